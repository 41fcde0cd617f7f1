package tasks

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// Envelope is the signed form of every message on the wire. Body holds the
// exact bytes that were signed, so verification never depends on
// re-encoding. Type names the kind of message; it is part of what is
// signed, so a signature made for one kind never verifies as another.
type Envelope struct {
	Version   int             `json:"v"`
	Type      string          `json:"type"`
	Body      json.RawMessage `json:"body"`
	Signature []byte          `json:"sig"`
}

// Errors from the Verify functions. Each means the message must not be
// acted on.
var (
	// ErrUnsigned: the payload is not a signed envelope at all.
	ErrUnsigned     = errors.New("message is not signed")
	ErrBadSignature = errors.New("signature does not verify")
	ErrExpired      = errors.New("expired")
	ErrMalformed    = errors.New("message is malformed")
	// ErrTTLTooLong: an order is valid for longer than MaxOrderTTL.
	ErrTTLTooLong = errors.New("order is valid for too long")
)

// signedPrefix opens every signed message. It and the message type in
// SignedBytes are the domain separation: the bot signs orders and probe
// requests with one key, and neither can be replayed as the other.
const signedPrefix = "nomos signed message v2\x00"

// SignedBytes is what a signature over a message of type typ with the
// given body covers.
func SignedBytes(typ string, body []byte) []byte {
	b := make([]byte, 0, len(signedPrefix)+len(typ)+1+len(body))
	b = append(b, signedPrefix...)
	b = append(b, typ...)
	b = append(b, 0)
	return append(b, body...)
}

// seal encodes v and signs it as a message of type typ.
func seal(key ed25519.PrivateKey, typ string, v any) ([]byte, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("sign %s: want an Ed25519 private key of %d bytes, got %d", typ, ed25519.PrivateKeySize, len(key))
	}
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", typ, err)
	}
	return json.Marshal(Envelope{Version: Version, Type: typ, Body: body, Signature: ed25519.Sign(key, SignedBytes(typ, body))})
}

// open checks that payload is an envelope of type typ signed with pub and
// decodes its body. Nothing of the body is read before the signature
// verifies.
func open[T versioned](pub ed25519.PublicKey, typ string, payload []byte) (T, error) {
	var v T
	var env Envelope
	if err := json.Unmarshal(payload, &env); err != nil {
		return v, fmt.Errorf("%w: not an envelope: %v", ErrUnsigned, err)
	}
	if len(env.Body) == 0 || len(env.Signature) == 0 {
		return v, fmt.Errorf("%w: no signed body", ErrUnsigned)
	}
	if env.Version != Version {
		return v, fmt.Errorf("%w %d (want %d)", ErrVersion, env.Version, Version)
	}
	if env.Type != typ {
		return v, fmt.Errorf("%w: a %q message delivered as %q", ErrBadSignature, env.Type, typ)
	}
	if len(pub) != ed25519.PublicKeySize {
		return v, fmt.Errorf("%w: no verify key is configured", ErrBadSignature)
	}
	if len(env.Signature) != ed25519.SignatureSize || !ed25519.Verify(pub, SignedBytes(typ, env.Body), env.Signature) {
		return v, ErrBadSignature
	}
	if err := json.Unmarshal(env.Body, &v); err != nil {
		return v, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if v.version() != Version {
		return v, fmt.Errorf("%w %d (want %d)", ErrVersion, v.version(), Version)
	}
	return v, nil
}

// Claims are what a message says about itself before anything of it is
// verified: labels for a refusal, never a basis for acting.
type Claims struct {
	ExecutionID string `json:"execution_id"`
	CheckID     string `json:"check_id"`
	TargetID    string `json:"target_id"`
	Actuator    string `json:"actuator"`
	// RunID and HostID are an inventory's.
	RunID  string `json:"run_id"`
	HostID string `json:"host_id"`
}

// Claimed reads the claims of a payload without trusting it: from the
// body of an envelope, or from the payload itself when it is not one.
func Claimed(payload []byte) Claims {
	var c Claims
	var env Envelope
	if json.Unmarshal(payload, &env) == nil && len(env.Body) > 0 {
		payload = env.Body
	}
	_ = json.Unmarshal(payload, &c)
	return c
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
