package bot_test

import (
	"testing"

	"github.com/nomoshq/nomos/hostgate"
	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/internal/testenv"
)

// TestApprovalsPassTheHostGate runs the room's flows against hosts that
// force nomos gate: a restart approved by reaction and a destroy approved
// by its typed phrase both run, and the gate refuses nothing they send.
func TestApprovalsPassTheHostGate(t *testing.T) {
	t.Parallel()
	b := setup(t, withFleet(testenv.WithGate(hostgate.Rules{})))

	b.say(t, b.operator, "restart jellyfin", "")
	card := b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval", "pct exec 101 -- systemctl restart jellyfin.service"))
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.cardEdited(card.ID, "succeeded"))

	b.say(t, b.operator, "destroy teddycloud", "")
	card = b.waitFor(t, b.botSays("destroy", "lxc:hubris/131", "destructive"))
	p, err := b.execs.Describe(b.ctx, b.execFor(t, card.ID))
	if err != nil || p.Phrase == "" {
		t.Fatalf("no phrase for the destroy: %v", err)
	}
	b.say(t, b.operator, p.Phrase, "")
	b.waitFor(t, b.cardEdited(card.ID, "succeeded"))

	entries, err := labsim.ReadLog(b.fleet.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]int{}
	for _, e := range entries {
		if e.Refused != "" {
			t.Errorf("the gate refused %q: %s", e.Command, e.Refused)
		}
		ran[e.Command]++
	}
	for _, want := range []string{"pct exec 101 -- systemctl restart jellyfin.service", "pct destroy 131"} {
		if ran[want] != 1 {
			t.Errorf("%q ran %d times through the gate, want once", want, ran[want])
		}
	}
}
