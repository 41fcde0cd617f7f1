// Package schedule runs jobs at cron times (robfig/cron/v3 specs). A
// leader-only job claims each slot (the cron time it falls due) in a
// shared store before it runs, so of several processes exactly one runs
// it, and a slot that fell due while none was running is run once, late,
// by the next: only the latest slot due is ever run, never a backlog.
// Other jobs run in every process that runs the scheduler.
package schedule

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/nomoshq/nomos/internal/loop"
)

// Slots is where a leader-only job's slots are claimed: store.Store.
type Slots interface {
	// RegisterScheduleJob records job as seen at at, unless known, and
	// returns its last claimed slot.
	RegisterScheduleJob(ctx context.Context, job string, at time.Time) (time.Time, error)
	// ClaimScheduleSlot claims slot when it is later than the last one
	// claimed; only one caller ever gets true for a slot.
	ClaimScheduleSlot(ctx context.Context, job string, slot time.Time) (bool, error)
	// ReleaseScheduleSlot gives a claimed slot back, for a retry.
	ReleaseScheduleSlot(ctx context.Context, job string, slot time.Time) error
}

// Job is one scheduled piece of work.
type Job struct {
	// Name names the job; it is the key of its slots. Required, unique.
	Name string
	// Spec is a cron spec: five fields (minute hour day-of-month month
	// day-of-week) or a descriptor such as @daily or @every 10m.
	// Required.
	Spec string
	// Location is the time zone Spec is read in; nil means UTC.
	Location *time.Location
	// LeaderOnly jobs claim each slot in Slots first, so only one process
	// runs it; others run in each process, each slot once per process.
	LeaderOnly bool
	// Run does the work of the slot that fell due at slot. An error
	// wrapping ErrRetry gives the slot back, so a later pass runs it
	// again; any other error is logged and the slot counts as run.
	Run func(ctx context.Context, slot time.Time) error
}

// ErrRetry, wrapped in a Run's error, has the slot tried again on a later
// pass (asynq's and river's jobs say the same with a sentinel).
var ErrRetry = errors.New("retry the slot")

// Config configures a Scheduler.
type Config struct {
	// Slots claims leader-only jobs' slots. Required when any job is
	// leader-only.
	Slots Slots
	// Tick is how often due slots are looked for. Default 30s.
	Tick time.Duration
	// Clock is the time. Default time.Now.
	Clock func() time.Time
	// Logger receives the scheduler's logs. Default: discarded.
	Logger *slog.Logger
}

// Scheduler runs jobs when they fall due.
type Scheduler struct {
	cfg  Config
	log  *slog.Logger
	mu   sync.Mutex
	jobs []*entry
}

type entry struct {
	Job
	sched cron.Schedule
	// last is the last slot known run (or claimed elsewhere); zero until
	// the job is registered.
	last time.Time
}

// parser reads five-field specs and descriptors, as crontab(5) does.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSpec checks a cron spec; its error says what is wrong with it.
func ParseSpec(spec string) (cron.Schedule, error) {
	s, err := parser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("cron spec %q: %w (want five fields, minute hour day-of-month month day-of-week, such as \"0 3 * * *\", or @daily, @hourly, @every 15m)", spec, err)
	}
	return s, nil
}

// New builds a scheduler with no jobs.
func New(cfg Config) *Scheduler {
	cfg.Tick = cmp.Or(cfg.Tick, 30*time.Second)
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Scheduler{cfg: cfg, log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))}
}

// Add registers a job. It may be called before Run or while it runs.
func (s *Scheduler) Add(j Job) error {
	switch {
	case j.Name == "" || j.Run == nil:
		return errors.New("schedule: a job needs a Name and a Run")
	case j.LeaderOnly && s.cfg.Slots == nil:
		return fmt.Errorf("schedule: job %s is leader-only, and the scheduler has no Slots to claim its slots in", j.Name)
	}
	sched, err := ParseSpec(j.Spec)
	if err != nil {
		return fmt.Errorf("schedule: job %s: %w", j.Name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.jobs {
		if e.Name == j.Name {
			return fmt.Errorf("schedule: job %s is registered twice", j.Name)
		}
	}
	s.jobs = append(s.jobs, &entry{Job: j, sched: sched})
	return nil
}

// Names lists the registered jobs, in the order they were added.
func (s *Scheduler) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.jobs))
	for i, e := range s.jobs {
		out[i] = e.Name
	}
	return out
}

// Run runs due jobs every Tick until ctx ends; run it only while the
// process leads when it has leader-only jobs (the bot runs it among its
// leader's services). Jobs run one after the other, in the order added.
func (s *Scheduler) Run(ctx context.Context) error {
	loop.Every(ctx, s.cfg.Tick, s.RunDue)
	return nil
}

// RunDue runs, once, each job whose latest slot at or before now has not
// run yet.
func (s *Scheduler) RunDue(ctx context.Context) {
	s.mu.Lock()
	jobs := append([]*entry(nil), s.jobs...)
	s.mu.Unlock()
	for _, e := range jobs {
		if ctx.Err() != nil {
			return
		}
		s.runDue(ctx, e)
	}
}

func (s *Scheduler) runDue(ctx context.Context, e *entry) {
	now := s.cfg.Clock()
	if e.last.IsZero() {
		if !e.LeaderOnly {
			e.last = now
			return
		}
		last, err := s.cfg.Slots.RegisterScheduleJob(ctx, e.Name, now)
		if err != nil {
			s.warn(ctx, "register a scheduled job", e, err)
			return
		}
		e.last = last
	}
	slot, ok := latestSlot(e.sched, e.Location, e.last, now)
	if !ok {
		return
	}
	if e.LeaderOnly {
		claimed, err := s.cfg.Slots.ClaimScheduleSlot(ctx, e.Name, slot)
		if err != nil {
			s.warn(ctx, "claim a scheduled slot", e, err)
			return
		}
		if !claimed {
			// Another process ran it (or a later one) meanwhile.
			e.last = slot
			return
		}
	}
	e.last = slot
	late := now.Sub(slot).Round(time.Second)
	err := e.Run(ctx, slot)
	switch {
	case err == nil:
		s.log.Info("scheduled job ran", "job", e.Name, "slot", slot, "late", late.String())
	case errors.Is(err, ErrRetry):
		s.log.Warn("scheduled job failed; retrying on a later pass", "job", e.Name, "slot", slot, "err", err)
		if e.LeaderOnly {
			if rerr := s.cfg.Slots.ReleaseScheduleSlot(context.WithoutCancel(ctx), e.Name, slot); rerr != nil {
				s.log.Error("give back a scheduled slot", "job", e.Name, "slot", slot, "err", rerr)
				return
			}
		}
		e.last = slot.Add(-time.Nanosecond) // the same slot is due again
	default:
		s.log.Error("scheduled job failed", "job", e.Name, "slot", slot, "err", err)
	}
}

func (s *Scheduler) warn(ctx context.Context, what string, e *entry, err error) {
	if ctx.Err() == nil {
		s.log.Warn(what, "job", e.Name, "err", err)
	}
}

// maxSteps bounds the walk from the last slot to now: a job every minute
// that last ran a year ago takes about half a million steps once.
const maxSteps = 1 << 20

// latestSlot is the latest time sched falls due after last and at or
// before now, read in loc; ok is false when there is none.
func latestSlot(sched cron.Schedule, loc *time.Location, last, now time.Time) (slot time.Time, ok bool) {
	if loc == nil {
		loc = time.UTC
	}
	t := last.In(loc)
	for range maxSteps {
		next := sched.Next(t)
		if next.IsZero() || next.After(now) {
			return slot, ok
		}
		slot, ok, t = next, true, next
	}
	return slot, ok
}

// Next is when spec next falls due after t, read in loc (nil: UTC); for
// showing a schedule.
func Next(spec string, loc *time.Location, t time.Time) (time.Time, error) {
	sched, err := ParseSpec(spec)
	if err != nil {
		return time.Time{}, err
	}
	return sched.Next(t.In(cmp.Or(loc, time.UTC))), nil
}
