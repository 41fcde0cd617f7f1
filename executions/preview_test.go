package executions_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// queuedPreview returns the verified preview request queued for id, or
// false when none was.
func (b *bundle) queuedPreview(t *testing.T, id uuid.UUID) (tasks.PreviewRun, bool) {
	t.Helper()
	info, err := b.inspector.GetTaskInfo(tasks.ProbeQueue(tasks.DefaultSite), "preview:"+id.String())
	if err != nil {
		return tasks.PreviewRun{}, false
	}
	r, err := tasks.VerifyPreviewRun(tasks.VerifyKeys{b.pub}, info.Payload, b.clock.Now())
	if err != nil {
		t.Fatalf("queued preview request does not verify: %v", err)
	}
	return r, true
}

// preview signs r as the actuator does and applies it.
func (b *bundle) preview(t *testing.T, r tasks.PreviewResult) error {
	t.Helper()
	if r.Actuator == "" {
		r.Actuator = tasks.DefaultActuator
	}
	if r.At.IsZero() {
		r.At = b.clock.Now()
	}
	payload, err := tasks.SignPreviewResult(b.reportKey, r)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.svc.ApplyReport(b.ctx, tasks.TypePreviewResult, payload)
	return err
}

// TestPreviewAskedWhenAPlanWaits: a plan awaiting its decision whose
// action has a host preview gets a signed preview request, for its
// container on its host; a plan without one, or one that approves
// itself, gets none. Asking changes nothing about the plan.
func TestPreviewAskedWhenAPlanWaits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	up := b.request(t, "apt_upgrade", "101", `{"mode":"upgrade"}`).Execution
	if up.State != store.StateAwaitingApproval {
		t.Fatalf("upgrade is %s, want awaiting approval", up.State)
	}
	r, ok := b.queuedPreview(t, up.ID)
	if !ok {
		t.Fatal("no preview was asked for an upgrade awaiting approval")
	}
	if r.Action != "apt_upgrade" || r.Target.VMID != 101 {
		t.Errorf("preview request for %s of vmid %d, want apt_upgrade of 101", r.Action, r.Target.VMID)
	}
	if r.Target.HostAddr == "" || !r.ExpiresAt.Equal(b.clock.Now().Add(executions.PreviewWait)) {
		t.Errorf("preview request %+v: want the host's address and an expiry PreviewWait away", r)
	}
	p, err := b.store.ExecutionPreview(b.ctx, up.ID)
	if err != nil || p.Result != nil {
		t.Fatalf("preview record %+v, %v: want one asked for and not yet answered", p, err)
	}

	for _, tc := range []struct{ action, target string }{{"restart", "jellyfin"}, {"pct_status", "101"}} {
		x := b.request(t, tc.action, tc.target, "").Execution
		if _, ok := b.queuedPreview(t, x.ID); ok {
			t.Errorf("%s %s: a host preview was asked for", tc.action, tc.target)
		}
	}
}

// TestPreviewAppliesOnce: the actuator's preview is recorded once, with
// its audit row; a second one, one nobody asked for, one about another
// action and one signed by another key are refused and change nothing.
func TestPreviewAppliesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	x := b.request(t, "pct_destroy", "131", "").Execution
	id := x.ID.String()
	good := tasks.PreviewResult{ExecutionID: id, Action: "pct_destroy", Snapshots: []tasks.SnapshotInfo{{Name: "before-upgrade"}}}
	if err := b.preview(t, good); err != nil {
		t.Fatal(err)
	}
	p, err := b.store.ExecutionPreview(b.ctx, x.ID)
	if err != nil || p.Result == nil {
		t.Fatalf("preview %+v, %v: want it recorded", p, err)
	}
	if !slices.Contains(auditActions(t, b, x.ID), "execution.preview") {
		t.Error("no execution.preview audit row")
	}

	refusal(t, b.preview(t, good), executions.RefusedReplayed)
	unasked := b.request(t, "restart", "jellyfin", "").Execution
	refusal(t, b.preview(t, tasks.PreviewResult{ExecutionID: unasked.ID.String(), Action: "restart"}), executions.RefusedNotDispatched)
	other := b.request(t, "apt_upgrade", "101", `{"mode":"upgrade"}`).Execution
	refusal(t, b.preview(t, tasks.PreviewResult{ExecutionID: other.ID.String(), Action: "pct_destroy"}), executions.RefusedWrongOrder)

	forged := tasks.PreviewResult{ExecutionID: other.ID.String(), Action: "apt_upgrade", Actuator: tasks.DefaultActuator, At: time.Now(),
		Packages: []tasks.PackageChange{{Name: "evil", To: "1"}}}
	payload, err := tasks.SignPreviewResult(b.keys.OrderSigning, forged)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.svc.ApplyReport(b.ctx, tasks.TypePreviewResult, payload)
	refusal(t, err, executions.RefusedBadSignature)
	if p, _ := b.store.ExecutionPreview(b.ctx, other.ID); p.Result != nil {
		t.Errorf("a refused preview was recorded: %s", p.Result)
	}
	if cur, _ := b.store.GetExecution(b.ctx, x.ID); cur.State != store.StateAwaitingApproval {
		t.Errorf("a preview moved the plan to %s", cur.State)
	}
}
