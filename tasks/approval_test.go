package tasks_test

import (
	"crypto/ed25519"
	"errors"
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
