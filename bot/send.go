package bot

import (
	"context"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// sendNotice posts routine text as m.notice, which clients do not push.
// html may be empty; replyTo, when set, threads it under that event.
func (b *Bot) sendNotice(ctx context.Context, room id.RoomID, plain, html string, replyTo *event.Event) id.EventID {
	content := &event.MessageEventContent{MsgType: event.MsgNotice, Body: plain, Mentions: &event.Mentions{}}
	return b.send(ctx, room, content, html, replyTo)
}

// sendEscalation posts text that must reach an operator's phone: m.text
// with m.mentions naming the operators. Default push rules suppress
// notices even when they mention someone.
func (b *Bot) sendEscalation(ctx context.Context, room id.RoomID, plain, html string, replyTo *event.Event) id.EventID {
	content := &event.MessageEventContent{MsgType: event.MsgText, Body: plain, Mentions: &event.Mentions{UserIDs: b.operatorMentions()}}
	return b.send(ctx, room, content, html, replyTo)
}

func (b *Bot) send(ctx context.Context, room id.RoomID, content *event.MessageEventContent, html string, replyTo *event.Event) id.EventID {
	return b.sendWithExtra(ctx, room, content, html, replyTo, nil)
}

// cardKey marks a plan card with its execution id, so a decision on the
// card can be tied to it even before the card's event id is recorded.
const cardKey = "io.nomos.execution"

// sendWithExtra is send with extra top-level content keys.
func (b *Bot) sendWithExtra(ctx context.Context, room id.RoomID, content *event.MessageEventContent, html string, replyTo *event.Event, extra map[string]any) id.EventID {
	ev, err := b.trySend(ctx, room, content, html, replyTo, extra)
	if err != nil {
		b.logger.Error("send message", "room_id", room, "err", err)
		return ""
	}
	return ev
}

// trySend is sendWithExtra that leaves logging a failure to the caller.
func (b *Bot) trySend(ctx context.Context, room id.RoomID, content *event.MessageEventContent, html string, replyTo *event.Event, extra map[string]any) (id.EventID, error) {
	if html != "" {
		content.Format = event.FormatHTML
		content.FormattedBody = html
	}
	if replyTo != nil {
		content.RelatesTo = (&event.RelatesTo{}).SetReplyTo(replyTo.ID)
	}
	var payload any = content
	if len(extra) > 0 {
		payload = &event.Content{Parsed: content, Raw: extra}
	}
	resp, err := b.cli.SendMessageEvent(ctx, room, event.EventMessage, payload)
	if err != nil {
		return "", err
	}
	return resp.EventID, nil
}

// editMessage replaces an earlier message's content. Edits carry empty
// m.mentions, so they never ping anyone again.
func (b *Bot) editMessage(ctx context.Context, room id.RoomID, original id.EventID, msgType event.MessageType, plain, html string) error {
	content := &event.MessageEventContent{MsgType: msgType, Body: plain, Mentions: &event.Mentions{}}
	if html != "" {
		content.Format = event.FormatHTML
		content.FormattedBody = html
	}
	content.SetEdit(original)
	_, err := b.cli.SendMessageEvent(ctx, room, event.EventMessage, content)
	return err
}
