package bot

import (
	"context"
	"errors"
	"net/http"
	"time"

	"maunium.net/go/mautrix"
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
	resp, err := b.sendEvent(ctx, room, payload)
	if err != nil {
		return "", err
	}
	return resp.EventID, nil
}

// sendAttempts bounds how often one message is offered to the homeserver,
// and sendRetryDelay is the wait before the second offer, doubled after each.
const (
	sendAttempts   = 4
	sendRetryDelay = 250 * time.Millisecond
)

// sendEvent sends a room message, and sends it again, under the same
// transaction id, when the homeserver failed (HTTP 5xx or 429) or its answer
// was lost. The transaction id makes a repeat idempotent: a homeserver that
// stored the event before it failed answers the repeat with the same event
// (client-server API, "Transaction identifiers"), so a card is never posted
// twice, and one the homeserver did not take is not lost to a passing fault.
// An answer such as 403 is final. mautrix retries only 502, 503, 504 and 429,
// and only when told to, with a new transaction id for every call.
func (b *Bot) sendEvent(ctx context.Context, room id.RoomID, payload any) (*mautrix.RespSendEvent, error) {
	txn := b.cli.TxnID()
	delay := sendRetryDelay
	for attempt := 1; ; attempt++ {
		resp, err := b.cli.SendMessageEvent(ctx, room, event.EventMessage, payload, mautrix.ReqSendEvent{TransactionID: txn})
		if err == nil || attempt == sendAttempts || !sendRetryable(ctx, err) {
			return resp, err
		}
		b.logger.WarnContext(ctx, "homeserver did not take a message; sending it again", "room_id", room, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(delay):
		}
		delay *= 2
	}
}

// sendRetryable reports whether a failed send may succeed if repeated.
func sendRetryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var httpErr mautrix.HTTPError
	if errors.As(err, &httpErr) && httpErr.Response != nil {
		code := httpErr.Response.StatusCode
		return code >= http.StatusInternalServerError || code == http.StatusTooManyRequests
	}
	// No answer at all: the request may not have arrived, or its answer was lost.
	return true
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
	_, err := b.sendEvent(ctx, room, content)
	return err
}
