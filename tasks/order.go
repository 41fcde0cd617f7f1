package tasks

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hibiken/asynq"
)

// Order is an approved execution as the actuator receives it: everything it
// needs to act, resolved by the bot, so the actuator never looks anything up.
type Order struct {
	Version     int             `json:"v"`
	ExecutionID string          `json:"execution_id"`
	Action      string          `json:"action"`
	Target      Target          `json:"target"`
	Params      json.RawMessage `json:"params"`
	Steps       []string        `json:"steps"`
	RiskClass   string          `json:"risk_class"`
	PlanHash    string          `json:"plan_hash"`
	IssuedAt    time.Time       `json:"issued_at"`
	ExpiresAt   time.Time       `json:"expires_at"`
}

// Target is the resolved entity an order acts on.
type Target struct {
	// ID is the entity's id, part of the plan hash.
	ID   string `json:"id"`
	Slug string `json:"slug"`
	Type string `json:"type"`
	// Host is the Proxmox node's name and HostAddr its SSH address.
	Host     string `json:"host"`
	HostAddr string `json:"host_addr"`
	VMID     int    `json:"vmid,omitempty"`
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
}

// Envelope is the signed form of an order on the wire. Order holds the exact
// bytes that were signed, so verification never depends on re-encoding.
type Envelope struct {
	Version   int             `json:"v"`
	Order     json.RawMessage `json:"order"`
	Signature []byte          `json:"sig"`
}

// Errors from VerifyOrder. Each means nothing may run.
var (
	ErrBadSignature = errors.New("order signature does not verify")
	ErrExpired      = errors.New("order has expired")
	ErrMalformed    = errors.New("order is malformed")
)

// SignOrder encodes and signs an order with the bot's key.
func SignOrder(key ed25519.PrivateKey, o Order) ([]byte, error) {
	o.Version = Version
	if o.ExecutionID == "" || o.Action == "" || o.PlanHash == "" || o.ExpiresAt.IsZero() {
		return nil, fmt.Errorf("sign order: %w: execution id, action, plan hash and expiry are required", ErrMalformed)
	}
	body, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("sign order %s: %w", o.ExecutionID, err)
	}
	env := Envelope{Version: Version, Order: body, Signature: ed25519.Sign(key, body)}
	return json.Marshal(env)
}

// VerifyOrder checks an envelope's signature against the pinned public key,
// then its version and expiry, and returns the order. The order's content
// is only trusted after the signature verifies.
func VerifyOrder(pub ed25519.PublicKey, payload []byte, now time.Time) (Order, error) {
	var env Envelope
	if err := json.Unmarshal(payload, &env); err != nil {
		return Order{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if env.Version != Version {
		return Order{}, fmt.Errorf("%w %d", ErrVersion, env.Version)
	}
	if len(env.Signature) != ed25519.SignatureSize || !ed25519.Verify(pub, env.Order, env.Signature) {
		return Order{}, ErrBadSignature
	}
	var o Order
	if err := json.Unmarshal(env.Order, &o); err != nil {
		return Order{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if o.Version != Version {
		return Order{}, fmt.Errorf("%w %d", ErrVersion, o.Version)
	}
	if o.ExecutionID == "" || o.Action == "" {
		return Order{}, fmt.Errorf("%w: missing execution id or action", ErrMalformed)
	}
	if !now.Before(o.ExpiresAt) {
		return o, fmt.Errorf("%w: expired at %s", ErrExpired, o.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return o, nil
}

// UnverifiedExecutionID reads the execution id of an envelope without
// trusting it, so a refusal can be reported against the id it claims.
func UnverifiedExecutionID(payload []byte) string {
	var env Envelope
	if json.Unmarshal(payload, &env) != nil {
		return ""
	}
	var o struct {
		ID string `json:"execution_id"`
	}
	if json.Unmarshal(env.Order, &o) != nil {
		return ""
	}
	return o.ID
}

// NewRunTask wraps a signed order for the actuator queue. The TaskID is the
// execution id and the task is retained after it finishes, so enqueueing the
// same execution twice yields asynq.ErrTaskIDConflict instead of a second run.
func NewRunTask(executionID string, envelope []byte) *asynq.Task {
	return asynq.NewTask(TypeExecutionRun, envelope,
		asynq.Queue(QueueActuator),
		asynq.TaskID(executionID),
		asynq.Retention(RunRetention),
		asynq.MaxRetry(0))
}

// LoadSigningKey reads an Ed25519 private key in PKCS#8 PEM form, as
// written by GenerateKeyFiles or `openssl genpkey -algorithm ed25519`.
func LoadSigningKey(path string) (ed25519.PrivateKey, error) {
	der, err := readPEM(path, "PRIVATE KEY")
	if err != nil {
		return nil, fmt.Errorf("load signing key: %w", err)
	}
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("load signing key %s: %w", path, err)
	}
	priv, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("load signing key %s: %T is not an Ed25519 key", path, key)
	}
	return priv, nil
}

// LoadVerifyKey reads an Ed25519 public key in PKIX PEM form, as written by
// GenerateKeyFiles or `openssl pkey -pubout`.
func LoadVerifyKey(path string) (ed25519.PublicKey, error) {
	der, err := readPEM(path, "PUBLIC KEY")
	if err != nil {
		return nil, fmt.Errorf("load verify key: %w", err)
	}
	key, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("load verify key %s: %w", path, err)
	}
	pub, ok := key.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("load verify key %s: %T is not an Ed25519 key", path, key)
	}
	return pub, nil
}

func readPEM(path, blockType string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != blockType {
		return nil, fmt.Errorf("%s: want a PEM %q block", path, blockType)
	}
	return block.Bytes, nil
}

// GenerateKeyFiles writes a new signing key (mode 0600) and its verify key.
func GenerateKeyFiles(signingPath, verifyPath string) error {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return err
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return err
	}
	if err := os.WriteFile(signingPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(verifyPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644)
}
