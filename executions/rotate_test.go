package executions_test

import (
	"crypto/ed25519"
	"testing"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// TestReportKeyRotation walks the actuator's report key through a
// rotation: while the bot holds both verify keys, reports signed with
// either are applied; once the previous key is dropped, a report signed
// with it is refused and changes nothing, as a forged one would.
func TestReportKeyRotation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	oldKey := b.reportKey
	oldPub := oldKey.Public().(ed25519.PublicKey)
	newPub, newKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	// service is the bot after a restart with these report keys.
	service := func(current, previous ed25519.PublicKey) *executions.Service {
		t.Helper()
		rules, err := policy.NewRules(policy.RulesConfig{Operators: []string{operator}})
		if err != nil {
			t.Fatal(err)
		}
		svc, err := executions.New(executions.Config{
			Store: b.store, Queue: b.queue, SigningKey: ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)),
			ReportVerifyKey: current, PreviousReportVerifyKey: previous, Rules: rules, Clock: b.clock.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	approved := func() store.Execution {
		t.Helper()
		return b.approve(t, b.request(t, "restart", "jellyfin", "").Execution)
	}

	overlap := service(newPub, oldPub)
	x := approved()
	id := x.ID.String()
	a, err := overlap.ApplyReport(b.ctx, tasks.TypeExecutionProgress, b.sealProgress(t, oldKey, tasks.Progress{ExecutionID: id, Seq: 1, Tail: "restarting"}))
	if err != nil || !a.Changed || a.Execution.State != store.StateRunning {
		t.Fatalf("progress signed with the previous key, during the overlap: %+v %v; want it applied", a.Execution.State, err)
	}
	a, err = overlap.ApplyReport(b.ctx, tasks.TypeExecutionResult, b.sealResult(t, newKey, tasks.Result{ExecutionID: id, PlanHash: x.PlanHash, Status: tasks.StatusSucceeded}))
	if err != nil || !a.Changed || a.Execution.State != store.StateSucceeded {
		t.Fatalf("a result signed with the new key, during the overlap: %+v %v; want it applied", a.Execution.State, err)
	}

	after := service(newPub, nil)
	late := approved()
	_, err = after.ApplyReport(b.ctx, tasks.TypeExecutionResult, b.sealResult(t, oldKey, tasks.Result{ExecutionID: late.ID.String(), PlanHash: late.PlanHash, Status: tasks.StatusFailed, Error: "old key"}))
	refusal(t, err, executions.RefusedBadSignature)
	got, err := b.store.GetExecution(b.ctx, late.ID)
	if err != nil || got.State != late.State || got.Error != "" {
		t.Errorf("after a result signed with the removed key: %s %q %v; want it left %s", got.State, got.Error, err, late.State)
	}
	a, err = after.ApplyReport(b.ctx, tasks.TypeExecutionResult, b.sealResult(t, newKey, tasks.Result{ExecutionID: late.ID.String(), PlanHash: late.PlanHash, Status: tasks.StatusSucceeded}))
	if err != nil || a.Execution.State != store.StateSucceeded {
		t.Errorf("a result signed with the new key, after the overlap: %+v %v; want it applied", a.Execution.State, err)
	}
}
