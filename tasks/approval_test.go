package tasks_test

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nomoshq/nomos/tasks"
)

// TestApprovalAnswerAnswersOneQuestion: an answer verifies only with the
// bot's key, only as an answer, and only for the question it answers:
// the same execution, actuator, plan hash and nonce.
func TestApprovalAnswerAnswersOneQuestion(t *testing.T) {
	t.Parallel()
	botPub, botKey, _ := ed25519.GenerateKey(nil)
	_, actuatorKey, _ := ed25519.GenerateKey(nil)
	q := tasks.ApprovalCheck{ExecutionID: "x1", Actuator: "actuator", PlanHash: "h1", Nonce: "n1", At: time.Now()}
	yes := tasks.ApprovalAnswer{ExecutionID: "x1", Actuator: "actuator", PlanHash: "h1", Nonce: "n1", Approved: true, At: time.Now()}
	good, err := tasks.SignApprovalAnswer(botKey, yes)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := tasks.VerifyApprovalAnswer(tasks.VerifyKeys{botPub}, good, q); err != nil || !a.Approved {
		t.Fatalf("the bot's yes = %+v, %v", a, err)
	}
	if got := tasks.AnswerNonce(good); got != "n1" {
		t.Errorf("AnswerNonce = %q, want n1", got)
	}
	question, err := tasks.SignApprovalCheck(botKey, q)
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := tasks.SignApprovalAnswer(actuatorKey, yes)
	for name, tc := range map[string]struct {
		payload []byte
		q       tasks.ApprovalCheck
		want    error
	}{
		"signed by another key":        {forged, q, tasks.ErrBadSignature},
		"a question, not an answer":    {question, q, tasks.ErrBadSignature},
		"an earlier question's answer": {good, withNonce(q, "n2"), tasks.ErrMalformed},
		"another plan":                 {good, withPlan(q, "h2"), tasks.ErrMalformed},
	} {
		if _, err := tasks.VerifyApprovalAnswer(tasks.VerifyKeys{botPub}, tc.payload, tc.q); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

func withNonce(q tasks.ApprovalCheck, n string) tasks.ApprovalCheck { q.Nonce = n; return q }
func withPlan(q tasks.ApprovalCheck, h string) tasks.ApprovalCheck  { q.PlanHash = h; return q }

// TestApprovalBatchAnswerAnswersItsQuestionOnly: an answer about several
// orders verifies only with the bot's key, only as such an answer, and
// only when it answers that very question: its actuator and nonce, and a
// verdict for each order asked about, in the question's order, naming
// the same execution and plan. A Redis writer who mixes verdicts, adds,
// drops or reorders them, or copies an answer to another question, gets
// an error, never a verdict.
func TestApprovalBatchAnswerAnswersItsQuestionOnly(t *testing.T) {
	t.Parallel()
	botPub, botKey, _ := ed25519.GenerateKey(nil)
	_, actuatorKey, _ := ed25519.GenerateKey(nil)
	now := time.Now()
	q := tasks.ApprovalBatch{Actuator: "actuator", Nonce: "n1", At: now,
		Orders: []tasks.ApprovalItem{{ExecutionID: "x1", PlanHash: "h1"}, {ExecutionID: "x2", PlanHash: "h2"}}}
	yes := func() tasks.ApprovalBatchAnswer {
		return tasks.ApprovalBatchAnswer{Actuator: "actuator", Nonce: "n1", At: now, Verdicts: []tasks.ApprovalVerdict{
			{ExecutionID: "x1", PlanHash: "h1", Approved: true}, {ExecutionID: "x2", PlanHash: "h2", Approved: false, State: "cancelled"}}}
	}
	sign := func(key ed25519.PrivateKey, a tasks.ApprovalBatchAnswer) []byte {
		t.Helper()
		p, err := tasks.SignApprovalBatchAnswer(key, a)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := sign(botKey, yes())
	a, err := tasks.VerifyApprovalBatchAnswer(tasks.VerifyKeys{botPub}, good, q)
	if err != nil || !a.Verdicts[0].Approved || a.Verdicts[1].Approved {
		t.Fatalf("the bot's answer = %+v, %v; want yes for x1, no for x2", a, err)
	}
	if got := tasks.AnswerNonce(good); got != "n1" {
		t.Errorf("AnswerNonce = %q, want n1", got)
	}
	question, err := tasks.SignApprovalBatch(botKey, q)
	if err != nil {
		t.Fatal(err)
	}
	single, err := tasks.SignApprovalAnswer(botKey, tasks.ApprovalAnswer{ExecutionID: "x1", Actuator: "actuator", PlanHash: "h1", Nonce: "n1", Approved: true, At: now})
	if err != nil {
		t.Fatal(err)
	}
	tampered := func(f func(*tasks.ApprovalBatchAnswer)) []byte {
		a := yes()
		f(&a)
		return sign(botKey, a)
	}
	for name, tc := range map[string]struct {
		payload []byte
		q       tasks.ApprovalBatch
		want    error
	}{
		"signed by another key":            {sign(actuatorKey, yes()), q, tasks.ErrBadSignature},
		"a question, not an answer":        {question, q, tasks.ErrBadSignature},
		"an answer about one order":        {single, q, tasks.ErrBadSignature},
		"an earlier question's answer":     {good, withBatchNonce(q, "n2"), tasks.ErrMalformed},
		"another actuator's answer":        {tampered(func(a *tasks.ApprovalBatchAnswer) { a.Actuator = "other" }), q, tasks.ErrMalformed},
		"a verdict about another order":    {tampered(func(a *tasks.ApprovalBatchAnswer) { a.Verdicts[1].ExecutionID = "x3" }), q, tasks.ErrMalformed},
		"a verdict for another plan":       {tampered(func(a *tasks.ApprovalBatchAnswer) { a.Verdicts[0].PlanHash = "h9" }), q, tasks.ErrMalformed},
		"a verdict left out":               {tampered(func(a *tasks.ApprovalBatchAnswer) { a.Verdicts = a.Verdicts[:1] }), q, tasks.ErrMalformed},
		"a verdict not asked for":          {tampered(func(a *tasks.ApprovalBatchAnswer) { a.Verdicts = append(a.Verdicts, a.Verdicts[0]) }), q, tasks.ErrMalformed},
		"the verdicts swapped":             {tampered(func(a *tasks.ApprovalBatchAnswer) { a.Verdicts[0], a.Verdicts[1] = a.Verdicts[1], a.Verdicts[0] }), q, tasks.ErrMalformed},
		"a yes moved to the other order":   {tampered(func(a *tasks.ApprovalBatchAnswer) { a.Verdicts[1].Approved = true; a.Verdicts[1].ExecutionID = "x1" }), q, tasks.ErrMalformed},
		"the answer to a smaller question": {good, withOrders(q, q.Orders[:1]), tasks.ErrMalformed},
	} {
		if _, err := tasks.VerifyApprovalBatchAnswer(tasks.VerifyKeys{botPub}, tc.payload, tc.q); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

// TestApprovalBatchIsBounded: a question about no order, about more than
// MaxApprovalBatch, or about one execution twice is malformed, whether
// the actuator would sign it or a holder of its key did.
func TestApprovalBatchIsBounded(t *testing.T) {
	t.Parallel()
	pub, key, _ := ed25519.GenerateKey(nil)
	items := func(n int) []tasks.ApprovalItem {
		out := make([]tasks.ApprovalItem, n)
		for i := range out {
			out[i] = tasks.ApprovalItem{ExecutionID: fmt.Sprintf("x%d", i), PlanHash: "h"}
		}
		return out
	}
	for name, orders := range map[string][]tasks.ApprovalItem{
		"no order":        nil,
		"too many orders": items(tasks.MaxApprovalBatch + 1),
		"an order twice":  append(items(2), tasks.ApprovalItem{ExecutionID: "x1", PlanHash: "h"}),
		"no plan hash":    {{ExecutionID: "x1"}},
	} {
		q := tasks.ApprovalBatch{Version: tasks.Version, Actuator: "actuator", Nonce: "n", At: time.Now(), Orders: orders}
		if _, err := tasks.SignApprovalBatch(key, q); !errors.Is(err, tasks.ErrMalformed) {
			t.Errorf("sign %s: %v, want ErrMalformed", name, err)
		}
		// Signed all the same, as a holder of the key could.
		body, err := json.Marshal(q)
		if err != nil {
			t.Fatal(err)
		}
		payload, err := json.Marshal(tasks.Envelope{Version: tasks.Version, Type: tasks.TypeApprovalBatch, Body: body,
			Signature: ed25519.Sign(key, tasks.SignedBytes(tasks.TypeApprovalBatch, body))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tasks.VerifyApprovalBatch(tasks.VerifyKeys{pub}, payload); !errors.Is(err, tasks.ErrMalformed) {
			t.Errorf("verify %s: %v, want ErrMalformed", name, err)
		}
	}
	q := tasks.ApprovalBatch{Actuator: "actuator", Nonce: "n", At: time.Now(), Orders: items(tasks.MaxApprovalBatch)}
	payload, err := tasks.SignApprovalBatch(key, q)
	if err != nil {
		t.Fatalf("a question about MaxApprovalBatch orders: %v", err)
	}
	if got, err := tasks.VerifyApprovalBatch(tasks.VerifyKeys{pub}, payload); err != nil || len(got.Orders) != tasks.MaxApprovalBatch {
		t.Errorf("verify a full question: %d orders, %v", len(got.Orders), err)
	}
}

func withBatchNonce(q tasks.ApprovalBatch, n string) tasks.ApprovalBatch { q.Nonce = n; return q }
func withOrders(q tasks.ApprovalBatch, o []tasks.ApprovalItem) tasks.ApprovalBatch {
	q.Orders = o
	return q
}
