package executions

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

// ContainerState asks a container's host whether it runs, through the
// pct_status probe (a Read), and waits up to ProbeWait for the answer:
// "running", "stopped", or what else `pct status` says. When the host
// does not answer in time, or the probe could not run, the error wraps
// ErrNoContainerState: the caller must not guess.
func (s *Service) ContainerState(ctx context.Context, container, requestedBy string) (string, error) {
	x, err := s.Read(ctx, Request{Action: string(policy.ActionPctStatus), Target: container, RequestedBy: requestedBy, Via: ViaChat}, s.cfg.ProbeWait)
	switch {
	case errors.Is(err, ErrReadBusy), errors.Is(err, ErrReadTimedOut):
		return "", fmt.Errorf("%w: %v", ErrNoContainerState, err)
	case err != nil:
		return "", err
	case x.State != store.StateSucceeded:
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
