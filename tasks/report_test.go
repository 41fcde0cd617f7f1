package tasks_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nomoshq/nomos/tasks"
)

func testResult() tasks.Result {
	return tasks.Result{
		ExecutionID: testOrder().ExecutionID, Actuator: "actuator", PlanHash: "abc123", Status: tasks.StatusSucceeded,
		Output: "restarted", StartedAt: now, FinishedAt: now.Add(2 * time.Second),
	}
}

func TestReportsRoundTrip(t *testing.T) {
	t.Parallel()
	pub, priv := keys(t)
	r := testResult()
	payload, err := tasks.SignResult(priv, r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tasks.VerifyResult(tasks.VerifyKeys{pub}, payload)
	if err != nil {
		t.Fatal(err)
	}
	r.Version = tasks.Version
	if diff := cmp.Diff(r, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	p := tasks.Progress{ExecutionID: r.ExecutionID, Actuator: "actuator", Seq: 3, Tail: "line", At: now}
	payload, err = tasks.SignProgress(priv, p)
	if err != nil {
		t.Fatal(err)
	}
	gotP, err := tasks.VerifyProgress(tasks.VerifyKeys{pub}, payload)
	if err != nil {
		t.Fatal(err)
	}
	p.Version = tasks.Version
	if diff := cmp.Diff(p, gotP); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
	c := tasks.CheckResult{CheckID: "c", TargetID: "t", Actuator: "actuator", Health: "healthy", At: now}
	payload, err = tasks.SignCheckResult(priv, c)
	if err != nil {
		t.Fatal(err)
	}
	gotC, err := tasks.VerifyCheckResult(tasks.VerifyKeys{pub}, payload)
	if err != nil {
		t.Fatal(err)
	}
	c.Version = tasks.Version
	if diff := cmp.Diff(c, gotC); diff != "" {
		t.Errorf("probe result (-want +got):\n%s", diff)
	}
}

// TestReportsRefused: what a Redis writer can put on the results queue
// without the actuator's key never verifies, and one kind of signed report
// never passes for another.
func TestReportsRefused(t *testing.T) {
	t.Parallel()
	pub, priv := keys(t)
	_, strangerKey := keys(t)
	good, err := tasks.SignResult(priv, testResult())
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := tasks.SignResult(strangerKey, testResult())
	if err != nil {
		t.Fatal(err)
	}
	progress, err := tasks.SignProgress(priv, tasks.Progress{ExecutionID: testResult().ExecutionID, Actuator: "actuator", Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	var env tasks.Envelope
	if err := json.Unmarshal(progress, &env); err != nil {
		t.Fatal(err)
	}
	env.Type = tasks.TypeExecutionResult
	progressAsResult, _ := json.Marshal(env)
	bare, _ := json.Marshal(testResult())
	for _, tt := range []struct {
		name    string
		payload []byte
		want    error
	}{
		{"unsigned", bare, tasks.ErrUnsigned},
		{"signed by another key", stranger, tasks.ErrBadSignature},
		{"status changed", reseal(t, good, func(b map[string]any) { b["status"] = "failed" }), tasks.ErrBadSignature},
		{"execution changed", reseal(t, good, func(b map[string]any) { b["execution_id"] = "0193a1b2-0000-7000-8000-000000000002" }), tasks.ErrBadSignature},
		{"a progress report relabelled as a result", progressAsResult, tasks.ErrBadSignature},
		{"a progress report", progress, tasks.ErrBadSignature},
	} {
		if _, err := tasks.VerifyResult(tasks.VerifyKeys{pub}, tt.payload); !errors.Is(err, tt.want) {
			t.Errorf("%s: VerifyResult = %v, want %v", tt.name, err, tt.want)
		}
	}
	if _, err := tasks.VerifyResult(nil, good); !errors.Is(err, tasks.ErrBadSignature) {
		t.Errorf("without a verify key: VerifyResult = %v, want ErrBadSignature", err)
	}
}

// FuzzVerifyResult checks that no input but a correctly signed result
// verifies.
func FuzzVerifyResult(f *testing.F) {
	pub, priv := keys(f)
	good, _ := tasks.SignResult(priv, testResult())
	f.Add(good)
	f.Add([]byte(`{"v":2,"type":"execution:result","body":{"v":2,"execution_id":"x","actuator":"a","status":"succeeded"},"sig":"AAAA"}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		r, err := tasks.VerifyResult(tasks.VerifyKeys{pub}, payload)
		if err != nil {
			return
		}
		var env tasks.Envelope
		if json.Unmarshal(payload, &env) != nil || !json.Valid(env.Body) {
			t.Fatalf("accepted a result that is not an envelope: %+v", r)
		}
		if !ed25519Verify(pub, tasks.SignedBytes(tasks.TypeExecutionResult, env.Body), env.Signature) {
			t.Fatalf("accepted a result whose signature does not verify: %+v", r)
		}
	})
}
