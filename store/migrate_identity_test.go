package store_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

// TestMigrationNamesContainersByCluster: a fleet recorded when a container
// was lxc:<vmid> moves forward to lxc:<cluster>/<vmid>, each host becoming
// the standalone cluster of its own name, keeping every id, so checks,
// edges and history follow (migrations/011_container_identity.sql).
func TestMigrationNamesContainersByCluster(t *testing.T) {
	t.Parallel()
	// The schema as it was before containers were named by cluster.
	url := testenv.DatabaseAtVersion(t, 10)
	ctx := testenv.Context(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `INSERT INTO entities (id, slug, type, name, attrs) VALUES
		('01900000-0000-7000-8000-000000000001', 'host:strong', 'host', 'strong', '{"node": "strong"}'),
		('01900000-0000-7000-8000-000000000002', 'host:lab2', 'host', 'lab2', '{"node": "pve2", "cluster": "lab"}'),
		('01900000-0000-7000-8000-000000000003', 'lxc:101', 'lxc', 'jellyfin', '{"vmid": 101, "host": "strong"}'),
		('01900000-0000-7000-8000-000000000004', 'lxc:110', 'lxc', 'vault', '{"vmid": 110, "host": "lab2"}'),
		('01900000-0000-7000-8000-000000000005', 'service:jellyfin', 'service', 'jellyfin', '{"vmid": 101, "host": "strong"}')`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, `INSERT INTO relationships (id, from_id, to_id, type) VALUES
		('01900000-0000-7000-8000-000000000006', '01900000-0000-7000-8000-000000000003', '01900000-0000-7000-8000-000000000005', 'runs')`)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Migrate(ctx, url); err != nil {
		t.Fatalf("migrate forward: %v", err)
	}
	rows, err := conn.Query(ctx, `SELECT id::text || ' ' || slug || ' ' || coalesce(attrs->>'cluster', attrs->>'container', '-') FROM entities ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"01900000-0000-7000-8000-000000000001 host:strong strong",
		"01900000-0000-7000-8000-000000000002 host:lab2 lab",
		"01900000-0000-7000-8000-000000000003 lxc:strong/101 -",
		"01900000-0000-7000-8000-000000000004 lxc:lab/110 -",
		"01900000-0000-7000-8000-000000000005 service:jellyfin lxc:strong/101",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("entities after the migration (-want +got):\n%s", d)
	}
}
