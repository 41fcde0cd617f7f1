// Package lease lets a process that took a task off an asynq queue say,
// every second, that it is still working on it, and lets its peers put
// back at once a task whose taker stopped saying so: the taker died.
// asynq's own lease would hold such a task for 30 s, and its recoverer
// looks only once a minute, so without this a task held by a killed
// process waited a minute or more.
//
// A lease is a Redis key with a short expiry (TTL), renewed every third
// of it while the work goes on and deleted when it ends. A Sweeper looks,
// every third of TTL, at the tasks asynq shows as taken (active) on one
// queue; one seen twice without its lease is handed to Resend, which puts
// a copy of it back. What keeps a task from being done twice is the
// consumer's own record (the actuator's journal, the bot's one result per
// execution), never the lease: a lease only speeds recovery up.
package lease

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// DefaultTTL is how long a lease lasts unless renewed: a holder killed
// now is seen dead within it, plus a third of it for the Sweeper's
// second look.
const DefaultTTL = 3 * time.Second

// releaseTimeout bounds the delete that ends a lease.
const releaseTimeout = 5 * time.Second

// Config is what a lease is held with.
type Config struct {
	// Redis holds the leases. Required.
	Redis redis.UniversalClient
	// TTL is how long a lease lasts after it was last renewed; it is
	// renewed every TTL/3. Default DefaultTTL.
	TTL time.Duration
	// Owner is the lease's value, read by an operator looking at Redis.
	Owner string
	// Logger hears of leases that could not be written. Default
	// slog.Default().
	Logger *slog.Logger
}

func (c Config) ttl() time.Duration        { return cmp.Or(c.TTL, DefaultTTL) }
func (c Config) logger() *slog.Logger      { return cmp.Or(c.Logger, slog.Default()) }
func (c Config) owner() string             { return cmp.Or(c.Owner, "nomos") }
func (c Config) renewEvery() time.Duration { return max(c.ttl()/3, time.Millisecond) }

// Hold takes the lease key and renews it until release is called, which
// deletes it. If ctx ends first the renewals stop and the lease lapses
// after TTL, as it does when the holder is killed. A lease that cannot be
// written is logged and the work goes on.
func Hold(ctx context.Context, cfg Config, key string) (release func()) {
	ctx, cancel := context.WithCancel(ctx)
	renew := func() {
		if err := cfg.Redis.Set(ctx, key, cfg.owner(), cfg.ttl()).Err(); err != nil && ctx.Err() == nil {
			cfg.logger().Warn("could not renew a lease", "key", key, "err", err)
		}
	}
	renew()
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(cfg.renewEvery())
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				renew()
			}
		}
	}()
	return func() {
		cancel()
		<-done
		del, stop := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer stop()
		cfg.Redis.Del(del, key)
	}
}

// Sweeper puts back the tasks of one queue whose takers died.
type Sweeper struct {
	// Config is the leases' (Redis, TTL, Logger).
	Config
	// Inspector lists the queue's active tasks. Required.
	Inspector *asynq.Inspector
	// Queue is the queue swept. Required.
	Queue string
	// Key is the lease key of a task asynq shows as taken, or "" for a
	// task the Sweeper must leave alone. Required.
	Key func(*asynq.TaskInfo) string
	// Resend puts a copy of a task whose taker died back on a queue.
	// Each task is handed to it once. Required.
	Resend func(context.Context, *asynq.TaskInfo) error

	resent, suspects map[string]bool
}

// Run sweeps at once and then every third of TTL until ctx ends.
func (s *Sweeper) Run(ctx context.Context) {
	t := time.NewTicker(s.renewEvery())
	defer t.Stop()
	for {
		if err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.logger().Warn("could not look for tasks a dead process took", "queue", s.Queue, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep looks once. asynq marks a task active just before its handler
// starts and takes the lease, so a task is resent only when the look
// before this one also saw it without a lease (or asynq's own lease on it
// has lapsed too).
func (s *Sweeper) Sweep(ctx context.Context) error {
	if s.resent == nil {
		s.resent = map[string]bool{}
	}
	active, err := s.Inspector.ListActiveTasks(s.Queue, asynq.PageSize(1000))
	if errors.Is(err, asynq.ErrQueueNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	suspects, taken := map[string]bool{}, map[string]bool{}
	for _, ti := range active {
		taken[ti.ID] = true
		if s.resent[ti.ID] {
			continue
		}
		key := s.Key(ti)
		if key == "" {
			continue
		}
		n, err := s.Redis.Exists(ctx, key).Result()
		if err != nil {
			return err
		}
		if n > 0 {
			continue
		}
		if !ti.IsOrphaned && !s.suspects[ti.ID] {
			suspects[ti.ID] = true
			continue
		}
		if err := s.Resend(ctx, ti); err != nil {
			return err
		}
		s.resent[ti.ID] = true
	}
	s.suspects = suspects
	for id := range s.resent {
		if !taken[id] { // asynq's recoverer has given it up since
			delete(s.resent, id)
		}
	}
	return nil
}
