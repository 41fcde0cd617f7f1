package bot

import (
	"fmt"
	"strings"
	"time"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

// Notices for the router: each returns a plain and an HTML body.

// NoticeAlreadyDecided says who decided a plan first.
func NoticeAlreadyDecided(a store.Approval) (plain, html string) {
	when := a.DecidedAt.UTC().Format("15:04 UTC")
	p := fmt.Sprintf("That plan was already %s by %s at %s.", a.Decision, a.DecidedBy, when)
	return p, escape(p)
}

// NoticeExpired says a plan expired and nothing will run.
func NoticeExpired(x store.Execution, now time.Time) (plain, html string) {
	p := fmt.Sprintf("Plan %s expired at %s, so nothing will run. Ask again for a fresh plan.", x.PlanCode, absTime(x.ExpiresAt, now))
	return p, escape(p)
}

// NoticeNotPending says a plan is past deciding.
func NoticeNotPending(x store.Execution) (plain, html string) {
	p := fmt.Sprintf("Plan %s is %s; it can't be decided any more.", x.PlanCode, strings.ReplaceAll(string(x.State), "_", " "))
	return p, escape(p)
}

// NoticeNotOperator politely refuses someone who is not an operator.
func NoticeNotOperator(userID string) (plain, html string) {
	p := fmt.Sprintf("Sorry %s, only the operators can request changes or decide plans here. I have noted the attempt. You can still ask for status.", userID)
	return p, escape(p)
}

// NoticeNeedsPhrase explains that a destructive plan takes only its typed
// phrase.
func NoticeNeedsPhrase(phrase string) (plain, html string) {
	p := "This plan is destructive: a reaction or a yes does not approve it. To go ahead, type exactly: " + phrase
	h := "This plan is <strong>destructive</strong>: a reaction or a “yes” does not approve it. To go ahead, type exactly: " + codeSpan(phrase)
	return p, h
}

// NoticePhraseMismatch answers a typed phrase that ends in a destructive
// plan's code but is not its phrase: one that names fewer of the plan's
// destructive steps, or others. It gives the phrase to type.
func NoticePhraseMismatch(code, phrase string) (plain, html string) {
	p := "That is not the phrase of plan " + code + ", so nothing was approved. Its phrase names every destructive step with its target; to approve all of it, type exactly: " + phrase
	h := "That is not the phrase of plan " + escape(code) + ", so <strong>nothing was approved</strong>. Its phrase names every destructive step with its target; to approve all of it, type exactly: " + codeSpan(phrase)
	return p, h
}

// NoticePhraseUnmatched answers a CmdConfirm that matches no plan waiting
// in the room.
func NoticePhraseUnmatched(typed string) (plain, html string) {
	typed = clip(typed, 120)
	p := "\"" + typed + "\" looks like a confirmation phrase, but it matches no plan waiting here, so nothing was approved. Copy the phrase from the plan's card exactly."
	h := codeSpan(typed) + " looks like a confirmation phrase, but it matches no plan waiting here, so nothing was approved. Copy the phrase from the plan's card exactly."
	return p, h
}

// NoticeNotReader refuses history or details to someone who is neither an
// operator nor a listed reader.
func NoticeNotReader(userID string) (plain, html string) {
	p := fmt.Sprintf("Sorry %s, only the operators and the readers listed in my configuration can read the history of executions or the details of hosts, containers and services here. You can still ask for status.", userID)
	return p, escape(p)
}

// askerText names who asked for a plan: "mcp:claude via mcp for
// @op:example.org", "the agent for @op:example.org", or the operator.
func askerText(x store.Execution) string {
	switch {
	case x.RequestedVia == "agent" && x.OnBehalfOf != "":
		return "the agent for " + x.OnBehalfOf
	case x.RequestedVia == "mcp" && x.OnBehalfOf != "":
		return x.RequestedBy + " via mcp for " + x.OnBehalfOf
	case x.RequestedVia == "mcp" || x.RequestedVia == "agent":
		return x.RequestedBy + " via " + x.RequestedVia
	}
	return x.RequestedBy
}

// NoticeAssentNotBound answers a bare "yes" when the one plan waiting was
// not asked for by the sender with a command, saying how to approve it in
// this room (verifiedOnly: an encrypted room, where reactions do not
// count).
func NoticeAssentNotBound(x store.Execution, verifiedOnly bool) (plain, html string) {
	asker := askerText(x)
	how, howHTML := approveHow(x.PlanCode, "its card", verifiedOnly)
	if x.GateClass() == policy.Destructive.String() {
		how = "type exactly the confirmation phrase its card shows"
		if verifiedOnly {
			how += ", from a verified session"
		}
		howHTML = escape(how)
	}
	p := fmt.Sprintf("Nothing was approved. A plain \"yes\" approves only a plan you asked for yourself, and plan %s (%s %s) was asked for by %s. "+
		"To approve it, %s.", x.PlanCode, x.Action, x.TargetSlug, asker, how)
	h := fmt.Sprintf("Nothing was approved. A plain “yes” approves only a plan you asked for yourself, and plan %s (%s %s) was asked for by %s. "+
		"To approve it, %s.", codeSpan(x.PlanCode), escape(x.Action), escape(x.TargetSlug), escape(asker), howHTML)
	return p, h
}

// NoticeSelfApproval refuses an approval from whoever asked for the plan,
// or from the operator the agent asked for it on behalf of, while
// approvals.self_approval is off.
func NoticeSelfApproval(userID string, x store.Execution) (plain, html string) {
	how := "you asked for it"
	switch {
	case x.OnBehalfOf == userID && x.RequestedVia == "mcp":
		how = "it came from " + x.RequestedBy + ", whose MCP token is yours"
	case x.OnBehalfOf == userID:
		how = "the agent asked for it on your behalf"
	}
	p := fmt.Sprintf("%s, your approval of plan %s was not counted: %s, and here a plan needs the approval of another operator (approvals.self_approval is off). "+
		"Ask another operator to approve it; you can still deny it.", userID, x.PlanCode, how)
	return p, escape(p)
}

// NoticeSameApprover refuses a second approval of a destructive plan from
// an operator who already gave it, while it needs several operators.
func NoticeSameApprover(userID, code string, quorum int) (plain, html string) {
	p := fmt.Sprintf("%s, you have already approved plan %s. It is destructive and needs the phrase from %d different operators: another operator must type it too.",
		userID, code, quorum)
	return p, escape(p)
}

// NoticeQuorumPending tells an operator that their approval of a
// destructive plan counted, and that it needs more.
func NoticeQuorumPending(userID, code string, votes, quorum int) (plain, html string) {
	p := fmt.Sprintf("%s, your approval of plan %s is recorded (%d of %d). It is destructive, so it waits for the phrase from another operator; nothing runs until then.",
		userID, code, votes, quorum)
	return p, escape(p)
}

// NoticeUnverifiedDevice tells an operator that an approval from one of
// their devices did not count because they have not verified it.
func NoticeUnverifiedDevice(userID, deviceID string) (plain, html string) {
	dev := "a session"
	if deviceID != "" {
		dev = "the session " + deviceID
	}
	p := fmt.Sprintf("%s, your approval was not counted: it came from %s that you have not verified, and in this encrypted room only approvals from your verified sessions count. "+
		"To verify it in Element: open Settings → Sessions, select this session and choose Verify, or verify it from another session where you are already signed in. Then approve again.", userID, dev)
	h := fmt.Sprintf("%s, your approval was <strong>not counted</strong>: it came from %s that you have not verified, and in this encrypted room only approvals from your verified sessions count. "+
		"To verify it in Element: open <em>Settings → Sessions</em>, select this session and choose <em>Verify</em>, or verify it from another session where you are already signed in. Then approve again.", escape(userID), escape(dev))
	return p, h
}

// NoticeIdentityChanged tells an operator that an approval did not count
// because their cryptographic identity (cross-signing master key) is not
// the one the bot first saw, and how to verify the bot so it counts again.
func NoticeIdentityChanged(userID, botUser, botDevice string) (plain, html string) {
	p := fmt.Sprintf("%s, your approval was not counted: your identity changed since I first saw it (your cross-signing key is new, as after resetting your identity or losing your recovery key), "+
		"so I cannot tell your sessions from someone else's. Verifying this session in Element does not change that; verifying me does. "+
		"In Element, open my profile (%s), select my session %s under Sessions, choose Verify and compare the emoji. "+
		"I post the same emoji here with a code; someone on the Nomos host confirms them with nomos verify <code>. Then approve again.", userID, botUser, botDevice)
	h := fmt.Sprintf("%s, your approval was <strong>not counted</strong>: your identity changed since I first saw it (your cross-signing key is new, as after resetting your identity or losing your recovery key), "+
		"so I cannot tell your sessions from someone else's. Verifying this session in Element does not change that; verifying me does. "+
		"In Element, open my profile (%s), select my session %s under <em>Sessions</em>, choose <em>Verify</em> and compare the emoji. "+
		"I post the same emoji here with a code; someone on the Nomos host confirms them with %s. Then approve again.",
		escape(userID), escape(botUser), codeSpan(botDevice), codeSpan("nomos verify <code>"))
	return p, h
}

// NoticeApprovalNotEncrypted tells an operator that an unencrypted
// approval (a reaction, which clients send in the clear) did not count in
// an encrypted room.
func NoticeApprovalNotEncrypted(userID, code string) (plain, html string) {
	p := fmt.Sprintf("%s, your approval was not counted: it was not encrypted (Element sends reactions in the clear), so I cannot tell which of your sessions sent it, "+
		"and in this encrypted room only approvals from your verified sessions count. Reply \"go ahead\" to this plan's card, or say approve %s, from a verified session.", userID, code)
	h := fmt.Sprintf("%s, your approval was <strong>not counted</strong>: it was not encrypted (Element sends reactions in the clear), so I cannot tell which of your sessions sent it, "+
		"and in this encrypted room only approvals from your verified sessions count. Reply “go ahead” to this plan's card, or say %s, from a verified session.", escape(userID), codeSpan("approve "+code))
	return p, h
}

// NoticeNoPending says there is nothing to decide.
func NoticeNoPending() (plain, html string) {
	p := "No plan is waiting for a decision here."
	return p, escape(p)
}

// NoticeNotADecision answers a reply to a card that is neither yes nor no.
func NoticeNotADecision() (plain, html string) {
	return "I read that as neither a yes nor a no. Reply \"go ahead\" to approve or \"no\" to deny.",
		"I read that as neither a yes nor a no. Reply “go ahead” to approve or “no” to deny."
}

// NoticeWhichPlan asks which plan a bare decision meant when several wait.
func NoticeWhichPlan(pending []store.Execution, now time.Time) (plain, html string) {
	var m bodies
	n := fmt.Sprintf("%d plans are waiting, so I won't guess which one you mean. Reply to its card, react to it, or say approve <code> / deny <code>:", len(pending))
	m.para(n, escape(n))
	var ps, hs []string
	for i, x := range pending {
		if i == 10 {
			more := fmt.Sprintf("and %d more (say pending)", len(pending)-10)
			ps, hs = append(ps, more), append(hs, escape(more))
			break
		}
		class, _ := policy.ParseClass(x.GateClass())
		line := fmt.Sprintf("%s %s, %s, %s", x.Action, x.TargetSlug, RiskBadge(class), expiry(x.ExpiresAt, now))
		ps = append(ps, x.PlanCode+": "+line)
		hs = append(hs, codeSpan(x.PlanCode)+": "+escape(line))
	}
	m.list(ps, hs)
	return m.done()
}

// NoticeUnknown answers a message Nomos did not understand: the usage hint
// when the verb was known, the suggestion when it was misspelt, else
// ShortHelp.
func NoticeUnknown(c Command) (plain, html string) {
	if c.Hint != "" {
		return c.Hint, escape(c.Hint)
	}
	if c.Suggestion != "" {
		return "I didn't understand that. Did you mean `" + c.Suggestion + "`?",
			"I didn't understand that. Did you mean <code>" + escape(c.Suggestion) + "</code>?"
	}
	s := ShortHelp()
	return s, escape(s)
}
