package tasks_test

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nomoshq/nomos/tasks"
)

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func testOrder() tasks.Order {
	return tasks.Order{
		ExecutionID: "0193a1b2-0000-7000-8000-000000000001",
		Action:      "restart",
		Target:      tasks.Target{Slug: "service:jellyfin", Type: "service", Host: "strong", HostAddr: "127.0.0.1:2201", VMID: 101, Unit: "jellyfin.service"},
		Params:      json.RawMessage(`{}`),
		Steps:       []string{"pct exec 101 -- systemctl restart jellyfin.service"},
		RiskClass:   "reversible_low",
		PlanHash:    "abc123",
		IssuedAt:    now,
		ExpiresAt:   now.Add(15 * time.Minute),
	}
}

func keys(t testing.TB) (ed25519.PublicKey, ed25519.PrivateKey) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

func TestSignVerifyRoundTrip(t *testing.T) {
	t.Parallel()
	pub, priv := keys(t)
	payload, err := tasks.SignOrder(priv, testOrder())
	if err != nil {
		t.Fatal(err)
	}
	got, err := tasks.VerifyOrder(pub, payload, now.Add(time.Minute))
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	want := testOrder()
	want.Version = tasks.Version
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	pub, priv := keys(t)
	otherPub, otherPriv := keys(t)
	_ = otherPub
	good, err := tasks.SignOrder(priv, testOrder())
	if err != nil {
		t.Fatal(err)
	}
	forged, err := tasks.SignOrder(otherPriv, testOrder())
	if err != nil {
		t.Fatal(err)
	}
	var env tasks.Envelope
	if err := json.Unmarshal(good, &env); err != nil {
		t.Fatal(err)
	}
	tamperedOrder := testOrder()
	tamperedOrder.Version = tasks.Version
	tamperedOrder.Steps = []string{"pct destroy 101"}
	env.Order, _ = json.Marshal(tamperedOrder)
	tampered, _ := json.Marshal(env)

	tests := []struct {
		name    string
		payload []byte
		at      time.Time
		want    error
	}{
		{"signed by another key", forged, now, tasks.ErrBadSignature},
		{"steps changed after signing", tampered, now, tasks.ErrBadSignature},
		{"expired", good, now.Add(16 * time.Minute), tasks.ErrExpired},
		{"exactly at expiry", good, now.Add(15 * time.Minute), tasks.ErrExpired},
		{"not json", []byte("pct destroy 101"), now, tasks.ErrMalformed},
		{"wrong version", []byte(`{"v":2,"order":{},"sig":""}`), now, tasks.ErrVersion},
		{"no signature", []byte(`{"v":1,"order":{"v":1,"execution_id":"x","action":"run"}}`), now, tasks.ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tasks.VerifyOrder(pub, tt.payload, tt.at)
			if !errors.Is(err, tt.want) {
				t.Errorf("VerifyOrder = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSignRequiresFields(t *testing.T) {
	t.Parallel()
	_, priv := keys(t)
	o := testOrder()
	o.PlanHash = ""
	if _, err := tasks.SignOrder(priv, o); !errors.Is(err, tasks.ErrMalformed) {
		t.Errorf("sign without plan hash = %v, want ErrMalformed", err)
	}
}

func TestKeyFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sk, vk := filepath.Join(dir, "sign.key"), filepath.Join(dir, "verify.pub")
	if err := tasks.GenerateKeyFiles(sk, vk); err != nil {
		t.Fatal(err)
	}
	priv, err := tasks.LoadSigningKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := tasks.LoadVerifyKey(vk)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := tasks.SignOrder(priv, testOrder())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.VerifyOrder(pub, payload, now); err != nil {
		t.Errorf("keys from files do not pair: %v", err)
	}
	if _, err := tasks.LoadVerifyKey(sk); err == nil {
		t.Error("a signing key file loaded as a verify key")
	}
}

func TestDecodeRefusesOtherVersions(t *testing.T) {
	t.Parallel()
	if _, err := tasks.Decode[tasks.Result]([]byte(`{"v":9,"execution_id":"x"}`)); !errors.Is(err, tasks.ErrVersion) {
		t.Errorf("Decode v9 = %v, want ErrVersion", err)
	}
	r, err := tasks.Decode[tasks.Result]([]byte(`{"v":1,"execution_id":"x","status":"succeeded","phases":[{"name":"run","elapsed":1500}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Phases[0].Elapsed != tasks.Duration(1500*time.Millisecond) {
		t.Errorf("elapsed = %v, want 1.5s", time.Duration(r.Phases[0].Elapsed))
	}
}

// FuzzVerifyOrder checks that no input but a correctly signed order verifies.
func FuzzVerifyOrder(f *testing.F) {
	pub, priv := keys(f)
	good, _ := tasks.SignOrder(priv, testOrder())
	f.Add(good)
	f.Add([]byte(`{"v":1,"order":{"v":1},"sig":"AAAA"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		o, err := tasks.VerifyOrder(pub, payload, now)
		if err != nil {
			return
		}
		var env tasks.Envelope
		if json.Unmarshal(payload, &env) != nil || !ed25519.Verify(pub, env.Order, env.Signature) {
			t.Fatalf("accepted an order whose signature does not verify: %+v", o)
		}
	})
}
