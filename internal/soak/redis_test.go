package soak

import (
	"testing"
	"time"
)

func redisFlushed(t *testing.T, s *stack) {
	redisLost(t, s, "Redis FLUSHALL after approvals", func() {
		if err := s.redis.flushAll(s.ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func redisRestarted(t *testing.T, s *stack) {
	redisLost(t, s, "Redis restarted after approvals", func() {
		s.redis.kill()
		time.Sleep(time.Second)
		if err := s.redis.start(); err != nil {
			t.Fatal(err)
		}
	})
}

// redisLost loses Redis's queues after orders were approved and
// dispatched but before the actuator took them (it is stopped). The
// reconciler sends them again from Postgres; each runs once.
func redisLost(t *testing.T, s *stack, name string, lose func()) {
	rounds, perRound := trials(1, 5), trials(2, 4)
	res := result{Case: name, Trials: rounds * perRound}
	from := len(s.log())
	for r := range rounds {
		s.actuator.stop()
		var plans []*plan
		for i := range perRound {
			p := s.ask(s.operators[i%len(s.operators)], r*perRound+i)
			p.op.approve(p.card.ID)
			plans = append(plans, p)
		}
		for _, p := range plans {
			s.waitState(p, "dispatched")
		}
		lose()
		back := time.Now()
		s.actuator.start()
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
	res.Note = "reconciler resends after orders.ack_timeout 3s"
	checkNoLateRuns(t, s, from, res.RunsSeen)
	record(t, res)
}
