package bot

import (
	"cmp"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/humantime"
	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// CardView is everything a plan card shows, for its first post and each
// edit.
type CardView struct {
	// Planned is the execution with its risk, blast radius, phrase and
	// target entity.
	Planned executions.Planned
	// Host, VMID and TargetName describe the resolved target; zero values
	// are filled from Planned.Target.
	Host       string
	VMID       int
	TargetName string
	// ApprovedBy and DecidedMethod override the execution's approval.
	ApprovedBy    string
	DecidedMethod string
	// Elapsed is how long the execution has run, or ran.
	Elapsed time.Duration
	// Tail is the live output; empty means the execution's progress tail.
	Tail string
	// Result is the actuator's final word; nil means the one stored on the
	// execution, if any.
	Result *tasks.Result
	// StatusURL is the status page's address; the card links to its
	// execution's page there. http(s) only, may be empty.
	StatusURL string
	// Now is the time the card is rendered at, for the expiry.
	Now time.Time
	// VerifiedOnly says the room takes approvals only from verified
	// sessions, encrypted: a reaction, sent in the clear, does not count.
	VerifiedOnly bool
	// Quorum is how many operators must type a destructive plan's phrase;
	// 0 or 1 means one.
	Quorum int
	// Preview is what the actuator read of what the plan will change;
	// StepPreviews, of a plan of several steps, each step's, in order.
	Preview      CardPreview
	StepPreviews []CardPreview
	// OwnPath are the entities between Nomos and its homeserver
	// (Config.OwnPath): a card that takes one down warns that the room
	// may go quiet.
	OwnPath []string
	// HostGuests are the containers and VMs on the node a node_reboot
	// plan reboots, as the fleet last saw them; read only for such a plan
	// awaiting its decision.
	HostGuests []store.Entity
	// Standing is the window whose standing approval the plan runs under,
	// when it does (its approval's method is standing).
	Standing *store.Window
}

// Limits that keep a card far below Matrix's 64 KiB event size.
const (
	tailLines     = 15
	tailBytes     = 1500
	stepsBytes    = executions.ShownStepsBytes
	errorBytes    = 600
	noteBytes     = 300
	maxNotes      = 8
	maxBlast      = 8
	maxReasonText = 300
)

// riskBadges gives each class an emoji that reads at a glance.
var riskBadges = map[policy.Class]string{
	policy.ReadOnly:       "🟢",
	policy.ReversibleLow:  "🟡",
	policy.ConfigMutation: "🟠",
	policy.Destructive:    "🔴",
}

// RiskBadge returns the class with its emoji, e.g. "🔴 destructive".
func RiskBadge(c policy.Class) string {
	if b, ok := riskBadges[c]; ok {
		return b + " " + c.String()
	}
	return "⚪ unclassified"
}

// bodies builds a message's plain and HTML bodies side by side.
type bodies struct{ plain, html strings.Builder }

func (m *bodies) para(plain, htm string) {
	m.plain.WriteString(plain + "\n")
	m.html.WriteString("<p>" + htm + "</p>\n")
}

// code adds a preformatted block; text is escaped here.
func (m *bodies) code(text string) {
	for line := range strings.SplitSeq(text, "\n") {
		m.plain.WriteString("    " + line + "\n")
	}
	m.html.WriteString("<pre><code>" + escape(text) + "</code></pre>\n")
}

func (m *bodies) list(items []string, htmItems []string) {
	for _, it := range items {
		m.plain.WriteString("  • " + it + "\n")
	}
	m.html.WriteString("<ul>\n")
	for _, it := range htmItems {
		m.html.WriteString("<li>" + it + "</li>\n")
	}
	m.html.WriteString("</ul>\n")
}

func (m *bodies) done() (plain, html string) {
	return strings.TrimRight(m.plain.String(), "\n"), strings.TrimRight(m.html.String(), "\n")
}

func escape(s string) string { return html.EscapeString(s) }

func codeSpan(s string) string { return "<code>" + escape(s) + "</code>" }

// RenderCard renders a plan card: what will run where, its risk and blast
// radius, how to decide, and where the execution stands. Every value is
// escaped for HTML and every output is redacted.
func RenderCard(v CardView) (plain, html string) {
	x := v.Planned.Execution
	t := resolveTarget(v)
	class := v.Planned.Risk.Class
	if !class.Valid() {
		class, _ = policy.ParseClass(x.GateClass())
	}
	res := v.Result
	if res == nil && len(x.Result) > 0 {
		var r tasks.Result
		if json.Unmarshal(x.Result, &r) == nil {
			res = &r
		}
	}

	var m bodies
	headLines(&m, v, t, class)
	standingLines(&m, v)
	if len(v.Planned.Steps) > 0 {
		renderPlan(&m, v, class, t)
		return m.done()
	}
	commandLines(&m, v, t)
	willChange(&m, v, t)
	phaseLine(&m, v, x, class, res, t)
	if res != nil {
		resultDetails(&m, v, res, t)
	}
	detailsLink(&m, v)
	return m.done()
}

// headLines adds the card's title, why it was asked for, its target, risk
// and blast radius.
func headLines(m *bodies, v CardView, t cardTarget, class policy.Class) {
	x := v.Planned.Execution
	verb := x.Action
	if spec, err := policy.Lookup(policy.Action(x.Action)); err == nil {
		verb = spec.Verb
	}
	title := "Plan"
	if x.PlanCode != "" {
		title += " " + x.PlanCode
	}
	what := verb + " " + t.display
	if len(v.Planned.Steps) > 0 {
		what = planTitle(v.Planned.Steps)
	}
	m.para(title+": "+what, "<strong>"+escape(title)+": "+escape(what)+"</strong>")

	// Why an agent or an MCP client asked, in its words.
	if why := strings.TrimSpace(x.Reason); why != "" {
		why = clip(redact.String(why), maxReasonText)
		asker := askerText(x)
		m.para("Why: "+why+" (asked by "+asker+")",
			"<strong>Why:</strong> "+escape(why)+" (asked by "+escape(asker)+")")
	}

	targetPlain, targetHTML := t.describe()
	m.plain.WriteString("Target: " + targetPlain + "\n")
	riskPlain := "Risk: " + RiskBadge(class)
	riskHTML := "<strong>Risk:</strong> " + escape(RiskBadge(class))
	if len(v.Planned.Risk.Reasons) > 0 {
		reasons := clip(redact.String(strings.Join(v.Planned.Risk.Reasons, "; ")), maxReasonText)
		riskPlain += " — " + reasons
		riskHTML += " — " + escape(reasons)
	}
	blastPlain, blastHTML := blastLine(v.Planned.Blast)
	m.plain.WriteString(riskPlain + "\n" + "Blast radius: " + blastPlain + "\n")
	m.html.WriteString("<p><strong>Target:</strong> " + targetHTML + "<br>\n" + riskHTML + "<br>\n" +
		"<strong>Blast radius:</strong> " + blastHTML + "</p>\n")
}

// commandLines adds the exact commands of a one-action card, after the
// snapshot that comes first when there is one.
func commandLines(m *bodies, v CardView, t cardTarget) {
	x := v.Planned.Execution
	factLines(m, v, t.vmid)
	if len(x.Steps) == 0 {
		return
	}
	where := "Runs"
	if t.host != "" {
		where += " on " + t.host
	}
	m.para(where+":", "<strong>"+escape(where)+":</strong>")
	// Never redacted: a card shows exactly what runs. The gate refuses a
	// plan whose steps look like they hold a secret.
	steps, cut := cutHead(strings.Join(x.Steps, "\n"), stepsBytes)
	if cut {
		steps += "\n… (plan cut short here; the status page shows all of it)"
	}
	m.code(steps)
}

// cardTarget is the resolved target as a card shows it.
type cardTarget struct {
	slug, typ, name, host, display string
	vmid                           int
	// container is the slug of the container a service target runs in.
	container string
}

func resolveTarget(v CardView) cardTarget {
	e := v.Planned.Target
	t := cardTarget{slug: cmp.Or(e.Slug, v.Planned.Execution.TargetSlug), typ: e.Type}
	if t.typ == "" {
		t.typ, _, _ = strings.Cut(t.slug, ":")
	}
	_, slugName, _ := strings.Cut(t.slug, ":")
	t.name = cmp.Or(v.TargetName, e.Name, slugName)
	t.host = cmp.Or(v.Host, e.AttrString("host"))
	if t.host == "" && t.typ == "host" {
		t.host = t.name
	}
	t.vmid = v.VMID
	t.container = e.AttrString("container")
	if t.vmid == 0 {
		t.vmid = e.AttrInt("vmid")
	}
	if t.vmid == 0 && policy.IsGuest(policy.TargetType(t.typ)) {
		_, t.vmid, _ = policy.ParseContainerName(slugName)
	}
	t.display = cmp.Or(t.name, t.slug, "(unknown target)")
	return t
}

// describe says what the target is: "jellyfin (service:jellyfin) · CT 101
// · host strong".
func (t cardTarget) describe() (plain, htm string) {
	plain, htm = t.display, "<strong>"+escape(t.display)+"</strong>"
	if t.slug != "" && t.slug != t.display {
		plain += " (" + t.slug + ")"
		htm += " (" + codeSpan(t.slug) + ")"
	}
	if t.vmid != 0 {
		kind := " · CT "
		if t.typ == "vm" {
			kind = " · VM "
		}
		s := kind + strconv.Itoa(t.vmid)
		plain, htm = plain+s, htm+escape(s)
	}
	if t.host != "" && t.typ != "host" {
		s := " · host " + t.host
		plain, htm = plain+s, htm+escape(s)
	}
	return plain, htm
}

// revertSlug is the container a revert hint names.
func (t cardTarget) revertSlug() string {
	switch {
	case t.typ == "lxc" && t.slug != "":
		return t.slug
	case t.container != "":
		return t.container
	}
	return ""
}

// blastLine lists who else is affected, nearest first, capped.
func blastLine(blast []policy.Affected) (plain, htm string) {
	if len(blast) == 0 {
		return "none", "none"
	}
	var ps, hs []string
	for i, a := range blast {
		if i == maxBlast {
			more := fmt.Sprintf("and %d more", len(blast)-maxBlast)
			ps, hs = append(ps, more), append(hs, more)
			break
		}
		how := viaText(a)
		ps = append(ps, a.Slug+how)
		hs = append(hs, codeSpan(a.Slug)+escape(how))
	}
	return strings.Join(ps, ", "), strings.Join(hs, ", ")
}

// viaText says in a few words how an affected entity is reached.
func viaText(a policy.Affected) string {
	switch a.Via {
	case policy.EdgeHosts:
		return " (on " + a.From + ")"
	case policy.EdgeRuns:
		return " (in " + a.From + ")"
	case policy.EdgeDependsOn:
		return " (needs " + a.From + ")"
	case policy.EdgeRoutesTo:
		return " (behind " + a.From + ")"
	}
	return ""
}

// phaseLine adds the card's status line for the execution's state, and
// what goes with that state: how to decide, the latest output, the error.
func phaseLine(m *bodies, v CardView, x store.Execution, class policy.Class, res *tasks.Result, t cardTarget) {
	by, method := deciderOf(v, x)
	approved := approvedText(by, method, class)
	elapsed := v.Elapsed
	if res != nil && !res.StartedAt.IsZero() && res.FinishedAt.After(res.StartedAt) {
		elapsed = res.FinishedAt.Sub(res.StartedAt)
	}
	steps := len(v.Planned.Steps)

	switch x.State {
	case store.StateAwaitingApproval:
		awaitingLines(m, v, x, class)
	case store.StateApproved:
		m.status("👍", strings.ToUpper(approved[:1])+approved[1:], "queuing")
	case store.StateDispatched:
		m.status("📤", "queued", approved+"; waiting for the actuator to start")
	case store.StateRunning:
		rest := approved
		if elapsed > 0 {
			rest = "for " + humantime.Duration(elapsed) + "; " + approved
		}
		what := "running"
		if steps > 0 {
			what = fmt.Sprintf("running step %d of %d", x.Position, steps)
		}
		m.status("⚙️", what, rest)
		addOutput(m, cmp.Or(v.Tail, x.ProgressTail), "Latest output", executionURL(v))
	case store.StateSucceeded:
		rest := approved
		if elapsed > 0 {
			rest = "in " + humantime.Duration(elapsed) + "; " + approved
		}
		m.status("✅", "succeeded", rest)
	case store.StateFailed:
		failedLines(m, x, steps, res, elapsed, approved)
	case store.StateOutcomeUnknown:
		unknownLines(m, x, steps, approved, t)
	case store.StateReconciled:
		m.status("🧾", "reconciled", "an operator checked the outcome and recorded it")
	case store.StateDenied:
		denied := "denied"
		if by != "" {
			denied += " by " + by
			if method != "" {
				denied += " (" + method + ")"
			}
		}
		m.status("🚫", denied, "nothing ran")
	case store.StateExpired:
		m.status("⌛", "expired", "no decision by "+absTime(x.ExpiresAt, v.Now)+"; nothing ran. Ask again for a fresh plan.")
	case store.StateCancelled:
		if x.Position > 1 {
			m.status("✖️", "cancelled", fmt.Sprintf("steps %d to %d did not run", x.Position, steps))
			break
		}
		m.status("✖️", "cancelled", "nothing ran")
	default:
		m.status("•", string(x.State), "")
	}
}

// status adds the card's status line: an emoji, its headline in bold and
// the rest after a dash.
func (m *bodies) status(emoji, head, rest string) {
	p := "Status: " + emoji + " " + head
	h := "<strong>Status:</strong> " + emoji + " <strong>" + escape(head) + "</strong>"
	if rest != "" {
		p += " — " + rest
		h += " — " + escape(rest)
	}
	m.para(p, h)
}

// deciderOf is who decided the plan and how; a quorum's approval names
// every voter.
func deciderOf(v CardView, x store.Execution) (by, method string) {
	by, method = v.ApprovedBy, v.DecidedMethod
	if x.Approval != nil {
		by, method = cmp.Or(by, x.Approval.DecidedBy), cmp.Or(method, x.Approval.Method)
	}
	if len(x.Votes) > 1 && x.Approval != nil && x.Approval.Decision == "approved" && by == x.Approval.DecidedBy {
		by = voterNames(x.Votes)
	}
	return by, method
}

func voterNames(votes []store.Vote) string {
	voters := make([]string, len(votes))
	for i, vt := range votes {
		voters[i] = vt.Voter
	}
	return strings.Join(voters, " and ")
}

// approvedText is "approved by @ann (reaction)" or "approved automatically
// (safe)".
func approvedText(by, method string, class policy.Class) string {
	approved := "approved"
	if method == string(policy.MethodAuto) {
		approved += " automatically (" + class.String() + ")"
	} else if method == executions.MethodStanding {
		approved += " under a standing approval"
	} else if by != "" {
		approved += " by " + by
		if method != "" {
			approved += " (" + method + ")"
		}
	}
	return approved
}

// awaitingLines adds the status of a plan waiting for a decision: when it
// expires, the quorum so far, and how to decide.
func awaitingLines(m *bodies, v CardView, x store.Execution, class policy.Class) {
	m.status("⏳", "awaiting approval", expiry(x.ExpiresAt, v.Now))
	if len(x.Votes) > 0 {
		p := fmt.Sprintf("Approved so far by %s (%d of %d); another operator must type the phrase too.",
			voterNames(x.Votes), len(x.Votes), max(v.Quorum, len(x.Votes)+1))
		m.para(p, escape(p))
	}
	howToDecide(m, v.Planned, class, v.VerifiedOnly, v.Quorum)
}

// failedLines adds the status of a failed execution: where and after how
// long it failed, the redacted error and the steps that did not run.
func failedLines(m *bodies, x store.Execution, steps int, res *tasks.Result, elapsed time.Duration, approved string) {
	what := "failed"
	if steps > 0 {
		what += fmt.Sprintf(" at step %d of %d", x.Position, steps)
	}
	if res != nil && res.FailedPhase != "" {
		what += " in phase " + res.FailedPhase
	}
	if elapsed > 0 {
		what += " after " + humantime.Duration(elapsed)
	}
	m.status("❌", what, approved)
	errText := x.Error
	if errText == "" && res != nil {
		errText = res.Error
	}
	if errText != "" {
		e := clip(redact.String(errText), errorBytes)
		m.para("Error: "+e, "<strong>Error:</strong> "+escape(e))
	}
	stoppedHere(m, x.Position, steps)
}

// unknownLines adds the status of an execution whose result never came,
// and how an operator records what they find.
func unknownLines(m *bodies, x store.Execution, steps int, approved string, t cardTarget) {
	what := "outcome unknown"
	if steps > 0 {
		what += fmt.Sprintf(" at step %d of %d", x.Position, steps)
	}
	m.status("❓", what, approved)
	stoppedHere(m, x.Position, steps)
	code := cmp.Or(x.PlanCode, "<code>")
	p := "The actuator started this but its result never arrived, so it may or may not have run. " +
		"It will not be retried on its own. Check " + t.display + ", then record what you found: resolve " + code + " <what happened>"
	h := "The actuator started this but its result never arrived, so it may or may not have run. " +
		"It will not be retried on its own. Check " + escape(t.display) + ", then record what you found: " +
		codeSpan("resolve "+code+" <what happened>")
	m.para(p, h)
}

// stoppedHere says which steps of a plan of n steps did not run because
// the one at position stopped it.
func stoppedHere(m *bodies, position, n int) {
	if position < 1 || position >= n {
		return
	}
	p := fmt.Sprintf("The plan stopped here: steps %d to %d were skipped and did not run.", position+1, n)
	if position+1 == n {
		p = fmt.Sprintf("The plan stopped here: step %d was skipped and did not run.", n)
	}
	m.para(p, escape(p))
}

// howToDecide tells the room how to approve or deny, naming only what
// works for this plan in this room: a destructive plan only its phrase,
// exactly; another plan a reaction only where reactions count, and never
// a phrase.
func howToDecide(m *bodies, p executions.Planned, class policy.Class, verifiedOnly bool, quorum int) {
	const deny = "Deny: react ❌ or 👎, or reply \"no\"."
	const denyHTML = "Deny: react ❌ or 👎, or reply “no”."
	if class == policy.Destructive {
		if p.Phrase == "" {
			m.para("⚠️ Destructive. This plan needs a typed confirmation phrase, which I could not derive; ask again for a fresh plan. "+deny,
				"⚠️ <strong>Destructive.</strong> This plan needs a typed confirmation phrase, which I could not derive; ask again for a fresh plan. "+denyHTML)
			return
		}
		m.para("⚠️ Destructive. To approve, type exactly: "+p.Phrase,
			"⚠️ <strong>Destructive.</strong> To approve, type exactly: "+codeSpan(p.Phrase))
		if verifiedOnly {
			q := "Type it from a verified session: this room is encrypted, and only your verified sessions approve here."
			m.para(q, escape(q))
		}
		if named := destructiveSteps(p.Steps); len(p.Steps) > 1 && named != "" {
			q := "It names each destructive step: " + named + "."
			m.para(q, escape(q))
		}
		if quorum > 1 {
			q := fmt.Sprintf("It needs the phrase from %d different operators.", quorum)
			if len(p.Steps) > 1 {
				q = fmt.Sprintf("It needs the phrase from %d different operators, and each one's phrase approves all %d steps.", quorum, len(p.Steps))
			}
			m.para(q, escape(q))
		}
		m.para("A reaction or a \"yes\" does not approve this plan. "+deny,
			"A reaction or a “yes” does not approve this plan. "+denyHTML)
		return
	}
	how, howHTML := approveHow(cmp.Or(p.Execution.PlanCode, "<code>"), "this card", verifiedOnly)
	m.para("Approve: "+how+". "+deny, "Approve: "+howHTML+". "+denyHTML)
}

// approveHow says how to approve a plan that is not destructive, whose
// card is called card: where approvals must come from a verified session
// (an encrypted room), a reply or the code, since a reaction (sent in the
// clear) does not count there; elsewhere a reaction first.
func approveHow(code, card string, verifiedOnly bool) (plain, html string) {
	if verifiedOnly {
		return "reply \"go ahead\" to " + card + ", or say approve " + code + ", from a verified session (this room is encrypted, and a reaction, sent unencrypted, does not approve)",
			"reply “go ahead” to " + card + ", or say " + codeSpan("approve "+code) + ", from a verified session (this room is encrypted, and a reaction, sent unencrypted, does not approve)"
	}
	return "react ✅ or 👍, reply \"go ahead\", or say approve " + code,
		"react ✅ or 👍, reply “go ahead”, or say " + codeSpan("approve "+code)
}

// destructiveSteps lists a plan's destructive steps as its phrase names
// them, with their place in the plan: "1. rollback gitea (lxc:strong/102),
// 3. destroy jellyfin (lxc:strong/101)".
func destructiveSteps(steps []executions.PlannedStep) string {
	var named []string
	for i, st := range steps {
		if st.Execution.RiskClass != policy.Destructive.String() {
			continue
		}
		t := stepTarget(st)
		s := fmt.Sprintf("%d. %s %s", i+1, stepVerb(st.Execution), t.display)
		if t.slug != "" && t.slug != t.display {
			s += " (" + t.slug + ")"
		}
		named = append(named, s)
	}
	return strings.Join(named, ", ")
}

// expiry is "expires in 29m (14:35 UTC)".
func expiry(at, now time.Time) string {
	if at.IsZero() {
		return ""
	}
	if now.IsZero() {
		return "expires at " + absTime(at, now)
	}
	left := at.Sub(now)
	if left <= 0 {
		return "expired at " + absTime(at, now)
	}
	return "expires in " + humantime.Duration(left.Round(time.Second)) + " (" + absTime(at, now) + ")"
}

// absTime is "14:35 UTC", with the date when it is not now's UTC day.
func absTime(at, now time.Time) string {
	at = at.UTC()
	if !now.IsZero() && at.Format(time.DateOnly) == now.UTC().Format(time.DateOnly) {
		return at.Format("15:04 UTC")
	}
	return at.Format("2006-01-02 15:04 UTC")
}

// addOutput adds a redacted output tail and, when it was cut and the
// execution has a page on the status page (pageURL), a link to the rest.
func addOutput(m *bodies, text, label, pageURL string) {
	text = strings.TrimRight(text, "\n")
	if strings.TrimSpace(text) == "" {
		return
	}
	tail, cut := outputTail(redact.String(text), tailLines, tailBytes)
	if cut {
		label += " (last lines)"
	}
	m.para(label+":", "<strong>"+escape(label)+":</strong>")
	m.code(tail)
	if u := safeURL(pageURL); cut && u != "" {
		m.para("Full output: "+u, `<a href="`+escape(u)+`">Full output on the status page</a>`)
	}
}

// resultDetails adds what the final edit shows: phases, snapshot and
// revert hint, notes, and the output.
func resultDetails(m *bodies, v CardView, res *tasks.Result, t cardTarget) {
	if len(res.Phases) > 0 {
		var ps, hs []string
		for i, ph := range res.Phases {
			if i == 12 {
				more := fmt.Sprintf("and %d more", len(res.Phases)-12)
				ps, hs = append(ps, more), append(hs, escape(more))
				break
			}
			s := clip(ph.Name, 60) + " " + phaseMark(ph)
			ps, hs = append(ps, s), append(hs, escape(s))
		}
		m.para("Phases: "+strings.Join(ps, " · "), "<strong>Phases:</strong> "+strings.Join(hs, " · "))
	}
	if res.Snapshot != "" {
		p := "📸 Snapshot " + res.Snapshot + " was taken first."
		h := "📸 Snapshot " + codeSpan(res.Snapshot) + " was taken first."
		if slug := t.revertSlug(); slug != "" {
			hint := "rollback " + slug + " " + res.Snapshot
			p += " To undo: " + hint
			h += " To undo: " + codeSpan(hint)
		}
		m.para(p, h)
	}
	if len(res.Notes) > 0 {
		var ps, hs []string
		for i, n := range res.Notes {
			if i == maxNotes {
				more := fmt.Sprintf("and %d more", len(res.Notes)-maxNotes)
				ps, hs = append(ps, more), append(hs, escape(more))
				break
			}
			n = clip(redact.String(n), noteBytes)
			ps, hs = append(ps, n), append(hs, escape(n))
		}
		m.para("Notes:", "<strong>Notes:</strong>")
		m.list(ps, hs)
	}
	addOutput(m, res.Output, "Output", executionURL(v))
}

func phaseMark(ph tasks.Phase) string {
	var s string
	switch ph.Status {
	case tasks.StatusSucceeded:
		s = "✅"
	case tasks.StatusFailed:
		s = "❌"
		if ph.ExitCode != 0 {
			s += " exit " + strconv.Itoa(ph.ExitCode)
		}
	case tasks.StatusOutcomeUnknown:
		s = "❓"
	default:
		s = "•"
	}
	if ph.Elapsed > 0 {
		s += " " + humantime.Duration(time.Duration(ph.Elapsed))
	}
	return s
}

// outputTail returns the last lines of text, at most maxLines lines and maxBytes
// bytes, cut at a line (or, for one long line, a rune) boundary, and
// whether anything was cut.
func outputTail(text string, maxLines, maxBytes int) (string, bool) {
	cut := false
	lines := strings.Split(text, "\n")
	if len(lines) > maxLines {
		lines, cut = lines[len(lines)-maxLines:], true
	}
	text = strings.Join(lines, "\n")
	if len(text) > maxBytes {
		cut = true
		text = text[len(text)-maxBytes:]
		if i := strings.IndexByte(text, '\n'); i >= 0 && i < len(text)-1 {
			text = text[i+1:]
		} else {
			for len(text) > 0 && !utf8.RuneStart(text[0]) {
				text = text[1:]
			}
		}
	}
	if cut {
		text = "…\n" + text
	}
	return text, cut
}

// cutHead returns the first maxBytes of text, cut at a rune boundary.
func cutHead(text string, maxBytes int) (string, bool) {
	if len(text) <= maxBytes {
		return text, false
	}
	i := max(maxBytes, 0)
	for i > 0 && !utf8.RuneStart(text[i]) {
		i--
	}
	return text[:i], true
}

// clip shortens s to at most n bytes, at a rune boundary, with an ellipsis.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s, _ = cutHead(s, n)
	return s + "…"
}

// safeURL returns u if it is an absolute http(s) URL, else "".
func safeURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return ""
	}
	return p.String()
}

// standingLines say which standing approval a plan runs under, who
// granted it, for what and until when, and link its window on the status
// page.
func standingLines(m *bodies, v CardView) {
	w := v.Standing
	if w == nil || w.Standing == nil {
		return
	}
	sa := w.Standing
	what := fmt.Sprintf("%s on %s", sa.MaxClass, strings.Join(w.TargetSlugs, ", "))
	granted := ""
	if len(sa.ApprovedBy) > 0 {
		granted = " granted by " + strings.Join(sa.ApprovedBy, " and ")
	}
	p := fmt.Sprintf("Runs without a per-plan approval, under standing approval %s of window %s (%s)%s, until %s: %s.",
		sa.Code, w.Name, what, granted, absTime(sa.ExpiresAt, v.Now), w.Reason)
	h := fmt.Sprintf("Runs without a per-plan approval, under standing approval %s of window %s (%s)%s, until %s: %s.",
		codeSpan(sa.Code), codeSpan(w.Name), escape(what), escape(granted), escape(absTime(sa.ExpiresAt, v.Now)), escape(w.Reason))
	if u := windowURL(v.StatusURL, w.ID.String()); u != "" {
		p += " " + u
		h += fmt.Sprintf(` <a href="%s">The window</a>`, escape(u))
	}
	m.para("🗓️ "+p, "🗓️ "+h)
}
