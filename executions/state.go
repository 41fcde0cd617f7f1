package executions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

// ContainerState asks a container's host whether it runs, through the
// pct_status probe, and waits up to ProbeWait for the answer: "running",
// "stopped", or what else `pct status` says. The probe approves itself
// (it takes nothing but the container) and has no room, so no card is
// posted for it. When the host does not answer in time, or the probe
// could not run, the error wraps ErrNoContainerState: the caller must not
// guess.
func (s *Service) ContainerState(ctx context.Context, container, requestedBy string) (string, error) {
	p, err := s.Request(ctx, Request{Action: string(policy.ActionPctStatus), Target: container, RequestedBy: requestedBy, Via: ViaChat})
	if errors.Is(err, ErrAlreadyWaiting) {
		// Another probe of it was held back a moment ago, and is being
		// cancelled: the actuator is as busy now.
		return "", fmt.Errorf("%w: the actuator is busy with other unattended orders", ErrNoContainerState)
	}
	if err != nil {
		return "", err
	}
	x := p.Execution
	if x.State == store.StateAwaitingApproval {
		// Too many unattended orders in flight: the probe was not sent.
		_, err := s.store.Transition(ctx, store.Transition{
			ID: x.ID, From: []store.ExecutionState{store.StateAwaitingApproval}, To: store.StateCancelled,
			Audit: store.AuditEntry{Actor: s.cfg.Actor, Action: "execution.cancelled", Detail: map[string]any{"reason": "too many unattended orders in flight for a probe"}},
		})
		if err != nil {
			s.logger.Warn("cancel a probe that could not be sent", "execution_id", x.ID, "err", err)
		}
		return "", fmt.Errorf("%w: the actuator is busy with other unattended orders", ErrNoContainerState)
	}
	deadline := time.NewTimer(s.cfg.ProbeWait)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !x.State.Terminal() {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-deadline.C:
			return "", fmt.Errorf("%w: no answer from host %s within %s (execution %s is %s)", ErrNoContainerState,
				p.Target.Attrs["host"], s.cfg.ProbeWait, x.ID, x.State)
		case <-tick.C:
		}
		if x, err = s.store.GetExecution(ctx, x.ID); err != nil {
			return "", err
		}
	}
	if x.State != store.StateSucceeded {
		return "", fmt.Errorf("%w: the probe %s: %s", ErrNoContainerState, x.State, firstLine(x.Error))
	}
	for line := range strings.Lines(x.ProgressTail) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "status:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%w: `pct status` gave no status line", ErrNoContainerState)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return clip(s, 200)
}
