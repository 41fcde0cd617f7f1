package bot_test

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"

	"github.com/nomoshq/nomos/tasks"
)

// TestForgedResultsWarnTheRoomOnce: a Redis writer who forges results gets
// them refused, and the room hears one warning however many arrive.
func TestForgedResultsWarnTheRoomOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, withAlerts())
	b.say(t, b.operator, "restart jellyfin", "")
	card := b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval"))
	x := b.execFor(t, card.ID)

	_, stranger, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClient(b.redis)
	defer client.Close()
	for i := range 3 {
		task, err := tasks.NewResultTask(stranger, tasks.Result{ExecutionID: x.ID.String(), Actuator: tasks.DefaultActuator,
			Status: tasks.StatusSucceeded, Output: "all good", StartedAt: time.Now(), FinishedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Enqueue(task, asynq.TaskID("forged-"+uuid.NewString())); err != nil {
			t.Fatalf("enqueue forgery %d: %v", i, err)
		}
	}
	b.waitFor(t, b.botSays("refused", "not signed with the actuator's key"))
	// Give the other two forgeries time to be refused, then count.
	deadline := time.Now().Add(10 * time.Second)
	var n int
	for time.Now().Before(deadline) {
		if err := b.storeQuery(t, `SELECT count(*) FROM audit_log WHERE action = 'report.refused'`, &n); err != nil {
			t.Fatal(err)
		}
		if n == 3 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n != 3 {
		t.Fatalf("%d forgeries audited as refused, want 3", n)
	}
	time.Sleep(500 * time.Millisecond) // a warning for the last one would be on its way
	resp, err := b.operator.Client.Messages(b.ctx, b.room, "", "", mautrix.DirectionBackward, nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	warnings := 0
	for _, e := range resp.Chunk {
		_ = e.Content.ParseRaw(e.Type)
		if e.Sender == b.botUser.UserID && e.Type == event.EventMessage && strings.Contains(e.Content.AsMessage().Body, "not signed with the actuator's key") {
			warnings++
		}
	}
	if warnings != 1 {
		t.Errorf("%d warnings in the room, want 1", warnings)
	}
	if after := b.execFor(t, card.ID); after.State != x.State {
		t.Errorf("forged results moved the execution from %s to %s", x.State, after.State)
	}
}
