package soak

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/nomoshq/nomos/internal/testenv"
)

// pgCluster is a Postgres cluster of the case's own, so restarting it
// touches no other test.
type pgCluster struct {
	bin, data, sock, log string
	port                 int
	asUser               string // run the server as this user (postgres refuses root)
}

// startPostgres initialises and starts a throwaway cluster with trust
// authentication on a free loopback port.
func startPostgres(t *testing.T) *pgCluster {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		t.Fatal("soak: no Postgres server binaries under /usr/lib/postgresql (make prepare installs them)")
	}
	slices.Sort(bins)
	dir, err := os.MkdirTemp("", "nomos-soak-pg-*")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgCluster{bin: filepath.Dir(bins[len(bins)-1]), data: filepath.Join(dir, "data"), sock: dir, log: filepath.Join(dir, "postgres.log"), port: testenv.FreePort(t)}
	if os.Geteuid() == 0 {
		p.asUser = "postgres"
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = p.run("stop", "-m", "immediate")
		_ = os.RemoveAll(dir)
	})
	if out, err := p.command("initdb", "-D", p.data, "-U", "nomos", "--auth=trust", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("soak: initdb: %v\n%s", err, out)
	}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *pgCluster) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(p.bin, name)
	if p.asUser != "" {
		return exec.Command("runuser", append([]string{"-u", p.asUser, "--", path}, args...)...)
	}
	return exec.Command(path, args...)
}

func (p *pgCluster) run(args ...string) error {
	out, err := p.command("pg_ctl", append([]string{"-D", p.data, "-w"}, args...)...).CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(p.log)
		return fmt.Errorf("pg_ctl %v: %v\n%s\n%s", args, err, out, tail(string(log), 2000))
	}
	return nil
}

func (p *pgCluster) start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", p.port, p.sock)
	return p.run("start", "-l", p.log, "-o", opts)
}

// stop shuts the server down at once, as a crash or a failover would:
// every connection breaks.
func (p *pgCluster) stop() error { return p.run("stop", "-m", "immediate") }

// URL is the connection URL of database db.
func (p *pgCluster) URL(db string) string {
	return fmt.Sprintf("postgres://nomos@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

func (p *pgCluster) createDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, p.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}

// redisServer is a Redis of the case's own, run in the foreground so it
// can be killed and started again on the same port.
type redisServer struct {
	port int
	dir  string
	cmd  *exec.Cmd
}

func startRedis(t *testing.T) *redisServer {
	t.Helper()
	r := &redisServer{port: testenv.FreePort(t), dir: t.TempDir()}
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.kill)
	return r
}

func (r *redisServer) start() error {
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(r.port),
		"--save", "", "--appendonly", "no", "--dir", r.dir, "--logfile", filepath.Join(r.dir, "redis.log"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis: %w", err)
	}
	r.cmd = cmd
	c := redis.NewClient(&redis.Options{Addr: r.addr()})
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("redis did not start on %s", r.addr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// kill stops Redis at once; it keeps nothing on disk, so its queues are
// gone.
func (r *redisServer) kill() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

func (r *redisServer) addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }
func (r *redisServer) URL() string  { return "redis://" + r.addr() + "/0" }

func (r *redisServer) flushAll(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: r.addr()})
	defer c.Close()
	return c.FlushAll(ctx).Err()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
