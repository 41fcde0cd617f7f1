package mcpserver_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/actuator"
	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// TestLXCStateAsksTheHostLive runs get_lxc_state end to end: a pct_status
// order signed by the gate, carried out by a real actuator over SSH against
// labsim, its result applied from the results queue.
func TestLXCStateAsksTheHostLive(t *testing.T) {
	t.Parallel()
	fleet := testenv.NewFleet(t)
	b := setupWithSeed(t, fleet.Seed)

	startActuator(t, b, fleet)

	text := b.ok(t, "get_lxc_state", map[string]any{"container": "101"})
	containsAll(t, "get_lxc_state 101", text, "lxc:strong/101 (jellyfin) on strong: running — live `pct status 101`")
	stopped := b.ok(t, "get_lxc_state", map[string]any{"container": "teddycloud"})
	containsAll(t, "get_lxc_state teddycloud", stopped, "lxc:hubris/131 (teddycloud) on hubris: stopped")

	// The live answer is recorded, so list_lxcs is as fresh as the probe.
	lxcs := b.ok(t, "list_lxcs", nil)
	containsAll(t, "list_lxcs after the probes", lxcs,
		"101 jellyfin strong 10.40.0.101/24 healthy",
		"131 teddycloud hubris 10.40.0.131/24 unhealthy teddycloud — container 131 is stopped")

	// A VM: get_vm_state runs qm status, and list_guests names each
	// row's type; the demo's VMs are on hubris.
	vm := b.ok(t, "get_vm_state", map[string]any{"vm": "homeassistant"})
	containsAll(t, "get_vm_state homeassistant", vm, "vm:hubris/200 (homeassistant) on hubris: running — live `qm status 200`")
	if text, isErr := callTool(t, b.ctx, b.client, "get_vm_state", map[string]any{"vm": "101"}); !isErr || !strings.Contains(text, "101") {
		t.Errorf("get_vm_state of a container = %v %q, want it refused: 101 is no VM", isErr, text)
	}
	guests := b.ok(t, "list_guests", nil)
	containsAll(t, "list_guests", guests, "17 guests", "lxc 101 jellyfin strong", "vm 200 homeassistant hubris 10.40.0.121 healthy - (guest agent)", "vm 201 opnsense hubris")
	vms := b.ok(t, "list_vms", nil)
	containsAll(t, "list_vms", vms, "2 VMs", "200 homeassistant hubris")
	containsNone(t, "list_vms", vms, "jellyfin")

	// It ran as the pct_status probe, requested by the agent, with no
	// card: a probe is not a plan.
	xs, err := b.store.ExecutionsVia(b.ctx, []string{"agent"}, 10)
	xs = slices.DeleteFunc(xs, func(x store.Execution) bool {
		return x.Action != "pct_status" || strings.HasPrefix(x.TargetSlug, "vm:")
	})
	if err != nil || len(xs) != 2 {
		t.Fatalf("executions via agent = %d, %v; want the two probes", len(xs), err)
	}
	for _, x := range xs {
		if x.RiskClass != "read_only" || x.State != store.StateSucceeded || x.RoomID != "" || x.Approval == nil || x.Approval.Method != "auto" {
			t.Errorf("probe execution %s: %s %s %s room %q; want a succeeded, automatically approved read_only pct_status with no room", x.ID, x.Action, x.RiskClass, x.State, x.RoomID)
		}
	}
	if cmds := fleet.Commands(t); !containsCommand(cmds, "pct status 101") || !containsCommand(cmds, "pct status 131") {
		t.Errorf("labsim did not see the two pct status commands: %q", cmds)
	}

	// A free-form command waits for a person even when it classifies
	// read_only: the classifier is not the gate.
	queued := b.ok(t, "request_execution", map[string]any{"action": "pct_exec", "target": "101", "params": map[string]any{"command": "uname -a"}, "reason": "which kernel is this"})
	containsAll(t, "read_only pct_exec from the agent", queued, "queued for approval: execution ", "(read_only): pct_exec on lxc:strong/101")
	if cmds := fleet.Commands(t); containsCommand(cmds, "uname") {
		t.Errorf("labsim ran the unapproved command: %q", cmds)
	}

	amb := b.fails(t, "get_lxc_state", map[string]any{"container": "lxc"})
	containsAll(t, "get_lxc_state of nothing", amb, `no lxc is called "lxc"`)
}

// TestTailLogReadsTheJournalLive: tail_log is a probe like get_lxc_state:
// the unit's journal at once, through a real actuator and the gate's
// forms, and a secret in a container's journal comes back redacted.
func TestTailLogReadsTheJournalLive(t *testing.T) {
	t.Parallel()
	fleet := testenv.NewFleet(t)
	b := setupWithSeed(t, fleet.Seed)
	startActuator(t, b, fleet)

	logs := b.ok(t, "tail_log", map[string]any{"target": "service:jellyfin", "lines": 3})
	containsAll(t, "tail_log service:jellyfin", logs, "the last 3 lines of service:jellyfin's journal", "Started jellyfin.service")
	fleet.Admin(t, "strong", "pct exec 101 -- logger -t backup 'token=abcdef123456 uploaded'")
	whole := b.ok(t, "tail_log", map[string]any{"target": "lxc:strong/101", "lines": 1})
	containsAll(t, "tail_log lxc:strong/101", whole, "backup: token=[REDACTED] uploaded")
	if strings.Contains(whole, "abcdef123456") {
		t.Errorf("tail_log shows the secret: %q", whole)
	}
	if !containsCommand(fleet.Commands(t), "pct exec 101 -- journalctl -u jellyfin.service -n 3 --no-pager") {
		t.Errorf("labsim did not see the unit's journal read: %q", fleet.Commands(t))
	}
	if text, isErr := b.call(t, b.ctx, "tail_log", map[string]any{"target": "lxc:strong/101", "lines": 500}); !isErr || !strings.Contains(text, "lines must be at most 100, got 500") {
		t.Errorf("tail_log of 500 lines = %v %q, want it refused", isErr, text)
	}

}

// startActuator runs a real actuator against fleet, and the bot's side of
// the results queue and of the actuator's approval checks.
func startActuator(t *testing.T, b *bundle, fleet *testenv.Fleet) {
	t.Helper()
	act, err := actuator.New(actuator.Config{
		RedisURL: b.redisURL, VerifyKey: b.pub, ReportSigningKey: b.keys.ReportSigning, SSHSigner: fleet.SSHSigner,
		KnownHostsFile: fleet.KnownHostsFile, JournalPath: filepath.Join(t.TempDir(), "journal"),
		Logger: testenv.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	actCtx, stopAct := context.WithCancel(context.Background())
	actDone := make(chan struct{})
	go func() {
		defer close(actDone)
		if err := act.Run(actCtx); err != nil && actCtx.Err() == nil {
			t.Errorf("actuator: %v", err)
		}
	}()
	t.Cleanup(func() { stopAct(); <-actDone })
	results := asynq.NewServer(b.redis, tasks.ResultsServerConfig(asynq.Config{
		Concurrency: 2, TaskCheckInterval: 50 * time.Millisecond, LogLevel: asynq.WarnLevel,
	}))
	h := &executions.ResultsHandler{Service: b.exec}
	if err := results.Start(h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(results.Shutdown)
	// The bot's answers to the actuator's "is this still approved?"
	testenv.Go(t, func(ctx context.Context) { h.ServeApprovalChecks(ctx, b.redis) })

}

func containsCommand(cmds []string, want string) bool {
	for _, c := range cmds {
		if strings.Contains(c, want) {
			return true
		}
	}
	return false
}

// TestLXCStateAnswersWhileTheProbeIsStillOut covers an actuator that does
// not answer in time: the tool says so and names the execution.
func TestLXCStateAnswersWhileTheProbeIsStillOut(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *mcpserver.Config) { c.LiveWait = 300 * time.Millisecond; c.PollInterval = 50 * time.Millisecond })
	text := b.ok(t, "get_lxc_state", map[string]any{"container": "lxc:strong/105"})
	containsAll(t, "get_lxc_state with no actuator", text, "lxc:strong/105 (postgres) on strong: the live probe is still dispatched after", "get_execution shows the answer")
	// A named read-only action the agent asks for waits for a person too.
	audit := b.ok(t, "request_execution", map[string]any{"action": "apt_upgrade", "target": "lxc:strong/101", "reason": "what is pending"})
	containsAll(t, "read_only apt audit from the agent", audit, "queued for approval: execution ", "(read_only): apt_upgrade on lxc:strong/101")
}
