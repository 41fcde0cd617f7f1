package bot_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/bot"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

// TestAgentReplyIsRenderedFromMarkdown: the agent's Markdown reaches
// Element as HTML, its plain body stays the Markdown, and markup or a
// script link the model was steered into writing is not a tag or a link
// in the formatted body.
func TestAgentReplyIsRenderedFromMarkdown(t *testing.T) {
	t.Parallel()
	llm := testenv.NewScriptedLLM(t)
	reply := "Jellyfin is **down**.\n\n```\nsystemctl status jellyfin\n```\n\n- restart it\n- check the disk\n\n" +
		"<img src=x onerror=alert(1)> and [click](javascript:alert(2))"
	llm.Script(testenv.Reply(reply))
	b := setup(t, withLLM(llm))
	b.say(t, b.operator, "what is wrong with jellyfin?", "")
	got := b.waitFor(t, b.botSays("Jellyfin is **down**."))
	m := got.Content.AsMessage()
	if m.Body != reply {
		t.Errorf("the plain body is not the model's Markdown:\n%s", m.Body)
	}
	if m.Format != event.FormatHTML {
		t.Fatalf("the reply has format %q, want HTML", m.Format)
	}
	for _, want := range []string{"<strong>down</strong>", "<pre><code>systemctl status jellyfin", "<ul>", "<li>restart it</li>", "&lt;img src=x onerror=alert(1)&gt;"} {
		if !strings.Contains(m.FormattedBody, want) {
			t.Errorf("formatted body lacks %q:\n%s", want, m.FormattedBody)
		}
	}
	for _, bad := range []string{"<img", "javascript:"} {
		if strings.Contains(m.FormattedBody, bad) {
			t.Errorf("formatted body carries %q:\n%s", bad, m.FormattedBody)
		}
	}
}

// botReactions lists the keys the bot reacted to target with.
func (b *bundle) botReactions(t testing.TB, target id.EventID) []string {
	t.Helper()
	resp, err := b.operator.Client.Messages(b.ctx, b.room, "", "", mautrix.DirectionBackward, nil, 200)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := len(resp.Chunk) - 1; i >= 0; i-- {
		e := resp.Chunk[i]
		_ = e.Content.ParseRaw(e.Type)
		if e.Type != event.EventReaction || e.Sender != b.botUser.UserID {
			continue
		}
		if r := e.Content.AsReaction(); r.RelatesTo.GetAnnotationID() == target {
			keys = append(keys, r.RelatesTo.GetAnnotationKey())
		}
	}
	return keys
}

// reactedBy matches a reaction by u to target with key.
func reactedBy(u id.UserID, target id.EventID, key string) func(*event.Event) bool {
	return func(e *event.Event) bool {
		if e.Type != event.EventReaction || e.Sender != u {
			return false
		}
		r := e.Content.AsReaction()
		return r.RelatesTo.GetAnnotationID() == target && r.RelatesTo.GetAnnotationKey() == key
	}
}

// TestCardsOfferReactionsThatTheBotCannotUse: a reversible card gets ✅
// and ❌ to tap, a destructive one only ❌ (its approval is the typed
// phrase), and the bot's own ✅ approves nothing: the operator's later
// refusal is what decides the card.
func TestCardsOfferReactionsThatTheBotCannotUse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.say(t, b.operator, "restart jellyfin", "")
	card := b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval"))
	b.waitFor(t, reactedBy(b.botUser.UserID, card.ID, "❌"))
	if diff := cmp.Diff([]string{"✅", "❌"}, b.botReactions(t, card.ID)); diff != "" {
		t.Errorf("the bot's reactions on a reversible card (-want +got):\n%s", diff)
	}
	// The bot's sync sees its own ✅ before this reply; had it counted,
	// the plan would have run before the refusal arrived.
	b.say(t, b.operator, "no", card.ID)
	b.waitFor(t, b.cardEdited(card.ID, "denied"))
	if x := b.execFor(t, card.ID); x.State != store.StateDenied {
		t.Errorf("the plan is %s, want denied", x.State)
	}
	if n := b.count(t, "pct exec 101 -- systemctl restart jellyfin.service"); n != 0 {
		t.Errorf("labsim ran the restart %d times, want never", n)
	}
	audit, err := b.store.AuditFor(b.ctx, b.execFor(t, card.ID).ID)
	if err != nil {
		t.Fatal(err)
	}
	if s := auditString(audit); strings.Contains(s, b.botUser.UserID.String()) {
		t.Errorf("the bot is an actor in the plan's audit:\n%s", s)
	}

	b.say(t, b.operator, "destroy teddycloud", "")
	dcard := b.waitFor(t, b.botSays("destroy", "lxc:hubris/131", "destructive"))
	b.waitFor(t, reactedBy(b.botUser.UserID, dcard.ID, "❌"))
	if diff := cmp.Diff([]string{"❌"}, b.botReactions(t, dcard.ID)); diff != "" {
		t.Errorf("the bot's reactions on a destructive card (-want +got):\n%s", diff)
	}
}

// TestAlertIsAcknowledgedAndMutedFromTheRoom: 👀 on an alert acknowledges
// its signal, a reply "mute 2h" mutes it, a guest can do neither, and
// while it is muted the check failing again is not announced, though a
// later alert on another service is.
func TestAlertIsAcknowledgedAndMutedFromTheRoom(t *testing.T) {
	t.Parallel()
	b := setup(t, withAlerts(), withConfig(func(c *bot.Config) { c.FlapWindow = time.Nanosecond }))
	now := time.Now().UTC().Add(-10 * time.Minute)
	due, err := b.store.ClaimDueChecks(b.ctx, now, 1000)
	if err != nil {
		t.Fatal(err)
	}
	checks := map[string]store.DueCheck{}
	for _, c := range due {
		checks[c.Slug] = c
	}
	record := func(slug, health, detail string, at time.Time) {
		t.Helper()
		c := checks[slug]
		if err := b.store.RecordCheck(b.ctx, store.CheckObservation{CheckID: c.ID.String(), TargetID: c.TargetID.String(), Health: health, Detail: detail, At: at}); err != nil {
			t.Fatal(err)
		}
	}
	signal := func() store.Signal {
		t.Helper()
		sigs, err := b.store.ListSignals(b.ctx, store.SignalFilter{Since: now.Add(-time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range sigs {
			if g.Kind == "check:jellyfin-http" {
				return g
			}
		}
		t.Fatalf("no jellyfin signal among %+v", sigs)
		return store.Signal{}
	}

	record("jellyfin-http", "unhealthy", "GET failed: connection refused", now)
	alert := b.waitFor(t, b.botSays("service:jellyfin is failing"))

	// A guest's 🔇 is refused and changes nothing.
	if _, err := b.guest.Client.SendReaction(b.ctx, b.room, alert.ID, "🔇"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.botSays("only the operators", b.guest.UserID.String()))
	if g := signal(); g.MutedUntil != nil || g.State != "raised" {
		t.Errorf("after a guest's 🔇 the signal is %s muted until %v, want raised and not muted", g.State, g.MutedUntil)
	}

	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, alert.ID, "👀"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.botSays("👀", b.operator.UserID.String(), "acknowledged check:jellyfin-http on service:jellyfin"))
	if g := signal(); g.State != "acknowledged" || g.AcknowledgedBy != b.operator.UserID.String() {
		t.Errorf("after 👀 the signal is %s by %q, want acknowledged by the operator", g.State, g.AcknowledgedBy)
	}

	before := time.Now()
	b.say(t, b.operator, "mute 2h", alert.ID)
	b.waitFor(t, b.botSays("🔇", "muted check:jellyfin-http on service:jellyfin for 2h"))
	if g := signal(); g.MutedUntil == nil || g.MutedUntil.Before(before.Add(2*time.Hour)) || g.MutedUntil.After(time.Now().Add(2*time.Hour)) {
		t.Errorf("after \"mute 2h\" the signal is muted until %v, want two hours on", g.MutedUntil)
	}

	// It recovers (noted), fails again while muted (not announced), and
	// then postgres fails: once that is announced, a jellyfin alert due
	// in the same or an earlier pass would have been posted already.
	record("jellyfin-http", "healthy", "GET answered 200", now.Add(time.Minute))
	b.waitFor(t, b.botSays("service:jellyfin recovered"))
	record("jellyfin-http", "unhealthy", "GET failed again", now.Add(2*time.Minute))
	record("postgres-tcp", "unhealthy", "nothing listens", now.Add(2*time.Minute+time.Second))
	b.waitFor(t, b.botSays("service:postgres is failing"))
	if n := countContaining(b.botBodies(t), "service:jellyfin is failing"); n != 1 {
		t.Errorf("jellyfin's failure was announced %d times, want once: the mute did not hold", n)
	}
}
