package actuator

import (
	"crypto/ed25519"
	"fmt"
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

// TestOrdersArrivingTogetherShareOneQuestion: while questions are out,
// the orders that arrive wait and go in the next question together, and
// each still runs once, on the verdict for it.
func TestOrdersArrivingTogetherShareOneQuestion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := b.results.hold()
	const n = 6
	var ids []string
	for i := range n {
		o := b.order(t, fmt.Sprintf("x-together-%d", i+1), policy.RestartParams{}, b.jellyfin())
		ids = append(ids, o.ExecutionID)
		b.send(t, o)
	}
	// Wait until every order is in a question on the list or waits for
	// the next one: questionsOut questions are out, the rest wait.
	deadline := time.Now().Add(waitTimeout)
	for {
		queued, err := b.results.rdb.LRange(t.Context(), tasks.ApprovalChecks, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		asked := 0
		for _, p := range queued {
			q, err := tasks.VerifyApprovalBatch(tasks.VerifyKeys{b.reportKey}, []byte(p))
			if err != nil {
				t.Fatal(err)
			}
			asked += len(q.Orders)
		}
		b.act.checks.mu.Lock()
		waiting := len(b.act.checks.pending)
		b.act.checks.mu.Unlock()
		if len(queued) == questionsOut && asked+waiting == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d questions about %d orders out and %d orders waiting; want %d out and all %d orders in", len(queued), asked, waiting, questionsOut, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	release()
	for _, id := range ids {
		diff(t, "status of "+id, tasks.StatusSucceeded, b.results.result(t, id).Status)
		diff(t, "questions about "+id, 1, b.results.questions(id))
	}
	sizes := b.results.questionSizes()
	if len(sizes) != questionsOut+1 {
		t.Errorf("%d orders were asked about in questions of %v; want the ones that waited in one more question", n, sizes)
	}
	diff(t, "commands run", n, len(b.commands(t)))
}

// TestAnswersToAnotherQuestionRunNothing: an answer signed with the bot's
// key that does not answer the question exactly (a verdict about an
// execution it did not ask about, one more verdict than it asked, another
// plan, another question's nonce, as a copy of an earlier answer has)
// counts for nothing: the order is refused once it expires, and nothing
// runs.
func TestAnswersToAnotherQuestionRunNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(func(c *Config) { c.ApprovalWait = 100 * time.Millisecond }))
	for i, tc := range []struct {
		name   string
		tamper func(*tasks.ApprovalBatchAnswer)
	}{
		{"a verdict about another execution", func(a *tasks.ApprovalBatchAnswer) { a.Verdicts[0].ExecutionID = "x-not-asked" }},
		{"a verdict more than asked", func(a *tasks.ApprovalBatchAnswer) {
			a.Verdicts = append(a.Verdicts, tasks.ApprovalVerdict{ExecutionID: "x-not-asked", PlanHash: a.Verdicts[0].PlanHash, Approved: true})
		}},
		{"another plan", func(a *tasks.ApprovalBatchAnswer) { a.Verdicts[0].PlanHash = "another-plan" }},
		{"another question's nonce", func(a *tasks.ApprovalBatchAnswer) { a.Nonce = "an-earlier-question" }},
		{"another actuator", func(a *tasks.ApprovalBatchAnswer) { a.Actuator = "elsewhere" }},
	} {
		b.results.tamperWith(tc.tamper)
		o := b.order(t, fmt.Sprintf("x-tampered-%d", i+1), policy.RestartParams{}, b.jellyfin())
		o.ExpiresAt = time.Now().Add(time.Second)
		before := len(b.commands(t))
		refused := b.run(t, o)
		diff(t, tc.name+": status", tasks.StatusRefused, refused.Status)
		diff(t, tc.name+": refusal", tasks.RefusedUnconfirmed, refused.Refusal)
		diff(t, tc.name+": commands run", before, len(b.commands(t)))
	}
}
