package actuator

import (
	"crypto/ed25519"
	"fmt"
	"slices"
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

// TestTwoDeliveriesOfOneOrderAskSeparately: a copy of an order delivered
// while the first waits for the bot (a redelivery, or a Redis writer)
// goes in a question of its own, since a question names each execution
// once; the order still runs once, and the copy is refused as a replay
// rather than holding the order up until it expires.
func TestTwoDeliveriesOfOneOrderAskSeparately(t *testing.T) {
	t.Parallel()
	// No order asks again on its own within the test: each must be asked
	// about in the questions that follow the release.
	b := setup(t, withConfig(func(c *Config) { c.ApprovalWait = time.Hour }))
	release := b.results.hold()
	// Another order's question is out, so both deliveries wait for the
	// next one together.
	ahead := b.order(t, "x-ahead", policy.RestartParams{}, b.jellyfin())
	b.send(t, ahead)
	waitFor(t, b, 1, 0)
	o := b.order(t, "x-twice", policy.RestartParams{}, b.jellyfin())
	env := b.send(t, o)
	b.deliver(t, env)
	waitFor(t, b, 1, 2)
	release()
	diff(t, "the order ahead", tasks.StatusSucceeded, b.results.result(t, ahead.ExecutionID).Status)
	first := b.results.nthResult(t, o.ExecutionID, 1)
	second := b.results.nthResult(t, o.ExecutionID, 2)
	got := []tasks.Status{first.Status, second.Status}
	if !slices.Contains(got, tasks.StatusSucceeded) || !slices.Contains(got, tasks.StatusRefused) {
		t.Errorf("the two deliveries ended %v, want one succeeded and one refused", got)
	}
	for _, r := range []tasks.Result{first, second} {
		if r.Status == tasks.StatusRefused {
			diff(t, "refusal of the copy", tasks.RefusedReplay, r.Refusal)
		}
	}
	diff(t, "questions about it", 2, b.results.questions(o.ExecutionID))
	diff(t, "commands run", 2, len(b.commands(t)))
}

// waitFor waits until questions are on the list, unread, and waiting
// orders wait for the next question.
func waitFor(t *testing.T, b *bundle, questions int64, waiting int) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		queued, err := b.results.rdb.LLen(t.Context(), tasks.ApprovalChecks).Result()
		if err != nil {
			t.Fatal(err)
		}
		b.act.checks.mu.Lock()
		pending := len(b.act.checks.pending)
		b.act.checks.mu.Unlock()
		if queued == questions && pending == waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d questions out and %d orders waiting; want %d and %d", queued, pending, questions, waiting)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
