// Package testenv gives tests real parts: a Postgres database cloned from a
// migrated template, a Redis database of their own, a shared Dendrite
// homeserver and labsim. Nothing here is a mock; everything it starts or
// creates is cleaned up when the test or the test binary ends.
package testenv

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/nomoshq/nomos/internal/devstack"
	"github.com/nomoshq/nomos/migrations"
	"github.com/nomoshq/nomos/store"
)

var (
	shutdownMu sync.Mutex
	shutdowns  []func()
	failures   []func() // run before shutdowns when a test failed
)

// Main runs the package's tests, waits for their databases to be dropped,
// then stops what the package started.
// Use it from TestMain: func TestMain(m *testing.M) { testenv.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	if code != 0 {
		shutdownMu.Lock()
		for _, fn := range failures {
			fn()
		}
		shutdownMu.Unlock()
	}
	drops.Wait()
	shutdownMu.Lock()
	for i := len(shutdowns) - 1; i >= 0; i-- {
		shutdowns[i]()
	}
	shutdownMu.Unlock()
	os.Exit(code)
}

// SkipIfShort skips a slow test that needs the real stack beyond Postgres
// and Redis (a homeserver, a browser, the nomos binary) under go test
// -short, saying why. It is the only way a test may skip itself: without
// -short, as in make test and CI, every test runs.
func SkipIfShort(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped under -short: " + why)
	}
}

func atShutdown(fn func()) {
	shutdownMu.Lock()
	defer shutdownMu.Unlock()
	shutdowns = append(shutdowns, fn)
}

// atFailure runs fn when the package's tests end with a failure, before
// what they started is stopped.
func atFailure(fn func()) {
	shutdownMu.Lock()
	defer shutdownMu.Unlock()
	failures = append(failures, fn)
}

// Logger returns a logger that writes through t.Log.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// Context returns a context that ends with the test, bounded so a stuck
// test fails instead of hanging the suite.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var (
	pgOnce sync.Once
	pg     *devstack.Postgres
	pgErr  error
	tmplDB string
)

// postgres returns the test server, starting it and making the migrated
// template on first use.
func postgres(ctx context.Context) (*devstack.Postgres, error) {
	pgOnce.Do(func() {
		pg, pgErr = devstack.EnsurePostgres(ctx, devstack.PostgresConfig{})
		if pgErr == nil {
			tmplDB, pgErr = ensureTemplate(ctx, pg)
		}
	})
	return pg, pgErr
}

// DatabaseURL returns the URL of a new database cloned from a template on
// which every migration has run. The database is dropped when t ends.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	ctx := Context(t)
	if _, err := postgres(ctx); err != nil {
		t.Fatalf("testenv: postgres: %v", err)
	}
	name := "nomos_test_" + randomHex(6)
	conn, err := pgx.Connect(ctx, pg.AdminURL)
	if err != nil {
		t.Fatalf("testenv: connect postgres: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tmplDB)); err != nil {
		t.Fatalf("testenv: clone template: %v", err)
	}
	t.Cleanup(func() { dropLater(name) })
	return pg.URL(name)
}

// IgnoreDrops is the goleak option for a test that checks for leaks per
// test: the databases of tests that have ended are dropped in the
// background, and Main waits for them, not the test.
func IgnoreDrops() goleak.Option {
	return goleak.IgnoreAnyFunction("github.com/nomoshq/nomos/internal/testenv.dropLater.func1")
}

// drops counts the databases still being dropped; Main waits for them.
var drops sync.WaitGroup

// dropLater drops a test's database in the background. A drop waits for a
// checkpoint, most of a second, which the test need not wait for; drops
// that overlap share their checkpoint.
func dropLater(name string) {
	drops.Add(1)
	go func() {
		defer drops.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := pg.DropDatabase(ctx, name); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: leaving %s behind: %v\n", name, err)
		}
	}()
}

// EmptyDatabaseURL returns the URL of a new database with no schema at all,
// for tests of the migrations themselves.
func EmptyDatabaseURL(t testing.TB) string {
	t.Helper()
	u := DatabaseURL(t) // ensures the server and a name that is cleaned up
	ctx := Context(t)
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA public CASCADE; CREATE SCHEMA public"); err != nil {
		t.Fatalf("testenv: empty database: %v", err)
	}
	return u
}

// DatabaseAtVersion returns the URL of a new database migrated only up to
// schema version v, as an older release left it, for tests of what a
// migration or an upgrade does to it.
func DatabaseAtVersion(t testing.TB, v int32) string {
	t.Helper()
	u := EmptyDatabaseURL(t)
	ctx := Context(t)
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer conn.Close(ctx)
	m, err := migrate.NewMigrator(ctx, conn, "nomos_schema_version")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if err := m.LoadMigrations(migrations.FS); err != nil {
		t.Fatalf("testenv: load migrations: %v", err)
	}
	if err := m.MigrateTo(ctx, v); err != nil {
		t.Fatalf("testenv: migrate to version %d: %v", v, err)
	}
	return u
}

// Store opens a store on a fresh database and closes it when t ends.
func Store(t testing.TB) *store.Store {
	t.Helper()
	s, err := store.Open(Context(t), store.Config{URL: DatabaseURL(t), MaxConns: 4, Logger: Logger(t)})
	if err != nil {
		t.Fatalf("testenv: open store: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// ensureTemplate creates, once per schema version, a database with every
// migration applied. Its name carries a hash of the migrations, so an edited
// migration gets a new template rather than a stale one. An advisory lock
// keeps test binaries running in parallel from building it twice.
func ensureTemplate(ctx context.Context, pg *devstack.Postgres) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%s\x00", path, data)
		return nil
	})
	if err != nil {
		return "", err
	}
	name := "nomos_template_" + hex.EncodeToString(h.Sum(nil))[:12]
	conn, err := pgx.Connect(ctx, pg.AdminURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(72300101)"); err != nil {
		return "", err
	}
	// Closing the connection releases the lock too, should this fail.
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(72300101)") }()
	var ready bool
	err = conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1 AND datistemplate)`, name).Scan(&ready)
	if err != nil || ready {
		return name, err
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	if _, _, err := store.Migrate(ctx, pg.URL(name)); err != nil {
		return "", fmt.Errorf("migrate template: %w", err)
	}
	// Only the owner may mark a template; the nomos role owns it.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+name+" WITH IS_TEMPLATE true"); err != nil {
		return "", err
	}
	return name, nil
}

var (
	redisOnce sync.Once
	rds       *devstack.Redis
	redisErr  error
)

// RedisURL returns the URL of a Redis database that no other running test
// uses. It is flushed before use and again when t ends.
func RedisURL(t testing.TB) string {
	t.Helper()
	ctx := Context(t)
	redisOnce.Do(func() {
		rds, redisErr = devstack.EnsureTestRedis(ctx, Logger(t))
	})
	if redisErr != nil {
		t.Fatalf("testenv: redis: %v", redisErr)
	}
	// Database 0 holds the allocation counter; the rest are handed out in
	// turn across every test process.
	admin := redis.NewClient(&redis.Options{Addr: rds.Addr})
	defer admin.Close()
	n, err := admin.Incr(ctx, "nomos:testenv:next_db").Result()
	if err != nil {
		t.Fatalf("testenv: allocate redis db: %v", err)
	}
	db := 1 + int(n%int64(rds.Databases-1))
	c := redis.NewClient(&redis.Options{Addr: rds.Addr, DB: db})
	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatalf("testenv: flush redis db %d: %v", db, err)
	}
	t.Cleanup(func() {
		c.FlushDB(context.Background())
		c.Close()
	})
	return rds.URL(db)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// ReportPercentiles reports the p50 and p99 of ds, in milliseconds, as
// benchmark metrics named <name>-p50-ms and <name>-p99-ms.
func ReportPercentiles(b *testing.B, name string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(ds[len(ds)/2]), name+"-p50-ms")
	b.ReportMetric(ms(ds[(len(ds)*99)/100]), name+"-p99-ms")
}

// Go runs fn on a goroutine of its own for the rest of the test: at
// cleanup its context is cancelled and Go waits for it to return.
func Go(t testing.TB, fn func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); fn(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}
