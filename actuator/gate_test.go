package actuator

import (
	"strings"
	"testing"

	"github.com/nomoshq/nomos/hostgate"
	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// TestApprovedFlowsPassTheGate runs approved orders and probes against a
// node that forces nomos gate with its default rules: a restart, a
// pct_exec (with its snapshot), a full pct_create with a dead resolver to
// heal, a snapshot and rollback, a stop and start and a destroy all pass,
// and every probe kind reads what it reads without the gate. The one
// step the gate refuses is the run action's shell on the host: the
// execution fails with the gate's own line and nothing runs.
func TestApprovedFlowsPassTheGate(t *testing.T) {
	t.Parallel()
	b := setup(t, withGate(hostgate.Rules{}))
	if err := b.sim.Inject(labsim.Fault{Kind: labsim.FaultDNSDead, Target: "100"}); err != nil {
		t.Fatal(err)
	}
	spare := b.lxc(103, "spare")
	for _, tc := range []struct {
		id     string
		params policy.Params
		target tasks.Target
	}{
		{"restart", policy.RestartParams{}, b.jellyfin()},
		{"pct-exec", policy.PctExecParams{Command: `systemctl is-active jellyfin && echo "it's up" | tee /tmp/state`}, b.lxc(101, "jellyfin")},
		{"create", policy.PctCreateParams{
			Hostname: "books", IP: "192.168.8.50/24", GW: "192.168.8.1", Services: []string{"nginx"},
			PostInstall: "systemctl is-active nginx\ncurl -fsS http://localhost/ >/dev/null",
		}, b.node()},
		{"snapshot", policy.PctSnapshotParams{Name: "before"}, spare},
		{"start", policy.PctStartParams{}, spare},
		{"stop", policy.PctStopParams{}, spare},
		{"rollback", policy.PctRollbackParams{Name: "before"}, spare},
		{"destroy", policy.PctDestroyParams{Purge: true}, spare},
	} {
		res := b.run(t, b.order(t, "x-"+tc.id, tc.params, tc.target))
		if res.Status != tasks.StatusSucceeded {
			t.Fatalf("%s through the gate: %s at %s: %s\n%s", tc.id, res.Status, res.FailedPhase, res.Error, res.Output)
		}
		if tc.id == "create" && (res.Created == nil || res.Created.VMID != 100) {
			t.Errorf("create: created %+v, want container 100", res.Created)
		}
	}
	contains(t, "the created container", b.ssh(t, "pct exec 100 -- systemctl is-active nginx"), "active")
	if strings.Contains(b.ssh(t, "pct list"), "103 ") {
		t.Error("container 103 is still listed after pct_destroy")
	}

	for _, c := range []tasks.CheckRun{
		{CheckID: "http", Kind: "http", Target: withIP(b.jellyfin(), "10.0.0.21")},
		{CheckID: "tcp", Kind: "tcp", Target: b.jellyfin()},
		{CheckID: "systemd", Kind: "systemd", Target: b.jellyfin()},
		{CheckID: "disk", Kind: "disk", Target: b.jellyfin()},
		{CheckID: "pct_status", Kind: "pct_status", Target: b.jellyfin()},
		{CheckID: "dns", Kind: "dns", Target: b.jellyfin()},
		{CheckID: "ping", Kind: "ping", Target: b.node(), Spec: map[string]any{"host": "jellyfin"}},
	} {
		c.TargetID = "entity-" + c.CheckID
		b.probe(t, c)
		if got := b.results.check(t, c.CheckID); got.Health != healthy {
			t.Errorf("probe %s through the gate: %s: %s", c.CheckID, got.Health, got.Detail)
		}
	}

	before := len(b.commands(t))
	res := b.run(t, b.order(t, "x-run", policy.RunParams{Command: "pct stop 101"}, b.node()))
	diff(t, "run status", tasks.StatusFailed, res.Status)
	contains(t, "run error", res.Error, "exited with status 126", "nomos gate: refused: a shell on the host itself", "host_shell: true")
	after := b.commands(t)[before:]
	if len(after) != 1 || after[0].Refused == "" || after[0].Exit != hostgate.ExitRefused {
		t.Errorf("the run step reached the host as %+v, want one refused command", after)
	}
	if out := b.ssh(t, "pct status 101"); out != "status: running\n" {
		t.Errorf("the refused run stopped container 101: %q", out)
	}
	for _, e := range b.commands(t)[:before] {
		if e.Refused != "" {
			t.Errorf("the gate refused %q: %s", e.Command, e.Refused)
		}
	}
}

// TestRunNeedsHostShell: with host_shell in the rules, the run action's
// sh -c reaches the host.
func TestRunNeedsHostShell(t *testing.T) {
	t.Parallel()
	b := setup(t, withGate(hostgate.Rules{HostShell: true}))
	res := b.run(t, b.order(t, "x-run", policy.RunParams{Command: "pct stop 101 && pct status 101"}, b.node()))
	if res.Status != tasks.StatusSucceeded {
		t.Fatalf("run with host_shell: %s: %s\n%s", res.Status, res.Error, res.Output)
	}
	contains(t, "run output", res.Output, "status: stopped")
}
