package bot

import (
	"context"
	"fmt"
	"sync"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/executions"
)

// refusedWarnEvery bounds how often a refused report is announced: a
// flood of forged messages must not become a flood in the room.
const refusedWarnEvery = 15 * time.Minute

// refusedWarner posts the first refused report in the room and then at
// most one warning per refusedWarnEvery, counting what it held back.
type refusedWarner struct {
	mu     sync.Mutex
	lastAt time.Time
	held   int
}

// onRefusedReport is the results consumer's hook for a report the gate
// refused: signed wrongly, for another actuator, replayed or never sent.
// The audit log already has it; the room hears one short warning that
// quotes nothing from the message.
func (b *Bot) onRefusedReport(ctx context.Context, r executions.RefusedReportError) {
	room := id.RoomID(r.RoomID)
	if room == "" {
		room = id.RoomID(b.cfg.OpsRoom)
	}
	if room == "" {
		return
	}
	w := &b.refused
	w.mu.Lock()
	now := b.now()
	if !w.lastAt.IsZero() && now.Sub(w.lastAt) < refusedWarnEvery {
		w.held++
		w.mu.Unlock()
		return
	}
	held := w.held
	w.lastAt, w.held = now, 0
	w.mu.Unlock()
	text := "⚠️ " + r.Warning()
	if held > 0 {
		text += fmt.Sprintf(" %d more were refused since the last warning.", held)
	}
	b.sendNotice(ctx, room, text, "", nil)
}
