package soak

import (
	"testing"
	"time"

	"github.com/nomoshq/nomos/internal/labsim"
)

// sshDropped has the host drop the actuator's SSH session while a restart
// runs there. The order ends outcome_unknown with a card that says so
// plainly, and nothing runs it again: not the reconciler, and not a second
// ✅ on the same card.
func sshDropped(t *testing.T, s *stack) {
	res := result{Case: "host drops SSH sessions mid-command", Trials: trials(1, 10)}
	for i := range res.Trials {
		p := s.ask(s.operators[0], i)
		s.hang(p.command)
		p.op.approve(p.card.ID)
		s.waitRunning(p.command)
		host := services[i%len(services)].host
		if err := s.fleet.Sim.Inject(labsim.Fault{Kind: labsim.FaultDrop, Target: host}); err != nil {
			t.Fatal(err)
		}
		dropped := time.Now()
		x, ended := s.awaitEnd(p, 2*time.Minute)
		if _, err := s.fleet.Sim.Clear(labsim.FaultDrop, ""); err != nil {
			t.Fatal(err)
		}
		s.clearHang()
		res.RunsExpected++
		if !ended || x.State != "outcome_unknown" || s.decisions(x.ID) != 1 {
			res.LostDecisions++
			t.Errorf("%s: ended %v in state %s with %d decisions, want outcome_unknown with 1", p, ended, x.State, s.decisions(x.ID))
			continue
		}
		res.Recover = append(res.Recover, time.Since(dropped))
		if !s.waitSays(p, 30*time.Second, "outcome unknown") || !s.says(p, "will not be retried") {
			t.Errorf("%s: the card does not say the outcome is unknown and that it will not be retried: %q", p, s.timeline.lastBody(s.botUser, p.card))
		}
		// A second ✅ on the same card, and a few reconciler passes.
		p.op.approve(p.card.ID)
		time.Sleep(4 * time.Second)
		n := runs(s.log(), p.logFrom, p.command)
		res.RunsSeen += n
		if n != 1 {
			t.Errorf("%s: its command reached the host %d times, want once and never again without a new plan", p, n)
		}
		if x, _, _ := s.execution(p.card.ID); x.State != "outcome_unknown" {
			t.Errorf("%s: went from outcome_unknown to %s on its own", p, x.State)
		}
	}
	res.Note = "every one outcome_unknown, none retried"
	record(t, res)
}
