package soak

import (
	"testing"
	"time"
)

// postgresRestarted stops Postgres at once, as a crash would, while
// approvals and results are in flight, and starts it again a few seconds
// later. Both roles stay up and reconnect by themselves, and nothing
// approved is lost.
func postgresRestarted(t *testing.T, s *stack) {
	rounds, perRound := trials(1, 5), trials(3, 6)
	res := result{Case: "Postgres restarted under load", Trials: rounds * perRound}
	from := len(s.log())
	for r := range rounds {
		var plans []*plan
		for i := range perRound {
			plans = append(plans, s.ask(s.operators[i%len(s.operators)], r*perRound+i))
		}
		for _, p := range plans {
			p.op.approve(p.card.ID)
		}
		time.Sleep(between(0, 100*time.Millisecond))
		if err := s.pg.stop(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		if err := s.pg.start(); err != nil {
			t.Fatal(err)
		}
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
		}
		res.Recover = append(res.Recover, time.Since(back))
		s.checkUp()
	}
	res.Note = "down 3 s each time (pg_ctl stop -m immediate)"
	checkNoLateRuns(t, s, from, res.RunsSeen)
	record(t, res)
}
