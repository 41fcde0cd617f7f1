package executions

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

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
	p, err := s.claimProbes(ctx, 0)
	if err != nil {
		return p.rep, err
	}
	return p.send(ctx)
}

// probePass is the checks one pass of the prober claimed, to be sent each
// at its slot, with the fleet they are sent against.
type probePass struct {
	s       *Service
	due     []store.DueCheck
	targets map[uuid.UUID]probeTarget
	rep     ProbeReport
}

// claimProbes marks stale targets and claims the checks due by ahead of
// now, in the order of their slots.
func (s *Service) claimProbes(ctx context.Context, ahead time.Duration) (probePass, error) {
	p := probePass{s: s}
	now := s.now()
	stale, err := s.store.MarkStale(ctx, now)
	if err != nil {
		return p, err
	}
	p.rep.Stale = stale
	p.due, err = s.store.ClaimChecksDueBy(ctx, now, now.Add(ahead), probeBatch)
	if err != nil || len(p.due) == 0 {
		return p, err
	}
	p.targets, err = s.probeTargets(ctx, now)
	return p, err
}

// send sends each claimed check at its slot. A pass cut short by ctx
// loses the slots it had not sent, not the checks: each one's next slot
// is claimed as usual.
func (p probePass) send(ctx context.Context) (ProbeReport, error) {
	s, rep := p.s, p.rep
	var errs []error
	for _, c := range p.due {
		if !s.waitFor(ctx, c.Slot) {
			break
		}
		now := s.now()
		t, ok := p.targets[c.TargetID]
		if !ok {
			rep.Skipped++
			continue
		}
		if t.target.HostAddr == "" {
			s.logger.Warn("check skipped: its host has no ssh address in the fleet data", "check", c.Slug, "target", t.target.Slug)
			rep.Skipped++
			continue
		}
		task, err := tasks.NewCheckRunTask(s.cfg.SigningKey, tasks.CheckRun{
			CheckID: c.ID.String(), TargetID: c.TargetID.String(), Actuator: s.cfg.Actuator, Site: t.site,
			Kind: c.Kind, Target: t.target, Spec: c.Spec,
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

// probeTarget is what the prober sends a check against: the target as
// the actuator needs it, and its site.
type probeTarget struct {
	target tasks.Target
	site   string
}

// probeTargets is the fleet as the prober last read it: each entity that
// is not destroyed, by id, resolved to what a probe carries. It is read
// again once it is older than probeGraphFor. The prober keeps these, not
// the entities: at 1,000 containers their attributes and the graph around
// them are megabytes, held between reads and again while the next read
// decodes.
func (s *Service) probeTargets(ctx context.Context, now time.Time) (map[uuid.UUID]probeTarget, error) {
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	if s.probeByID != nil && now.Sub(s.probeAt) < probeGraphFor && now.After(s.probeAt) {
		return s.probeByID, nil
	}
	g, err := s.loadGraph(ctx)
	if err != nil {
		return nil, err
	}
	byID := make(map[uuid.UUID]probeTarget, len(g.entities))
	for _, e := range g.entities {
		if e.Lifecycle == "destroyed" {
			continue
		}
		byID[e.ID] = probeTarget{target: g.orderTarget(e), site: g.site(e)}
	}
	s.probeByID, s.probeAt = byID, now
	return byID, nil
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
// Each pass claims the checks due within the next two ticks and hands
// them to a sender of their own, which sends each at its slot: no probe
// waits for a tick (up to ProbeInterval late), nor for the next pass's
// own queries, which run while the last pass's probes are still going out.
func (s *Service) RunProber(ctx context.Context) {
	var senders sync.WaitGroup
	defer senders.Wait()
	loop.Every(ctx, s.cfg.ProbeInterval, func(ctx context.Context) {
		p, err := s.claimProbes(ctx, 2*s.cfg.ProbeInterval)
		if err != nil {
			if ctx.Err() == nil {
				s.logger.Error("probe due checks", "err", err)
			}
			return
		}
		senders.Go(func() {
			rep, err := p.send(ctx)
			if err != nil && ctx.Err() == nil {
				s.logger.Error("probe due checks", "err", err)
			}
			if rep.Stale > 0 || rep.Skipped > 0 {
				s.logger.Info("prober", "sent", rep.Sent, "skipped", rep.Skipped, "stale", rep.Stale)
			}
		})
	})
}
