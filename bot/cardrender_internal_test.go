package bot

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/net/html"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

var cardNow = time.Date(2026, 7, 6, 14, 6, 0, 0, time.UTC)

// cardSetup returns a restart plan for service:jellyfin in CT 101 on
// strong, waiting for approval; tests change what they need.
func cardSetup(t *testing.T) CardView {
	t.Helper()
	return CardView{
		Planned: executions.Planned{
			Execution: store.Execution{
				Request: store.Request{
					ID: uuid.MustParse("01900000-0000-7000-8000-000000000001"), Action: "restart",
					TargetSlug: "service:jellyfin",
					Steps:      []string{"pct exec 101 -- systemctl restart jellyfin.service"},
					RiskClass:  "reversible_low", PlanCode: "k7q2", State: store.StateAwaitingApproval,
					ExpiresAt: cardNow.Add(29 * time.Minute),
				},
				CreatedAt: cardNow.Add(-time.Minute),
			},
			Risk:  policy.Risk{Class: policy.ReversibleLow, Reasons: []string{"restarts jellyfin.service"}},
			Blast: []policy.Affected{{Slug: "service:caddy", Via: policy.EdgeRoutesTo, From: "service:jellyfin", Depth: 1}},
			Target: store.Entity{Slug: "service:jellyfin", Type: "service", Name: "jellyfin",
				Attrs: map[string]any{"host": "strong", "vmid": float64(101), "unit": "jellyfin.service", "container": "lxc:strong/101"}},
		},
		Now: cardNow,
	}
}

func approved(v *CardView, state store.ExecutionState) {
	v.Planned.Execution.State = state
	v.Planned.Execution.Approval = &store.Approval{Decision: "approved", DecidedBy: "@op:example.org", Method: "reaction", DecidedAt: cardNow}
}

func lines(n int, format string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, format+"\n", i)
	}
	return b.String()
}

func TestRenderCard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		change    func(v *CardView)
		want      []string // in both plain and HTML
		wantHTML  []string
		wantPlain []string
		not       []string // in neither
	}{
		{
			name: "awaiting approval",
			want: []string{"Plan k7q2: restart jellyfin", "service:jellyfin", "CT 101", "host strong",
				"🟡 reversible_low", "restarts jellyfin.service", "service:caddy (behind service:jellyfin)",
				"pct exec 101 -- systemctl restart jellyfin.service", "awaiting approval",
				"expires in 29m (14:35 UTC)", "✅ or 👍", "go ahead", "approve k7q2", "❌ or 👎"},
			wantHTML: []string{"<pre><code>pct exec 101 -- systemctl restart jellyfin.service</code></pre>", "<code>service:caddy</code>"},
			not:      []string{"type exactly", "Destructive", "verified session"},
		},
		{
			name:     "in an encrypted room only a verified session's reply or code approves",
			change:   func(v *CardView) { v.VerifiedOnly = true },
			want:     []string{"reply", "go ahead", "approve k7q2", "from a verified session", "a reaction, sent unencrypted, does not approve", "❌ or 👎"},
			wantHTML: []string{"<code>approve k7q2</code>"},
			not:      []string{"react ✅"},
		},
		{
			name:   "no blast radius",
			change: func(v *CardView) { v.Planned.Blast = nil },
			want:   []string{"Blast radius", "none"},
		},
		{
			name: "blast radius is capped",
			change: func(v *CardView) {
				v.Planned.Blast = nil
				for i := range 12 {
					v.Planned.Blast = append(v.Planned.Blast, policy.Affected{Slug: fmt.Sprintf("service:s%02d", i), Via: policy.EdgeDependsOn, From: "service:jellyfin", Depth: 1})
				}
			},
			want: []string{"service:s07 (needs service:jellyfin)", "and 4 more"},
			not:  []string{"service:s08"},
		},
		{
			name: "destructive shows the phrase",
			change: func(v *CardView) {
				x := &v.Planned.Execution
				x.Action, x.TargetSlug, x.RiskClass, x.Steps = "pct_destroy", "lxc:hubris/131", "destructive", []string{"pct destroy 131"}
				x.ExpiresAt = cardNow.Add(10 * time.Minute)
				v.Planned.Risk = policy.Risk{Class: policy.Destructive, Reasons: []string{"destroys lxc:hubris/131 and its disks"}}
				v.Planned.Phrase = "destroy lxc:hubris/131 k7q2"
				v.Planned.Target = store.Entity{Slug: "lxc:hubris/131", Type: "lxc", Name: "scratch", Attrs: map[string]any{"host": "weak", "vmid": float64(131)}}
			},
			want:     []string{"Plan k7q2: destroy scratch", "(lxc:hubris/131)", "CT 131", "host weak", "🔴 destructive", "type exactly", "destroy lxc:hubris/131 k7q2", "does not approve", "expires in 10m"},
			wantHTML: []string{"<code>destroy lxc:hubris/131 k7q2</code>"},
			not:      []string{"go ahead", "✅ or 👍"},
		},
		{
			name:   "the phrase is shown only for destructive plans",
			change: func(v *CardView) { v.Planned.Phrase = "restart service:jellyfin k7q2" },
			not:    []string{"restart service:jellyfin k7q2", "type exactly"},
		},
		{
			name:   "class falls back to the stored one",
			change: func(v *CardView) { v.Planned.Risk = policy.Risk{}; v.Planned.Execution.RiskClass = "config_mutation" },
			want:   []string{"🟠 config_mutation"},
		},
		{
			name:   "approved",
			change: func(v *CardView) { approved(v, store.StateApproved) },
			want:   []string{"Approved by @op:example.org (reaction)"},
			not:    []string{"awaiting approval", "go ahead", "expires in"},
		},
		{
			name: "approved automatically",
			change: func(v *CardView) {
				approved(v, store.StateDispatched)
				v.Planned.Execution.Approval.DecidedBy, v.Planned.Execution.Approval.Method = "nomos", "auto"
				v.Planned.Risk.Class = policy.ReadOnly
			},
			want: []string{"queued", "approved automatically (read_only)", "🟢 read_only"},
		},
		{
			name: "approver from the view",
			change: func(v *CardView) {
				approved(v, store.StateDispatched)
				v.ApprovedBy, v.DecidedMethod = "@alice:example.org", "reply"
			},
			want: []string{"queued", "approved by @alice:example.org (reply)"},
		},
		{
			name: "running shows the tail and elapsed time",
			change: func(v *CardView) {
				approved(v, store.StateRunning)
				v.Elapsed = 12 * time.Second
				v.Tail = lines(40, "line %02d")
				v.StatusURL = "https://nomos.example.org/x/01900000"
			},
			want:     []string{"running", "for 12s", "line 40", "line 26", "Full output"},
			wantHTML: []string{`<a href="https://nomos.example.org/x/01900000/executions/01900000-0000-7000-8000-000000000001">Full output`},
			not:      []string{"line 25", "line 01"},
		},
		{
			name: "running falls back to the stored tail, without a link when not cut",
			change: func(v *CardView) {
				approved(v, store.StateRunning)
				v.Planned.Execution.ProgressTail = "Restarting jellyfin\n"
				v.StatusURL = "https://nomos.example.org/x/1"
			},
			want: []string{"Restarting jellyfin"},
			not:  []string{"Full output"},
		},
		{
			name: "a status link must be http",
			change: func(v *CardView) {
				approved(v, store.StateRunning)
				v.Tail = lines(40, "line %02d")
				v.StatusURL = "javascript:alert(1)"
			},
			not: []string{"javascript", "Full output", "Details", "<a "},
		},
		{
			name:     "links to the execution's page on the status page",
			change:   func(v *CardView) { v.StatusURL = "https://nomos.example.org/" },
			want:     []string{"Details"},
			wantHTML: []string{`<a href="https://nomos.example.org/executions/01900000-0000-7000-8000-000000000001">Details on the status page</a>`},
		},
		{
			name:      "the link keeps the status page's own path",
			change:    func(v *CardView) { approved(v, store.StateSucceeded); v.StatusURL = "https://lab.example.org/nomos" },
			wantPlain: []string{"Details: https://lab.example.org/nomos/executions/01900000-0000-7000-8000-000000000001"},
			wantHTML:  []string{`<a href="https://lab.example.org/nomos/executions/01900000-0000-7000-8000-000000000001">`},
		},
		{
			name: "no status page, no link",
			not:  []string{"Details", "status page", "<a "},
		},
		{
			name:   "no execution id, no link",
			change: func(v *CardView) { v.StatusURL = "https://nomos.example.org/"; v.Planned.Execution.ID = uuid.Nil },
			not:    []string{"Details", "<a "},
		},
		{
			name: "succeeded with a snapshot and notes",
			change: func(v *CardView) {
				approved(v, store.StateSucceeded)
				v.Result = &tasks.Result{Status: tasks.StatusSucceeded, Snapshot: "nomos-20260706-140700",
					Notes:     []string{"resolver was dead; switched to 1.1.1.1"},
					Phases:    []tasks.Phase{{Name: "snapshot", Status: tasks.StatusSucceeded, Elapsed: tasks.Duration(2 * time.Second)}, {Name: "restart", Status: tasks.StatusSucceeded}},
					StartedAt: cardNow, FinishedAt: cardNow.Add(14 * time.Second), Output: "ok\n"}
			},
			want:     []string{"succeeded", "in 14s", "nomos-20260706-140700", "rollback lxc:strong/101 nomos-20260706-140700", "resolver was dead; switched to 1.1.1.1", "snapshot ✅ 2s", "restart ✅"},
			wantHTML: []string{"<code>rollback lxc:strong/101 nomos-20260706-140700</code>"},
			not:      []string{"awaiting approval"},
		},
		{
			name: "the result is read from the execution",
			change: func(v *CardView) {
				approved(v, store.StateSucceeded)
				raw, _ := json.Marshal(tasks.Result{Status: tasks.StatusSucceeded, Snapshot: "pre-x1"})
				v.Planned.Execution.Result = raw
			},
			want: []string{"rollback lxc:strong/101 pre-x1"},
		},
		{
			name: "failed shows the error and the phase",
			change: func(v *CardView) {
				approved(v, store.StateFailed)
				v.Planned.Execution.Error = "apt-get exited 100"
				v.Result = &tasks.Result{Status: tasks.StatusFailed, FailedPhase: "upgrade", Error: "ignored: the execution's error wins",
					Phases: []tasks.Phase{{Name: "upgrade", Status: tasks.StatusFailed, ExitCode: 100}},
					Output: "E: Could not resolve deb.debian.org\n"}
			},
			want: []string{"failed in phase upgrade", "apt-get exited 100", "upgrade ❌ exit 100", "E: Could not resolve deb.debian.org"},
		},
		{
			name:   "outcome unknown explains and says how to reconcile",
			change: func(v *CardView) { approved(v, store.StateOutcomeUnknown) },
			want:   []string{"outcome unknown", "may or may not have run", "will not be retried", "resolve k7q2 <what happened>"},
		},
		{
			name: "denied",
			change: func(v *CardView) {
				v.Planned.Execution.State = store.StateDenied
				v.Planned.Execution.Approval = &store.Approval{Decision: "denied", DecidedBy: "@bob:example.org", Method: "reply"}
			},
			want: []string{"denied by @bob:example.org (reply)", "nothing ran"},
			not:  []string{"go ahead"},
		},
		{
			name:   "expired",
			change: func(v *CardView) { v.Planned.Execution.State = store.StateExpired; v.Now = cardNow.Add(time.Hour) },
			want:   []string{"expired", "14:35 UTC", "nothing ran"},
			not:    []string{"go ahead"},
		},
		{
			name:   "cancelled",
			change: func(v *CardView) { v.Planned.Execution.State = store.StateCancelled },
			want:   []string{"cancelled"},
		},
		{
			name:   "reconciled",
			change: func(v *CardView) { approved(v, store.StateReconciled) },
			want:   []string{"reconciled"},
		},
		{
			name:   "expiry on another day shows the date",
			change: func(v *CardView) { v.Planned.Execution.ExpiresAt = cardNow.Add(30 * time.Hour) },
			want:   []string{"2026-07-07 20:06 UTC"},
		},
		{
			name:   "target details from the view",
			change: func(v *CardView) { v.Host, v.VMID, v.TargetName = "weak", 202, "jelly" },
			want:   []string{"jelly", "CT 202", "host weak", "Runs on weak"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := cardSetup(t)
			if tt.change != nil {
				tt.change(&v)
			}
			plain, htm := RenderCard(v)
			text := htmlText(t, htm)
			for _, w := range tt.want {
				if !strings.Contains(plain, w) {
					t.Errorf("plain lacks %q:\n%s", w, plain)
				}
				if !strings.Contains(text, w) {
					t.Errorf("HTML lacks %q:\n%s", w, htm)
				}
			}
			for _, w := range tt.wantHTML {
				if !strings.Contains(htm, w) {
					t.Errorf("HTML lacks %q:\n%s", w, htm)
				}
			}
			for _, w := range tt.wantPlain {
				if !strings.Contains(plain, w) {
					t.Errorf("plain lacks %q:\n%s", w, plain)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(plain, w) || strings.Contains(htm, w) {
					t.Errorf("card shows %q, which it must not:\nplain:\n%s\nhtml:\n%s", w, plain, htm)
				}
			}
			checkHTML(t, htm)
		})
	}
}

func TestRenderCardEscapes(t *testing.T) {
	t.Parallel()
	const evil = `<script>alert(1)</script></code></pre><img src=x onerror=alert(2)>&amp;`
	v := cardSetup(t)
	approved(&v, store.StateFailed)
	v.Planned.Target.Name = evil
	v.Planned.Target.Attrs["host"] = evil
	v.Planned.Execution.Steps = []string{"sh -c " + evil}
	v.Planned.Execution.Error = evil
	v.Planned.Execution.PlanCode = evil
	v.Planned.Risk.Reasons = []string{evil}
	v.Planned.Execution.Reason = evil
	v.Planned.Execution.RequestedBy = evil
	v.Planned.Blast = []policy.Affected{{Slug: evil, Via: policy.EdgeRuns, From: evil}}
	v.Result = &tasks.Result{Status: tasks.StatusFailed, Output: evil, Snapshot: evil, Notes: []string{evil},
		FailedPhase: evil, Phases: []tasks.Phase{{Name: evil, Status: tasks.StatusFailed}}}
	v.StatusURL = `https://x.example.org/"><script>`
	_, htm := RenderCard(v)
	for _, bad := range []string{"<script", "</code></pre><img", "<img", `"><`} {
		if strings.Contains(htm, bad) {
			t.Errorf("HTML carries unescaped %q:\n%s", bad, htm)
		}
	}
	if !strings.Contains(htm, "&lt;script&gt;") {
		t.Errorf("HTML lacks the escaped text:\n%s", htm)
	}
	checkHTML(t, htm)

	// The destructive phrase and notices escape too.
	v = cardSetup(t)
	v.Planned.Risk.Class = policy.Destructive
	v.Planned.Phrase = evil
	_, htm = RenderCard(v)
	checkHTML(t, htm)
	for _, f := range []func() (string, string){
		func() (string, string) { return NoticeNeedsPhrase(evil) },
		func() (string, string) { return NoticePhraseUnmatched(evil) },
		func() (string, string) { return NoticePhraseMismatch(evil, evil) },
		func() (string, string) { return NoticeNotOperator(evil) },
		func() (string, string) {
			return NoticeAlreadyDecided(store.Approval{Decision: "approved", DecidedBy: evil})
		},
		func() (string, string) {
			return NoticeExpired(store.Execution{Request: store.Request{PlanCode: evil}}, cardNow)
		},
		func() (string, string) {
			return NoticeNotPending(store.Execution{Request: store.Request{PlanCode: evil, State: "running"}})
		},
		func() (string, string) {
			return NoticeWhichPlan([]store.Execution{{Request: store.Request{PlanCode: evil, Action: evil, TargetSlug: evil}}}, cardNow)
		},
	} {
		_, h := f()
		if strings.Contains(h, "<script") {
			t.Errorf("notice HTML carries unescaped text: %s", h)
		}
		checkHTML(t, h)
	}
}

// TestRenderCardShowsWhyAnAgentAsked: a plan from the agent or an MCP
// client carries its reason, redacted, and who asked; an operator's own
// command has no such line.
func TestRenderCardShowsWhyAnAgentAsked(t *testing.T) {
	t.Parallel()
	v := cardSetup(t)
	plain, _ := RenderCard(v)
	if strings.Contains(plain, "Why:") {
		t.Errorf("a chat command's card has a Why line:\n%s", plain)
	}
	v.Planned.Execution.Reason = "jellyfin stopped answering; the log says token=abc123"
	v.Planned.Execution.RequestedBy, v.Planned.Execution.RequestedVia = "claude-desktop", "mcp"
	plain, htm := RenderCard(v)
	if !strings.Contains(plain, "Why: jellyfin stopped answering; the log says token=[REDACTED] (asked by claude-desktop via mcp)") {
		t.Errorf("card lacks the redacted reason and asker:\n%s", plain)
	}
	checkHTML(t, htm)
}

func TestRenderCardRedactsAndBoundsSize(t *testing.T) {
	t.Parallel()
	v := cardSetup(t)
	approved(&v, store.StateFailed)
	// Steps are never redacted (the gate refuses a plan whose steps hold
	// a secret); a long one is cut and points to the status page.
	v.Planned.Execution.Steps = []string{"pct exec 101 -- sh -c 'curl -H \"Accept: text/plain\" " + strings.Repeat("x", 20000) + "'"}
	v.Planned.Execution.Error = "login failed: password=hunter2 " + strings.Repeat("e", 5000)
	v.Result = &tasks.Result{Status: tasks.StatusFailed, Output: "connecting\nDB_PASSWORD=hunter2\n" + strings.Repeat("é", 50000),
		Notes: []string{"token: s3cr3t-t0k3n"}}
	plain, htm := RenderCard(v)
	if !strings.Contains(plain, `pct exec 101 -- sh -c 'curl -H "Accept: text/plain" xxx`) {
		t.Errorf("card does not show the step as it runs:\n%.300s", plain)
	}
	for _, secret := range []string{"hunter2", "s3cr3t-t0k3n"} {
		if strings.Contains(plain, secret) || strings.Contains(htm, secret) {
			t.Errorf("card shows the secret %q", secret)
		}
	}
	if len(plain) > 16<<10 || len(htm) > 24<<10 {
		t.Errorf("card is %d bytes plain, %d bytes HTML; want it small", len(plain), len(htm))
	}
	for _, s := range []string{plain, htm} {
		if !strings.Contains(s, "status page") {
			t.Errorf("a cut plan does not point to the status page:\n%s", s)
		}
		if !json.Valid([]byte(`"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`).Replace(s) + `"`)) {
			t.Errorf("card is not valid UTF-8 after cutting")
		}
	}
	checkHTML(t, htm)
}

func FuzzRenderCard(f *testing.F) {
	f.Add("jellyfin", "ok\n", "restarts it", "nomos-20260706-140700")
	f.Add("<script>", "</code></pre><b>", "<i>", "x\"y")
	f.Fuzz(func(t *testing.T, name, addOutput, reason, snapshot string) {
		v := cardSetup(t)
		approved(&v, store.StateSucceeded)
		v.TargetName = name
		v.Planned.Risk.Reasons = []string{reason}
		v.Result = &tasks.Result{Output: addOutput, Snapshot: snapshot, Notes: []string{reason}}
		_, htm := RenderCard(v)
		checkHTML(t, htm)
	})
}

func TestOutputTail(t *testing.T) {
	t.Parallel()
	if got, cut := outputTail("a\nb", 15, 1500); got != "a\nb" || cut {
		t.Errorf("short output: %q %v", got, cut)
	}
	got, cut := outputTail(strings.Repeat("é", 1000), 15, 1500)
	if !cut || len(got) > 1500+len("…\n") || !strings.HasPrefix(got, "…\né") {
		t.Errorf("long line: cut %v, %d bytes, starts %q", cut, len(got), got[:min(len(got), 8)])
	}
	got, _ = outputTail(lines(100, "%03d "+strings.Repeat("y", 200)), 15, 1500)
	if strings.Contains(got, "092 ") || !strings.Contains(got, "100 ") {
		t.Errorf("tail keeps whole lines within the byte budget, got:\n%s", got)
	}
}

func TestNotices(t *testing.T) {
	t.Parallel()
	plain, _ := NoticeAlreadyDecided(store.Approval{Decision: "approved", DecidedBy: "@op:example.org", DecidedAt: cardNow})
	if plain != "That plan was already approved by @op:example.org at 14:06 UTC." {
		t.Errorf("NoticeAlreadyDecided = %q", plain)
	}
	plain, htm := NoticeNeedsPhrase("destroy lxc:hubris/131 k7q2")
	if !strings.Contains(plain, "type exactly: destroy lxc:hubris/131 k7q2") || !strings.Contains(htm, "<code>destroy lxc:hubris/131 k7q2</code>") {
		t.Errorf("NoticeNeedsPhrase = %q / %q", plain, htm)
	}
	plain, _ = NoticeWhichPlan([]store.Execution{
		{Request: store.Request{PlanCode: "k7q2", Action: "restart", TargetSlug: "service:jellyfin", RiskClass: "reversible_low", ExpiresAt: cardNow.Add(5 * time.Minute)}},
		{Request: store.Request{PlanCode: "m3zt", Action: "pct_destroy", TargetSlug: "lxc:hubris/131", RiskClass: "destructive", ExpiresAt: cardNow.Add(9 * time.Minute)}},
	}, cardNow)
	for _, w := range []string{"2 plans", "won't guess", "k7q2: restart service:jellyfin", "m3zt: pct_destroy lxc:hubris/131, 🔴 destructive, expires in 9m"} {
		if !strings.Contains(plain, w) {
			t.Errorf("NoticeWhichPlan lacks %q:\n%s", w, plain)
		}
	}
	if plain, _ := NoticeExpired(store.Execution{Request: store.Request{PlanCode: "k7q2", ExpiresAt: cardNow}}, cardNow); !strings.Contains(plain, "expired at 14:06 UTC") {
		t.Errorf("NoticeExpired = %q", plain)
	}
	if plain, _ := NoticeNotOperator("@guest:example.org"); !strings.Contains(plain, "only the operators") {
		t.Errorf("NoticeNotOperator = %q", plain)
	}
}

// allowedTags are the tags a card or notice may contain.
var allowedTags = map[string]bool{"p": true, "ol": true, "strong": true, "code": true, "pre": true, "br": true, "ul": true, "li": true, "a": true}

// checkHTML fails unless htm uses only allowedTags, balanced, and an <a>
// carries nothing but an http(s) href.
func checkHTML(t testing.TB, htm string) {
	t.Helper()
	z := html.NewTokenizer(strings.NewReader(htm))
	var stack []string
	for {
		switch z.Next() {
		case html.ErrorToken:
			if z.Err() != io.EOF {
				t.Fatalf("HTML does not tokenize: %v", z.Err())
			}
			if len(stack) != 0 {
				t.Fatalf("unclosed tags %v in:\n%s", stack, htm)
			}
			return
		case html.StartTagToken:
			tok := z.Token()
			if !allowedTags[tok.Data] {
				t.Fatalf("tag <%s> in:\n%s", tok.Data, htm)
			}
			for _, a := range tok.Attr {
				if tok.Data != "a" || a.Key != "href" || !(strings.HasPrefix(a.Val, "https://") || strings.HasPrefix(a.Val, "http://")) {
					t.Fatalf("attribute %s=%q on <%s> in:\n%s", a.Key, a.Val, tok.Data, htm)
				}
			}
			if tok.Data != "br" {
				stack = append(stack, tok.Data)
			}
		case html.EndTagToken:
			tok := z.Token()
			if len(stack) == 0 || stack[len(stack)-1] != tok.Data {
				t.Fatalf("unbalanced </%s> (open %v) in:\n%s", tok.Data, stack, htm)
			}
			stack = stack[:len(stack)-1]
		case html.SelfClosingTagToken:
			if tok := z.Token(); !allowedTags[tok.Data] {
				t.Fatalf("tag <%s/> in:\n%s", tok.Data, htm)
			}
		}
	}
}

// htmlText is the text a client shows for htm.
func htmlText(t testing.TB, htm string) string {
	t.Helper()
	z := html.NewTokenizer(strings.NewReader(htm))
	var b strings.Builder
	for {
		switch z.Next() {
		case html.ErrorToken:
			return b.String()
		case html.TextToken:
			b.Write(z.Text())
		}
	}
}
