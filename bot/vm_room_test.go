package bot_test

import (
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/hostgate"
	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

// TestVMShutdownIgnoredThenStopByPhrase is issue 21's "shutdown opnsense"
// through the room, on nodes that force nomos gate. OPNsense ignores the
// ACPI request (labsim's acpi_ignored fault), so qm shutdown waits out
// its --timeout and fails, as qemu-server's _do_vm_stop does without
// forceStop ("VM quit/powerdown failed - got timeout",
// src/PVE/QemuServer.pm): the card ends failed, saying the VM did not
// shut down within the bound it was given, and neither the execution nor
// the audit log says it succeeded. The bound here is 2 s, asked for in
// the message, so the test does not wait out the 60 s default. Then
// "stop opnsense", a hard power-off (src/PVE/API2/Qemu.pm vm_stop, "akin
// to pulling the power plug"), is destructive: neither a ✅ nor "go
// ahead" runs it, only the typed phrase does.
func TestVMShutdownIgnoredThenStopByPhrase(t *testing.T) {
	t.Parallel()
	b := setup(t, withFleet(testenv.WithGate(hostgate.Rules{})))
	if err := b.fleet.Sim.Inject(labsim.Fault{Kind: labsim.FaultIgnoreACPI, Target: "201"}); err != nil {
		t.Fatal(err)
	}
	b.say(t, b.operator, "shutdown opnsense within 2s", "")
	card := b.waitFor(t, b.botSays("vm:hubris/201", "awaiting approval", "qm shutdown 201 --timeout 2"))
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	done := b.waitFor(t, b.cardEdited(card.ID, "did not shut down within"))
	body := done.Content.AsMessage().NewContent.Body
	for _, want := range []string{"VM 201 did not shut down within 2 s and is still running", "Nothing was forced"} {
		if !strings.Contains(body, want) {
			t.Errorf("the failed card does not say %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "succeeded") {
		t.Errorf("the card of a shutdown that timed out says succeeded:\n%s", body)
	}
	x := b.execFor(t, card.ID)
	if x.State != store.StateFailed {
		t.Errorf("the shutdown's execution is %s, want failed", x.State)
	}
	audit, err := b.store.AuditFor(b.ctx, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := auditString(audit); !strings.Contains(got, "execution.failed") || strings.Contains(got, "execution.succeeded") {
		t.Errorf("audit of the timed-out shutdown = %s, want execution.failed and no success", got)
	}
	if got := b.fleet.Admin(t, "hubris", "qm status 201"); got != "status: running\n" {
		t.Errorf("after the failed shutdown qm status 201 = %q, want still running", got)
	}

	b.say(t, b.operator, "stop opnsense", "")
	card = b.waitFor(t, b.botSays("vm:hubris/201", "destructive", "qm stop 201", "like pulling the plug"))
	p, err := b.execs.Describe(b.ctx, b.execFor(t, card.ID))
	if err != nil || p.Phrase == "" || !strings.Contains(card.Content.AsMessage().Body, p.Phrase) {
		t.Fatalf("the stop's card does not show its phrase %q: %v", p.Phrase, err)
	}
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.botSays("a reaction or a yes does not approve it", p.Phrase))
	b.say(t, b.operator, "go ahead", card.ID)
	// The room hears the refusal once; the audit log has each.
	stop := b.execFor(t, card.ID)
	deadline := time.Now().Add(30 * time.Second)
	for {
		audit, err := b.store.AuditFor(b.ctx, stop.ID)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(auditString(audit), "execution.decision_refused") >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ✅ and the go ahead are not both refused in the audit: %s", auditString(audit))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := b.execFor(t, card.ID); got.State != store.StateAwaitingApproval {
		t.Fatalf("a ✅ and a go ahead moved the stop to %s", got.State)
	}
	if n := b.count(t, "qm stop 201"); n != 0 {
		t.Fatalf("qm stop 201 ran %d times before the phrase", n)
	}
	b.say(t, b.operator, p.Phrase, "")
	b.waitFor(t, b.cardEdited(card.ID, "succeeded"))
	if n := b.count(t, "qm stop 201"); n != 1 {
		t.Errorf("qm stop 201 ran %d times, want once", n)
	}
	if got := b.fleet.Admin(t, "hubris", "qm status 201"); got != "status: stopped\n" {
		t.Errorf("after the stop qm status 201 = %q", got)
	}
	refusedByGate(t, b)
}

// TestHAVMSnapshotRollbackInTheRoom is issue 21's snapshot then rollback
// of the Home Assistant VM, end to end on labsim, through the gate, with
// the VM under Proxmox HA (vm:200). A snapshot is no power change; the
// rollback stops the running VM itself (qemu-server src/PVE/QemuConfig.pm
// __snapshot_rollback_vm_stop), and HA's LRM starts the "started"
// resource again on its next round (pve-ha-manager src/PVE/HA/LRM.pm
// exec_resource_agent). Both plans are audited from request to success.
// Between them an inventory reads the VM's snapshots (qm listsnapshot)
// and its HA state, so "snapshots homeassistant" lists the new one and
// the rollback's card says HA starts it again.
func TestHAVMSnapshotRollbackInTheRoom(t *testing.T) {
	t.Parallel()
	b := setup(t, withDiscovery(), withFleet(testenv.WithGate(hostgate.Rules{}), func(c *labsim.Config) {
		c.HADelay = time.Second
		for i := range c.Hosts {
			for j := range c.Hosts[i].VMs {
				if c.Hosts[i].VMs[j].VMID == 200 {
					c.Hosts[i].VMs[j].HA = "started"
				}
			}
		}
	}))
	if got := b.fleet.Admin(t, "hubris", "ha-manager status"); !strings.Contains(got, "service vm:200 (hubris, started)") {
		t.Fatalf("homeassistant is not under HA:\n%s", got)
	}
	b.say(t, b.operator, "snapshot homeassistant before-update", "")
	snap := b.waitFor(t, b.botSays("vm:hubris/200", "awaiting approval", "qm snapshot 200 before-update"))
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, snap.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.cardEdited(snap.ID, "succeeded"))
	if got := b.fleet.Admin(t, "hubris", "qm listsnapshot 200"); !strings.Contains(got, "before-update") {
		t.Fatalf("qm listsnapshot 200 lacks the snapshot:\n%s", got)
	}
	b.discover(t)
	b.say(t, b.operator, "snapshots homeassistant", "")
	b.waitFor(t, b.botSays("Snapshots of homeassistant (vm:hubris/200): 1, newest first", "before-update, not made by Nomos"))

	b.say(t, b.operator, "rollback homeassistant before-update", "")
	rb := b.waitFor(t, b.botSays("vm:hubris/200", "destructive", "qm rollback 200 before-update",
		"Proxmox HA manages VM 200: the rollback stops it, and HA starts it again on its next round."))
	p, err := b.execs.Describe(b.ctx, b.execFor(t, rb.ID))
	if err != nil || p.Phrase == "" {
		t.Fatalf("no phrase for the rollback: %v", err)
	}
	b.say(t, b.operator, p.Phrase, "")
	b.waitFor(t, b.cardEdited(rb.ID, "succeeded"))
	if n := b.count(t, "qm rollback 200 before-update"); n != 1 {
		t.Errorf("qm rollback 200 before-update ran %d times, want once", n)
	}
	for _, card := range []id.EventID{snap.ID, rb.ID} {
		x := b.execFor(t, card)
		audit, err := b.store.AuditFor(b.ctx, x.ID)
		if err != nil {
			t.Fatal(err)
		}
		got := auditString(audit)
		for _, want := range []string{"execution.requested", "execution.approved", "execution.dispatched", "actuator execution.succeeded"} {
			if !strings.Contains(got, want) {
				t.Errorf("audit of %s lacks %s: %s", x.Action, want, got)
			}
		}
	}
	// HA brings it back: the LRM starts the resource it finds off.
	deadline := time.Now().Add(30 * time.Second)
	for b.fleet.Admin(t, "hubris", "qm status 200") != "status: running\n" {
		if time.Now().After(deadline) {
			t.Fatal("HA did not start homeassistant again after the rollback")
		}
		time.Sleep(200 * time.Millisecond)
	}
	refusedByGate(t, b)
}

// refusedByGate fails the test for every command labsim's gate refused.
func refusedByGate(t *testing.T, b *bundle) {
	t.Helper()
	entries, err := labsim.ReadLog(b.fleet.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Refused != "" {
			t.Errorf("the gate refused %q: %s", e.Command, e.Refused)
		}
	}
}

// TestListGuestsAndShowAVMInTheRoom is issue 21's first Done-when through
// the room: after an inventory (which gives the run states) and one round
// of the fleet's checks (the demo's pct_status checks on both VMs, which
// run qm status and, where agent: 1 is set, ping the guest agent with qm
// guest cmd VMID ping), "list guests" shows the two VMs with their run
// state, and "show homeassistant" says its guest agent answers while
// "show opnsense" says it has none.
func TestListGuestsAndShowAVMInTheRoom(t *testing.T) {
	t.Parallel()
	b := setup(t, withDiscovery(), withFleet(testenv.WithGate(hostgate.Rules{})))
	b.fleet.Admin(t, "hubris", "qm stop 201")
	b.discover(t)
	if _, err := b.execs.ProbeDue(b.ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for b.count(t, "qm guest cmd 200 ping") == 0 || !b.agentChecked(t) {
		if time.Now().After(deadline) {
			t.Fatal("the homeassistant-vm check never came back")
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.say(t, b.operator, "list guests", "")
	b.waitFor(t, b.botSays("200 homeassistant on hubris, 10.40.0.121, running, VM with guest agent", "201 opnsense on hubris, 10.40.0.254, stopped, VM"))
	b.say(t, b.operator, "show homeassistant", "")
	b.waitFor(t, b.botSays("homeassistant (vm:hubris/200)", "Guest agent: answers", "VM 200 is running and its guest agent answers"))
	b.say(t, b.operator, "show opnsense", "")
	b.waitFor(t, b.botSays("opnsense (vm:hubris/201)", "Guest agent: not enabled"))
	refusedByGate(t, b)
}

// agentChecked reports whether the homeassistant-vm check has a result.
func (b *bundle) agentChecked(t *testing.T) bool {
	t.Helper()
	var n int
	if err := b.storeQuery(t, `SELECT count(*) FROM check_defs WHERE slug = 'homeassistant-vm' AND last_result_at IS NOT NULL`, &n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}
