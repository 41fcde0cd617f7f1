package actuator

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// TestWithdrawnApprovalHoldsOnTheActuator: before it begins an order the
// actuator asks the bot whether the execution is still approved. A copy
// of a signed order put back on the queue after its approval was
// withdrawn is refused and runs nothing, whoever copied it; an answer
// signed by anyone but the bot, or to another question, counts for
// nothing; and an order the bot never confirms never runs.
func TestWithdrawnApprovalHoldsOnTheActuator(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(func(c *Config) { c.ApprovalWait = 200 * time.Millisecond }))
	restart := func(id string) tasks.Order { return b.order(t, id, policy.RestartParams{}, b.jellyfin()) }

	// Approved: it runs, after one question.
	ran := b.run(t, restart("x-approved"))
	diff(t, "an approved order", tasks.StatusSucceeded, ran.Status)
	diff(t, "questions asked about it", 1, b.results.questions("x-approved"))

	// Withdrawn, then a copy of its signed order is put back on the queue.
	o := restart("x-withdrawn")
	envelope := b.sign(t, o)
	b.results.withdraw(o.ExecutionID)
	before := len(b.commands(t))
	b.deliver(t, envelope)
	refused := b.results.result(t, o.ExecutionID)
	diff(t, "a copy of a withdrawn order", tasks.StatusRefused, refused.Status)
	diff(t, "refusal", tasks.RefusedNotApproved, refused.Refusal)
	diff(t, "labsim ran nothing for it", before, len(b.commands(t)))
	if journal := b.journalOnce(t, func(string) bool { return true }); strings.Contains(journal, "x-withdrawn") {
		t.Errorf("the journal began the withdrawn order:\n%s", journal)
	}
}

// TestAnswersFromAnyoneButTheBotCountForNothing: whoever writes to Redis
// can answer the actuator's question, but only the bot's signature on
// an answer to that very question lets the order run; without one the
// order is refused as unconfirmed once it expires, and nothing runs.
func TestAnswersFromAnyoneButTheBotCountForNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(func(c *Config) { c.ApprovalWait = 100 * time.Millisecond }))
	_, forger, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	b.results.signWith(forger)
	o := b.order(t, "x-forged-yes", policy.RestartParams{}, b.jellyfin())
	o.ExpiresAt = time.Now().Add(2 * time.Second)
	before := len(b.commands(t))
	refused := b.run(t, o)
	diff(t, "an order only a forger said yes to", tasks.StatusRefused, refused.Status)
	diff(t, "refusal", tasks.RefusedUnconfirmed, refused.Refusal)
	diff(t, "labsim ran nothing for it", before, len(b.commands(t)))
	if n := b.results.questions(o.ExecutionID); n < 2 {
		t.Errorf("the actuator asked %d times, want it to ask again while it waits", n)
	}
}
