package tasks

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"time"
)

// Before it runs an order, the actuator asks the bot whether the order's
// execution is still approved, and runs it only on a signed yes that
// answers that very question. A copy of a signed order put back on the
// queue after its approval was withdrawn is then refused, without the
// actuator reading the database: the bot, which can, answers.
//
// Questions and answers are not asynq tasks but plain Redis lists, each
// read with a blocking pop: the question is on the path of every order,
// and an asynq queue is polled, which cost two polls (about 15 ms) per
// order. Neither list holds anything worth keeping: a question left
// unanswered is asked again.
const (
	// TypeApprovalCheck is the signed type of the actuator's question,
	// signed with its report key.
	TypeApprovalCheck = "execution:approval_check"
	// TypeApprovalAnswer is the signed type of the bot's answer, signed
	// with the bot's order key.
	TypeApprovalAnswer = "execution:approval_answer"
	// ApprovalChecks is the Redis list the actuators push their questions
	// on, and the leading bot pops them from.
	ApprovalChecks = "nomos:approval-checks"
	// ApprovalListTTL is how long a question or answer list lives after
	// its last push, so one that nobody reads (the bot or the actuator
	// away) does not grow for ever.
	ApprovalListTTL = time.Minute
)

// ApprovalQueue is the Redis list of the bot's answers for one actuator
// of a site: only the actuator that asked pops it.
func ApprovalQueue(site, actuator string) string {
	return "nomos:approvals:" + siteOf(site) + ":" + actuator
}

// ApprovalCheck asks whether an execution is still approved, just before
// the actuator would begin it.
type ApprovalCheck struct {
	Version     int    `json:"v"`
	ExecutionID string `json:"execution_id"`
	// Actuator names the actuator that asks; the answer goes to its
	// queue.
	Actuator string `json:"actuator"`
	Site     string `json:"site,omitempty"`
	// PlanHash is the signed order's: the answer covers that plan only.
	PlanHash string `json:"plan_hash"`
	// Nonce is fresh for every question, so an answer copied from an
	// earlier one answers nothing.
	Nonce string    `json:"nonce"`
	At    time.Time `json:"at"`
}

// ApprovalAnswer is the bot's answer to one ApprovalCheck.
type ApprovalAnswer struct {
	Version     int    `json:"v"`
	ExecutionID string `json:"execution_id"`
	Actuator    string `json:"actuator"`
	PlanHash    string `json:"plan_hash"`
	Nonce       string `json:"nonce"`
	// Approved is true only when the execution is approved or dispatched,
	// for this plan hash, and nothing has started it.
	Approved bool `json:"approved"`
	// State is the execution's state as the bot has it, for a refusal's
	// sentence.
	State string    `json:"state,omitempty"`
	At    time.Time `json:"at"`
}

func (c ApprovalCheck) version() int  { return c.Version }
func (a ApprovalAnswer) version() int { return a.Version }

// SignApprovalCheck encodes and signs a question with the actuator's
// report key.
func SignApprovalCheck(key ed25519.PrivateKey, c ApprovalCheck) ([]byte, error) {
	c.Version = Version
	c.Site = siteOf(c.Site)
	if c.ExecutionID == "" || c.Actuator == "" || c.PlanHash == "" || c.Nonce == "" || c.At.IsZero() {
		return nil, fmt.Errorf("sign approval check: %w: execution id, actuator, plan hash, nonce and time are required", ErrMalformed)
	}
	return seal(key, TypeApprovalCheck, c)
}

// VerifyApprovalCheck checks a question's signature and fields.
func VerifyApprovalCheck(keys VerifyKeys, payload []byte) (ApprovalCheck, error) {
	c, err := open[ApprovalCheck](keys, TypeApprovalCheck, payload)
	if err != nil {
		return ApprovalCheck{}, err
	}
	if c.ExecutionID == "" || c.Actuator == "" || c.PlanHash == "" || c.Nonce == "" || c.At.IsZero() {
		return ApprovalCheck{}, fmt.Errorf("%w: missing execution id, actuator, plan hash, nonce or time", ErrMalformed)
	}
	c.Site = siteOf(c.Site)
	return c, nil
}

// SignApprovalAnswer encodes and signs an answer with the bot's order
// key.
func SignApprovalAnswer(key ed25519.PrivateKey, a ApprovalAnswer) ([]byte, error) {
	a.Version = Version
	if a.ExecutionID == "" || a.Actuator == "" || a.Nonce == "" || a.At.IsZero() {
		return nil, fmt.Errorf("sign approval answer: %w: execution id, actuator, nonce and time are required", ErrMalformed)
	}
	return seal(key, TypeApprovalAnswer, a)
}

// VerifyApprovalAnswer checks an answer's signature and that it answers
// q: the same execution, actuator, plan hash and nonce. An answer to any
// other question is ErrMalformed, whatever it says.
func VerifyApprovalAnswer(keys VerifyKeys, payload []byte, q ApprovalCheck) (ApprovalAnswer, error) {
	a, err := open[ApprovalAnswer](keys, TypeApprovalAnswer, payload)
	if err != nil {
		return ApprovalAnswer{}, err
	}
	if a.ExecutionID != q.ExecutionID || a.Actuator != q.Actuator || a.PlanHash != q.PlanHash || a.Nonce != q.Nonce {
		return ApprovalAnswer{}, fmt.Errorf("%w: the answer is for another question", ErrMalformed)
	}
	return a, nil
}

// AnswerNonce reads the nonce an answer claims, before anything of it is
// verified: only to find who waits for it.
func AnswerNonce(payload []byte) string {
	var c struct {
		Nonce string `json:"nonce"`
	}
	var env Envelope
	if err := json.Unmarshal(payload, &env); err == nil && len(env.Body) > 0 {
		_ = json.Unmarshal(env.Body, &c)
	}
	return c.Nonce
}
