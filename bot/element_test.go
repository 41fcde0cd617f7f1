package bot_test

import (
	"strings"
	"testing"

	"maunium.net/go/mautrix/event"

	"github.com/nomoshq/nomos/internal/testenv"
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
