package bot

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/store"
)

// Plans are asked for and decided only in the rooms meant for them: the
// ops room and Config.Rooms. Anywhere else (a room an operator made and
// invited the bot to, a direct message) the bot answers reads, and says
// once where plans belong.

// roomUse is what a room may be used for.
type roomUse int

const (
	// roomForPlans: plans are asked for, carded and decided here.
	roomForPlans roomUse = iota
	// roomNotListed: neither the ops room nor one of Config.Rooms.
	roomNotListed
	// roomInTheClear: listed, but not encrypted while verified devices
	// are required, so a stolen access token could decide here unseen.
	roomInTheClear
)

// planRooms lists the rooms for plans: the ops room first.
func (b *Bot) planRooms() []id.RoomID {
	var out []id.RoomID
	for _, r := range append([]string{b.cfg.OpsRoom}, b.cfg.Rooms...) {
		if r != "" && !slices.Contains(out, id.RoomID(r)) {
			out = append(out, id.RoomID(r))
		}
	}
	return out
}

// roomUse says what room may be used for.
func (b *Bot) roomUse(ctx context.Context, room id.RoomID) roomUse {
	if !slices.Contains(b.planRooms(), room) {
		return roomNotListed
	}
	if b.cfg.AllowUnverifiedDevices {
		return roomForPlans
	}
	enc, err := b.isEncrypted(ctx, room)
	if err != nil {
		// Not knowing is treated as in the clear: the stricter rule here.
		b.logger.Warn("room encryption state", "room_id", room, "err", err)
		return roomInTheClear
	}
	if !enc {
		return roomInTheClear
	}
	return roomForPlans
}

// isEncrypted reads room's encryption from the state store, asking again
// once Postgres is back from an outage.
func (b *Bot) isEncrypted(ctx context.Context, room id.RoomID) (bool, error) {
	if b.cli == nil || b.cli.StateStore == nil {
		return false, fmt.Errorf("no state store")
	}
	enc, err := b.cli.StateStore.IsEncrypted(ctx, room)
	for err != nil && b.awaitStore(ctx) {
		enc, err = b.cli.StateStore.IsEncrypted(ctx, room)
	}
	return enc, err
}

// forPlans reports whether plans may be asked for and decided in the
// event's room. When not, the attempt (what) is audited and the room is
// told once, ever, why and where to go instead; nothing else is said.
func (b *Bot) forPlans(ctx context.Context, evt *event.Event, what string) bool {
	use := b.roomUse(ctx, evt.RoomID)
	if use == roomForPlans {
		return true
	}
	reason := "the room is not one for plans (matrix.ops_room, matrix.rooms)"
	if use == roomInTheClear {
		reason = "the room is not encrypted and approvals.require_verified_device is on"
	}
	b.logger.Info("plan or decision outside the rooms for plans", "room_id", evt.RoomID, "sender", evt.Sender, "what", what, "reason", reason)
	err := b.store.AppendAudit(ctx, store.AuditEntry{Actor: evt.Sender.String(), Action: "chat.refused",
		Detail: map[string]any{"what": what, "reason": reason, "event_id": evt.ID.String(), "room_id": evt.RoomID.String()}})
	if err != nil {
		b.logger.Error("audit refusal", "err", err)
	}
	b.sayWhereOnce(ctx, evt.RoomID, use)
	return false
}

// sayWhereOnce tells room, once for as long as the database lasts, why it
// takes no plans and where they belong.
func (b *Bot) sayWhereOnce(ctx context.Context, room id.RoomID, use roomUse) {
	kind := "not_for_plans"
	if use == roomInTheClear {
		kind = "in_the_clear"
	}
	if ok, err := b.store.MarkEventHandled(ctx, room.String(), "notice:"+kind+":"+room.String()); err != nil || !ok {
		return
	}
	var plain, htm string
	if use == roomInTheClear {
		plain, htm = NoticeRoomInTheClear()
	} else {
		plain, htm = NoticeNotForPlans(b.planRooms())
	}
	b.sendNotice(ctx, room, plain, htm, nil)
}

// cardRoom is where x's card goes: its own room when that is one for
// plans, and otherwise the ops room, so a plan made for any other room
// (an agent session's whose room is no longer listed, say) is never
// carded only there. Empty means nowhere: no ops room is set.
func (b *Bot) cardRoom(ctx context.Context, room id.RoomID) id.RoomID {
	if b.roomUse(ctx, room) == roomForPlans || room == id.RoomID(b.cfg.OpsRoom) {
		return room
	}
	return id.RoomID(b.cfg.OpsRoom)
}

// copyToOpsRoom shows the ops room a plan carded in another room for
// plans, once: every plan is seen there, wherever it is decided. The copy
// is edited as the card is (editOpsCopy) and decides nothing itself.
func (b *Bot) copyToOpsRoom(ctx context.Context, room id.RoomID, plain, htm string, x store.Execution) {
	ops := id.RoomID(b.cfg.OpsRoom)
	if ops == "" || room == ops {
		return
	}
	if ok, err := b.store.ClaimNotice(ctx, x.ID, opsCopy); err != nil || !ok {
		return
	}
	plain, htm = opsCopyText(room, plain, htm, x)
	copied := b.sendNotice(ctx, ops, plain, htm, nil)
	if copied == "" {
		return
	}
	if err := b.store.SetNoticeEvent(ctx, x.ID, opsCopy, copied.String()); err != nil {
		b.logger.Warn("record the ops room's copy of a card; it will not follow the plan", "execution_id", x.ID, "err", err)
	}
}

// opsCopy is the notice kind of a card's copy in the ops room.
const opsCopy = "ops_copy"

// opsCopyText is the ops room's copy of a card carded in room.
func opsCopyText(room id.RoomID, plain, htm string, x store.Execution) (string, string) {
	lead := fmt.Sprintf("Plan %s was asked for in %s and is decided there:", x.PlanCode, room)
	return lead + "\n" + plain, "<p>" + escape(lead) + "</p>" + htm
}

// editOpsCopy brings the ops room's copy of x's card, if it has one, to
// the card's new text.
func (b *Bot) editOpsCopy(ctx context.Context, x store.Execution, plain, htm string) error {
	copied, err := b.store.NoticeEvent(ctx, x.ID, opsCopy)
	if err != nil || copied == "" {
		return err
	}
	plain, htm = opsCopyText(id.RoomID(x.RoomID), plain, htm, x)
	return b.editMessage(ctx, id.RoomID(b.cfg.OpsRoom), id.EventID(copied), event.MsgNotice, plain, htm)
}

// reads reports whether a command only reads: it is answered in any room.
func (k CommandKind) reads() bool {
	switch k {
	case CmdHelp, CmdStatus, CmdListContainers, CmdShow, CmdPending, CmdHistory, CmdProblems, CmdSnapshots, CmdBrief, CmdWindows:
		return true
	}
	return false
}

// readersOnly reports whether a read is for the operators and the listed
// readers only: what it shows goes past the fleet at a glance.
func (k CommandKind) readersOnly() bool {
	switch k {
	case CmdShow, CmdHistory, CmdProblems, CmdSnapshots, CmdBrief, CmdWindows:
		return true
	}
	return false
}

// readsHere lists what the bot answers in any room.
const readsHere = "Here I answer questions about the fleet: status, list containers, show <name>, problems, snapshots <container>, history, brief."

// matrixTo links a room for Matrix clients.
func matrixTo(room id.RoomID) string { return "https://matrix.to/#/" + string(room) }

// NoticeNotForPlans is said once in a room that is not one for plans.
func NoticeNotForPlans(rooms []id.RoomID) (plain, html string) {
	if len(rooms) == 0 {
		p := "I take no plans and count no decisions in this room: plans are asked for and decided only in the ops room, and none is configured yet " +
			"(matrix.ops_room). " + readsHere
		return p, escape(p)
	}
	links := make([]string, len(rooms))
	hlinks := make([]string, len(rooms))
	for i, r := range rooms {
		links[i] = matrixTo(r)
		hlinks[i] = fmt.Sprintf(`<a href="%s">%s</a>`, escape(matrixTo(r)), escape(string(r)))
	}
	p := "I take no plans and count no decisions in this room: plans are asked for and decided only in the ops room, where every operator sees them (" +
		strings.Join(links, ", ") + "). " + readsHere
	h := "I take no plans and count no decisions in this room: plans are asked for and decided only in the ops room, where every operator sees them (" +
		strings.Join(hlinks, ", ") + "). " + escape(readsHere)
	return p, h
}

// NoticeRoomInTheClear is said once in a room for plans that is not
// encrypted while verified devices are required.
func NoticeRoomInTheClear() (plain, html string) {
	p := "This room is not encrypted, so I take no plans and count no decisions here: approvals need a verified session " +
		"(approvals.require_verified_device), and in a room in the clear anyone holding an operator's password or access token could decide unseen. " +
		"A room admin can turn encryption on (Element: Room settings → Security & Privacy → Encrypted); it cannot be turned off again."
	return p, escape(p)
}
