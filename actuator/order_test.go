package actuator

import (
	"crypto/ed25519"
	"encoding/json"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// ignoreElapsed compares phases without their durations.
var ignoreElapsed = cmpopts.IgnoreFields(tasks.Phase{}, "Elapsed")

// An order that ends before its first progress report is due sends its
// result alone, and the result says the order began, so the bot can
// record the start before the end.
func TestQuickOrderReportsItsStartWithItsResult(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(func(c *Config) {
		c.ProgressInterval, c.HeartbeatInterval = time.Minute, time.Minute
	}))
	o := b.order(t, "x-restart", policy.RestartParams{}, b.jellyfin())
	res := b.run(t, o)

	diff(t, "status", tasks.StatusSucceeded, res.Status)
	diff(t, "phases", []tasks.Phase{{Name: "restart", Status: tasks.StatusSucceeded}}, res.Phases, ignoreElapsed)
	diff(t, "commands labsim ran", []string{"pct exec 101 -- systemctl restart jellyfin.service"}, commandLines(b.commands(t)))
	diff(t, "the command is the plan's step", o.Steps, commandLines(b.commands(t)))
	diff(t, "the result says the order began", true, res.Began)

	msgs := forExecution(b.results.wait(t, "messages", func([]message) bool { return true }), o.ExecutionID)
	if len(msgs) != 1 || msgs[0].Type != tasks.TypeExecutionResult {
		t.Fatalf("want the result alone, got %+v", msgs)
	}
	journal := b.journalOnce(t, func(j string) bool { return strings.Contains(j, "finished x-restart ") })
	contains(t, "journal", journal, "started x-restart ", "finished x-restart succeeded\n")
}

// An order still running when ProgressInterval has passed acknowledges
// with progress 1 before its result, and nothing comes after the result.
func TestLongOrderIsAcknowledgedBeforeItsResult(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(func(c *Config) { c.CommandTimeout = 500 * time.Millisecond }))
	if err := b.sim.Inject(labsim.Fault{Kind: labsim.FaultHang, Target: "101", Match: "systemctl restart"}); err != nil {
		t.Fatal(err)
	}
	o := b.order(t, "x-long", policy.RestartParams{}, b.jellyfin())
	res := b.run(t, o)
	diff(t, "status", tasks.StatusFailed, res.Status)
	diff(t, "the result says the order began", true, res.Began)

	msgs := forExecution(b.results.wait(t, "messages", func([]message) bool { return true }), o.ExecutionID)
	if len(msgs) < 2 || msgs[0].Type != tasks.TypeExecutionProgress || msgs[0].Progress.Seq != 1 {
		t.Fatalf("want the first message to be progress 1 (the acknowledgment), got %+v", msgs)
	}
	if last := msgs[len(msgs)-1]; last.Type != tasks.TypeExecutionResult {
		t.Errorf("want the result last, with no progress after it; got %+v", last)
	}
}

func TestReplayedOrderIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := b.order(t, "x-replay", policy.RestartParams{}, b.jellyfin())
	env := b.send(t, o)
	diff(t, "first delivery", tasks.StatusSucceeded, b.results.result(t, o.ExecutionID).Status)

	// Redis delivers at least once: the same signed order arrives again.
	b.deliver(t, env)
	second := b.results.nthResult(t, o.ExecutionID, 2)
	diff(t, "second delivery", tasks.StatusRefused, second.Status)
	diff(t, "refusal", tasks.RefusedReplay, second.Refusal)
	contains(t, "refusal error", second.Error, "already started")
	diff(t, "labsim ran it once", 1, len(b.commands(t)))
}

func TestRefusedOrdersRunNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, strangerKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	restart := func(id string) tasks.Order { return b.order(t, id, policy.RestartParams{}, b.jellyfin()) }

	// vouched says whether the refusal names the plan hash of a verified
	// order of the bot's: only such a refusal may fail the execution.
	for _, tc := range []struct {
		name     string
		envelope func(id string) []byte
		want     tasks.Refusal
		wantErr  string
		vouched  bool
	}{
		{"forged signature", func(id string) []byte {
			env, err := tasks.SignOrder(strangerKey, restart(id))
			if err != nil {
				t.Fatal(err)
			}
			return env
		}, tasks.RefusedBadSignature, "signature does not verify", false},
		{"unsigned", func(id string) []byte {
			raw, err := json.Marshal(restart(id))
			if err != nil {
				t.Fatal(err)
			}
			return raw
		}, tasks.RefusedBadSignature, "signature does not verify", false},
		{"tampered after signing", func(id string) []byte {
			var env tasks.Envelope
			if err := json.Unmarshal(b.sign(t, restart(id)), &env); err != nil {
				t.Fatal(err)
			}
			env.Body = json.RawMessage(strings.Replace(string(env.Body), `"restart"`, `"pct_destroy"`, 1))
			out, _ := json.Marshal(env)
			return out
		}, tasks.RefusedBadSignature, "signature does not verify", false},
		{"for another actuator", func(id string) []byte {
			o := restart(id)
			o.Actuator = "actuator-west"
			return b.sign(t, o)
		}, tasks.RefusedWrongActuator, `addressed to another actuator (the order is for actuator "actuator-west"`, false},
		{"valid for two hours", func(id string) []byte {
			o := restart(id)
			o.ExpiresAt = o.IssuedAt.Add(2 * time.Hour)
			return b.sign(t, o)
		}, tasks.RefusedTTLTooLong, "valid for longer than the actuator accepts", true},
		{"expired", func(id string) []byte {
			o := restart(id)
			o.IssuedAt, o.ExpiresAt = time.Now().Add(-time.Hour), time.Now().Add(-time.Minute)
			return b.sign(t, o)
		}, tasks.RefusedExpired, "expired", true},
		{"plan hash of another plan", func(id string) []byte {
			o := b.order(t, id, policy.SystemctlParams{Verb: policy.VerbRestart}, b.jellyfin())
			o.PlanHash = b.order(t, id, policy.SystemctlParams{Verb: policy.VerbStop}, b.jellyfin()).PlanHash
			return b.sign(t, o)
		}, tasks.RefusedPlanMismatch, "do not match the plan that was approved", true},
		{"target moved after approval", func(id string) []byte {
			o := restart(id)
			o.Target.VMID = 102
			return b.sign(t, o)
		}, tasks.RefusedPlanMismatch, "do not match", true},
		{"unknown action", func(id string) []byte {
			o := restart(id)
			o.Action = "format_disk"
			return b.sign(t, o)
		}, tasks.RefusedMalformed, "unknown action", true},
		{"injection in a parameter", func(id string) []byte {
			o := b.order(t, id, policy.SystemctlParams{Verb: policy.VerbRestart, Unit: "jellyfin"}, b.lxc(101, "jellyfin"))
			o.Params = json.RawMessage(`{"verb":"restart","unit":"x;reboot"}`)
			return b.sign(t, o)
		}, tasks.RefusedMalformed, "params.unit", true},
		{"payload of another version", func(id string) []byte {
			return []byte(`{"v":99,"type":"execution:run","body":{"execution_id":"` + id + `"},"sig":"AAAA"}`)
		}, tasks.RefusedMalformed, "could not be read", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "x-" + strings.ReplaceAll(tc.name, " ", "-")
			b.deliver(t, tc.envelope(id))
			res := b.results.result(t, id)
			diff(t, "status", tasks.StatusRefused, res.Status)
			diff(t, "refusal", tc.want, res.Refusal)
			contains(t, "error", res.Error, "Nothing ran", tc.wantErr)
			diff(t, "signed by", tasks.DefaultActuator, res.Actuator)
			diff(t, "vouches for a plan", tc.vouched, res.PlanHash != "")
		})
	}
	// An envelope that names no execution can't be reported; it is only
	// logged. Send it first so that the check below sees it handled.
	b.deliver(t, []byte("not json"))
	last := b.order(t, "x-after", policy.PctExecParams{Command: "cat /etc/hostname"}, b.lxc(101, "jellyfin"))
	diff(t, "a good order after the refusals", tasks.StatusSucceeded, b.run(t, last).Status)

	diff(t, "labsim saw only the good order", last.Steps, commandLines(b.commands(t)))
	journal := b.journalOnce(t, func(j string) bool { return strings.Contains(j, "finished x-after ") })
	// started, sent (just before its command went out) and finished.
	diff(t, "journal lines", 3, strings.Count(journal, "\n"))
}

func TestHostKeyRefused(t *testing.T) {
	t.Parallel()
	otherKey := func(t *testing.T) ssh.PublicKey {
		pub, _, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		k, err := ssh.NewPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for _, tc := range []struct {
		name    string
		pinned  func(t *testing.T, b *bundle) []string
		wantErr string
	}{
		{"unknown host", func(t *testing.T, b *bundle) []string {
			return []string{knownhosts.Line([]string{"[127.0.0.1]:1"}, otherKey(t))}
		}, "is not in"},
		{"changed host key", func(t *testing.T, b *bundle) []string {
			return []string{knownhosts.Line([]string{knownhosts.Normalize(b.addr)}, otherKey(t))}
		}, "does not match the key pinned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(t *testing.T, b *bundle) {
				if err := labsim.WriteKnownHosts(b.knownHosts, tc.pinned(t, b)); err != nil {
					t.Fatal(err)
				}
			})
			res := b.run(t, b.order(t, "x-hostkey", policy.RestartParams{}, b.jellyfin()))
			diff(t, "status", tasks.StatusFailed, res.Status)
			diff(t, "failed phase", "restart", res.FailedPhase)
			contains(t, "error", res.Error, "did not run", "host key refused", tc.wantErr)
			diff(t, "labsim ran nothing", []string{}, commandLines(b.commands(t)))
		})
	}
}

func TestInterruptedExecutionIsReportedOnce(t *testing.T) {
	t.Parallel()
	started := time.Date(2026, 7, 6, 10, 15, 0, 0, time.UTC)
	b := setup(t, func(t *testing.T, b *bundle) {
		// A previous actuator journaled the start and died before the finish.
		if err := os.MkdirAll(b.dir+"/actuator", 0o700); err != nil {
			t.Fatal(err)
		}
		// x-crash had sent its command; x-unsent died before it sent any.
		line := "started x-crash " + started.Format(time.RFC3339) + "\n" +
			"sent x-crash " + started.Format(time.RFC3339) + "\n" +
			"started x-unsent " + started.Format(time.RFC3339) + "\n"
		if err := os.WriteFile(b.journal, []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	res := b.results.result(t, "x-crash")
	diff(t, "status", tasks.StatusOutcomeUnknown, res.Status)
	contains(t, "error", res.Error, "actuator stopped while this execution was running", "reconciled")
	diff(t, "started at", started, res.StartedAt.UTC())
	// Nothing of x-unsent reached the host: not outcome_unknown, but
	// failed, saying that nothing ran.
	unsent := b.results.result(t, "x-unsent")
	diff(t, "status of an order that sent nothing", tasks.StatusFailed, unsent.Status)
	contains(t, "error", unsent.Error, "before it sent any command", "nothing ran")

	// Once reported, a restart does not report it again.
	b.restart(t)
	o := b.order(t, "x-after-restart", policy.RestartParams{}, b.jellyfin())
	diff(t, "an order after the restart", tasks.StatusSucceeded, b.run(t, o).Status)
	journal, err := os.ReadFile(b.journal)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "finished lines for x-crash", 1, strings.Count(string(journal), "finished x-crash outcome_unknown\n"))
	diff(t, "results for x-crash", 1, len(results(b.results.wait(t, "all", func([]message) bool { return true }), "x-crash")))
	diff(t, "labsim ran only the new order", o.Steps, commandLines(b.commands(t)))

	// The interrupted order itself, delivered again, is a replay.
	crash := b.order(t, "x-crash", policy.RestartParams{}, b.jellyfin())
	b.deliver(t, b.sign(t, crash))
	diff(t, "redelivered interrupted order", tasks.RefusedReplay, b.results.nthResult(t, "x-crash", 2).Refusal)
	diff(t, "labsim still ran only the new order", o.Steps, commandLines(b.commands(t)))
}

func TestHungCommandTimesOut(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(func(c *Config) { c.CommandTimeout = 300 * time.Millisecond }))
	if err := b.sim.Inject(labsim.Fault{Kind: labsim.FaultHang, Target: "101", Match: "systemctl restart"}); err != nil {
		t.Fatal(err)
	}
	res := b.run(t, b.order(t, "x-hang", policy.RestartParams{}, b.jellyfin()))
	diff(t, "status", tasks.StatusFailed, res.Status)
	diff(t, "failed phase", "restart", res.FailedPhase)
	contains(t, "error", res.Error, "ran too long", "timed out after 300ms")

	// labsim logs exit -1 for a command whose session ended before it did:
	// the kill reached the host.
	entries := b.commands(t)
	if len(entries) != 1 || entries[0].Command != "pct exec 101 -- systemctl restart jellyfin.service" || entries[0].Exit != -1 {
		t.Errorf("want the restart cut short (exit -1) in labsim's log, got %+v", entries)
	}
}

func TestDroppedConnectionIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.sim.Inject(labsim.Fault{Kind: labsim.FaultDrop, Target: "pve1"}); err != nil {
		t.Fatal(err)
	}
	res := b.run(t, b.order(t, "x-drop", policy.RestartParams{}, b.jellyfin()))
	diff(t, "status", tasks.StatusOutcomeUnknown, res.Status)
	diff(t, "failed phase", "restart", res.FailedPhase)
	contains(t, "error", res.Error, "may or may not have run")
	diff(t, "labsim received the command once", []string{"pct exec 101 -- systemctl restart jellyfin.service"}, commandLines(b.commands(t)))

	// The next order dials again once the host is back.
	if _, err := b.sim.Clear(labsim.FaultDrop, ""); err != nil {
		t.Fatal(err)
	}
	diff(t, "after the drop", tasks.StatusSucceeded, b.run(t, b.order(t, "x-after-drop", policy.RestartParams{}, b.jellyfin())).Status)
}

func TestConfigMutationSnapshotsFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := b.order(t, "x-mutate", policy.PctExecParams{Command: "touch /etc/nomos-was-here"}, b.lxc(101, "jellyfin"))
	diff(t, "class of the order", policy.ConfigMutation.String(), o.RiskClass)
	res := b.run(t, o)
	diff(t, "status", tasks.StatusSucceeded, res.Status)
	if !regexp.MustCompile(`^nomos-\d{8}-\d{6}$`).MatchString(res.Snapshot) {
		t.Fatalf("want the result to name the snapshot, got %q", res.Snapshot)
	}
	diff(t, "commands labsim ran, the lock checked and a snapshot first",
		[]string{"pct config 101 --current 1", "pct snapshot 101 " + res.Snapshot, "pct exec 101 -- sh -c 'touch /etc/nomos-was-here'"}, commandLines(b.commands(t)))
	diff(t, "phases", []string{"snapshot", "pct_exec"}, phaseNames(res))
	contains(t, "notes", strings.Join(res.Notes, "\n"), "pct_rollback on lxc:101 with name "+res.Snapshot)
	contains(t, "snapshots on the host", b.ssh(t, "pct listsnapshot 101"), res.Snapshot)

	// A second change right after gets a snapshot of its own, even within
	// the same second.
	again := b.run(t, b.order(t, "x-mutate-again", policy.PctExecParams{Command: "touch /etc/nomos-was-here-too"}, b.lxc(101, "jellyfin")))
	diff(t, "second status", tasks.StatusSucceeded, again.Status)
	if again.Snapshot == "" || again.Snapshot == res.Snapshot {
		t.Errorf("want a second, distinct snapshot; got %q after %q", again.Snapshot, res.Snapshot)
	}
}

func phaseNames(r tasks.Result) []string {
	out := []string{}
	for _, p := range r.Phases {
		out = append(out, p.Name)
	}
	return out
}

// TestActionsRunAsRendered runs each action in turn and checks that labsim
// received exactly the plan's steps.
func TestActionsRunAsRendered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	web := b.lxc(102, "web")
	nginx := tasks.Target{ID: "svc-nginx", Slug: "service:nginx", Type: "service", Host: "pve1", HostAddr: b.addr, VMID: 102, Unit: "nginx"}
	for i, tc := range []struct {
		params policy.Params
		target tasks.Target
		want   []string
		note   string
	}{
		{policy.PctSnapshotParams{Name: "before"}, web, []string{"pct snapshot 102 before"}, ""},
		{policy.PctStopParams{}, web, []string{"pct shutdown 102 --timeout 60 --forceStop 1"}, ""},
		{policy.PctStartParams{}, web, []string{"pct start 102"}, ""},
		{policy.PctRebootParams{}, web, []string{"pct reboot 102"}, ""},
		{policy.RestartParams{}, nginx, []string{"pct exec 102 -- systemctl restart nginx.service"}, ""},
		{policy.SystemctlParams{Verb: policy.VerbReload, Unit: "nginx"}, web, []string{"pct exec 102 -- systemctl reload nginx.service"}, ""},
		{policy.AptUpgradeParams{}, web, []string{
			"pct exec 102 -- apt-get -q -o Acquire::Retries=3 update",
			"pct exec 102 -- apt list --upgradable"}, ""},
		{policy.PctExecParams{Command: "cat /etc/hostname"}, web, []string{"pct exec 102 -- sh -c 'cat /etc/hostname'"}, ""},
		{policy.RunParams{Command: "pct list"}, b.node(), []string{"sh -c 'pct list'"}, ""},
		{policy.PctRollbackParams{Name: "before"}, web, []string{"pct rollback 102 before"}, "request pct_start"},
		{policy.PctDestroyParams{}, web, []string{"pct destroy 102"}, ""},
	} {
		action := string(tc.params.Action())
		t.Run(action, func(t *testing.T) {
			before := len(b.commands(t))
			o := b.order(t, "x-"+strconv.Itoa(i)+"-"+action, tc.params, tc.target)
			diff(t, "plan steps", tc.want, o.Steps)
			res := b.run(t, o)
			if res.Status != tasks.StatusSucceeded {
				t.Fatalf("status %s: %s\n%s", res.Status, res.Error, res.Output)
			}
			want := tc.want
			if touchesLock(tc.want) {
				// A lock (a backup's) would refuse these: it is read first.
				want = append([]string{"pct config 102 --current 1"}, tc.want...)
			}
			diff(t, "commands labsim ran", want, commandLines(b.commands(t)[before:]))
			if tc.note != "" {
				contains(t, "notes", strings.Join(res.Notes, "\n"), tc.note)
			}
		})
	}
	contains(t, "the other containers stay", b.ssh(t, "pct list"), "101 ")
	if strings.Contains(b.ssh(t, "pct list"), "102 ") {
		t.Error("container 102 is still listed after pct_destroy")
	}
}

func TestHeartbeatsWhileQuietAndShutdownKills(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(func(c *Config) {
		c.HeartbeatInterval = 20 * time.Millisecond
		c.ShutdownGrace = 100 * time.Millisecond
	}))
	if err := b.sim.Inject(labsim.Fault{Kind: labsim.FaultHang, Target: "101", Match: "systemctl restart"}); err != nil {
		t.Fatal(err)
	}
	o := b.order(t, "x-quiet", policy.RestartParams{}, b.jellyfin())
	b.send(t, o)
	// The command prints nothing and never ends, yet reports keep coming.
	msgs := b.results.wait(t, "heartbeats", func(msgs []message) bool { return len(forExecution(msgs, o.ExecutionID)) >= 4 })
	for i, m := range forExecution(msgs, o.ExecutionID)[:4] {
		diff(t, "message type", tasks.TypeExecutionProgress, m.Type)
		diff(t, "sequence", i+1, m.Progress.Seq)
	}

	b.stopActuator()
	res := b.results.result(t, o.ExecutionID)
	diff(t, "status", tasks.StatusOutcomeUnknown, res.Status)
	contains(t, "error", res.Error, "actuator was shutting down")
	journal, err := os.ReadFile(b.journal)
	if err != nil {
		t.Fatal(err)
	}
	contains(t, "journal", string(journal), "finished x-quiet outcome_unknown\n")
	entries := b.commands(t)
	if len(entries) != 1 || entries[0].Exit != -1 {
		t.Errorf("want the hung command cut short in labsim's log, got %+v", entries)
	}
}

func TestUnreachableHostFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target := b.jellyfin()
	target.HostAddr = closedAddr(t)
	res := b.run(t, b.order(t, "x-unreachable", policy.RestartParams{}, target))
	diff(t, "status", tasks.StatusFailed, res.Status)
	contains(t, "error", res.Error, "before anything was sent", "did not run", "cannot reach")
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
