package tasks

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/nomoshq/nomos/policy"
)

// MaxOrderTTL caps how long an order stays valid. The bot refuses a
// longer orders.ttl and the actuator refuses an order that claims one, so
// a copy lifted from Redis is worthless within the hour.
const MaxOrderTTL = time.Hour

// DefaultActuator is the name of an actuator when none is configured.
const DefaultActuator = "actuator"

// ValidateActuatorName checks an actuator's name: one word of letters,
// digits, '.', '_' and '-', at most 64 characters.
func ValidateActuatorName(name string) error {
	if !actuatorName.match(name) {
		return fmt.Errorf("actuator name %q: want one word of letters, digits, '.', '_' and '-', at most 64 characters", name)
	}
	return nil
}

// Order is an approved execution as the actuator receives it: everything it
// needs to act, resolved by the bot, so the actuator never looks anything up.
type Order struct {
	Version     int    `json:"v"`
	ExecutionID string `json:"execution_id"`
	// Actuator names the actuator the order is for; any other refuses it.
	Actuator string `json:"actuator"`
	// Site is the site of the target's host. Only that site's actuator
	// runs the order; empty means DefaultSite.
	Site      string          `json:"site,omitempty"`
	Action    string          `json:"action"`
	Target    Target          `json:"target"`
	Params    json.RawMessage `json:"params"`
	Steps     []string        `json:"steps"`
	RiskClass string          `json:"risk_class"`
	PlanHash  string          `json:"plan_hash"`
	IssuedAt  time.Time       `json:"issued_at"`
	ExpiresAt time.Time       `json:"expires_at"`
	// SnapshotKeep is how many of its own snapshots (policy.IsNomosSnapshot)
	// the actuator leaves on the container after a change it snapshotted
	// first, deleting the oldest; 0 deletes none (snapshots.keep).
	SnapshotKeep int `json:"snapshot_keep,omitempty"`
	// LockWait bounds how long the actuator waits for a lock on the
	// container (a backup's) to clear before a step Proxmox would refuse
	// while it holds; 0 means DefaultLockWait.
	LockWait Duration `json:"lock_wait,omitempty"`
}

// DefaultLockWait is how long an order waits for a container's lock when
// it does not say.
const DefaultLockWait = 2 * time.Minute

// MaxLockWait caps Order.LockWait: an order is valid for at most
// MaxOrderTTL, and waiting longer than a good part of it helps nobody.
const MaxLockWait = 30 * time.Minute

// Target is the resolved entity an order acts on.
type Target struct {
	// ID is the entity's id, part of the plan hash.
	ID   string `json:"id"`
	Slug string `json:"slug"`
	Type string `json:"type"`
	// Host is the Proxmox node's name and HostAddr its SSH address.
	Host     string `json:"host"`
	HostAddr string `json:"host_addr"`
	// Node is the host's Proxmox node name, where it differs from Host
	// (the seed's node:); empty means Host.
	Node string `json:"node,omitempty"`
	VMID int    `json:"vmid,omitempty"`
	// Hostname is the container's host name (a service's, that of the
	// container it runs in) and IP its address without the prefix length.
	Hostname string `json:"hostname,omitempty"`
	IP       string `json:"ip,omitempty"`
	Unit     string `json:"unit,omitempty"`
	Port     int    `json:"port,omitempty"`
	// HealthPath is the service's HTTP health path, for verification.
	HealthPath string `json:"health_path,omitempty"`
	// Services names the services inside a container target.
	Services []string `json:"services,omitempty"`
	// SnapshotBlocker is why the container cannot be snapshotted, when
	// the plan's card said its change would go on without a snapshot
	// (policy.Target.SnapshotBlocker; part of the plan hash).
	SnapshotBlocker string `json:"snapshot_blocker,omitempty"`
	// Agent says a VM target has its QEMU guest agent enabled, so its
	// run-state probe also asks the agent whether the OS inside answers.
	Agent bool `json:"agent,omitempty"`
}

// SignOrder encodes and signs an order with the bot's key.
func SignOrder(key ed25519.PrivateKey, o Order) ([]byte, error) {
	o.Version = Version
	o.Site = siteOf(o.Site)
	if o.ExecutionID == "" || o.Actuator == "" || o.Action == "" || o.PlanHash == "" || o.IssuedAt.IsZero() || o.ExpiresAt.IsZero() {
		return nil, fmt.Errorf("sign order: %w: execution id, actuator, action, plan hash, issue time and expiry are required", ErrMalformed)
	}
	if err := policy.ValidateSiteName(o.Site); err != nil {
		return nil, fmt.Errorf("sign order: %w: %v", ErrMalformed, err)
	}
	env, err := seal(key, TypeExecutionRun, o)
	if err != nil {
		return nil, fmt.Errorf("sign order %s: %w", o.ExecutionID, err)
	}
	return env, nil
}

// VerifyOrder checks an envelope's signature against the pinned keys,
// then its version, fields and lifetime, and returns the order. The
// order's content is only trusted after the signature verifies.
//
// An order that verifies but has expired, or claims a lifetime over
// MaxOrderTTL, is returned with ErrExpired or ErrTTLTooLong: it is the
// bot's, and must still not run.
func VerifyOrder(keys VerifyKeys, payload []byte, now time.Time) (Order, error) {
	o, err := open[Order](keys, TypeExecutionRun, payload)
	if err != nil {
		return Order{}, err
	}
	if o.ExecutionID == "" || o.Actuator == "" || o.Action == "" || o.IssuedAt.IsZero() {
		return Order{}, fmt.Errorf("%w: missing execution id, actuator, action or issue time", ErrMalformed)
	}
	o.Site = siteOf(o.Site)
	if o.ExpiresAt.Sub(o.IssuedAt) > MaxOrderTTL {
		return o, fmt.Errorf("%w: issued at %s and valid until %s, more than %s", ErrTTLTooLong,
			o.IssuedAt.UTC().Format(time.RFC3339), o.ExpiresAt.UTC().Format(time.RFC3339), MaxOrderTTL)
	}
	if !now.Before(o.ExpiresAt) {
		return o, fmt.Errorf("the order %w at %s", ErrExpired, o.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return o, nil
}

// NewRunTask wraps a signed order for its site's order queue. The TaskID is
// the execution id and the task is retained after it finishes, so enqueueing
// the same execution twice yields asynq.ErrTaskIDConflict instead of a
// second run.
func NewRunTask(site, executionID string, envelope []byte) *asynq.Task {
	return asynq.NewTask(TypeExecutionRun, envelope,
		asynq.Queue(OrderQueue(siteOf(site))),
		asynq.TaskID(executionID),
		asynq.Retention(RunRetention),
		asynq.MaxRetry(0))
}

// SignCheckRun encodes and signs a probe request with the bot's order key.
// The message type is part of the signature, so a probe request can never
// pass for an order.
func SignCheckRun(key ed25519.PrivateKey, c CheckRun) ([]byte, error) {
	c.Version = Version
	c.Site = siteOf(c.Site)
	if c.CheckID == "" || c.TargetID == "" || c.Actuator == "" || c.IssuedAt.IsZero() || c.ExpiresAt.IsZero() {
		return nil, fmt.Errorf("sign probe: %w: check id, target id, actuator, issue time and expiry are required", ErrMalformed)
	}
	if err := policy.ValidateSiteName(c.Site); err != nil {
		return nil, fmt.Errorf("sign probe: %w: %v", ErrMalformed, err)
	}
	return seal(key, TypeCheckRun, c)
}

// VerifyCheckRun checks a probe request's signature, fields and expiry. An
// expired request is returned with ErrExpired.
func VerifyCheckRun(keys VerifyKeys, payload []byte, now time.Time) (CheckRun, error) {
	c, err := open[CheckRun](keys, TypeCheckRun, payload)
	if err != nil {
		return CheckRun{}, err
	}
	if c.CheckID == "" || c.TargetID == "" || c.Actuator == "" || c.IssuedAt.IsZero() || c.ExpiresAt.IsZero() {
		return CheckRun{}, fmt.Errorf("%w: missing check id, target id, actuator, issue time or expiry", ErrMalformed)
	}
	c.Site = siteOf(c.Site)
	// A copied request can be replayed until it expires; like an order's,
	// that window is at most MaxOrderTTL.
	if c.ExpiresAt.Sub(c.IssuedAt) > MaxOrderTTL {
		return CheckRun{}, fmt.Errorf("%w: the probe request is valid from %s to %s, longer than %s", ErrMalformed,
			c.IssuedAt.UTC().Format(time.RFC3339), c.ExpiresAt.UTC().Format(time.RFC3339), MaxOrderTTL)
	}
	if !now.Before(c.ExpiresAt) {
		return c, fmt.Errorf("the probe request %w at %s", ErrExpired, c.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return c, nil
}

// NewCheckRunTask signs a probe request and wraps it for its site's probes
// queue.
func NewCheckRunTask(key ed25519.PrivateKey, c CheckRun) (*asynq.Task, error) {
	env, err := SignCheckRun(key, c)
	if err != nil {
		return nil, err
	}
	return asynq.NewTask(TypeCheckRun, env, asynq.Queue(ProbeQueue(siteOf(c.Site))), asynq.MaxRetry(0)), nil
}
