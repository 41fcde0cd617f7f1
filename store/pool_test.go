package store_test

import (
	"errors"
	"testing"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

// The store leaves out pgx's description cache in the default query mode,
// where nothing reads it; a database URL that asks for the cache_describe
// mode (as one behind a transaction-pooling PgBouncer may) needs the
// cache, and its queries must still run.
func TestQueriesRunInEitherCachingMode(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"", "&default_query_exec_mode=cache_describe", "&default_query_exec_mode=cache_statement"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := testenv.Context(t)
			s, err := store.Open(ctx, store.Config{URL: testenv.DatabaseURL(t) + mode, MaxConns: 2, Logger: testenv.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// Twice: the second run of a statement is the one served
			// from the cache.
			for range 2 {
				if _, err := s.EntityBySlug(ctx, "lxc:nowhere/100"); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("EntityBySlug = %v, want ErrNotFound", err)
				}
				if _, err := s.ListEntities(ctx, "lxc"); err != nil {
					t.Fatalf("ListEntities: %v", err)
				}
			}
		})
	}
}
