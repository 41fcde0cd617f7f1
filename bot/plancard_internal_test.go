package bot

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// planSetup returns a three-step plan on CT 101 (snapshot, upgrade,
// reboot), waiting for approval; tests move its steps on.
func planSetup(t *testing.T) CardView {
	t.Helper()
	head := uuid.MustParse("01900000-0000-7000-8000-000000000010")
	lxc := store.Entity{Slug: "lxc:strong/101", Type: "lxc", Name: "media", Attrs: map[string]any{"host": "strong", "vmid": float64(101)}}
	info := &store.PlanInfo{Hash: strings.Repeat("ab", 32), RiskClass: "config_mutation", Steps: 3}
	step := func(n int, action, class, cmd string) executions.PlannedStep {
		id := head
		if n > 1 {
			id = uuid.MustParse("01900000-0000-7000-8000-00000000001" + string(rune('0'+n)))
		}
		state := store.StateWaiting
		if n == 1 {
			state = store.StateAwaitingApproval
		}
		c, _ := policy.ParseClass(class)
		return executions.PlannedStep{
			Execution: store.Execution{
				Request: store.Request{
					ID: id, Action: action, TargetSlug: "lxc:strong/101", Steps: []string{cmd}, RiskClass: class,
					PlanCode: "k7q2", State: state, ExpiresAt: cardNow.Add(29 * time.Minute),
				},
				PlanID: &head, Position: n, Plan: info,
			},
			Risk: policy.Risk{Class: c}, Target: lxc, Snapshot: action == "apt_upgrade",
		}
	}
	steps := []executions.PlannedStep{
		step(1, "pct_snapshot", "reversible_low", "pct snapshot 101 before"),
		step(2, "apt_upgrade", "config_mutation", "pct exec 101 -- apt-get -q -y upgrade"),
		step(3, "pct_reboot", "reversible_low", "pct reboot 101"),
	}
	return CardView{
		Planned: executions.Planned{Execution: steps[0].Execution, Steps: steps, Target: lxc,
			Risk: policy.Risk{Class: policy.ConfigMutation, Reasons: []string{"step 2: installs packages"}}},
		Now: cardNow,
	}
}

// moveStep sets step n's state, result and output, and keeps the card's
// first-step execution in step.
func moveStep(v *CardView, n int, state store.ExecutionState, res *tasks.Result, tail string) {
	x := &v.Planned.Steps[n-1].Execution
	x.State, x.ProgressTail = state, tail
	x.Approval = &store.Approval{Decision: "approved", DecidedBy: "@op:example.org", Method: "reaction", DecidedAt: cardNow}
	if res != nil {
		x.Result, _ = json.Marshal(res)
		x.Error = res.Error
	}
	v.Planned.Execution = v.Planned.Steps[0].Execution
}

func TestRenderPlanCard(t *testing.T) {
	t.Parallel()
	ok := func(d time.Duration) *tasks.Result {
		return &tasks.Result{Status: tasks.StatusSucceeded, StartedAt: cardNow, FinishedAt: cardNow.Add(d)}
	}
	tests := []struct {
		name   string
		change func(v *CardView)
		want   []string
		not    []string
	}{
		{
			name: "awaiting approval, every step waiting",
			want: []string{"Plan k7q2: snapshot, then upgrade, then reboot media", "🟠 config_mutation",
				"each runs only once the one before it has succeeded",
				"1. ⏳ snapshot media (lxc:strong/101) · 🟡 reversible_low · awaiting approval", "pct snapshot 101 before",
				"2. ⏳ upgrade media (lxc:strong/101) · 🟠 config_mutation · waiting for step 1",
				"📸 first, the actuator snapshots CT 101", "3. ⏳ reboot media", "awaiting approval", "approve k7q2"},
			not: []string{"⏭", "running step"},
		},
		{
			name: "step 2 running with its last output line",
			change: func(v *CardView) {
				moveStep(v, 1, store.StateSucceeded, ok(2*time.Second), "")
				moveStep(v, 2, store.StateRunning, nil, "== run\nReading package lists...\nUnpacking libc6 (2.36-9)\n\n")
			},
			want: []string{"1. ✅ snapshot media (lxc:strong/101) · 🟡 reversible_low · succeeded in 2s",
				"2. 🔄 upgrade media (lxc:strong/101) · 🟠 config_mutation · running: Unpacking libc6 (2.36-9)",
				"3. ⏳ reboot media (lxc:strong/101) · 🟡 reversible_low · waiting for step 2", "running step 2 of 3", "Latest output"},
			not: []string{"awaiting approval", "❌"},
		},
		{
			name: "step 2 failed: step 3 skipped, the revert offered",
			change: func(v *CardView) {
				moveStep(v, 1, store.StateSucceeded, ok(time.Second), "")
				moveStep(v, 2, store.StateFailed, &tasks.Result{Status: tasks.StatusFailed, Error: "apt-get exited 100\nmore", Snapshot: "nomos-20260706-140500",
					Phases: []tasks.Phase{{Name: "snapshot", Status: tasks.StatusSucceeded}, {Name: "run", Status: tasks.StatusFailed, ExitCode: 100}}}, "")
				moveStep(v, 3, store.StateSkipped, nil, "")
			},
			want: []string{"2. ❌ upgrade media (lxc:strong/101) · 🟠 config_mutation · failed: apt-get exited 100",
				"📸 first, the actuator snapshots CT 101: ✅ nomos-20260706-140500", "3. ⏭ reboot media (lxc:strong/101) · 🟡 reversible_low · skipped",
				"failed at step 2 of 3", "The plan stopped here: step 3 was skipped and did not run.", "Snapshot nomos-20260706-140500 was taken before step 2",
				"To undo: rollback lxc:strong/101 nomos-20260706-140500"},
			not: []string{"3. ✅", "running step", "exited 100 more"},
		},
		{
			name: "every step succeeded",
			change: func(v *CardView) {
				for n := 1; n <= 3; n++ {
					moveStep(v, n, store.StateSucceeded, ok(time.Second), "")
				}
			},
			want: []string{"3. ✅ reboot media", "Status: ✅ succeeded", "approved by @op:example.org (reaction)"},
			not:  []string{"skipped", "⏳"},
		},
		{
			name: "denied: no step runs",
			change: func(v *CardView) {
				for n := 1; n <= 3; n++ {
					moveStep(v, n, store.StateDenied, nil, "")
				}
				v.Planned.Steps[0].Execution.Approval.Decision = "denied"
				v.Planned.Execution = v.Planned.Steps[0].Execution
			},
			want: []string{"⏭ reboot media (lxc:strong/101) · 🟡 reversible_low · not run (plan denied)", "denied by @op:example.org", "nothing ran"},
		},
		{
			name: "a destructive plan needs two operators, one has approved",
			change: func(v *CardView) {
				v.Planned.Risk.Class = policy.Destructive
				v.Planned.Phrase = "destroy lxc:strong/101 k7q2"
				v.Quorum = 2
				v.Planned.Execution.Votes = []store.Vote{{Voter: "@alice:example.org", Method: "phrase"}}
			},
			want: []string{"Approved so far by @alice:example.org (1 of 2)", "type exactly: destroy lxc:strong/101 k7q2", "from 2 different operators"},
		},
		{
			name: "the phrase names each destructive step, and each operator's approves the whole plan",
			change: func(v *CardView) {
				for _, n := range []int{1, 3} {
					v.Planned.Steps[n-1].Execution.RiskClass = "destructive"
					v.Planned.Steps[n-1].Risk.Class = policy.Destructive
				}
				v.Planned.Steps[0].Execution.Action, v.Planned.Steps[2].Execution.Action = "pct_rollback", "pct_destroy"
				v.Planned.Execution = v.Planned.Steps[0].Execution
				v.Planned.Risk.Class = policy.Destructive
				v.Planned.Phrase = "rollback lxc:strong/101 destroy lxc:strong/101 k7q2"
				v.Quorum = 2
			},
			want: []string{"type exactly: rollback lxc:strong/101 destroy lxc:strong/101 k7q2",
				"It names each destructive step: 1. rollback media (lxc:strong/101), 3. destroy media (lxc:strong/101).",
				"It needs the phrase from 2 different operators, and each one's phrase approves all 3 steps."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := planSetup(t)
			if tt.change != nil {
				tt.change(&v)
			}
			plain, htm := RenderCard(v)
			for _, w := range tt.want {
				if !strings.Contains(plain, w) {
					t.Errorf("plain card lacks %q:\n%s", w, plain)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(plain, w) {
					t.Errorf("plain card shows %q:\n%s", w, plain)
				}
			}
			checkHTML(t, htm)
		})
	}
}

// TestRenderPlanCardEscapesAndRedacts: what a host printed or a model
// wrote reaches a plan card's HTML escaped and redacted.
func TestRenderPlanCardEscapesAndRedacts(t *testing.T) {
	t.Parallel()
	const evil = `<script>alert(1)</script> password=hunter2`
	v := planSetup(t)
	v.Planned.Steps[0].Target.Name = "<b>x</b>"
	moveStep(&v, 1, store.StateSucceeded, &tasks.Result{Status: tasks.StatusSucceeded, Snapshot: evil}, "")
	moveStep(&v, 2, store.StateFailed, &tasks.Result{Status: tasks.StatusFailed, Error: evil, Output: evil}, evil)
	plain, htm := RenderCard(v)
	if strings.Contains(htm, "<script") || strings.Contains(htm, "<b>x") {
		t.Errorf("unescaped HTML:\n%s", htm)
	}
	if strings.Contains(plain, "hunter2") || strings.Contains(htm, "hunter2") {
		t.Errorf("the card shows a secret:\n%s", plain)
	}
	checkHTML(t, htm)
}

// TestPlanTitleNeverClipsWhatIsDestroyed: a plan too long for its title
// gives way on its other steps, counted, and never on one that destroys:
// each destructive step's verb and target stay in the title whole.
func TestPlanTitleNeverClipsWhatIsDestroyed(t *testing.T) {
	t.Parallel()
	step := func(action, class, name string, vmid int) executions.PlannedStep {
		slug := "lxc:strong/" + strconv.Itoa(vmid)
		return executions.PlannedStep{
			Execution: store.Execution{Request: store.Request{Action: action, TargetSlug: slug, RiskClass: class}},
			Target:    store.Entity{Slug: slug, Type: "lxc", Name: name, Attrs: map[string]any{"host": "strong", "vmid": float64(vmid)}},
		}
	}
	var steps []executions.PlannedStep
	steps = append(steps, step("pct_rollback", "destructive", "the-family-photo-archive", 900))
	for i := range 8 {
		steps = append(steps, step("pct_snapshot", "reversible_low", "a-container-with-a-long-name-"+strconv.Itoa(i), 110+i))
	}
	steps = append(steps, step("pct_destroy", "destructive", "the-household-wiki", 101))
	tests := []struct {
		name  string
		steps []executions.PlannedStep
		want  string
	}{
		{"short enough", []executions.PlannedStep{steps[0], steps[1], steps[9]},
			"rollback the-family-photo-archive, then snapshot a-container-with-a-long-name-0, then destroy the-household-wiki"},
		{"the others give way", steps,
			"rollback the-family-photo-archive, then 8 other steps, then destroy the-household-wiki"},
	}
	long := append(append([]executions.PlannedStep{}, steps[:2]...), steps[9])
	long[1].Target.Name = strings.Repeat("x", 120)
	tests = append(tests, struct {
		name  string
		steps []executions.PlannedStep
		want  string
	}{"one other step", long, "rollback the-family-photo-archive, then 1 other step, then destroy the-household-wiki"})
	for _, tt := range tests {
		if got := planTitle(tt.steps); got != tt.want {
			t.Errorf("%s: planTitle = %q, want %q", tt.name, got, tt.want)
		}
	}
	// On one target, the verbs give way the same way.
	same := make([]executions.PlannedStep, 10)
	for i := range same {
		same[i] = step("pct_snapshot", "reversible_low", "the-household-wiki", 101)
	}
	same[9] = step("pct_destroy", "destructive", "the-household-wiki", 101)
	if got, want := planTitle([]executions.PlannedStep{same[0], same[9]}), "snapshot, then destroy the-household-wiki"; got != want {
		t.Errorf("planTitle on one target = %q, want %q", got, want)
	}
	if got := planTitle(same); !strings.HasSuffix(got, "destroy the-household-wiki") || len(got) > stepTitleLen {
		t.Errorf("planTitle of ten steps on one target = %q, want it to end in the destroy", got)
	}
}
