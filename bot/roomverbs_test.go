package bot_test

import (
	"strings"
	"testing"

	"maunium.net/go/mautrix/event"

	"github.com/nomoshq/nomos/hostgate"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

// botShows matches a bot message, or an edit of one, whose text contains
// all of parts: a read's card may be edited to its result before the test
// looks.
func (b *bundle) botShows(parts ...string) func(*event.Event) bool {
	return func(e *event.Event) bool {
		if e.Sender != b.botUser.UserID || e.Type != event.EventMessage {
			return false
		}
		m := e.Content.AsMessage()
		if m.NewContent != nil {
			return containsAll(m.NewContent.Body, parts)
		}
		return containsAll(m.Body, parts)
	}
}

// TestSecondRestartPointsAtTheFirstPlan: a second `restart jellyfin`
// while the first waits makes no second card: the answer names the first
// plan's code and links its card.
func TestSecondRestartPointsAtTheFirstPlan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.say(t, b.operator, "restart jellyfin", "")
	card := b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval"))
	x := b.execFor(t, card.ID)
	b.say(t, b.operator, "restart jellyfin please", "")
	again := b.waitFor(t, b.botSays("Already queued", x.PlanCode))
	if body := again.Content.AsMessage().Body; !strings.Contains(body, string(card.ID)) {
		t.Errorf("the answer %q does not link the first card %s", body, card.ID)
	}
	if xs, err := b.store.ListExecutions(b.ctx, store.ExecutionFilter{}); err != nil || len(xs) != 1 {
		t.Fatalf("%d plans after two requests for one change (err %v), want 1", len(xs), err)
	}
	// The first card still decides it.
	b.say(t, b.operator, "approve "+x.PlanCode, "")
	b.waitFor(t, b.cardEdited(card.ID, "succeeded"))
	if n := b.count(t, "pct exec 101 -- systemctl restart jellyfin.service"); n != 1 {
		t.Errorf("labsim ran the restart %d times, want once", n)
	}
}

// TestRebootHostStrongNeedsThePhrase: `reboot host strong` is a
// destructive plan that only its typed phrase approves; through the
// node's gate it runs shutdown -r +1, and the node comes back with the
// containers that start at boot running.
func TestRebootHostStrongNeedsThePhrase(t *testing.T) {
	t.Parallel()
	b := setup(t, withFleet(testenv.WithGate(hostgate.Rules{})))
	b.say(t, b.operator, "reboot host strong", "")
	card := b.waitFor(t, b.botSays("host:strong", "destructive", "shutdown -r +1"))
	x := b.execFor(t, card.ID)
	p, err := b.execs.Describe(b.ctx, x)
	if err != nil || !strings.HasPrefix(p.Phrase, "reboot-node host:strong ") || !strings.Contains(card.Content.AsMessage().Body, p.Phrase) {
		t.Fatalf("card does not show the phrase %q: %v", p.Phrase, err)
	}
	b.say(t, b.operator, "yes", card.ID)
	b.waitFor(t, b.botSays("type exactly", p.Phrase))
	if n := b.count(t, "shutdown -r +1"); n != 0 {
		t.Fatalf("the node rebooted %d times before the phrase", n)
	}
	b.say(t, b.operator, p.Phrase, "")
	b.waitFor(t, b.cardEdited(card.ID, "succeeded"))
	if n := b.count(t, "shutdown -r +1"); n != 1 {
		t.Errorf("the node got shutdown -r +1 %d times, want once", n)
	}
	if list := b.fleet.Admin(t, "strong", "pct list"); !strings.Contains(list, "running") {
		t.Errorf("after the reboot no container on strong runs:\n%s", list)
	}
}

// TestLogsAndNodeUpdatesInTheRoom: `logs` reads a service's journal at
// once, through the node's gate, and shows it with secrets redacted; a
// container's whole journal shows what logger wrote; `check updates on
// host strong` lists the node's upgrades and installs nothing.
func TestLogsAndNodeUpdatesInTheRoom(t *testing.T) {
	t.Parallel()
	b := setup(t, withFleet(testenv.WithGate(hostgate.Rules{})))
	b.say(t, b.operator, "logs jellyfin 5 lines", "")
	b.waitFor(t, b.botShows("succeeded", "Started jellyfin.service"))
	if n := b.count(t, "pct exec 101 -- journalctl -u jellyfin.service -n 5 --no-pager"); n != 1 {
		t.Errorf("labsim read the journal %d times, want once; commands: %v", n, b.fleet.Commands(t))
	}

	b.fleet.Admin(t, "strong", "pct exec 101 -- logger -t backup 'upload with password=hunter2secret done'")
	b.say(t, b.operator, "logs lxc:strong/101 last 3", "")
	got := b.waitFor(t, b.botShows("succeeded", "upload with password="))
	body := got.Content.AsMessage().Body
	if m := got.Content.AsMessage(); m.NewContent != nil {
		body = m.NewContent.Body
	}
	if strings.Contains(body, "hunter2secret") || !strings.Contains(body, "password=[REDACTED]") {
		t.Errorf("the log's secret is not redacted: %q", body)
	}

	b.say(t, b.operator, "check updates on host strong", "")
	b.waitFor(t, b.botShows("succeeded", "Listing..."))
	if n := b.count(t, "apt list --upgradable"); n != 1 {
		t.Errorf("the node listed its upgrades %d times, want once", n)
	}
}

// TestNearMissesAreSuggested: a misspelt verb or target is answered with
// what was likely meant, and nothing is planned.
func TestNearMissesAreSuggested(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.say(t, b.operator, "restrat jellyfin", "")
	b.waitFor(t, b.botSays("Did you mean `restart jellyfin`?"))
	b.say(t, b.operator, "restart jelyfin", "")
	b.waitFor(t, b.botSays("I don't know that target", "Did you mean `restart jellyfin`?"))
	b.say(t, b.operator, "show gitae", "")
	b.waitFor(t, b.botSays("Did you mean `show gitea`?"))
	if xs, err := b.store.ListExecutions(b.ctx, store.ExecutionFilter{}); err != nil || len(xs) != 0 {
		t.Fatalf("a near miss made %d plans (err %v), want none", len(xs), err)
	}
}
