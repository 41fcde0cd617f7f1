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

// An actuator that has several orders to confirm at once asks about all
// of them in one question, and the bot answers all of them in one answer
// read from one Postgres query: one signature each way and one round
// trip for a burst, not one per order. Both travel on the same lists as
// the single forms, which the bot still answers, so an actuator of an
// earlier release keeps working; an actuator of this one needs a bot of
// this one (upgrade the bot first).
const (
	// TypeApprovalBatch is the signed type of a question about several
	// orders, signed with the actuator's report key.
	TypeApprovalBatch = "execution:approval_batch"
	// TypeApprovalBatchAnswer is the signed type of the bot's answer to one,
	// signed with the bot's order key.
	TypeApprovalBatchAnswer = "execution:approval_batch_answer"
	// MaxApprovalBatch bounds the orders of one question. A larger one is
	// malformed, and nothing of it is answered.
	MaxApprovalBatch = 100
)

// ApprovalItem is one order a question asks about: its execution and the
// plan hash of the signed order.
type ApprovalItem struct {
	ExecutionID string `json:"execution_id"`
	PlanHash    string `json:"plan_hash"`
}

// ApprovalBatch asks whether each of several executions is still
// approved, under one nonce.
type ApprovalBatch struct {
	Version  int    `json:"v"`
	Actuator string `json:"actuator"`
	Site     string `json:"site,omitempty"`
	// Orders are the orders asked about, each execution once.
	Orders []ApprovalItem `json:"orders"`
	Nonce  string         `json:"nonce"`
	At     time.Time      `json:"at"`
}

// ApprovalVerdict is the bot's answer about one order of a question.
type ApprovalVerdict struct {
	ExecutionID string `json:"execution_id"`
	PlanHash    string `json:"plan_hash"`
	// Approved and State mean what they mean in ApprovalAnswer.
	Approved bool   `json:"approved"`
	State    string `json:"state,omitempty"`
}

// ApprovalBatchAnswer is the bot's answer to one ApprovalBatch: a verdict
// for each of its orders, in its order.
type ApprovalBatchAnswer struct {
	Version  int               `json:"v"`
	Actuator string            `json:"actuator"`
	Nonce    string            `json:"nonce"`
	Verdicts []ApprovalVerdict `json:"verdicts"`
	At       time.Time         `json:"at"`
}

func (c ApprovalBatch) version() int       { return c.Version }
func (a ApprovalBatchAnswer) version() int { return a.Version }

// check says what is wrong with a question's fields, or nil.
func (c ApprovalBatch) check() error {
	switch {
	case c.Actuator == "" || c.Nonce == "" || c.At.IsZero():
		return fmt.Errorf("%w: missing actuator, nonce or time", ErrMalformed)
	case len(c.Orders) == 0:
		return fmt.Errorf("%w: a question about no order", ErrMalformed)
	case len(c.Orders) > MaxApprovalBatch:
		return fmt.Errorf("%w: a question about %d orders, more than %d", ErrMalformed, len(c.Orders), MaxApprovalBatch)
	}
	seen := make(map[string]bool, len(c.Orders))
	for _, o := range c.Orders {
		if o.ExecutionID == "" || o.PlanHash == "" {
			return fmt.Errorf("%w: an order without execution id or plan hash", ErrMalformed)
		}
		if seen[o.ExecutionID] {
			return fmt.Errorf("%w: execution %.64q asked about twice", ErrMalformed, o.ExecutionID)
		}
		seen[o.ExecutionID] = true
	}
	return nil
}

// SignApprovalBatch encodes and signs a question about several orders
// with the actuator's report key.
func SignApprovalBatch(key ed25519.PrivateKey, c ApprovalBatch) ([]byte, error) {
	c.Version = Version
	c.Site = siteOf(c.Site)
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("sign approval batch: %w", err)
	}
	return seal(key, TypeApprovalBatch, c)
}

// VerifyApprovalBatch checks a question's signature and fields: at most
// MaxApprovalBatch orders, each execution once.
func VerifyApprovalBatch(keys VerifyKeys, payload []byte) (ApprovalBatch, error) {
	c, err := open[ApprovalBatch](keys, TypeApprovalBatch, payload)
	if err != nil {
		return ApprovalBatch{}, err
	}
	if err := c.check(); err != nil {
		return ApprovalBatch{}, err
	}
	c.Site = siteOf(c.Site)
	return c, nil
}

// SignApprovalBatchAnswer encodes and signs an answer with the bot's order
// key.
func SignApprovalBatchAnswer(key ed25519.PrivateKey, a ApprovalBatchAnswer) ([]byte, error) {
	a.Version = Version
	if a.Actuator == "" || a.Nonce == "" || a.At.IsZero() || len(a.Verdicts) == 0 {
		return nil, fmt.Errorf("sign approval batch answer: %w: actuator, nonce, time and verdicts are required", ErrMalformed)
	}
	return seal(key, TypeApprovalBatchAnswer, a)
}

// VerifyApprovalBatchAnswer checks an answer's signature and that it answers
// q: the same actuator and nonce, and a verdict for each of q's orders,
// in q's order, naming the same execution and plan hash. An answer that
// leaves an order out, adds one, or names another is ErrMalformed as a
// whole, whatever it says.
func VerifyApprovalBatchAnswer(keys VerifyKeys, payload []byte, q ApprovalBatch) (ApprovalBatchAnswer, error) {
	a, err := open[ApprovalBatchAnswer](keys, TypeApprovalBatchAnswer, payload)
	if err != nil {
		return ApprovalBatchAnswer{}, err
	}
	if a.Actuator != q.Actuator || a.Nonce != q.Nonce {
		return ApprovalBatchAnswer{}, fmt.Errorf("%w: the answer is for another question", ErrMalformed)
	}
	if len(a.Verdicts) != len(q.Orders) {
		return ApprovalBatchAnswer{}, fmt.Errorf("%w: %d verdicts for a question about %d orders", ErrMalformed, len(a.Verdicts), len(q.Orders))
	}
	for i, v := range a.Verdicts {
		if v.ExecutionID != q.Orders[i].ExecutionID || v.PlanHash != q.Orders[i].PlanHash {
			return ApprovalBatchAnswer{}, fmt.Errorf("%w: verdict %d names an order the question did not ask about there", ErrMalformed, i+1)
		}
	}
	return a, nil
}

// MessageType is the type a signed message claims, before anything of it
// is verified: only to choose how to verify it.
func MessageType(payload []byte) string {
	var env Envelope
	_ = json.Unmarshal(payload, &env)
	return env.Type
}
