package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

func TestMigrateEmptyThenNoop(t *testing.T) {
	t.Parallel()
	url := testenv.EmptyDatabaseURL(t)
	ctx := testenv.Context(t)
	latest, err := store.LatestVersion()
	if err != nil {
		t.Fatal(err)
	}
	from, to, err := store.Migrate(ctx, url)
	if err != nil {
		t.Fatalf("first migrate: %v", err)
	}
	if from != 0 || to != latest {
		t.Fatalf("first migrate went %d -> %d, want 0 -> %d", from, to, latest)
	}
	before := schemaFingerprint(t, ctx, url)
	from, to, err = store.Migrate(ctx, url)
	if err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if from != latest || to != latest {
		t.Fatalf("second migrate went %d -> %d, want a no-op at %d", from, to, latest)
	}
	if after := schemaFingerprint(t, ctx, url); after != before {
		t.Fatalf("second migrate changed the schema")
	}
}

// schemaFingerprint summarises the tables and columns of the public schema.
func schemaFingerprint(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var fp string
	err = conn.QueryRow(ctx, `SELECT string_agg(table_name || '.' || column_name || ':' || data_type, ',' ORDER BY table_name, ordinal_position)
		FROM information_schema.columns WHERE table_schema = 'public'`).Scan(&fp)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	url := testenv.EmptyDatabaseURL(t)
	ctx := testenv.Context(t)
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, _, err := store.Migrate(ctx, url)
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent migrate: %v", err)
		}
	}
}

func TestAuditLogIsAppendOnly(t *testing.T) {
	t.Parallel()
	url := testenv.DatabaseURL(t)
	ctx := testenv.Context(t)
	s, err := store.Open(ctx, store.Config{URL: url, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.AppendAudit(ctx, store.AuditEntry{Actor: "@operator:localhost", Action: "test.append"}); err != nil {
		t.Fatalf("append: %v", err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, stmt := range []string{
		`UPDATE audit_log SET actor = 'someone else'`,
		`DELETE FROM audit_log`,
		`TRUNCATE audit_log`,
	} {
		if _, err := conn.Exec(ctx, stmt); err == nil {
			t.Errorf("%s: succeeded, want it refused", stmt)
		}
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE actor = '@operator:localhost'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("audit rows after refused changes = %d, want 1", n)
	}
}
