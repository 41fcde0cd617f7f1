package executions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

// Errors of Read, which its callers turn into a sentence per target.
var (
	// ErrReadNeedsApproval: the request is not a read that approves
	// itself, so Read made no plan of it.
	ErrReadNeedsApproval = errors.New("not a read that approves itself")
	// ErrReadTimedOut: the host did not finish the read within the wait.
	// The execution goes on and ends as any other; Read stops waiting.
	ErrReadTimedOut = errors.New("no answer in time")
	// ErrReadBusy: the actuator's unattended slots stayed full for the
	// whole wait, so the read was never sent.
	ErrReadBusy = errors.New("the actuator stayed busy with other unattended orders")
)

// NeedsApprovalError is a read that, on its target, is of a class a
// person must approve, such as one the fleet's policy raises.
type NeedsApprovalError struct {
	Action, Target string
	Risk           policy.Risk
}

func (e *NeedsApprovalError) Error() string {
	return fmt.Sprintf("%s on %s is %s (%s): %v", e.Action, e.Target, e.Risk.Class, strings.Join(e.Risk.Reasons, "; "), ErrReadNeedsApproval)
}

func (e *NeedsApprovalError) Unwrap() error { return ErrReadNeedsApproval }

// readPoll is how often Read looks at the execution it waits for, and
// readRetry how long it lets a held-back read's slot clear before asking
// again.
const (
	readPoll  = 50 * time.Millisecond
	readRetry = time.Second
)

// Read asks for a catalogue read that approves itself (a read-only
// action that a person asked for) and waits up to wait for its end. It
// has no room, so no card is posted for it; it is audited as any
// execution. A read held back because the unattended slots are full
// (Config.UnattendedLimit) is cancelled and asked for again, within the
// same wait. The execution is returned once it is terminal, whatever
// its outcome; an error says why there is none to read.
func (s *Service) Read(ctx context.Context, r Request, wait time.Duration) (store.Execution, error) {
	if !s.cfg.Rules.AutoApproves(policy.Action(r.Action), policy.ReadOnly, false, false) || len(r.Steps) > 0 {
		return store.Execution{}, fmt.Errorf("%s: %w", r.Action, ErrReadNeedsApproval)
	}
	r.RoomID = ""
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	var x store.Execution
	for sent := false; !sent; {
		p, err := s.Request(ctx, r)
		switch {
		case errors.Is(err, ErrAlreadyWaiting):
			// Another read of it was held back a moment ago and is being
			// cancelled.
		case err != nil:
			return store.Execution{}, err
		case p.Risk.Class != policy.ReadOnly:
			// The fleet's policy raises it on this target: a person
			// decides it, on its own card.
			s.cancelHeld(ctx, p.Execution, "not a read that approves itself")
			return store.Execution{}, &NeedsApprovalError{Action: r.Action, Target: p.Target.Slug, Risk: p.Risk}
		case p.Execution.State == store.StateAwaitingApproval:
			s.cancelHeld(ctx, p.Execution, "too many unattended orders in flight for a read")
		default:
			x, sent = p.Execution, true
			continue
		}
		select {
		case <-ctx.Done():
			return store.Execution{}, ctx.Err()
		case <-deadline.C:
			return store.Execution{}, fmt.Errorf("%w within %s", ErrReadBusy, wait)
		case <-time.After(readRetry):
		}
	}
	tick := time.NewTicker(readPoll)
	defer tick.Stop()
	for !x.State.Terminal() {
		select {
		case <-ctx.Done():
			return x, ctx.Err()
		case <-deadline.C:
			return x, fmt.Errorf("%w: the read was still %s after %s", ErrReadTimedOut, x.State, wait)
		case <-tick.C:
		}
		var err error
		if x, err = s.store.GetExecution(ctx, x.ID); err != nil {
			return x, err
		}
	}
	return x, nil
}

// cancelHeld cancels a read that was held back for a person rather than
// sent: nobody is shown it to decide.
func (s *Service) cancelHeld(ctx context.Context, x store.Execution, why string) {
	_, err := s.store.Transition(ctx, store.Transition{
		ID: x.ID, From: []store.ExecutionState{store.StateAwaitingApproval}, To: store.StateCancelled,
		Audit: store.AuditEntry{Actor: s.cfg.Actor, Action: "execution.cancelled", Detail: map[string]any{"reason": why}},
	})
	if err != nil {
		s.logger.Warn("cancel a read that could not be sent", "execution_id", x.ID, "err", err)
	}
}

// ReadOutcome is one target's read of ReadEach.
type ReadOutcome struct {
	// Target is the target as the request named it.
	Target string
	// Execution is the read, once it has ended; zero when Err says there
	// was none to wait for.
	Execution store.Execution
	// Err says why the read has no outcome to show: it was not sent, or
	// did not end within the wait.
	Err error
}

// ReadEach runs the same read (r's action and params) on each target,
// at most Config.UnattendedLimit at a time so that it never holds every
// unattended slot's worth of reads back, each waiting up to wait. The
// outcomes are in the order of targets.
func (s *Service) ReadEach(ctx context.Context, r Request, targets []string, wait time.Duration) []ReadOutcome {
	out := make([]ReadOutcome, len(targets))
	slots := make(chan struct{}, max(1, s.cfg.UnattendedLimit))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			rt := r
			rt.Target = t
			x, err := s.Read(ctx, rt, wait)
			out[i] = ReadOutcome{Target: t, Execution: x, Err: err}
		}()
	}
	wg.Wait()
	return out
}
