package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis describes a running local Redis server.
type Redis struct {
	Addr string
	// Databases is how many logical databases the server offers.
	Databases int
}

// RedisConfig says where Redis should listen and keep its files.
type RedisConfig struct {
	// Port on 127.0.0.1; default 6379.
	Port int
	// Dir holds the pid and log files of a server started here.
	Dir string
	// Databases to configure when starting a server; default 16.
	Databases int
	Logger    *slog.Logger
}

// EnsureRedis reuses a Redis already answering on the port, or starts one
// (installing redis-server with apt when it is missing). A server started
// here keeps nothing on disk: Redis is only the transport, and losing its
// contents must lose no decision.
func EnsureRedis(ctx context.Context, cfg RedisConfig) (*Redis, error) {
	port := cfg.Port
	if port == 0 {
		port = 6379
	}
	dbs := cfg.Databases
	if dbs == 0 {
		dbs = 16
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	r := &Redis{Addr: "127.0.0.1:" + strconv.Itoa(port), Databases: dbs}
	if n, err := redisDatabases(ctx, r.Addr); err == nil {
		r.Databases = n
		return r, nil
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		logger.Info("installing redis-server with apt")
		if err := aptInstall(ctx, "redis-server"); err != nil {
			return nil, err
		}
		if bin, err = exec.LookPath("redis-server"); err != nil {
			return nil, fmt.Errorf("redis-server not found after install: %w", err)
		}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("redis dir: %w", err)
	}
	logger.Info("starting redis", "addr", r.Addr)
	_, err = runCmd(ctx, bin,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--daemonize", "yes",
		"--databases", strconv.Itoa(dbs),
		"--save", "", "--appendonly", "no",
		"--dir", cfg.Dir,
		"--pidfile", filepath.Join(cfg.Dir, "redis.pid"),
		"--logfile", filepath.Join(cfg.Dir, "redis.log"))
	if err != nil {
		return nil, fmt.Errorf("start redis: %w", err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		n, err := redisDatabases(waitCtx, r.Addr)
		if err == nil {
			r.Databases = n
			return r, nil
		}
		select {
		case <-waitCtx.Done():
			return nil, fmt.Errorf("redis did not start on %s: %w", r.Addr, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// URL is the redis:// URL of logical database db.
func (r *Redis) URL(db int) string { return fmt.Sprintf("redis://%s/%d", r.Addr, db) }

// redisDatabases pings Redis at addr and returns its database count.
func redisDatabases(ctx context.Context, addr string) (int, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second})
	defer c.Close()
	res, err := c.ConfigGet(ctx, "databases").Result()
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(res["databases"])
	if err != nil {
		return 0, fmt.Errorf("redis config databases: %w", err)
	}
	return n, nil
}

// Test Redis: its own port and many databases, so parallel test binaries
// each get a database without touching a developer's Redis on 6379.
const (
	TestRedisPort      = 16379
	TestRedisDatabases = 1024
)

// EnsureTestRedis starts or reuses the Redis the tests share.
func EnsureTestRedis(ctx context.Context, logger *slog.Logger) (*Redis, error) {
	return EnsureRedis(ctx, RedisConfig{
		Port:      TestRedisPort,
		Databases: TestRedisDatabases,
		Dir:       filepath.Join(CacheDir(), "redis-test"),
		Logger:    logger,
	})
}
