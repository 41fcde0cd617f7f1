package main

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

// oneBehind returns the URL of a new database one migration short of this
// build's newest, as an upgrade finds it, holding a marker row in a table
// of its own.
func oneBehind(t *testing.T) (dbURL string, latest int32) {
	t.Helper()
	latest, err := store.LatestVersion()
	if err != nil {
		t.Fatal(err)
	}
	dbURL = testenv.DatabaseAtVersion(t, latest-1)
	ctx := testenv.Context(t)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE restore_marker (v text); INSERT INTO restore_marker VALUES ('before the upgrade')`); err != nil {
		t.Fatal(err)
	}
	return dbURL, latest
}

func runMigrateRole(t *testing.T, dbURL string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(append([]string{"migrate"}, args...), []string{"NOMOS_DATABASE__URL=" + dbURL}, &out, &errOut)
	return code, out.String(), errOut.String()
}

func schemaVersion(t *testing.T, dbURL string) int32 {
	t.Helper()
	v, err := store.SchemaVersion(testenv.Context(t), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// pgEnv is libpq's environment for dbURL's server and user, as an
// operator's shell has it for the restore script.
func pgEnv(t *testing.T, dbURL string) (env []string, db string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	return append(os.Environ(), "PGHOST="+u.Hostname(), "PGPORT="+u.Port(), "PGUSER="+u.User.Username(), "PGPASSWORD="+pw, "PGSSLMODE=disable"),
		strings.TrimPrefix(u.Path, "/")
}

// TestMigrateBackupAndRestore walks the rollback runbook of
// docs/operations.md ("Rolling back an upgrade") against the real
// Postgres: `nomos migrate -backup` dumps a database one migration behind
// before it migrates it, names the dump after the schema version and the
// binary's version, and writes nothing when there is nothing to apply;
// deploy/scripts/restore.sh then puts the dump back, schema version and
// data, and keeps the database it replaced.
func TestMigrateBackupAndRestore(t *testing.T) {
	t.Parallel()
	dbURL, latest := oneBehind(t)
	dir := filepath.Join(t.TempDir(), "backups")

	code, out, errOut := runMigrateRole(t, dbURL, "-backup", dir)
	if code != 0 {
		t.Fatalf("nomos migrate -backup: exit %d\n%s%s", code, out, errOut)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("backup directory holds %v (%v), want exactly one dump", entries, err)
	}
	name := entries[0].Name()
	wantName := regexp.MustCompile(fmt.Sprintf(`^nomos-schema%d-before-%s-\d{8}T\d{6}Z\.dump$`, latest-1, regexp.QuoteMeta(unsafeFileChars.ReplaceAllString(version, "_"))))
	if !wantName.MatchString(name) {
		t.Errorf("dump named %q, want it to match %s", name, wantName)
	}
	dump := filepath.Join(dir, name)
	if !strings.Contains(out, "backed up schema version "+fmt.Sprint(latest-1)+" to "+dump) ||
		!strings.Contains(out, fmt.Sprintf("migrated schema from version %d to %d", latest-1, latest)) {
		t.Errorf("nomos migrate -backup said:\n%s", out)
	}
	data, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("PGDMP")) {
		t.Errorf("%s is not a pg_dump custom-format archive: starts %q", name, data[:min(len(data), 16)])
	}
	if fi, _ := os.Stat(dump); fi.Mode().Perm() != 0o600 {
		t.Errorf("dump mode %v, want 0600: it holds the whole database", fi.Mode().Perm())
	}
	if got := schemaVersion(t, dbURL); got != latest {
		t.Fatalf("schema version %d after migrate, want %d", got, latest)
	}

	// Nothing to apply: no dump.
	if code, out, errOut := runMigrateRole(t, dbURL, "-backup", dir); code != 0 || !strings.Contains(out, "up to date") {
		t.Fatalf("second migrate: exit %d\n%s%s", code, out, errOut)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("a migrate with nothing to apply wrote a dump: %v", entries)
	}

	// Roll back binary and schema: the restore script puts the dump back.
	env, db := pgEnv(t, dbURL)
	cmd := exec.Command("../../deploy/scripts/restore.sh", dump, db, "nomos")
	cmd.Env = env
	restoreOut, err := cmd.CombinedOutput()
	t.Cleanup(func() { dropDatabasesLike(t, dbURL, db+"_before_restore_%", db+"_restoring") })
	if err != nil {
		t.Fatalf("restore.sh: %v\n%s", err, restoreOut)
	}
	if !strings.Contains(string(restoreOut), fmt.Sprintf("at schema version %d", latest-1)) {
		t.Errorf("restore.sh said:\n%s", restoreOut)
	}
	if got := schemaVersion(t, dbURL); got != latest-1 {
		t.Errorf("restored schema version %d, want %d, the dump's", got, latest-1)
	}
	ctx := testenv.Context(t)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var marker string
	if err := conn.QueryRow(ctx, `SELECT v FROM restore_marker`).Scan(&marker); err != nil || marker != "before the upgrade" {
		t.Errorf("restored data: %q, %v", marker, err)
	}
	var kept int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname LIKE $1`, db+"_before_restore_%").Scan(&kept); err != nil || kept != 1 {
		t.Errorf("restore.sh kept %d databases it replaced (%v), want 1", kept, err)
	}
}

// TestRestoreRefusesABadDump gives restore.sh a file that is no dump: it
// must fail before it touches the database.
func TestRestoreRefusesABadDump(t *testing.T) {
	t.Parallel()
	dbURL, latest := oneBehind(t)
	bad := filepath.Join(t.TempDir(), "torn.dump")
	if err := os.WriteFile(bad, []byte("PGDMP and then nothing"), 0o600); err != nil {
		t.Fatal(err)
	}
	env, db := pgEnv(t, dbURL)
	cmd := exec.Command("../../deploy/scripts/restore.sh", bad, db, "nomos")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("restore.sh restored a torn dump:\n%s", out)
	}
	if got := schemaVersion(t, dbURL); got != latest-1 {
		t.Errorf("schema version %d after a refused restore, want %d untouched", got, latest-1)
	}
}

// TestMigrateBackupRefuses: when the dump cannot be written, nothing is
// migrated, and the error says how to go on; -no-backup migrates without
// one. The password reaches pg_dump only through its environment.
func TestMigrateBackupRefuses(t *testing.T) {
	t.Parallel()
	t.Run("unwritable directory", func(t *testing.T) {
		t.Parallel()
		dbURL, latest := oneBehind(t)
		file := filepath.Join(t.TempDir(), "not-a-dir")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runMigrateRole(t, dbURL, "-backup", filepath.Join(file, "backups"))
		if code == 0 || !strings.Contains(errOut, "nothing was migrated") || !strings.Contains(errOut, "-no-backup") {
			t.Errorf("exit %d, want a refusal that names -no-backup\n%s%s", code, out, errOut)
		}
		if got := schemaVersion(t, dbURL); got != latest-1 {
			t.Errorf("schema version %d after a refused backup, want %d", got, latest-1)
		}
		if code, out, errOut := runMigrateRole(t, dbURL, "-backup", filepath.Join(file, "backups"), "-no-backup"); code != 0 {
			t.Errorf("-no-backup: exit %d\n%s%s", code, out, errOut)
		}
		if got := schemaVersion(t, dbURL); got != latest {
			t.Errorf("schema version %d after -no-backup, want %d", got, latest)
		}
	})
	t.Run("no pg_dump", func(t *testing.T) {
		t.Parallel()
		dbURL, latest := oneBehind(t)
		code, _, errOut := runMigrateRole(t, dbURL, "-backup", t.TempDir(), "-pg-dump", "/nonexistent/pg_dump")
		if code == 0 || !strings.Contains(errOut, "postgresql-client") {
			t.Errorf("exit %d, want a refusal that says to install the client:\n%s", code, errOut)
		}
		if got := schemaVersion(t, dbURL); got != latest-1 {
			t.Errorf("schema version %d, want %d", got, latest-1)
		}
	})
	t.Run("pg_dump fails", func(t *testing.T) {
		t.Parallel()
		dbURL, latest := oneBehind(t)
		dir := t.TempDir()
		// pg_dump refuses an unknown option: the dump fails part-way.
		code, _, errOut := runMigrateRole(t, dbURL, "-backup", dir, "-pg-dump", writeScript(t, `exec pg_dump --no-such-option "$@"`))
		if code == 0 || !strings.Contains(errOut, "no-such-option") || !strings.Contains(errOut, "nothing was migrated") {
			t.Errorf("exit %d, want a refusal that quotes pg_dump:\n%s", code, errOut)
		}
		if got := schemaVersion(t, dbURL); got != latest-1 {
			t.Errorf("schema version %d, want %d", got, latest-1)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("a failed dump left %v behind", entries)
		}
	})
	t.Run("password not in argv", func(t *testing.T) {
		t.Parallel()
		dbURL, _ := oneBehind(t)
		argv := filepath.Join(t.TempDir(), "argv")
		wrapper := writeScript(t, `printf '%s\n' "$@" > `+argv+`; exec pg_dump "$@"`)
		if code, out, errOut := runMigrateRole(t, dbURL, "-backup", t.TempDir(), "-pg-dump", wrapper); code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
		u, _ := url.Parse(dbURL)
		pw, _ := u.User.Password()
		got, err := os.ReadFile(argv)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(got), pw) || strings.Contains(string(got), "postgres://") {
			t.Errorf("pg_dump's command line holds the database URL or password:\n%s", got)
		}
	})
}

func writeScript(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pg_dump_wrapper")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// dropDatabasesLike drops what restore.sh made beside the test's database.
func dropDatabasesLike(t *testing.T, dbURL string, patterns ...string) {
	ctx := context.Background()
	u, _ := url.Parse(dbURL)
	u.Path = "/postgres"
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Logf("drop restore leftovers: %v", err)
		return
	}
	defer conn.Close(ctx)
	for _, p := range patterns {
		rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE $1`, p)
		if err != nil {
			continue
		}
		names, _ := pgx.CollectRows(rows, pgx.RowTo[string])
		for _, n := range names {
			if _, err := conn.Exec(ctx, `DROP DATABASE `+pgx.Identifier{n}.Sanitize()+` WITH (FORCE)`); err != nil {
				t.Logf("drop %s: %v", n, err)
			}
		}
	}
}
