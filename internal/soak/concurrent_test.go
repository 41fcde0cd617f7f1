package soak

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"
)

// concurrentPlans has three operators ask for restarts across both hosts
// at once and approve each as its card comes. Every plan is decided once
// and run once and its card ends saying so. It measures approval → SSH
// (the ✅ sent to the command's start on the host) for the report; no
// test asserts a time.
func concurrentPlans(t *testing.T, s *stack) {
	n := trials(9, 50)
	res := result{Case: "concurrent plans, 3 operators, 2 hosts", Trials: n}
	targets := fleetServices(s)
	from := len(s.log())
	type asked struct {
		op         *operator
		svc        fleetService
		msg        id.EventID
		card       roomEvent
		approvedAt time.Time
		err        error
	}
	all := make([]*asked, n)
	// A request equal to a plan that still waits is answered "already
	// queued" with no second card (docs/user-guide.md), so two operators
	// never ask to restart the same service until the first one's ✅ has
	// been counted: each service is held from the request to its approval.
	held := make([]sync.Mutex, len(targets))
	var wg sync.WaitGroup
	for w, op := range s.operators {
		wg.Go(func() {
			for i := w; i < n; i += len(s.operators) {
				a := &asked{op: op, svc: targets[i%len(targets)]}
				all[i] = a
				held[i%len(targets)].Lock()
				a.err = s.askAndApprove(op, "restart "+a.svc.name, func(msg id.EventID, card roomEvent, at time.Time) {
					a.msg, a.card, a.approvedAt = msg, card, at
				})
				held[i%len(targets)].Unlock()
			}
		})
	}
	wg.Wait()
	s.asked += n
	perCommand := map[string][]time.Time{}
	for _, a := range all {
		res.RunsExpected++
		if a.err != nil {
			res.LostDecisions++
			t.Errorf("restart %s by %s: %v", a.svc.name, a.op.id, a.err)
			continue
		}
		p := &plan{op: a.op, msg: a.msg, card: a.card, service: a.svc.name, command: a.svc.command}
		x, ended := s.awaitEnd(p, 3*time.Minute)
		if !ended || x.State != "succeeded" || s.decisions(x.ID) != 1 {
			res.LostDecisions++
			t.Errorf("%s: ended %v in state %s with %d decisions, want succeeded with 1", p, ended, x.State, s.decisions(x.ID))
			continue
		}
		if !s.waitSays(p, 60*time.Second, "succeeded") {
			t.Errorf("%s: the card never said it succeeded: %q", p, s.timeline.lastBody(s.botUser, p.card))
		}
		perCommand[a.svc.command] = append(perCommand[a.svc.command], a.approvedAt)
	}
	// Runs per command, and approval → SSH by pairing each command's
	// approvals and starts in order.
	log := s.log()
	var lat []time.Duration
	for command, approved := range perCommand {
		var starts []time.Time
		for _, e := range log[from:] {
			if e.Command == command {
				starts = append(starts, e.TS)
			}
		}
		res.RunsSeen += len(starts)
		if len(starts) != len(approved) {
			t.Errorf("%q reached its host %d times for %d approved plans", command, len(starts), len(approved))
			continue
		}
		slices.SortFunc(approved, func(a, b time.Time) int { return a.Compare(b) })
		for i := range starts {
			lat = append(lat, starts[i].Sub(approved[i]))
		}
	}
	s.checkAsked()
	res.Note = fmt.Sprintf("approval → SSH p50 %s, p99 %s", roundDur(percentile(lat, 50)), roundDur(percentile(lat, 99)))
	record(t, res)
}

type fleetService struct{ name, host, command string }

// askAndApprove sends text as op, approves the card that answers it with
// a ✅, reports the message, card and time of the ✅ to got, and returns
// once the approval is counted.
func (s *stack) askAndApprove(op *operator, text string, got func(msg id.EventID, card roomEvent, at time.Time)) error {
	resp, err := op.cli.SendText(s.ctx, s.room, text)
	if err != nil {
		return err
	}
	card, ok := s.timeline.await(90*time.Second, func(e roomEvent) bool { return e.isCardFor(s.botUser, resp.EventID) })
	if !ok {
		return fmt.Errorf("no card")
	}
	at := time.Now()
	got(resp.EventID, card, at)
	if _, err := op.cli.SendReaction(s.ctx, s.room, card.ID, "✅"); err != nil {
		return err
	}
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if x, ok, err := s.execution(card.ID); err == nil && ok && x.State != "awaiting_approval" {
			return nil
		}
	}
	return fmt.Errorf("the ✅ on %s was never counted", card.ID)
}

// fleetServices lists every seeded service whose name names it alone,
// with the command a restart of it sends.
func fleetServices(s *stack) []fleetService {
	names := map[string]int{}
	for _, h := range s.fleet.Seed.Hosts {
		for _, c := range h.Containers {
			names[c.Hostname]++
			for _, svc := range c.Services {
				names[svc.Name]++
			}
		}
	}
	var out []fleetService
	for _, h := range s.fleet.Seed.Hosts {
		for _, c := range h.Containers {
			for _, svc := range c.Services {
				if names[svc.Name] > 1 || strings.Contains(svc.Name, "-") {
					continue
				}
				out = append(out, fleetService{svc.Name, h.Name, fmt.Sprintf("pct exec %d -- systemctl restart %s", c.VMID, svc.Unit)})
			}
		}
	}
	return out
}
