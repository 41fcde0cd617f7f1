package bot

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/humantime"
	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// Limits of one step's line on a plan card.
const (
	stepNoteBytes = 160
	stepTitleLen  = 120
)

// planTitle names a plan of several steps in a few words: "stop, then
// destroy teddycloud", or each step's target when they differ. A title
// longer than stepTitleLen gives way on its other steps, counted ("then
// 3 other steps"), and never on a destructive one: what a plan destroys
// is always in its title, whole.
func planTitle(steps []executions.PlannedStep) string {
	same := true
	for _, st := range steps[1:] {
		same = same && st.Execution.TargetSlug == steps[0].Execution.TargetSlug
	}
	parts := make([]string, len(steps))
	keep := make([]bool, len(steps))
	for i, st := range steps {
		parts[i] = stepVerb(st.Execution)
		if !same {
			parts[i] += " " + stepTarget(st).display
		}
		keep[i] = st.Execution.RiskClass == policy.Destructive.String()
	}
	join := func(parts []string) string {
		title := strings.Join(parts, ", then ")
		if same {
			title += " " + stepTarget(steps[0]).display
		}
		return title
	}
	title := join(parts)
	if len(title) <= stepTitleLen || !slices.Contains(keep, true) {
		return clip(title, stepTitleLen)
	}
	var short []string
	for i := 0; i < len(parts); {
		if keep[i] {
			short = append(short, parts[i])
			i++
			continue
		}
		j := i
		for j < len(parts) && !keep[j] {
			j++
		}
		short = append(short, otherSteps(j-i))
		i = j
	}
	return join(short)
}

// otherSteps is "1 other step" or "n other steps".
func otherSteps(n int) string {
	if n == 1 {
		return "1 other step"
	}
	return strconv.Itoa(n) + " other steps"
}

func stepVerb(x store.Execution) string {
	if spec, err := policy.Lookup(policy.Action(x.Action)); err == nil {
		return spec.Verb
	}
	return x.Action
}

// stepTarget is a step's resolved target as a card shows it.
func stepTarget(st executions.PlannedStep) cardTarget {
	return resolveTarget(CardView{Planned: executions.Planned{Execution: st.Execution, Target: st.Target}})
}

// stepResult is the actuator's final word on a step, if any.
func stepResult(x store.Execution) *tasks.Result {
	if len(x.Result) == 0 {
		return nil
	}
	var r tasks.Result
	if json.Unmarshal(x.Result, &r) != nil {
		return nil
	}
	return &r
}

// renderPlan adds a plan of several steps to a card: one live line per
// step, in order, with its commands, then where the plan stands and, once
// a step has ended the plan, its details.
func renderPlan(m *bodies, v CardView, class policy.Class, t cardTarget) {
	steps := v.Planned.Steps
	intro := "Steps, in order; each runs only once the one before it has succeeded:"
	m.para(intro, "<strong>"+escape(intro)+"</strong>")
	budget := stepsBytes / len(steps)
	var plain strings.Builder
	htm := "<ol>\n"
	for i, st := range steps {
		p, h := stepLine(i+1, st, budget)
		plain.WriteString(p)
		htm += "<li>" + h + "</li>\n"
	}
	m.plain.WriteString(plain.String())
	m.html.WriteString(htm + "</ol>\n")
	planWillChange(m, v)

	px, stop := planPhase(v.Planned.Execution, steps)
	pv := v
	pv.Tail, pv.Result = "", nil
	phaseLine(m, pv, px, class, nil, stepTarget(stop))
	for _, st := range steps {
		if r := stepResult(st.Execution); r != nil && r.Snapshot != "" {
			snapshotLine(m, r.Snapshot, st.Execution.Position, stepTarget(st))
		}
	}
	if px.State.Terminal() {
		if r := stepResult(stop.Execution); r != nil {
			r.Snapshot = "" // shown above, with the step it was taken before
			resultDetails(m, v, r, stepTarget(stop))
		}
	}
}

// stepLine renders one step: its mark, what it does where, its class and
// where it stands, the snapshot the actuator takes first if any, and the
// commands as they run.
func stepLine(n int, st executions.PlannedStep, budget int) (plain, htm string) {
	x := st.Execution
	t := stepTarget(st)
	class, _ := policy.ParseClass(x.RiskClass)
	mark, state := stepState(x)
	what := stepVerb(x) + " " + t.display
	slug := ""
	if t.slug != "" && t.slug != t.display {
		slug = " (" + t.slug + ")"
	}
	plain = fmt.Sprintf("%d. %s %s%s · %s · %s\n", n, mark, what, slug, RiskBadge(class), state)
	htm = fmt.Sprintf("%s <strong>%s</strong> %s", mark, escape(stepVerb(x)), escape(t.display))
	if slug != "" {
		htm += " (" + codeSpan(t.slug) + ")"
	}
	htm += " · " + escape(RiskBadge(class)) + " · " + escape(state)
	for _, fact := range stepFacts(st, t.vmid) {
		plain += "    " + fact + "\n"
		htm += "<br>\n" + escape(fact)
	}
	cmds, cut := cutHead(strings.Join(x.Steps, "\n"), budget)
	if cut {
		cmds += "\n… (cut short here; the status page shows all of it)"
	}
	for line := range strings.SplitSeq(cmds, "\n") {
		plain += "    " + line + "\n"
		htm += "<br>\n" + codeSpan(line)
	}
	return plain, htm
}

// stepState is a step's mark and a few words on where it stands.
func stepState(x store.Execution) (mark, words string) {
	r := stepResult(x)
	took := ""
	if r != nil && !r.StartedAt.IsZero() && r.FinishedAt.After(r.StartedAt) {
		took = " in " + humantime.Duration(r.FinishedAt.Sub(r.StartedAt))
	}
	switch x.State {
	case store.StateAwaitingApproval:
		return "⏳", "awaiting approval"
	case store.StateWaiting:
		return "⏳", fmt.Sprintf("waiting for step %d", x.Position-1)
	case store.StateApproved, store.StateDispatched:
		return "⏳", "queued"
	case store.StateRunning:
		if last := lastLine(x.ProgressTail); last != "" {
			return "🔄", "running: " + last
		}
		return "🔄", "running"
	case store.StateSucceeded:
		return "✅", "succeeded" + took
	case store.StateFailed:
		return "❌", "failed" + took + cmp.Or(": "+firstLineOf(x.Error), "")
	case store.StateOutcomeUnknown:
		return "❓", "outcome unknown"
	case store.StateReconciled:
		return "🧾", "reconciled by an operator"
	case store.StateSkipped:
		return "⏭", "skipped"
	case store.StateDenied, store.StateExpired, store.StateCancelled:
		return "⏭", "not run (plan " + string(x.State) + ")"
	}
	return "•", string(x.State)
}

// snapshotState says how the snapshot before a step went, from the
// step's phases.
func snapshotState(x store.Execution) string {
	if r := stepResult(x); r != nil {
		for _, ph := range r.Phases {
			if ph.Name != "snapshot" {
				continue
			}
			if ph.Status == tasks.StatusSucceeded {
				if policy.ValidateSnapshotName(r.Snapshot) != nil {
					return ": ✅ taken"
				}
				return ": ✅ " + r.Snapshot
			}
			if r.FailedPhase == "snapshot" {
				return ": ❌ it failed, so the step did not run"
			}
			return ": ❌ none was taken, and the step went on without one"
		}
	}
	if x.State == store.StateRunning {
		return ": 🔄"
	}
	return ""
}

// snapshotLine says a snapshot was taken before a step, and how to undo
// what followed.
func snapshotLine(m *bodies, snapshot string, position int, t cardTarget) {
	if policy.ValidateSnapshotName(snapshot) != nil {
		// Not a name pct accepts, so no rollback could name it.
		p := fmt.Sprintf("📸 A snapshot was taken before step %d, under a name that is not a valid snapshot name; see the status page.", position)
		m.para(p, escape(p))
		return
	}
	p := fmt.Sprintf("📸 Snapshot %s was taken before step %d.", snapshot, position)
	h := fmt.Sprintf("📸 Snapshot %s was taken before step %d.", codeSpan(snapshot), position)
	if slug := t.revertSlug(); slug != "" {
		hint := "rollback " + slug + " " + snapshot
		p += " To undo: " + hint
		h += " To undo: " + codeSpan(hint)
	}
	m.para(p, h)
}

// planPhase is where a plan of several steps stands, as one execution
// the phase line can show: its first step (head, with the plan's decision
// and votes), with the state, position, error and output of the step that
// decides it. stop is that step.
func planPhase(head store.Execution, steps []executions.PlannedStep) (store.Execution, executions.PlannedStep) {
	at := len(steps) - 1
	state := store.StateSucceeded
	switch head.State {
	case store.StateAwaitingApproval, store.StateDenied, store.StateExpired:
		at, state = 0, head.State
	default:
		for i, st := range steps {
			if st.Execution.State == store.StateSucceeded {
				continue
			}
			at, state = i, st.Execution.State
			if state == store.StateWaiting {
				state = store.StateApproved // moving on to it
			}
			break
		}
	}
	stop := steps[at]
	px := head
	px.State, px.Position = state, stop.Execution.Position
	px.Error, px.ProgressTail, px.Result = stop.Execution.Error, stop.Execution.ProgressTail, nil
	return px, stop
}

// lastLine is the last non-empty line of output, redacted and cut short.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "== ") {
			return clip(redact.String(l), stepNoteBytes)
		}
	}
	return ""
}

func firstLineOf(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return clip(redact.String(s), stepNoteBytes)
}

// planElapsed is how long a plan has run: from its approval to its last
// step's latest change.
func planElapsed(steps []executions.PlannedStep, approvedAt time.Time) time.Duration {
	var last time.Time
	for _, st := range steps {
		if st.Execution.State != store.StateWaiting && st.Execution.UpdatedAt.After(last) {
			last = st.Execution.UpdatedAt
		}
	}
	if last.Before(approvedAt) {
		return 0
	}
	return last.Sub(approvedAt)
}
