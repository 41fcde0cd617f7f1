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
		Actuator:    "actuator",
		Site:        tasks.DefaultSite,
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

func testCheckRun() tasks.CheckRun {
	return tasks.CheckRun{
		CheckID: "0193a1b2-0000-7000-8000-0000000000c1", TargetID: "0193a1b2-0000-7000-8000-0000000000e1", Actuator: "actuator",
		Site: tasks.DefaultSite, Kind: "http", Target: tasks.Target{Slug: "service:jellyfin", HostAddr: "127.0.0.1:2201", Hostname: "jellyfin", Port: 8096},
		IssuedAt: now, ExpiresAt: now.Add(30 * time.Second),
	}
}

func keys(t testing.TB) (ed25519.PublicKey, ed25519.PrivateKey) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

// reseal replaces an envelope's body with f's version of it, keeping the
// original signature: what someone who can write to Redis, but holds no
// key, can do.
func reseal(t testing.TB, payload []byte, f func(body map[string]any)) []byte {
	t.Helper()
	var env tasks.Envelope
	if err := json.Unmarshal(payload, &env); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(env.Body, &body); err != nil {
		t.Fatal(err)
	}
	f(body)
	env.Body, _ = json.Marshal(body)
	out, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSignVerifyRoundTrip(t *testing.T) {
	t.Parallel()
	pub, priv := keys(t)
	payload, err := tasks.SignOrder(priv, testOrder())
	if err != nil {
		t.Fatal(err)
	}
	got, err := tasks.VerifyOrder(tasks.VerifyKeys{pub}, payload, now.Add(time.Minute))
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
	_, otherPriv := keys(t)
	good, err := tasks.SignOrder(priv, testOrder())
	if err != nil {
		t.Fatal(err)
	}
	forged, err := tasks.SignOrder(otherPriv, testOrder())
	if err != nil {
		t.Fatal(err)
	}
	tampered := reseal(t, good, func(b map[string]any) { b["steps"] = []string{"pct destroy 101"} })
	readdressed := reseal(t, good, func(b map[string]any) { b["actuator"] = "other" })
	long := testOrder()
	long.ExpiresAt = long.IssuedAt.Add(tasks.MaxOrderTTL + time.Second)
	tooLong, err := tasks.SignOrder(priv, long)
	if err != nil {
		t.Fatal(err)
	}
	// A probe request is signed with the same key; it must not pass for
	// an order, even wrapped as one.
	probe, err := tasks.SignCheckRun(priv, testCheckRun())
	if err != nil {
		t.Fatal(err)
	}
	var probeEnv tasks.Envelope
	if err := json.Unmarshal(probe, &probeEnv); err != nil {
		t.Fatal(err)
	}
	probeEnv.Type = tasks.TypeExecutionRun
	probeAsOrder, _ := json.Marshal(probeEnv)

	tests := []struct {
		name    string
		payload []byte
		at      time.Time
		want    error
	}{
		{"signed by another key", forged, now, tasks.ErrBadSignature},
		{"steps changed after signing", tampered, now, tasks.ErrBadSignature},
		{"actuator changed after signing", readdressed, now, tasks.ErrBadSignature},
		{"a probe request's signature", probe, now, tasks.ErrBadSignature},
		{"a probe request relabelled as an order", probeAsOrder, now, tasks.ErrBadSignature},
		{"expired", good, now.Add(16 * time.Minute), tasks.ErrExpired},
		{"exactly at expiry", good, now.Add(15 * time.Minute), tasks.ErrExpired},
		{"valid for more than the cap", tooLong, now, tasks.ErrTTLTooLong},
		{"not json", []byte("pct destroy 101"), now, tasks.ErrUnsigned},
		{"a bare order", []byte(`{"v":2,"execution_id":"x","action":"run"}`), now, tasks.ErrUnsigned},
		{"wrong version", []byte(`{"v":9,"type":"execution:run","body":{},"sig":"AAAA"}`), now, tasks.ErrVersion},
		{"no signature", []byte(`{"v":2,"type":"execution:run","body":{"v":2,"execution_id":"x","action":"run"}}`), now, tasks.ErrUnsigned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tasks.VerifyOrder(tasks.VerifyKeys{pub}, tt.payload, tt.at)
			if !errors.Is(err, tt.want) {
				t.Errorf("VerifyOrder = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestVerifyCheckRun(t *testing.T) {
	t.Parallel()
	pub, priv := keys(t)
	_, otherPriv := keys(t)
	good, err := tasks.SignCheckRun(priv, testCheckRun())
	if err != nil {
		t.Fatal(err)
	}
	got, err := tasks.VerifyCheckRun(tasks.VerifyKeys{pub}, good, now)
	if err != nil {
		t.Fatal(err)
	}
	want := testCheckRun()
	want.Version = tasks.Version
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("probe request (-want +got):\n%s", diff)
	}
	order, err := tasks.SignOrder(priv, testOrder())
	if err != nil {
		t.Fatal(err)
	}
	forged, err := tasks.SignCheckRun(otherPriv, testCheckRun())
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(testCheckRun())
	for _, tt := range []struct {
		name    string
		payload []byte
		want    error
	}{
		{"unsigned", raw, tasks.ErrUnsigned},
		{"signed by another key", forged, tasks.ErrBadSignature},
		{"an order's signature", order, tasks.ErrBadSignature},
		{"url swapped in", reseal(t, good, func(b map[string]any) { b["spec"] = map[string]any{"url": "http://169.254.169.254/"} }), tasks.ErrBadSignature},
	} {
		if _, err := tasks.VerifyCheckRun(tasks.VerifyKeys{pub}, tt.payload, now); !errors.Is(err, tt.want) {
			t.Errorf("%s: VerifyCheckRun = %v, want %v", tt.name, err, tt.want)
		}
	}
	if _, err := tasks.VerifyCheckRun(tasks.VerifyKeys{pub}, good, now.Add(30*time.Second)); !errors.Is(err, tasks.ErrExpired) {
		t.Errorf("at expiry: VerifyCheckRun = %v, want ErrExpired", err)
	}
	noExpiry := testCheckRun()
	noExpiry.ExpiresAt = time.Time{}
	if _, err := tasks.SignCheckRun(priv, noExpiry); !errors.Is(err, tasks.ErrMalformed) {
		t.Errorf("sign a probe without an expiry = %v, want ErrMalformed", err)
	}
	// Signed by the bot but valid for a day: a copy could be replayed all
	// day, so it is refused like an order valid for over an hour.
	long := testCheckRun()
	long.ExpiresAt = long.IssuedAt.Add(24 * time.Hour)
	longEnv, err := tasks.SignCheckRun(priv, long)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.VerifyCheckRun(tasks.VerifyKeys{pub}, longEnv, long.IssuedAt); !errors.Is(err, tasks.ErrMalformed) {
		t.Errorf("a probe request valid for a day: VerifyCheckRun = %v, want ErrMalformed", err)
	}
}

func TestSignRequiresFields(t *testing.T) {
	t.Parallel()
	_, priv := keys(t)
	for name, change := range map[string]func(*tasks.Order){
		"plan hash": func(o *tasks.Order) { o.PlanHash = "" },
		"actuator":  func(o *tasks.Order) { o.Actuator = "" },
		"issued at": func(o *tasks.Order) { o.IssuedAt = time.Time{} },
	} {
		o := testOrder()
		change(&o)
		if _, err := tasks.SignOrder(priv, o); !errors.Is(err, tasks.ErrMalformed) {
			t.Errorf("sign without %s = %v, want ErrMalformed", name, err)
		}
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
	if _, err := tasks.VerifyOrder(tasks.VerifyKeys{pub}, payload, now); err != nil {
		t.Errorf("keys from files do not pair: %v", err)
	}
	if _, err := tasks.LoadVerifyKey(sk); err == nil {
		t.Error("a signing key file loaded as a verify key")
	}
}

func TestDurationIsMilliseconds(t *testing.T) {
	t.Parallel()
	_, priv := keys(t)
	pub := priv.Public().(ed25519.PublicKey)
	payload, err := tasks.SignResult(priv, tasks.Result{ExecutionID: "x", Actuator: "actuator", Status: tasks.StatusSucceeded,
		Phases: []tasks.Phase{{Name: "run", Elapsed: tasks.Duration(1500 * time.Millisecond)}}})
	if err != nil {
		t.Fatal(err)
	}
	var env tasks.Envelope
	if err := json.Unmarshal(payload, &env); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Phases []struct{ Elapsed json.RawMessage } `json:"phases"`
	}
	if err := json.Unmarshal(env.Body, &body); err != nil || string(body.Phases[0].Elapsed) != "1500" {
		t.Errorf("elapsed on the wire = %s (%v), want 1500", body.Phases[0].Elapsed, err)
	}
	r, err := tasks.VerifyResult(tasks.VerifyKeys{pub}, payload)
	if err != nil {
		t.Fatal(err)
	}
	if r.Phases[0].Elapsed != tasks.Duration(1500*time.Millisecond) {
		t.Errorf("elapsed = %v, want 1.5s", time.Duration(r.Phases[0].Elapsed))
	}
}

func TestClaimed(t *testing.T) {
	t.Parallel()
	_, priv := keys(t)
	signed, err := tasks.SignOrder(priv, testOrder())
	if err != nil {
		t.Fatal(err)
	}
	want := tasks.Claims{ExecutionID: testOrder().ExecutionID, Actuator: "actuator"}
	if diff := cmp.Diff(want, tasks.Claimed(signed)); diff != "" {
		t.Errorf("claims of an envelope (-want +got):\n%s", diff)
	}
	bare := []byte(`{"v":2,"check_id":"c1","target_id":"t1","actuator":"a"}`)
	if diff := cmp.Diff(tasks.Claims{CheckID: "c1", TargetID: "t1", Actuator: "a"}, tasks.Claimed(bare)); diff != "" {
		t.Errorf("claims of a bare payload (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(tasks.Claims{}, tasks.Claimed([]byte("garbage"))); diff != "" {
		t.Errorf("claims of garbage (-want +got):\n%s", diff)
	}
}

func TestValidateActuatorName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"actuator", "pve-east.1", "A_2"} {
		if err := tasks.ValidateActuatorName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-x", "a b", "a;b", string(make([]byte, 65))} {
		if err := tasks.ValidateActuatorName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzVerifyOrder checks that no input but a correctly signed order verifies.
func FuzzVerifyOrder(f *testing.F) {
	pub, priv := keys(f)
	good, _ := tasks.SignOrder(priv, testOrder())
	probe, _ := tasks.SignCheckRun(priv, testCheckRun())
	f.Add(good)
	f.Add(probe)
	f.Add([]byte(`{"v":2,"type":"execution:run","body":{"v":2},"sig":"AAAA"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		o, err := tasks.VerifyOrder(tasks.VerifyKeys{pub}, payload, now)
		if err != nil {
			return
		}
		var env tasks.Envelope
		if json.Unmarshal(payload, &env) != nil || !ed25519.Verify(pub, tasks.SignedBytes(tasks.TypeExecutionRun, env.Body), env.Signature) {
			t.Fatalf("accepted an order whose signature does not verify: %+v", o)
		}
	})
}
