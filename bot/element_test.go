package bot_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

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
	dcard := b.waitFor(t, b.botSays("destroy", "lxc:131", "destructive"))
	b.waitFor(t, reactedBy(b.botUser.UserID, dcard.ID, "❌"))
	if diff := cmp.Diff([]string{"❌"}, b.botReactions(t, dcard.ID)); diff != "" {
		t.Errorf("the bot's reactions on a destructive card (-want +got):\n%s", diff)
	}
}
