package bot_test

import (
	"strings"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/store"
)

// cardShows matches card, as posted or as edited since, when its body
// holds all of parts: a preview that comes back before the card is posted
// is in the card itself, one that comes after is in an edit.
func (b *bundle) cardShows(card id.EventID, parts ...string) func(*event.Event) bool {
	edited := b.cardEdited(card, parts...)
	return func(e *event.Event) bool {
		if e.ID == card {
			return containsAll(e.Content.AsMessage().Body, parts)
		}
		return edited(e)
	}
}

// TestUpgradeCardListsThePackages: "upgrade 102" through the room makes a
// card that, before anyone approves, lists the packages the upgrade
// installs, as the actuator read them from labsim with apt-get -s
// upgrade; the read changed nothing, and the plan is approved and runs
// as any other.
func TestUpgradeCardListsThePackages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.say(t, b.operator, "upgrade 102", "")
	card := b.waitFor(t, b.botSays("upgrade", "gitea", "awaiting approval"))
	b.waitFor(t, b.cardShows(card.ID, "Will change:", "4 packages, 2 from security",
		"curl 7.88.1-10+deb12u8 → 7.88.1-10+deb12u12 (security)", "openssh-server 1:9.2p1-2+deb12u3 → 1:9.2p1-2+deb12u5 (security)",
		"libc6 2.36-9+deb12u8 → 2.36-9+deb12u9", "take effect only after a restart"))
	if x := b.execFor(t, card.ID); x.State != store.StateAwaitingApproval {
		t.Fatalf("the preview moved the plan to %s", x.State)
	}
	if n := b.count(t, "pct exec 102 -- apt-get -s upgrade"); n != 1 {
		t.Errorf("the preview ran apt-get -s upgrade %d times, want once", n)
	}
	for _, c := range b.fleet.Commands(t) {
		if strings.Contains(c, "102") && strings.Contains(c, "apt-get") && !strings.Contains(c, "-s upgrade") {
			t.Errorf("before approval, labsim ran %q", c)
		}
	}
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	done := b.waitFor(t, b.cardEdited(card.ID, "succeeded"))
	if strings.Contains(done.Content.AsMessage().NewContent.Body, "Will change:") {
		t.Errorf("the card of a plan that ran still says what it will change:\n%s", done.Content.AsMessage().NewContent.Body)
	}
	if got := b.fleet.Admin(t, "strong", "pct exec 102 -- apt-get -s upgrade"); !strings.Contains(got, "0 upgraded") {
		t.Errorf("after the approved upgrade apt still has upgrades:\n%s", got)
	}
}

// TestDestroyCardNamesSnapshotsAndBackups: a destroy's card names, before
// the phrase is typed, the container's snapshots and disks and its
// backup status: the job that includes it and its newest backup, or that
// no job does.
func TestDestroyCardNamesSnapshotsAndBackups(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fleet.Admin(t, "hubris", "pct snapshot 131 before-retire")
	b.say(t, b.operator, "destroy teddycloud", "")
	card := b.waitFor(t, b.botSays("destroy", "lxc:hubris/131", "destructive"))
	b.waitFor(t, b.cardShows(card.ID, "Will change:", "Its 1 snapshot goes with it: before-retire",
		"Disks removed: local-lvm:vm-131-disk-0.", "⚠️ No backup job includes CT 131."))

	b.say(t, b.operator, "destroy 102", "")
	card = b.waitFor(t, b.botSays("destroy", "lxc:strong/102", "destructive"))
	b.waitFor(t, b.cardShows(card.ID, "Will change:", "CT 102 has no snapshots.",
		"Backup job backup-weekly-strong (sun 01:00) includes it, to local.", "Newest backup: ", "local:backup/vzdump-lxc-102-",
		"Goes down with it: service:gitea"))
	if x := b.execFor(t, card.ID); x.State != store.StateAwaitingApproval {
		t.Fatalf("the preview moved the plan to %s", x.State)
	}
	for _, c := range b.fleet.Commands(t) {
		if strings.HasPrefix(c, "pct destroy") || strings.HasPrefix(c, "pct stop") {
			t.Errorf("before the phrase, labsim ran %q", c)
		}
	}
}
