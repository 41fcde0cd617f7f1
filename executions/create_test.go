package executions_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// TestCreateSaysWhoAndWhy: the container pct_create makes carries, in its
// Proxmox notes, who asked for it, the execution and the reason, written
// into the step the card shows and the hash covers; a requester cannot
// write the notes themselves.
func TestCreateSaysWhoAndWhy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := b.svc.Request(b.ctx, executions.Request{
		Action: "pct_create", Target: "host:strong", Params: json.RawMessage(`{"hostname":"wiki"}`),
		RequestedBy: operator, Via: executions.ViaMCP, Reason: "a wiki for the family\n<b>now</b>", RoomID: "!ops:localhost",
	})
	if err != nil {
		t.Fatal(err)
	}
	x := p.Execution
	want := "--description 'Created by Nomos for " + operator + ", execution " + x.ID.String() + ". Reason: a wiki for the family b now /b'"
	if !strings.HasSuffix(x.Steps[0], want) {
		t.Errorf("create step:\n%s\nwant it to end with\n%s", x.Steps[0], want)
	}
	for _, opt := range []string{"--unprivileged 1 --features nesting=1 --onboot 1 --tags nomos"} {
		if !strings.Contains(x.Steps[0], opt) {
			t.Errorf("create step %q lacks %q", x.Steps[0], opt)
		}
	}
	var params policy.PctCreateParams
	if err := json.Unmarshal(x.Params, &params); err != nil || !strings.Contains(params.Description, x.ID.String()) {
		t.Errorf("stored params %s (%v) do not carry the description", x.Params, err)
	}

	_, err = b.svc.Request(b.ctx, executions.Request{
		Action: "pct_create", Target: "host:strong", Params: json.RawMessage(`{"hostname":"wiki","description":"Created by Nomos for someone else"}`),
		RequestedBy: operator, Via: executions.ViaChat, RoomID: "!ops:localhost",
	})
	if !errors.Is(err, policy.ErrInvalidParams) || !strings.Contains(err.Error(), "params.description: is written by Nomos") {
		t.Errorf("a description given by the requester: %v, want it refused", err)
	}
}

// TestCreatedContainerAddress: a dhcp container's leased address, read
// by the actuator after start, becomes its address in the fleet; one the
// order could not have led to is refused.
func TestCreatedContainerAddress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name    string
		params  string
		vmid    int
		ip      string
		address string
		refused bool
	}{
		{"leased", `{"hostname":"leased"}`, 160, "dhcp", "10.40.0.77/24", false},
		{"static with a lease", `{"hostname":"static","ip":"10.40.0.161/24","gw":"10.40.0.1"}`, 161, "10.40.0.161/24", "10.40.0.99/24", true},
		{"loopback lease", `{"hostname":"loop"}`, 162, "dhcp", "127.0.0.1/8", true},
		{"not an address", `{"hostname":"junk"}`, 163, "dhcp", "x; reboot", true},
		{"no prefix", `{"hostname":"bare"}`, 164, "dhcp", "10.40.0.78", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := b.approve(t, b.request(t, "pct_create", "host:strong", tc.params).Execution)
			var p policy.PctCreateParams
			if err := json.Unmarshal(x.Params, &p); err != nil {
				t.Fatal(err)
			}
			a, err := b.result(t, tasks.Result{ExecutionID: x.ID.String(), PlanHash: x.PlanHash, Status: tasks.StatusSucceeded,
				Created: &tasks.CreatedContainer{VMID: tc.vmid, Host: "strong", Hostname: p.Hostname, IP: tc.ip, Address: tc.address}})
			if tc.refused {
				refusal(t, err, executions.RefusedCreated)
				return
			}
			if err != nil || a.Execution.State != store.StateSucceeded {
				t.Fatalf("result: %s %v", a.Execution.State, err)
			}
			e, err := b.store.EntityBySlug(b.ctx, "lxc:strong/160")
			if err != nil || e.AttrString("ip") != tc.address {
				t.Errorf("lxc:strong/160 ip = %q (%v), want the leased %s", e.AttrString("ip"), err, tc.address)
			}
		})
	}
}
