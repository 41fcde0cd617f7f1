package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

var vm200 = Target{Type: TargetVM, ID: "0190a1b2-0000-7000-8000-000000000200", Slug: "vm:strong/200", Host: "strong", VMID: 200}

// TestVMSteps: the guest actions run qm on a VM target, with the forms
// qemu-server's CLI takes (src/PVE/CLI/qm.pm), and their classes follow
// what each does to a running guest: a shutdown is a request the guest
// may refuse, a stop cuts its power ("akin to pulling the power plug",
// src/PVE/API2/Qemu.pm vm_stop), a rollback discards its changes.
func TestVMSteps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		params Params
		want   []string
		class  Class
	}{
		{PctStatusParams{}, []string{"qm status 200"}, ReadOnly},
		{PctStartParams{}, []string{"qm start 200"}, ReversibleLow},
		{GuestShutdownParams{}, []string{"qm shutdown 200 --timeout 60"}, ReversibleLow},
		{GuestShutdownParams{Timeout: 5}, []string{"qm shutdown 200 --timeout 5"}, ReversibleLow},
		{PctRebootParams{}, []string{"qm reboot 200"}, ReversibleLow},
		{PctStopParams{}, []string{"qm stop 200"}, Destructive},
		{PctSnapshotParams{Name: "before-update"}, []string{"qm snapshot 200 before-update"}, ReversibleLow},
		{PctSnapshotParams{Name: "before-update", VMState: true}, []string{"qm snapshot 200 before-update --vmstate 1"}, ReversibleLow},
		{PctRollbackParams{Name: "before-update"}, []string{"qm rollback 200 before-update"}, Destructive},
		{PctRollbackParams{Name: "first", Discard: []string{"second"}}, []string{"qm delsnapshot 200 second", "qm rollback 200 first"}, Destructive},
		{PctDestroyParams{}, []string{"qm destroy 200 --purge 1"}, Destructive},
		{PctExecParams{Command: "ha core check"}, []string{"qm guest exec 200 -- sh -c 'ha core check'"}, ConfigMutation},
	} {
		name := string(tc.params.Action())
		got, err := Render(tc.params, vm200)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d := diff(tc.want, got); d != "" {
			t.Errorf("%s steps %s", name, d)
		}
		r, err := Classify(tc.params, vm200, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Class != tc.class {
			t.Errorf("%s class = %s, want %s", name, r.Class, tc.class)
		}
	}
	if got, err := Render(GuestShutdownParams{Timeout: 30}, lxc101); err != nil || !slices.Equal(got, []string{"pct shutdown 101 --timeout 30"}) {
		t.Errorf("guest_shutdown of a container = %q, %v; want pct shutdown without --forceStop", got, err)
	}
	r, _ := Classify(PctStopParams{}, vm200, nil)
	if !slices.ContainsFunc(r.Reasons, func(s string) bool { return strings.Contains(s, "like pulling the plug") }) {
		t.Errorf("qm stop's reasons do not say it is like pulling the plug: %q", r.Reasons)
	}
	r, _ = Classify(PctSnapshotParams{Name: "with-ram", VMState: true}, vm200, nil)
	if !slices.ContainsFunc(r.Reasons, func(s string) bool { return strings.Contains(s, "as much storage again as the VM's memory") }) {
		t.Errorf("a vmstate snapshot's reasons do not count its RAM toward storage: %q", r.Reasons)
	}
	if r, _ := Classify(PctStopParams{}, lxc101, nil); r.Class != ReversibleLow {
		t.Errorf("pct_stop on a container is %s, want reversible_low: it shuts down cleanly first", r.Class)
	}
}

// TestVMRefusals: what a VM target cannot take is refused before
// anything renders, and a timeout outside its bounds is a parameter error.
func TestVMRefusals(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		params Params
		target Target
	}{
		"vmstate of a container": {PctSnapshotParams{Name: "x1", VMState: true}, lxc101},
		"restart of a VM":        {RestartParams{}, vm200},
		"upgrade in a VM":        {AptUpgradeParams{}, vm200},
		"timeout too long":       {GuestShutdownParams{Timeout: MaxShutdownTimeout + 1}, vm200},
		"negative timeout":       {GuestShutdownParams{Timeout: -1}, vm200},
		"slug and vmid disagree": {PctStartParams{}, Target{Type: TargetVM, ID: vm200.ID, Slug: "vm:strong/201", Host: "strong", VMID: 200}},
		"vm slug on an lxc type": {PctStartParams{}, Target{Type: TargetLXC, ID: vm200.ID, Slug: "vm:strong/200", Host: "strong", VMID: 200}},
	} {
		if steps, err := Render(tc.params, tc.target); err == nil {
			t.Errorf("%s: rendered %q, want a refusal", name, steps)
		} else if !errors.Is(err, ErrInvalidParams) && !errors.Is(err, ErrInvalidTarget) {
			t.Errorf("%s: %v is neither a parameter nor a target error", name, err)
		}
	}
	p, err := ParseParams(ActionGuestShutdown, []byte(`{"timeout": 5}`))
	if err != nil || p.(GuestShutdownParams).Timeout != 5 {
		t.Errorf("ParseParams guest_shutdown = %#v, %v", p, err)
	}
	if _, err := ParseParams(ActionGuestShutdown, []byte(`{"timeout": 5, "force": true}`)); err == nil {
		t.Error("guest_shutdown took a force parameter; it has none")
	}
}
