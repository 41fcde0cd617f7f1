package tasks

import (
	"crypto/ed25519"
	"fmt"

	"github.com/hibiken/asynq"
)

// The actuator signs everything it reports with its own key, which the bot
// pins; the bot's key never signs a report, and the actuator's never an
// order.

// SignProgress encodes and signs a progress report with the actuator's key.
func SignProgress(key ed25519.PrivateKey, p Progress) ([]byte, error) {
	p.Version = Version
	if p.ExecutionID == "" || p.Actuator == "" || p.Seq < 1 {
		return nil, fmt.Errorf("sign progress: %w: execution id, actuator and a sequence number from 1 are required", ErrMalformed)
	}
	return seal(key, TypeExecutionProgress, p)
}

// VerifyProgress checks a progress report's signature and fields.
func VerifyProgress(keys VerifyKeys, payload []byte) (Progress, error) {
	p, err := open[Progress](keys, TypeExecutionProgress, payload)
	if err != nil {
		return Progress{}, err
	}
	if p.ExecutionID == "" || p.Actuator == "" || p.Seq < 1 {
		return Progress{}, fmt.Errorf("%w: missing execution id, actuator or sequence number", ErrMalformed)
	}
	return p, nil
}

// SignResult encodes and signs a result with the actuator's key.
func SignResult(key ed25519.PrivateKey, r Result) ([]byte, error) {
	r.Version = Version
	if r.ExecutionID == "" || r.Actuator == "" || r.Status == "" {
		return nil, fmt.Errorf("sign result: %w: execution id, actuator and status are required", ErrMalformed)
	}
	return seal(key, TypeExecutionResult, r)
}

// VerifyResult checks a result's signature and fields.
func VerifyResult(keys VerifyKeys, payload []byte) (Result, error) {
	r, err := open[Result](keys, TypeExecutionResult, payload)
	if err != nil {
		return Result{}, err
	}
	if r.ExecutionID == "" || r.Actuator == "" || r.Status == "" {
		return Result{}, fmt.Errorf("%w: missing execution id, actuator or status", ErrMalformed)
	}
	return r, nil
}

// SignCheckResult encodes and signs a probe result with the actuator's key.
func SignCheckResult(key ed25519.PrivateKey, c CheckResult) ([]byte, error) {
	c.Version = Version
	if c.CheckID == "" || c.TargetID == "" || c.Actuator == "" || c.At.IsZero() {
		return nil, fmt.Errorf("sign probe result: %w: check id, target id, actuator and time are required", ErrMalformed)
	}
	return seal(key, TypeCheckResult, c)
}

// VerifyCheckResult checks a probe result's signature and fields.
func VerifyCheckResult(keys VerifyKeys, payload []byte) (CheckResult, error) {
	c, err := open[CheckResult](keys, TypeCheckResult, payload)
	if err != nil {
		return CheckResult{}, err
	}
	if c.CheckID == "" || c.TargetID == "" || c.Actuator == "" || c.At.IsZero() {
		return CheckResult{}, fmt.Errorf("%w: missing check id, target id, actuator or time", ErrMalformed)
	}
	return c, nil
}

// NewProgressTask signs a progress report and wraps it for the results
// queue.
func NewProgressTask(key ed25519.PrivateKey, p Progress) (*asynq.Task, error) {
	env, err := SignProgress(key, p)
	if err != nil {
		return nil, err
	}
	return asynq.NewTask(TypeExecutionProgress, env, asynq.Queue(QueueResults), asynq.MaxRetry(3)), nil
}

// NewResultTask signs a result and wraps it for the results queue. Its
// TaskID makes a second enqueue of the same result a no-op while the first
// is retained.
func NewResultTask(key ed25519.PrivateKey, r Result) (*asynq.Task, error) {
	env, err := SignResult(key, r)
	if err != nil {
		return nil, err
	}
	return asynq.NewTask(TypeExecutionResult, env, asynq.Queue(QueueResults), asynq.MaxRetry(25),
		asynq.TaskID("result:"+r.ExecutionID+":"+string(r.Status)), asynq.Retention(RunRetention)), nil
}

// NewCheckResultTask signs a probe result and wraps it for the results
// queue, in the group whose results the bot takes in batches.
func NewCheckResultTask(key ed25519.PrivateKey, c CheckResult) (*asynq.Task, error) {
	env, err := SignCheckResult(key, c)
	if err != nil {
		return nil, err
	}
	return asynq.NewTask(TypeCheckResult, env, asynq.Queue(QueueResults), asynq.Group(CheckResultGroup), asynq.MaxRetry(3)), nil
}
