package bot

import (
	"context"
	"fmt"
	"html"
	"strings"

	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/store"
)

// announceDiscoveries posts, in the ops room, one notice for each
// inventory that found containers new, back, changed or gone. An
// inventory that changed nothing says nothing.
func (b *Bot) announceDiscoveries(ctx context.Context) {
	room := id.RoomID(b.cfg.OpsRoom)
	list, err := b.store.InventoryNotices(ctx)
	if err != nil {
		if ctx.Err() == nil {
			b.logger.Warn("list discovery notices", "err", err)
		}
		return
	}
	for _, n := range list {
		if ok, err := b.store.ClaimInventoryNotice(ctx, n.RunID); err != nil || !ok {
			continue
		}
		plain, htm := discoveryText(n.Changes)
		if b.sendNotice(ctx, room, plain, htm, nil) == "" {
			b.logger.Warn("could not post a discovery notice; trying again on the next pass", "run_id", n.RunID, "room_id", room)
			if err := b.store.UnclaimInventoryNotice(ctx, n.RunID); err != nil {
				b.logger.Error("unclaim a discovery notice that was not posted", "run_id", n.RunID, "err", err)
			}
		}
	}
}

// maxNoticeNames bounds the containers one part of a notice names.
const maxNoticeNames = 10

// discoveryText sums up one inventory in a sentence: "On strong:
// discovered 2 new containers: 150 newbox, 151 web; 131 teddycloud is
// gone." Names are host names the actuator and the bot both validated.
func discoveryText(c store.InventoryChanges) (plain, htm string) {
	var parts []string
	if n := len(c.New); n == 1 {
		parts = append(parts, "discovered a new container: "+names(c.New))
	} else if n > 1 {
		parts = append(parts, fmt.Sprintf("discovered %d new containers: %s", n, names(c.New)))
	}
	if len(c.Back) > 0 {
		parts = append(parts, names(c.Back)+isAre(len(c.Back))+" back")
	}
	if len(c.Changed) > 0 {
		var changed []string
		for i, ch := range c.Changed {
			if i == maxNoticeNames {
				changed = append(changed, fmt.Sprintf("and %d more", len(c.Changed)-i))
				break
			}
			keys := make([]string, len(ch.Keys))
			for j, k := range ch.Keys {
				keys[j] = strings.TrimSuffix(strings.TrimSuffix(k, "_mb"), "_gb")
			}
			changed = append(changed, fmt.Sprintf("%d %s (%s)", ch.VMID, ch.Name, strings.Join(keys, ", ")))
		}
		parts = append(parts, "changed: "+strings.Join(changed, ", "))
	}
	if len(c.Gone) > 0 {
		parts = append(parts, names(c.Gone)+isAre(len(c.Gone))+" gone")
	}
	body := "On " + c.Host + ": " + strings.Join(parts, "; ") + "."
	plain = "🔎 " + body + " Say `list containers` to see the fleet."
	htm = "🔎 " + html.EscapeString(body) + " Say <code>list containers</code> to see the fleet."
	return plain, htm
}

func names(refs []store.ContainerRef) string {
	var out []string
	for i, r := range refs {
		if i == maxNoticeNames {
			out = append(out, fmt.Sprintf("and %d more", len(refs)-i))
			break
		}
		out = append(out, fmt.Sprintf("%d %s", r.VMID, r.Name))
	}
	if len(out) == 2 {
		return out[0] + " and " + out[1]
	}
	return strings.Join(out, ", ")
}

func isAre(n int) string {
	if n == 1 {
		return " is"
	}
	return " are"
}
