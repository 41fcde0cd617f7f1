package soak

import (
	"fmt"
	"testing"
	"time"
)

// botKilled SIGKILLs the bot a random moment after an operator's ✅,
// before, while or after the decision is stored, and starts it again.
// Each approval is decided once and its order runs once; no card is
// posted twice and no earlier message is handled again.
func botKilled(t *testing.T, s *stack) {
	res := result{Case: "bot SIGKILLed around an approval", Trials: trials(3, 30)}
	before := 0
	from := len(s.log())
	for i := range res.Trials {
		p := s.ask(s.operators[i%len(s.operators)], i)
		p.op.approve(p.card.ID)
		time.Sleep(between(0, 300*time.Millisecond))
		s.bot.kill()
		x, _, _ := s.execution(p.card.ID)
		if s.decisions(x.ID) == 0 {
			before++
		}
		restarted := time.Now()
		s.bot.start()
		// A report the killed bot had taken off the queue is put back
		// by the restarted bot once its report lease (3 s) lapses;
		// asynq's own recovery, a minute or two, is the long stop.
		x, ended := s.awaitEnd(p, 3*time.Minute)
		n := runs(s.log(), p.logFrom, p.command)
		res.RunsExpected++
		res.RunsSeen += n
		if !ended || x.State != "succeeded" || s.decisions(x.ID) != 1 {
			res.LostDecisions++
			t.Errorf("%s: ended %v in state %s with %d decisions, want succeeded with 1", p, ended, x.State, s.decisions(x.ID))
			continue
		}
		res.Recover = append(res.Recover, time.Since(restarted))
		if n != 1 {
			t.Errorf("%s: its command reached the host %d times, want once", p, n)
		}
		if !s.waitSays(p, 30*time.Second, "succeeded") {
			t.Errorf("%s: the card never said it succeeded: %q", p, s.timeline.lastBody(s.botUser, p.card))
		}
	}
	res.Note = fmt.Sprintf("%d killed before the decision was stored, %d after", before, res.Trials-before)
	s.checkAsked()
	checkNoLateRuns(t, s, from, res.RunsSeen)
	record(t, res)
}
