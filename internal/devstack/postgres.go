package devstack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Postgres describes a running local Postgres server and a role that may
// create databases on it.
type Postgres struct {
	// AdminURL connects as the nomos role to the maintenance database.
	AdminURL string
	host     string
	port     string
	user     string
	password string
}

// PostgresConfig says which server and role to use.
type PostgresConfig struct {
	// Port of the local cluster; default 5432.
	Port string
	// User and Password of the role Nomos uses; default nomos/nomos.
	User     string
	Password string
	Logger   *slog.Logger
}

// EnsurePostgres makes the local Postgres cluster answer on 127.0.0.1 and
// makes sure the configured role exists with the CREATEDB privilege. It
// reuses a server that already runs, starts an installed cluster that is
// stopped, and installs Postgres with apt when it is missing.
func EnsurePostgres(ctx context.Context, cfg PostgresConfig) (*Postgres, error) {
	p := &Postgres{
		host:     "127.0.0.1",
		port:     cmp.Or(cfg.Port, "5432"),
		user:     cmp.Or(cfg.User, "nomos"),
		password: cmp.Or(cfg.Password, "nomos"),
	}
	p.AdminURL = p.URL("postgres")
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if p.ping(ctx) == nil {
		return p, nil
	}
	if _, err := exec.LookPath("pg_ctlcluster"); err != nil {
		logger.Info("installing postgresql with apt")
		if err := aptInstall(ctx, "postgresql"); err != nil {
			return nil, err
		}
	}
	if err := startClusters(ctx, logger); err != nil {
		return nil, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := waitTCP(waitCtx, p.host+":"+p.port); err != nil {
		return nil, fmt.Errorf("postgres did not start: %w", err)
	}
	if err := p.ensureRole(ctx); err != nil {
		return nil, err
	}
	if err := p.ping(ctx); err != nil {
		return nil, fmt.Errorf("postgres: log in as %s: %w", p.user, err)
	}
	return p, nil
}

// URL is the connection URL for database db.
func (p *Postgres) URL(db string) string {
	return fmt.Sprintf("postgres://%s:%s@%s:%s/%s?sslmode=disable", p.user, p.password, p.host, p.port, db)
}

func (p *Postgres) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.AdminURL)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// startClusters starts every installed cluster that is down.
func startClusters(ctx context.Context, logger *slog.Logger) error {
	out, err := runCmd(ctx, "pg_lsclusters", "--no-header")
	if err != nil {
		return err
	}
	started := false
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		if f[3] == "online" {
			started = true
			continue
		}
		logger.Info("starting postgres cluster", "version", f[0], "cluster", f[1], "port", f[2])
		name, args := asRoot("pg_ctlcluster", f[0], f[1], "start")
		if _, err := runCmd(ctx, name, args...); err != nil {
			return fmt.Errorf("start postgres cluster %s/%s: %w", f[0], f[1], err)
		}
		started = true
	}
	if !started {
		return fmt.Errorf("no postgres cluster is installed: create one with pg_createcluster")
	}
	return nil
}

// ensureRole creates or updates the role through the postgres superuser's
// peer login, the one way in that a fresh Debian cluster allows.
func (p *Postgres) ensureRole(ctx context.Context) error {
	quoted := strings.ReplaceAll(p.password, "'", "''")
	sql := fmt.Sprintf(`DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%[1]s') THEN
    CREATE ROLE %[1]s LOGIN CREATEDB PASSWORD '%[2]s';
  ELSE
    ALTER ROLE %[1]s LOGIN CREATEDB PASSWORD '%[2]s';
  END IF;
END $$;`, p.user, quoted)
	name, args := "runuser", []string{"-u", "postgres", "--", "psql", "-p", p.port, "-v", "ON_ERROR_STOP=1", "-qc", sql}
	if _, err := runCmd(ctx, name, args...); err != nil {
		return fmt.Errorf("create postgres role %s: %w", p.user, err)
	}
	return nil
}

// EnsureDatabase creates database name owned by the role when it is missing.
func (p *Postgres) EnsureDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, p.AdminURL)
	if err != nil {
		return fmt.Errorf("ensure database %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("ensure database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// DropDatabase removes database name, disconnecting anyone still on it.
func (p *Postgres) DropDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, p.AdminURL)
	if err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// An autovacuum worker visiting the database belongs to the superuser,
	// so the forced drop may not end it (42501) or find it still there
	// (55006). It leaves within moments: try again until ctx ends.
	for {
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || (pgErr.Code != "42501" && pgErr.Code != "55006") {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drop database %s: %w", name, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// DatabaseComment reports whether database name exists and the comment on
// it, which `nomos dev` uses to mark the database as its own.
func (p *Postgres) DatabaseComment(ctx context.Context, name string) (comment string, exists bool, err error) {
	conn, err := pgx.Connect(ctx, p.AdminURL)
	if err != nil {
		return "", false, fmt.Errorf("read database %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var c *string
	err = conn.QueryRow(ctx, `SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, name).Scan(&c)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read database %s: %w", name, err)
	}
	if c != nil {
		comment = *c
	}
	return comment, true, nil
}

// SetDatabaseComment puts comment on database name, which the role owns.
func (p *Postgres) SetDatabaseComment(ctx context.Context, name, comment string) error {
	conn, err := pgx.Connect(ctx, p.AdminURL)
	if err != nil {
		return fmt.Errorf("comment on database %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// COMMENT takes no parameters; the literal is quoted by hand.
	literal := "'" + strings.ReplaceAll(comment, "'", "''") + "'"
	if _, err := conn.Exec(ctx, "COMMENT ON DATABASE "+pgx.Identifier{name}.Sanitize()+" IS "+literal); err != nil {
		return fmt.Errorf("comment on database %s: %w", name, err)
	}
	return nil
}
