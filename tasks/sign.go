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

// VerifyKeys are the public keys a message may be signed with: the
// current key, and while a key is rotated the previous one as well. A
// message verifies when one of them verifies it, so the signing side can
// switch to a new key while the other side still accepts the old one.
type VerifyKeys []ed25519.PublicKey

// RotatingKeys is the set of current and, while a rotation overlaps,
// previous; a previous key of length zero is left out. Without a current
// key the set is empty and verifies nothing, whatever previous is.
func RotatingKeys(current, previous ed25519.PublicKey) VerifyKeys {
	switch {
	case len(current) == 0:
		return nil
	case len(previous) == 0:
		return VerifyKeys{current}
	}
	return VerifyKeys{current, previous}
}

// Check reports why the set cannot be used: it is empty, or one of its
// keys is not an Ed25519 public key.
func (k VerifyKeys) Check() error {
	if len(k) == 0 {
		return errors.New("no verify key is configured")
	}
	for i, pub := range k {
		if len(pub) != ed25519.PublicKeySize {
			return fmt.Errorf("verify key %d is not an Ed25519 public key (%d bytes, want %d)", i+1, len(pub), ed25519.PublicKeySize)
		}
	}
	return nil
}

func (k VerifyKeys) verify(message, sig []byte) bool {
	for _, pub := range k {
		if ed25519.Verify(pub, message, sig) {
			return true
		}
	}
	return false
}

// open checks that payload is an envelope of type typ signed with one of
// keys and decodes its body. Nothing of the body is read before the
// signature verifies.
func open[T versioned](keys VerifyKeys, typ string, payload []byte) (T, error) {
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
	// A set with a malformed key verifies nothing, rather than whatever
	// its other keys would: it is a configuration fault.
	if err := keys.Check(); err != nil {
		return v, fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	if len(env.Signature) != ed25519.SignatureSize || !keys.verify(SignedBytes(typ, env.Body), env.Signature) {
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
	return os.WriteFile(verifyPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644) //nolint:gosec // G306: the public half, for the other role to read
}
