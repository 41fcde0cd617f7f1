package tasks

import (
	"encoding/json"
	"errors"
	"time"
)

// QueueResults carries every actuator's reports to the bot. Orders and
// probes go on the queues of the target host's site (OrderQueue,
// ProbeQueue).
const QueueResults = "nomos:results"

// Task types.
const (
	TypeExecutionRun      = "execution:run"
	TypeCheckRun          = "check:run"
	TypeExecutionProgress = "execution:progress"
	TypeExecutionResult   = "execution:result"
	TypeCheckResult       = "check:result"
)

// Version is the payload version this build writes and reads. A payload of
// another version is refused rather than guessed at. Version 2 signs every
// message in an Envelope.
const Version = 2

// RunRetention keeps a finished execution:run task in Redis so that the
// same execution id cannot be enqueued again while it is retained.
const RunRetention = 24 * time.Hour

// ErrVersion reports a payload written by an incompatible build.
var ErrVersion = errors.New("unsupported payload version")

// Status is how an execution ended, as the actuator reports it.
type Status string

const (
	StatusSucceeded      Status = "succeeded"
	StatusFailed         Status = "failed"
	StatusOutcomeUnknown Status = "outcome_unknown"
	// StatusRefused means the actuator ran nothing: the order's signature,
	// expiry or journal check failed.
	StatusRefused Status = "refused"
)

// Refusal is why the actuator refused an order without running it.
type Refusal string

const (
	RefusedBadSignature Refusal = "bad_signature"
	RefusedExpired      Refusal = "expired"
	RefusedMalformed    Refusal = "malformed"
	// RefusedReplay means the journal shows the order already started; the
	// first delivery's result stands.
	RefusedReplay Refusal = "replay"
	// RefusedPlanMismatch means the signed plan hash does not match the
	// steps the actuator derives from the order's action and parameters.
	RefusedPlanMismatch Refusal = "plan_mismatch"
	// RefusedWrongActuator means the order is signed by the bot but
	// addressed to another actuator.
	RefusedWrongActuator Refusal = "wrong_actuator"
	// RefusedTTLTooLong means the order claims a lifetime over MaxOrderTTL.
	RefusedTTLTooLong Refusal = "ttl_too_long"
	// RefusedWrongSite means the order is signed by the bot for a host of
	// another site: it reached this actuator's queue by mistake or by a
	// hand on Redis, and this actuator's SSH key is not the one for it.
	RefusedWrongSite Refusal = "wrong_site"
	// RefusedNotApproved means the bot answered that the execution is
	// no longer approved: its approval was withdrawn, or it already ran.
	// A copy of its order was put back on the queue.
	RefusedNotApproved Refusal = "not_approved"
	// RefusedUnconfirmed means the bot did not confirm the approval
	// before the order expired or the actuator stopped; nothing ran.
	RefusedUnconfirmed Refusal = "unconfirmed"
)

// Progress is a coalesced snapshot of a running execution's output.
type Progress struct {
	Version     int    `json:"v"`
	ExecutionID string `json:"execution_id"`
	// Actuator names the actuator that ran the order and signed this.
	Actuator string `json:"actuator"`
	// Seq numbers the reports of one execution from 1; the bot refuses a
	// report whose number is not above the last it applied.
	Seq     int       `json:"seq"`
	Phase   string    `json:"phase,omitempty"`
	Tail    string    `json:"tail"`
	Elapsed Duration  `json:"elapsed"`
	At      time.Time `json:"at"`
}

// Phase is one named stage of an execution and how it went.
type Phase struct {
	Name     string   `json:"name"`
	Status   Status   `json:"status"`
	ExitCode int      `json:"exit_code"`
	Elapsed  Duration `json:"elapsed"`
	Note     string   `json:"note,omitempty"`
}

// Result is the actuator's final word on one execution.
type Result struct {
	Version     int    `json:"v"`
	ExecutionID string `json:"execution_id"`
	// Actuator names the actuator that signed the result.
	Actuator string `json:"actuator"`
	// PlanHash is the plan hash of the verified order this result
	// answers. It is empty when no verified order stands behind the
	// result: a refusal of an order that did not verify or was addressed
	// to another actuator, and the outcome_unknown of an execution
	// recovered from the journal after a crash.
	PlanHash string `json:"plan_hash,omitempty"`
	Status   Status `json:"status"`
	// Refusal says why a refused order was not run.
	Refusal     Refusal  `json:"refusal,omitempty"`
	ExitCode    int      `json:"exit_code"`
	Error       string   `json:"error,omitempty"`
	Output      string   `json:"output,omitempty"`
	Phases      []Phase  `json:"phases,omitempty"`
	FailedPhase string   `json:"failed_phase,omitempty"`
	Snapshot    string   `json:"snapshot,omitempty"`
	Notes       []string `json:"notes,omitempty"`
	// Created describes a container that pct_create made, even when a
	// later phase failed, so the bot can add it to the fleet.
	Created *CreatedContainer `json:"created,omitempty"`
	// Began is true when the actuator journaled the order's start, so a
	// command of it may have gone out. A result can be the first the bot
	// hears of an order (an order shorter than the first progress report
	// waits for), and the bot then records the start before the end.
	Began      bool      `json:"began,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
}

// CreatedContainer is a container that an execution created.
type CreatedContainer struct {
	VMID     int    `json:"vmid"`
	Host     string `json:"host"`
	Hostname string `json:"hostname"`
	// IP is the address the order asked for: a CIDR, or "dhcp".
	IP string `json:"ip"`
	// Address is the IPv4 CIDR a "dhcp" container was leased, read from
	// the node after start; empty when the order gave a static address or
	// none was seen.
	Address string `json:"address,omitempty"`
}

// CheckRun asks the actuator for one read-only probe. The bot signs it
// with its order key.
type CheckRun struct {
	Version  int    `json:"v"`
	CheckID  string `json:"check_id"`
	TargetID string `json:"target_id"`
	// Actuator names the actuator the probe is for.
	Actuator string `json:"actuator"`
	// Site is the site of the target's host; another site's actuator
	// drops the request.
	Site     string         `json:"site,omitempty"`
	Kind     string         `json:"kind"`
	Target   Target         `json:"target"`
	Spec     map[string]any `json:"spec,omitempty"`
	IssuedAt time.Time      `json:"issued_at"`
	// ExpiresAt is when the probe is no longer worth running: its next
	// slot has come. Required. An actuator back from an outage drops the
	// backlog instead of probing the past.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// CheckResult is the outcome of a probe, to be written against TargetID.
type CheckResult struct {
	Version  int    `json:"v"`
	CheckID  string `json:"check_id"`
	TargetID string `json:"target_id"`
	// Actuator names the actuator that ran the probe and signed this.
	Actuator string             `json:"actuator"`
	Health   string             `json:"health"`
	Detail   string             `json:"detail,omitempty"`
	Metrics  map[string]float64 `json:"metrics,omitempty"`
	At       time.Time          `json:"at"`
}

// Duration marshals as milliseconds, which every consumer can read.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).Milliseconds())
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	var ms int64
	if err := json.Unmarshal(b, &ms); err != nil {
		return err
	}
	*d = Duration(time.Duration(ms) * time.Millisecond)
	return nil
}

// versioned is implemented by every payload.
type versioned interface{ version() int }

func (o Order) version() int       { return o.Version }
func (p Progress) version() int    { return p.Version }
func (r Result) version() int      { return r.Version }
func (c CheckRun) version() int    { return c.Version }
func (c CheckResult) version() int { return c.Version }
