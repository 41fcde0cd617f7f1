package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/nomoshq/nomos/store"
)

func runMigrate(ctx context.Context, env *roleEnv, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	backupDir := fs.String("backup", "", "before applying a migration, write a pg_dump (custom format) of the database into `dir`; refuse to migrate if it cannot")
	noBackup := fs.Bool("no-backup", false, "migrate without the dump -backup asks for")
	pgDump := fs.String("pg-dump", "pg_dump", "the pg_dump `program` -backup runs (its major version at least the server's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := env.config("migrate")
	if err != nil {
		return err
	}
	if *backupDir != "" && !*noBackup {
		current, err := store.SchemaVersion(ctx, cfg.Database.URL)
		if err != nil {
			return err
		}
		latest, err := store.LatestVersion()
		if err != nil {
			return err
		}
		// Only a migration to apply is worth a dump: a current database is
		// left untouched, and so is the backup directory.
		if current < latest {
			path, err := dumpDatabase(ctx, dumpConfig{
				program: *pgDump, url: cfg.Database.URL, dir: *backupDir,
				schema: current, version: version, now: time.Now(),
			})
			if err != nil {
				return fmt.Errorf("back up before migrating from schema version %d: %w; nothing was migrated (fix it, or pass -no-backup to migrate without a dump)", current, err)
			}
			fmt.Fprintf(env.stdout, "backed up schema version %d to %s\n", current, path)
		}
	}
	from, to, err := store.Migrate(ctx, cfg.Database.URL)
	if err != nil {
		return err
	}
	if from == to {
		fmt.Fprintf(env.stdout, "schema is up to date at version %d\n", to)
	} else {
		fmt.Fprintf(env.stdout, "migrated schema from version %d to %d\n", from, to)
	}
	return nil
}

// dumpConfig is one pg_dump before a migration.
type dumpConfig struct {
	// program is the pg_dump to run.
	program string
	// url is the database, as database.url has it.
	url string
	// dir receives the dump; it is made (0700) if missing.
	dir string
	// schema is the database's schema version, and version the binary's:
	// both name the file, so the dump says which release reads it.
	schema  int32
	version string
	now     time.Time
}

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// dumpName is the file a dump of schema version schema, taken by nomos
// version before it migrates, is written to.
func dumpName(schema int32, version string, now time.Time) string {
	return fmt.Sprintf("nomos-schema%d-before-%s-%s.dump",
		schema, unsafeFileChars.ReplaceAllString(version, "_"), now.UTC().Format("20060102T150405Z"))
}

// dumpDatabase writes a compressed custom-format pg_dump of the database
// into cfg.dir and returns its path. The dump is written beside its final
// name and renamed when pg_dump succeeded, so a file with the final name is
// always a whole dump. The password reaches pg_dump in its environment,
// never on its command line, where ps would show it.
func dumpDatabase(ctx context.Context, cfg dumpConfig) (string, error) {
	pc, err := pgconn.ParseConfig(cfg.url)
	if err != nil {
		return "", fmt.Errorf("database.url: %w", err)
	}
	if err := os.MkdirAll(cfg.dir, 0o700); err != nil {
		return "", err
	}
	final := filepath.Join(cfg.dir, dumpName(cfg.schema, cfg.version, cfg.now))
	partial, err := os.CreateTemp(cfg.dir, ".partial-*.dump")
	if err != nil {
		return "", err
	}
	if err := partial.Close(); err != nil {
		return "", err
	}
	// Gone already once the dump is renamed to its final name.
	defer func() { _ = os.Remove(partial.Name()) }()

	cmd := exec.CommandContext(ctx, cfg.program, "--format=custom", "--compress=6", "--no-password", "--file="+partial.Name())
	cmd.Env = append(os.Environ(),
		"PGHOST="+pc.Host, "PGPORT="+strconv.Itoa(int(pc.Port)),
		"PGUSER="+pc.User, "PGPASSWORD="+pc.Password, "PGDATABASE="+pc.Database,
		"PGSSLMODE="+sslMode(cfg.url), "PGCONNECT_TIMEOUT=10")
	if out, err := cmd.CombinedOutput(); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("no %s: install the PostgreSQL client (Debian: postgresql-client), or give its path with -pg-dump", cfg.program)
		}
		return "", fmt.Errorf("%s: %w: %s", cfg.program, err, strings.TrimSpace(string(out)))
	}
	if err := os.Chmod(partial.Name(), 0o600); err != nil {
		return "", err
	}
	if err := os.Rename(partial.Name(), final); err != nil {
		return "", err
	}
	return final, nil
}

var sslModeParam = regexp.MustCompile(`sslmode=([a-z-]+)`)

// sslMode is the sslmode database.url asks for (libpq's default, prefer,
// when it names none).
func sslMode(url string) string {
	if m := sslModeParam.FindStringSubmatch(url); m != nil {
		return m[1]
	}
	return "prefer"
}
