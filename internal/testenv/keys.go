package testenv

import (
	"crypto/ed25519"
	"testing"
)

// Keys are the two Ed25519 key pairs between the bot and the actuator,
// fresh for one test.
type Keys struct {
	// OrderSigning signs orders and probe requests (the bot's
	// executions.Config.SigningKey); OrderVerify is its public half (the
	// actuator's Config.VerifyKey).
	OrderSigning ed25519.PrivateKey
	OrderVerify  ed25519.PublicKey
	// ReportSigning signs progress, results and probe results (the
	// actuator's Config.ReportSigningKey); ReportVerify is its public half
	// (the bot's executions.Config.ReportVerifyKey).
	ReportSigning ed25519.PrivateKey
	ReportVerify  ed25519.PublicKey
}

// NewKeys generates both key pairs.
func NewKeys(t testing.TB) Keys {
	t.Helper()
	var k Keys
	var err error
	if k.OrderVerify, k.OrderSigning, err = ed25519.GenerateKey(nil); err != nil {
		t.Fatal(err)
	}
	if k.ReportVerify, k.ReportSigning, err = ed25519.GenerateKey(nil); err != nil {
		t.Fatal(err)
	}
	return k
}
