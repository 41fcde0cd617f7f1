package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/seeds"
	"github.com/nomoshq/nomos/store"
)

// seededDB is a store on its own database with the demo seed, and a
// connection to look at its tables.
func seededDB(t *testing.T) (*store.Store, *pgx.Conn) {
	t.Helper()
	ctx := testenv.Context(t)
	url := testenv.DatabaseURL(t)
	s := openSeeded(t, store.Config{URL: url, MaxConns: 4, Logger: testenv.Logger(t)})
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return s, conn
}

// openSeeded opens a store with cfg (on a fresh database) and seeds the
// demo fleet into it.
func openSeeded(t *testing.T, cfg store.Config) *store.Store {
	t.Helper()
	ctx := testenv.Context(t)
	s, err := store.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	seed, err := fleetseed.Load(seeds.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplySeed(ctx, seed); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkState is every row a check result may write, as text, in order.
func checkState(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(testenv.Context(t), `
		SELECT 'check ' || slug || ' ' || coalesce(last_health, '-') || ' ' || coalesce(last_detail, '-') || ' ' || coalesce(last_result_at::text, '-') FROM check_defs
		UNION ALL SELECT 'status ' || e.slug || ' ' || coalesce(st.health, '-') || ' ' || coalesce(st.detail, '-') || ' ' || coalesce(st.last_check_at::text, '-')
			FROM entity_status st JOIN entities e ON e.id = st.entity_id
		UNION ALL SELECT 'signal ' || e.slug || ' ' || sg.kind || ' ' || sg.severity || ' ' || sg.summary || ' ' || sg.state
			FROM signals sg JOIN entities e ON e.id = sg.entity_id
		UNION ALL SELECT 'metric ' || e.slug || ' ' || m.metric || ' ' || m.value::text || ' ' || m.at::text
			FROM metric_samples m JOIN entities e ON e.id = m.entity_id
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// roundOfResults is a result for every seeded check, disabled ones too,
// each in one of three states by its place and the round, and what a
// batch may also carry: a second, older result of one check after its
// newer one, and a result naming a target its check does not observe.
func roundOfResults(t *testing.T, conn *pgx.Conn, round int, at time.Time) []store.CheckObservation {
	t.Helper()
	rows, err := conn.Query(testenv.Context(t), `SELECT id::text, target_id::text, slug FROM check_defs ORDER BY slug`)
	if err != nil {
		t.Fatal(err)
	}
	type check struct{ ID, Target, Slug string }
	checks, err := pgx.CollectRows(rows, pgx.RowToStructByPos[check])
	if err != nil {
		t.Fatal(err)
	}
	states := []string{"healthy", "unhealthy", "degraded"}
	var out []store.CheckObservation
	for i, c := range checks {
		out = append(out, store.CheckObservation{
			CheckID: c.ID, TargetID: c.Target, Health: states[(i+round)%3], Detail: fmt.Sprintf("round %d of %s", round, c.Slug),
			Metrics: map[string]float64{"probe_ms": float64(10*round + i)}, At: at.Add(time.Duration(i) * time.Millisecond),
		})
	}
	first := out[0]
	older := first
	older.Health, older.Detail, older.At = "unhealthy", "an older result", first.At.Add(-time.Second)
	stray := out[1]
	stray.TargetID, stray.Detail = first.TargetID, "a result for a target its check does not observe"
	return append(out, older, stray)
}

// RecordChecks writes what RecordCheck writes for each result in turn:
// the same checks, statuses, roll-ups, signals and metrics.
func TestRecordChecksEqualsOneByOne(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	oneByOne, oneConn := seededDB(t)
	batched, batchConn := seededDB(t)
	start := time.Now().UTC().Truncate(time.Second)
	for round := range 3 {
		at := start.Add(time.Duration(round) * time.Minute)
		results := roundOfResults(t, oneConn, round, at)
		again := roundOfResults(t, batchConn, round, at)
		// The two databases have their own ids.
		stored := 0
		for _, o := range results {
			err := oneByOne.RecordCheck(ctx, o)
			switch {
			case err == nil:
				stored++
			case !errors.Is(err, store.ErrNotFound):
				t.Fatal(err)
			}
		}
		n, err := batched.RecordChecks(ctx, again)
		if err != nil {
			t.Fatal(err)
		}
		// The older result of the first check is stored one by one
		// (and changes nothing); in a batch it gives way to the newer.
		if n != stored-1 {
			t.Errorf("round %d: RecordChecks recorded %d results, want %d", round, n, stored-1)
		}
		if diff := cmp.Diff(checkState(t, oneConn), checkState(t, batchConn)); diff != "" {
			t.Fatalf("round %d: state after RecordChecks (-one by one +batched):\n%s", round, diff)
		}
	}
	state := strings.Join(checkState(t, batchConn), "\n")
	for _, want := range []string{"signal ", " resolved", " critical ", " warning ", "metric service:jellyfin probe_ms"} {
		if !strings.Contains(state, want) {
			t.Errorf("three rounds left no %q; the test does not exercise it:\n%s", want, state)
		}
	}
}

// A pass of several hundred results is stored whole: every check gets
// its result, every target its health, every metric its sample.
func TestRecordChecksStoresALargePass(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	s, conn := seededDB(t)
	checks := roundOfResults(t, conn, 0, time.Now())
	checks = checks[:len(checks)-2]
	// The same checks many times over, as a pass of several hundred
	// results of a larger fleet would be: each result a millisecond on.
	var pass []store.CheckObservation
	for i := range 40 {
		for _, c := range checks {
			c.At = c.At.Add(time.Duration(i) * time.Second)
			c.Metrics = map[string]float64{"probe_ms": float64(i)}
			pass = append(pass, c)
		}
	}
	if len(pass) < 500 {
		t.Fatalf("a pass of %d results; want several hundred", len(pass))
	}
	n, err := s.RecordChecks(ctx, pass)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(checks) {
		t.Errorf("recorded %d results, want one per check (%d): the newest", n, len(checks))
	}
	var missing, samples int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM check_defs WHERE last_result_at IS NULL
		OR last_detail NOT LIKE 'round 0 of %'`).Scan(&missing); err != nil {
		t.Fatal(err)
	}
	if missing != 0 {
		t.Errorf("%d checks have no result after the pass", missing)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM metric_samples WHERE metric = 'probe_ms' AND value = 39`).Scan(&samples); err != nil {
		t.Fatal(err)
	}
	if samples == 0 {
		t.Error("the newest results' metric samples were not stored")
	}
	var unchecked []string
	rows, err := conn.Query(ctx, `SELECT e.slug FROM check_defs cd JOIN entity_status st ON st.entity_id = cd.target_id
		JOIN entities e ON e.id = cd.target_id WHERE cd.enabled AND st.last_check_at IS NULL`)
	if err != nil {
		t.Fatal(err)
	}
	if unchecked, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(unchecked) != 0 {
		t.Errorf("checked targets %v have no health after the pass", unchecked)
	}
	if _, err := s.RecordChecks(ctx, []store.CheckObservation{{CheckID: uuid.NewString(), TargetID: uuid.NewString(), Health: "healthy", At: time.Now()}}); err != nil {
		t.Errorf("a result of an unknown check fails the batch: %v", err)
	}
}
