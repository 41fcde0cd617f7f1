package executions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nomoshq/nomos/internal/loop"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// ProbeReport counts what one pass of the prober did.
type ProbeReport struct {
	// Sent is how many probes went to the actuator.
	Sent int
	// Skipped is how many due checks could not be sent: their target is
	// gone or destroyed, or its host has no SSH address.
	Skipped int
	// Stale is how many targets went without a result for too long and
	// were marked stale.
	Stale int
}

// probeBatch bounds the checks one pass sends; the rest wait a tick.
const probeBatch = 1000

// ProbeDue marks stale the targets whose checks stopped answering, then
// sends every check whose time has come to the actuator as a read-only
// probe, signed with the order key. The results come back on the results
// queue (ApplyReport).
// Each check is claimed for its slot in the database, so a restart or a
// second bot never sends one slot twice.
func (s *Service) ProbeDue(ctx context.Context) (ProbeReport, error) {
	return s.probeDue(ctx, 0)
}

// probeDue is ProbeDue for the checks due within ahead of now as well,
// each sent at its slot: RunProber claims the checks of its next tick so
// that none waits for that tick (up to ProbeInterval late) to be sent.
func (s *Service) probeDue(ctx context.Context, ahead time.Duration) (ProbeReport, error) {
	var rep ProbeReport
	now := s.now()
	stale, err := s.store.MarkStale(ctx, now)
	if err != nil {
		return rep, err
	}
	rep.Stale = stale
	due, err := s.store.ClaimChecksDueBy(ctx, now, now.Add(ahead), probeBatch)
	if err != nil || len(due) == 0 {
		return rep, err
	}
	g, byID, err := s.probeGraph(ctx, now)
	if err != nil {
		return rep, err
	}
	var errs []error
	for _, c := range due {
		if !s.waitFor(ctx, c.Slot) {
			// Stopping: the claimed slots are lost, not the checks.
			break
		}
		now := s.now()
		e, ok := byID[c.TargetID.String()]
		if !ok || e.Lifecycle == "destroyed" {
			rep.Skipped++
			continue
		}
		target := g.orderTarget(e)
		if target.HostAddr == "" {
			s.logger.Warn("check skipped: its host has no ssh address in the fleet data", "check", c.Slug, "target", e.Slug)
			rep.Skipped++
			continue
		}
		task, err := tasks.NewCheckRunTask(s.cfg.SigningKey, tasks.CheckRun{
			CheckID: c.ID.String(), TargetID: c.TargetID.String(), Actuator: s.cfg.Actuator, Site: g.site(e),
			Kind: c.Kind, Target: target, Spec: c.Spec,
			IssuedAt: now, ExpiresAt: now.Add(min(c.Interval, tasks.MaxOrderTTL)),
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := s.cfg.Queue.EnqueueContext(ctx, task); err != nil {
			// The slot is lost, not the check: its next slot is claimed
			// as usual, and the target goes stale if this keeps up.
			errs = append(errs, fmt.Errorf("send probe %s: %w", c.Slug, err))
			continue
		}
		rep.Sent++
	}
	return rep, errors.Join(errs...)
}

// probeGraphFor is how long the prober reuses the fleet it read: it
// passes twice a second, and reading every entity each time would cost
// more than the probes. A probe is a read, so one sent to a target a few
// seconds after it changed costs a result that says so, nothing more.
const probeGraphFor = 5 * time.Second

// probeGraph is the fleet as the prober last read it, by entity id, read
// again once it is older than probeGraphFor.
func (s *Service) probeGraph(ctx context.Context, now time.Time) (*graph, map[string]store.Entity, error) {
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	if s.probeG != nil && now.Sub(s.probeAt) < probeGraphFor && now.After(s.probeAt) {
		return s.probeG, s.probeByID, nil
	}
	g, err := s.loadGraph(ctx)
	if err != nil {
		return nil, nil, err
	}
	byID := make(map[string]store.Entity, len(g.entities))
	for _, e := range g.entities {
		byID[e.ID.String()] = e
	}
	s.probeG, s.probeByID, s.probeAt = g, byID, now
	return g, byID, nil
}

// waitFor waits until at, by the service's clock, and reports false if
// ctx ended first.
func (s *Service) waitFor(ctx context.Context, at time.Time) bool {
	d := at.Sub(s.now())
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// RunProber probes at once and then every ProbeInterval until ctx ends.
// Each pass claims the checks due before the next one and sends each at
// its slot, so a probe is sent on time rather than up to a tick late.
func (s *Service) RunProber(ctx context.Context) {
	loop.Every(ctx, s.cfg.ProbeInterval, func(ctx context.Context) {
		rep, err := s.probeDue(ctx, s.cfg.ProbeInterval)
		if err != nil && ctx.Err() == nil {
			s.logger.Error("probe due checks", "err", err)
		}
		if rep.Stale > 0 || rep.Skipped > 0 {
			s.logger.Info("prober", "sent", rep.Sent, "skipped", rep.Skipped, "stale", rep.Stale)
		}
	})
}
