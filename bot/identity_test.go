package bot_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// TestSharedVMIDInTheRoom: the demo's strong and hubris are standalone
// nodes that both have a CT 100 (Proxmox keeps a vmid unique within a
// cluster only). `show 100` shows both; `reboot 100` asks which one and
// plans nothing; `reboot strong/100` plans the one on strong.
func TestSharedVMIDInTheRoom(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.say(t, b.operator, "show 100", "")
	b.waitFor(t, b.botSays("2 containers have vmid 100", "syncthing (lxc:hubris/100)", "unbound (lxc:strong/100)"))

	b.say(t, b.operator, "reboot 100", "")
	b.waitFor(t, b.botSays(`"100" could mean lxc:hubris/100 or lxc:strong/100`))
	var plans int
	if err := b.storeQuery(t, `SELECT count(*) FROM executions`, &plans); err != nil {
		t.Fatal(err)
	}
	if plans != 0 {
		t.Errorf("an ambiguous reboot planned %d executions, want none", plans)
	}

	b.say(t, b.operator, "reboot strong/100", "")
	b.waitFor(t, b.botSays("lxc:strong/100", "pct reboot 100", "awaiting approval"))
}

// TestProblemsListsWhatNeedsAttention: "what's wrong" answers without an
// LLM: nothing at first; then the open signal of a failing check.
func TestProblemsListsWhatNeedsAttention(t *testing.T) {
	t.Parallel()
	b := setup(t, withAlerts())
	b.say(t, b.operator, "problems", "")
	b.waitFor(t, b.botSays("Nothing needs attention"))

	now := time.Now().UTC().Add(-time.Minute)
	due, err := b.store.ClaimDueChecks(b.ctx, now, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range due {
		if c.Slug == "jellyfin-http" {
			if err := b.store.RecordCheck(b.ctx, store.CheckObservation{CheckID: c.ID.String(), TargetID: c.TargetID.String(),
				Health: "unhealthy", Detail: "GET /health: connection refused", At: now}); err != nil {
				t.Fatal(err)
			}
		}
	}
	b.say(t, b.operator, "What's wrong?", "")
	b.waitFor(t, b.botSays("Open signals (1), worst first:", "🔴 service:jellyfin check:jellyfin-http", "connection refused"))
}

// TestShowGroupsAServiceWithItsContainer: "show jellyfin" names both the
// service and the container it runs in, which are one thing to a person;
// both are shown together instead of a question.
func TestShowGroupsAServiceWithItsContainer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.say(t, b.operator, "show jellyfin", "")
	b.waitFor(t, b.botSays("jellyfin (lxc:strong/101)", "jellyfin (service:jellyfin)", "runs service:jellyfin"))
}

// TestSnapshotsListsWhoMadeThem: "snapshots postgres" lists the
// container's snapshots newest first, with who made each: the one Nomos
// took before a restart it was asked for (postgres's restart is a
// config_mutation, so the actuator snapshots first), and one made outside
// Nomos, which Nomos never deletes.
func TestSnapshotsListsWhoMadeThem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.say(t, b.operator, "restart postgres", "")
	card := b.waitFor(t, b.botSays("restart postgres", "awaiting approval"))
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.cardEdited(card.ID, "succeeded"))
	x, err := b.store.GetExecution(b.ctx, b.execFor(t, card.ID).ID)
	if err != nil {
		t.Fatal(err)
	}
	var res tasks.Result
	if err := json.Unmarshal(x.Result, &res); err != nil || !policy.IsNomosSnapshot(res.Snapshot) {
		t.Fatalf("the restart's result %s (%v) names no snapshot of Nomos's", x.Result, err)
	}
	// What the next inventory would record: oldest first.
	if err := b.store.MergeEntityAttrs(b.ctx, "lxc:strong/105", map[string]any{"snapshots": []string{"before-upgrade", res.Snapshot}}); err != nil {
		t.Fatal(err)
	}
	b.say(t, b.operator, "snapshots postgres", "")
	got := b.waitFor(t, b.botSays("Snapshots of postgres (lxc:strong/105): 2, newest first"))
	body := got.Content.AsMessage().Body
	mine := strings.Index(body, res.Snapshot+", ")
	theirs := strings.Index(body, "before-upgrade, not made by Nomos")
	if mine < 0 || theirs < mine || !strings.Contains(body, "by Nomos before restart on service:postgres, asked by "+b.operator.UserID.String()+", approved by "+b.operator.UserID.String()) {
		t.Errorf("snapshots = %q; want Nomos's newest first with its restart, asker and approver, then before-upgrade as not Nomos's", body)
	}
}

// TestCreateInTheRoomWithoutAnLLM: "create lxc wiki on hubris cores 2
// memory 2G" makes pct_create's plan from the grammar alone, with the
// options on the card before anyone approves.
func TestCreateInTheRoomWithoutAnLLM(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.say(t, b.operator, "create lxc wiki on hubris cores 2 memory 2G", "")
	b.waitFor(t, b.botSays("pct create", "--hostname wiki", "--cores 2", "--memory 2048", "awaiting approval"))
}
