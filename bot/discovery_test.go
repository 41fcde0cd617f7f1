package bot_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/bot"
	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/store"
)

// withDiscovery makes the bot take inventories, sending due runs every
// 100 ms.
func withDiscovery() func(*bundle) {
	return func(b *bundle) {
		tune := b.tune
		b.tune = func(c *bot.Config) {
			c.RunDiscovery = true
			if tune != nil {
				tune(c)
			}
		}
		b.execTune = func(c *executions.Config) { c.InventoryTick = 100 * time.Millisecond }
	}
}

// discover does what `nomos discover` does: it asks for a run of every
// host now, and waits for each to be applied.
func (b *bundle) discover(t *testing.T) []store.InventoryRun {
	t.Helper()
	runs, err := b.store.RequestInventory(b.ctx, b.operator.UserID.String())
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uuid.UUID, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := b.store.InventoryRuns(b.ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(got, func(r store.InventoryRun) bool { return r.AppliedAt == nil }) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the inventory runs were never applied: %+v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDiscoveryIsAnnouncedOnce: with discovery on, a container an admin
// makes straight on a host is announced in the ops room in one notice and
// listed by "list containers" with its run state; an inventory that finds
// nothing new says nothing; the container's destruction is one more
// notice, and the list shows it gone.
func TestDiscoveryIsAnnouncedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, withAlerts(), withDiscovery())
	discover := func() []store.InventoryRun { return b.discover(t) }

	b.fleet.Admin(t, "strong", "pct create 150 local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --hostname newbox"+
		" --net0 name=eth0,bridge=vmbr0,ip=10.40.0.150/24,gw=10.40.0.1 --start 1")
	discover()
	b.waitFor(t, b.botSays("🔎 On strong: discovered a new container: 150 newbox."))
	b.say(t, b.operator, "list containers", "")
	b.waitFor(t, b.botSays("16 containers", "🟢 150 newbox on strong, 10.40.0.150/24, running, discovered, healthy",
		"⏹️ 131 teddycloud on hubris, 10.40.0.131/24, stopped, stopped on purpose: onboot is off"))

	// Nothing changed on the hosts: the run has nothing for the room.
	for _, r := range discover() {
		if r.Changes == nil || r.Changes.Announced() || r.Error != "" {
			t.Errorf("an unchanged run of %s: %+v, error %q", r.Host, r.Changes, r.Error)
		}
	}

	b.fleet.Admin(t, "strong", "pct destroy 150 --force")
	discover()
	b.waitFor(t, b.botSays("🔎 On strong: 150 newbox is gone."))
	b.say(t, b.operator, "status", "")
	b.waitFor(t, b.botSays("Fleet status", "lxcs: 15", "14 running, 1 stopped"))
	b.say(t, b.operator, "list containers", "")
	b.waitFor(t, b.botSays("15 containers", "Gone: lxc:strong/150 newbox"))
	if n := countContaining(b.botBodies(t), "🔎 On"); n != 2 {
		t.Errorf("%d discovery notices, want 2 (found, gone):\n%s", n, strings.Join(b.botBodies(t), "\n"))
	}
}
