package soak

import (
	"fmt"
	"testing"
	"time"
)

// homeserverStopped stops Dendrite while plans run and one was approved
// just before. The results that come in meanwhile are edited into their
// cards once it is back, each card's edits in order, and the approval
// made just before the stop is not lost.
func homeserverStopped(t *testing.T, s *stack) {
	outage := 10 * time.Second
	if full() {
		outage = 60 * time.Second
	}
	n := trials(3, 6)
	res := result{Case: "homeserver stopped while plans run", Trials: n}
	from := len(s.log())
	var plans []*plan
	for i := range n {
		plans = append(plans, s.ask(s.operators[i%len(s.operators)], i))
	}
	// Approved one after another, the last just before the stop: the
	// first ones run and finish while the homeserver is away, the last
	// may reach the bot only once it is back.
	for _, p := range plans {
		p.op.approve(p.card.ID)
	}
	time.Sleep(between(0, 300*time.Millisecond))
	if err := s.hs.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	time.Sleep(time.Until(stopped.Add(outage)))
	meanwhile := 0
	for _, p := range plans {
		if x, ok, _ := s.execution(p.card.ID); ok && x.State == "succeeded" {
			meanwhile++
		}
	}
	s.restartHomeserver()
	back := time.Now()
	for _, p := range plans {
		x, ended := s.awaitEnd(p, 2*time.Minute)
		n := runs(s.log(), p.logFrom, p.command)
		res.RunsExpected++
		res.RunsSeen += n
		if !ended || x.State != "succeeded" || s.decisions(x.ID) != 1 {
			res.LostDecisions++
			t.Errorf("%s: ended %v in state %s with %d decisions, want succeeded with 1", p, ended, x.State, s.decisions(x.ID))
			continue
		}
		if n != 1 {
			t.Errorf("%s: its command reached the host %d times, want once", p, n)
		}
		if !s.waitSays(p, 90*time.Second, "succeeded") {
			t.Errorf("%s: the card never said it succeeded after the homeserver came back: %q", p, s.timeline.lastBody(s.botUser, p.card))
			continue
		}
		res.Recover = append(res.Recover, time.Since(back))
		s.checkEditsInOrder(p)
	}
	s.checkUp()
	res.Note = fmt.Sprintf("down %s; %d of %d finished meanwhile, edited in once back", outage, meanwhile, n)
	checkNoLateRuns(t, s, from, res.RunsSeen)
	record(t, res)
}

// checkEditsInOrder checks that no edit of the card goes back to an
// earlier state once it said succeeded.
func (s *stack) checkEditsInOrder(p *plan) {
	s.t.Helper()
	done := false
	for _, e := range s.timeline.edits(s.botUser, p.card.ID) {
		if contains(e.Body, "succeeded") {
			done = true
		} else if done {
			s.t.Errorf("%s: an edit after the one that said succeeded says: %q", p, e.Body)
		}
	}
}
