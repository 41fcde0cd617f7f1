package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound is returned when a lookup matches no row.
var ErrNotFound = errors.New("not found")

// Config configures a Store.
type Config struct {
	// URL is a libpq connection string or postgres:// URL.
	URL string
	// MaxConns bounds the pool. Default DefaultMaxConns.
	MaxConns int32
	// Logger receives slow-start and connection messages; nil means slog.Default().
	Logger *slog.Logger
	// Clock is the source of "now" for rows the application timestamps.
	// nil means time.Now.
	Clock func() time.Time
	// Tracer, when set, sees every query on the pool; tests count a
	// page's queries with it.
	Tracer pgx.QueryTracer
}

// DefaultMaxConns is the pool's size unless Config says otherwise.
// pgxpool's own default is the number of CPUs, at least 4: on a small
// machine that left the bot two connections beside its two LISTENs, and
// 50 approvals at once queued for them (docs/operations.md, "Latency,
// measured").
const DefaultMaxConns = 16

// Store wraps a pgx pool with Nomos's queries.
type Store struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
	now    func() time.Time
}

// Open connects to Postgres and checks the connection with a ping.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.URL == "" {
		return nil, errors.New("open store: database url is empty")
	}
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("open store: parse database url: %w", err)
	}
	pcfg.MaxConns = cmp.Or(cfg.MaxConns, DefaultMaxConns)
	if pcfg.ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
		// Only the cache_describe mode reads the description cache, and
		// pgx presizes it for 512 statements on every connection: 25 KB
		// each, 0.4 MB of the bot's heap with the pool full.
		pcfg.ConnConfig.DescriptionCacheCapacity = 0
	}
	if cfg.Tracer != nil {
		pcfg.ConnConfig.Tracer = cfg.Tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store: ping %s: %w", pcfg.ConnConfig.Host, err)
	}
	s := &Store{pool: pool, logger: cfg.Logger, now: cfg.Clock}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// Close releases the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// newID mints a UUIDv7, which sorts by creation time.
func newID() uuid.UUID { return uuid.Must(uuid.NewV7()) }

// interpretError maps driver errors to the store's own.
func interpretError(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// inTx runs fn in a transaction, committing when it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}
