package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"

	"github.com/nomoshq/nomos/migrations"
)

// versionTable records which migrations have run.
const versionTable = "nomos_schema_version"

// Migrate applies every pending migration to the database at url. tern holds
// an advisory lock while it works, so concurrent callers wait rather than
// race, and a database already at the newest version is left untouched.
// It returns the schema version before and after.
func Migrate(ctx context.Context, url string) (from, to int32, err error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, 0, fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	m, err := migrate.NewMigrator(ctx, conn, versionTable)
	if err != nil {
		return 0, 0, fmt.Errorf("migrate: %w", err)
	}
	if err := m.LoadMigrations(migrations.FS); err != nil {
		return 0, 0, fmt.Errorf("migrate: load migrations: %w", err)
	}
	from, err = m.GetCurrentVersion(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("migrate: read version: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		return from, 0, fmt.Errorf("migrate: %w", err)
	}
	to, err = m.GetCurrentVersion(ctx)
	if err != nil {
		return from, 0, fmt.Errorf("migrate: read version: %w", err)
	}
	return from, to, nil
}

// LatestVersion is the number of the newest embedded migration.
func LatestVersion() (int32, error) {
	names, err := migrate.FindMigrations(migrations.FS)
	if err != nil {
		return 0, err
	}
	return int32(len(names)), nil
}

// SchemaVersion reads the schema version of the database at url without
// changing anything, unlike Migrate: 0 when no migration has run.
func SchemaVersion(ctx context.Context, url string) (int32, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, fmt.Errorf("read schema version: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, versionTable).Scan(&exists); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int32
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+versionTable).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}
