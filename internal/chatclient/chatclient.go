// Package chatclient is a small terminal Matrix client for one room, so
// anyone can try Nomos without installing Element. It logs in with a
// password, shows the room's last few messages and then live ones as plain
// lines, with edits applied and HTML rendered as text, and sends what the
// operator types: messages, reactions and replies to the bot's last plan
// card. It does not decrypt end-to-end encrypted messages.
package chatclient

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Config is what Run needs.
type Config struct {
	// HomeserverURL is the homeserver's client-server base URL.
	HomeserverURL string
	// UserID is the full Matrix id to log in as, with Password.
	UserID   string
	Password string
	// RoomID is the one room shown. Run joins it if the user is only
	// invited.
	RoomID string
	// BotUserID is the Nomos bot. /react and /reply go to its last plan
	// card, or to its last message when none looks like a plan. When empty,
	// any other user's messages count as the bot's.
	BotUserID string
	// DeviceID is the device to log in as; a fixed id lets every run reuse
	// one device. Defaults to NOMOSCHAT.
	DeviceID string
	// Backlog is how many earlier messages are shown on start. Defaults to
	// 10; a negative value shows none.
	Backlog int
	// In carries the operator's lines; Run returns at its end. Run does not
	// close it, and a goroutine blocked reading it ends when it does.
	In io.Reader
	// Out receives whole plain-text lines, without terminal escapes.
	Out io.Writer
	// Logger records failures with their causes. Defaults to discarding.
	Logger *slog.Logger
	// Clock tells today's date, so the times of today's messages print
	// without one. Defaults to time.Now.
	Clock func() time.Time
}

// DefaultDeviceID is the device Run logs in as when Config.DeviceID is empty.
const DefaultDeviceID = "NOMOSCHAT"

const (
	defaultBacklog = 10
	// historyLimit bounds the events asked for per sync: enough that the
	// backlog's edits and reactions arrive with it.
	historyLimit = 50
	syncTimeout  = 30 * time.Second
	maxBackoff   = 30 * time.Second
)

func (c *Config) validate() error {
	var errs []error
	if c.HomeserverURL == "" {
		errs = append(errs, errors.New("homeserver URL is required"))
	}
	if _, _, err := id.UserID(c.UserID).Parse(); err != nil {
		errs = append(errs, fmt.Errorf("user id %q: %w", c.UserID, err))
	}
	if c.Password == "" {
		errs = append(errs, errors.New("password is required"))
	}
	if !strings.HasPrefix(c.RoomID, "!") {
		errs = append(errs, fmt.Errorf("room id %q: must start with an exclamation mark", c.RoomID))
	}
	if c.BotUserID != "" {
		if _, _, err := id.UserID(c.BotUserID).Parse(); err != nil {
			errs = append(errs, fmt.Errorf("bot user id %q: %w", c.BotUserID, err))
		}
	}
	if c.In == nil || c.Out == nil {
		errs = append(errs, errors.New("the input and output streams are required"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("chatclient config: %w", err)
	}
	c.DeviceID = cmp.Or(c.DeviceID, DefaultDeviceID)
	c.Backlog = cmp.Or(c.Backlog, defaultBacklog)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return nil
}

// Run logs in, joins the room if needed, prints the last Backlog messages
// and then every new one, and sends the lines read from In until In ends,
// the operator types /quit or ctx ends. Those three return nil; an error
// means the session could not start or the homeserver refused it.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	c := &client{
		cfg:    cfg,
		room:   id.RoomID(cfg.RoomID),
		bot:    id.UserID(cfg.BotUserID),
		logger: cfg.Logger.With("room_id", cfg.RoomID, "user_id", cfg.UserID),
		msgs:   map[id.EventID]*message{},
		seen:   map[id.EventID]bool{},
	}
	since, err := c.start(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}

	lines := make(chan string)
	stop := make(chan struct{})
	defer close(stop)
	go readLines(cfg.In, lines, stop, c.logger)

	syncCtx, cancelSync := context.WithCancel(ctx)
	syncErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { syncErr <- c.syncLoop(syncCtx, since) })
	defer func() {
		cancelSync()
		wg.Wait()
	}()

	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-syncErr:
			return err
		case line, ok := <-lines:
			if !ok {
				return nil
			}
			if quit := c.run(ctx, parseCommand(line)); quit {
				return nil
			}
		}
	}
}

// readLines sends In's lines to lines and closes it at the end of In.
func readLines(in io.Reader, lines chan<- string, stop <-chan struct{}, logger *slog.Logger) {
	defer close(lines)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		select {
		case lines <- sc.Text():
		case <-stop:
			return
		}
	}
	if err := sc.Err(); err != nil {
		logger.Error("read input; leaving", "err", err)
	}
}

// client is one chat session.
type client struct {
	cfg      Config
	cli      *mautrix.Client
	room     id.RoomID
	bot      id.UserID
	logger   *slog.Logger
	filterID string

	// mu guards the fields below and serialises writes to Out.
	mu sync.Mutex
	// msgs holds every message seen, by event id, so edits, reactions and
	// replies find theirs.
	msgs map[id.EventID]*message
	// order lists the messages in timeline order.
	order []*message
	// shown lists the printed messages; shown[i] is #i+1.
	shown []*message
	// seen holds every event id handled, so nothing prints twice.
	seen      map[id.EventID]bool
	roomName  string
	encrypted bool
}

// message is one m.room.message (or undecryptable event) of the room, as
// last edited.
type message struct {
	id         id.EventID
	num        int // #num once printed, else 0
	sender     id.UserID
	ts         time.Time
	msgType    event.MessageType
	text       string
	replyTo    id.EventID
	mentionsMe bool
	edited     bool
	deleted    bool
	encrypted  bool
	// plan is set once the message looks like a plan card, and stays set
	// through the edits that turn the card into a status.
	plan bool
}

// start logs in, joins, and prints the room's header and backlog. It
// returns the sync token to continue from.
func (c *client) start(ctx context.Context) (string, error) {
	if err := c.login(ctx); err != nil {
		return "", err
	}
	justJoined, err := c.join(ctx)
	if err != nil {
		return "", err
	}
	if err := c.createFilter(ctx); err != nil {
		return "", err
	}
	resp, err := c.firstSync(ctx, justJoined)
	if err != nil {
		return "", err
	}
	// The backlog comes from /messages: the first sync's timeline can be
	// empty right after a join, and is limited to what that sync saw.
	history, err := c.cli.Messages(ctx, c.room, "", "", mautrix.DirectionBackward, &mautrix.FilterPart{Types: shownTypes}, historyLimit)
	if err != nil {
		return "", fmt.Errorf("read the room's history: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var timeline []*event.Event
	if r := resp.Rooms.Join[c.room]; r != nil {
		c.applyState(r.State.Events)
		if r.StateAfter != nil {
			c.applyState(r.StateAfter.Events)
		}
		c.applyState(r.Timeline.Events)
		timeline = r.Timeline.Events
	}
	for i := len(history.Chunk) - 1; i >= 0; i-- {
		c.apply(history.Chunk[i], false)
	}
	for _, evt := range timeline { // already seen ones are skipped
		c.apply(evt, false)
	}
	c.printHeader()
	return resp.NextBatch, nil
}

// shownTypes are the room events the client reads: messages, reactions and
// redactions, encrypted or not.
var shownTypes = []event.Type{event.EventMessage, event.EventEncrypted, event.EventReaction, event.EventRedaction}

// login logs in with the password, as the configured device.
func (c *client) login(ctx context.Context) error {
	cli, err := mautrix.NewClient(c.cfg.HomeserverURL, "", "")
	if err != nil {
		return fmt.Errorf("homeserver URL: %w", err)
	}
	_, err = cli.Login(ctx, &mautrix.ReqLogin{
		Type:                     mautrix.AuthTypePassword,
		Identifier:               mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: c.cfg.UserID},
		Password:                 c.cfg.Password,
		DeviceID:                 id.DeviceID(c.cfg.DeviceID),
		InitialDeviceDisplayName: "nomos chat",
		StoreCredentials:         true,
	})
	if err != nil {
		return fmt.Errorf("log in as %s: %w", c.cfg.UserID, err)
	}
	c.cli = cli
	c.logger.Debug("logged in", "device_id", cli.DeviceID)
	return nil
}

// join joins the room unless the user is in it already.
func (c *client) join(ctx context.Context) (justJoined bool, err error) {
	joined, err := c.cli.JoinedRooms(ctx)
	if err != nil {
		return false, fmt.Errorf("list joined rooms: %w", err)
	}
	if slices.Contains(joined.JoinedRooms, c.room) {
		return false, nil
	}
	if _, err := c.cli.JoinRoomByID(ctx, c.room); err != nil {
		return false, fmt.Errorf("join %s: %w", c.room, err)
	}
	c.logger.Info("joined room")
	return true, nil
}

// createFilter makes the sync filter: the room's shown events and its
// name and encryption, nothing else.
func (c *client) createFilter(ctx context.Context) error {
	f, err := c.cli.CreateFilter(ctx, &mautrix.Filter{
		Room: &mautrix.RoomFilter{
			Rooms:    []id.RoomID{c.room},
			Timeline: &mautrix.FilterPart{Limit: historyLimit, Types: shownTypes},
			State:    &mautrix.FilterPart{Types: []event.Type{event.StateRoomName, event.StateEncryption}},
			// Receipts and typing are not shown.
			Ephemeral:   &mautrix.FilterPart{NotTypes: []event.Type{{Type: "*"}}},
			AccountData: &mautrix.FilterPart{NotTypes: []event.Type{{Type: "*"}}},
		},
		Presence:    &mautrix.FilterPart{NotTypes: []event.Type{{Type: "*"}}},
		AccountData: &mautrix.FilterPart{NotTypes: []event.Type{{Type: "*"}}},
	})
	if err != nil {
		return fmt.Errorf("create sync filter: %w", err)
	}
	c.filterID = f.FilterID
	return nil
}

// firstSync runs the first sync. Right after a join the homeserver's sync
// view can lag behind it, and until it shows the room joined, /messages
// shows nothing of the room's past: wait for it (a few seconds at most).
func (c *client) firstSync(ctx context.Context, justJoined bool) (*mautrix.RespSync, error) {
	resp, err := c.cli.SyncRequest(ctx, 0, "", c.filterID, false, "")
	if err != nil {
		return nil, fmt.Errorf("first sync: %w", err)
	}
	for wait := 0; justJoined && resp.Rooms.Join[c.room] == nil && wait < 25; wait++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if resp, err = c.cli.SyncRequest(ctx, 0, "", c.filterID, false, ""); err != nil {
			return nil, fmt.Errorf("first sync: %w", err)
		}
	}
	return resp, nil
}

// printHeader prints who and where, then the backlog with edits applied.
func (c *client) printHeader() {
	where := string(c.room)
	if c.roomName != "" {
		where = fmt.Sprintf("%q (%s)", c.roomName, c.room)
	}
	c.printf("Connected to %s as %s, device %s.", where, c.cfg.UserID, c.cfg.DeviceID)
	if c.encrypted {
		c.printf("This room is encrypted: nomos chat can't read encrypted messages, and what you type is sent unencrypted.")
	}
	var backlog []*message
	if c.cfg.Backlog > 0 {
		for i := len(c.order) - 1; i >= 0 && len(backlog) < c.cfg.Backlog; i-- {
			if !c.order[i].deleted {
				backlog = append(backlog, c.order[i])
			}
		}
	}
	if len(backlog) > 0 {
		if len(backlog) == 1 {
			c.printf("── last message ──")
		} else {
			c.printf("── last %d messages ──", len(backlog))
		}
		for i := len(backlog) - 1; i >= 0; i-- {
			c.show(backlog[i])
		}
	}
	c.printf("── live: type a message, or /help ──")
}

// syncLoop long-polls the homeserver and prints what arrives until ctx
// ends or the homeserver rejects the session.
func (c *client) syncLoop(ctx context.Context, since string) error {
	backoff := time.Second
	for {
		resp, err := c.cli.SyncRequest(ctx, int(syncTimeout/time.Millisecond), since, c.filterID, false, "")
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if errors.Is(err, mautrix.MUnknownToken) || errors.Is(err, mautrix.MForbidden) {
				return fmt.Errorf("sync: %w", err)
			}
			c.logger.Warn("sync failed; retrying", "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = time.Second
		since = resp.NextBatch
		if _, left := resp.Rooms.Leave[c.room]; left {
			c.mu.Lock()
			c.printf("You are no longer in the room.")
			c.mu.Unlock()
			return fmt.Errorf("left room %s", c.room)
		}
		r := resp.Rooms.Join[c.room]
		if r == nil {
			continue
		}
		c.mu.Lock()
		c.applyState(r.State.Events)
		if r.Timeline.Limited && len(c.order) > 0 {
			c.printf("… (some messages were skipped)")
		}
		for _, evt := range r.Timeline.Events {
			c.apply(evt, true)
		}
		c.mu.Unlock()
	}
}

// applyState notes the room's name and whether it is encrypted.
func (c *client) applyState(evts []*event.Event) {
	for _, evt := range evts {
		if evt.StateKey == nil || *evt.StateKey != "" {
			continue
		}
		switch evt.Type.Type {
		case event.StateRoomName.Type:
			evt.Type.Class = event.StateEventType
			if err := evt.Content.ParseRaw(evt.Type); err == nil || errors.Is(err, event.ErrContentAlreadyParsed) {
				c.roomName = evt.Content.AsRoomName().Name
			}
		case event.StateEncryption.Type:
			c.encrypted = true
		}
	}
}

// apply records one timeline event and, when live, prints it.
func (c *client) apply(evt *event.Event, live bool) {
	if evt.StateKey != nil || c.seen[evt.ID] {
		return
	}
	c.seen[evt.ID] = true
	evt.Type.Class = event.MessageEventType
	switch evt.Type.Type {
	case event.EventMessage.Type, event.EventReaction.Type, event.EventRedaction.Type:
		if err := evt.Content.ParseRaw(evt.Type); err != nil && !errors.Is(err, event.ErrContentAlreadyParsed) {
			c.logger.Debug("unreadable event", "event_id", evt.ID, "type", evt.Type.Type, "err", err)
			return
		}
	}
	switch evt.Type.Type {
	case event.EventMessage.Type:
		content := evt.Content.AsMessage()
		if content.MsgType == "" {
			return // redacted
		}
		if orig := content.RelatesTo.GetReplaceID(); orig != "" {
			c.applyEdit(evt, orig, content, live)
			return
		}
		m := &message{
			id:      evt.ID,
			sender:  evt.Sender,
			ts:      time.UnixMilli(evt.Timestamp),
			msgType: content.MsgType,
			replyTo: content.RelatesTo.GetNonFallbackReplyTo(),
		}
		c.setContent(m, content)
		c.add(m, live)
	case event.EventEncrypted.Type:
		m := &message{
			id:        evt.ID,
			sender:    evt.Sender,
			ts:        time.UnixMilli(evt.Timestamp),
			encrypted: true,
			text:      "[encrypted; nomos chat can't decrypt it]",
		}
		c.add(m, live)
	case event.EventReaction.Type:
		rel := evt.Content.AsReaction().RelatesTo
		if !live || rel.Type != event.RelAnnotation {
			return
		}
		c.printf("  %s %s reacted %s to %s", c.timestamp(time.UnixMilli(evt.Timestamp)), shortName(evt.Sender), rel.Key, c.ref(rel.EventID))
	case event.EventRedaction.Type:
		target := cmp.Or(evt.Redacts, evt.Content.AsRedaction().Redacts)
		m := c.msgs[target]
		if m == nil || m.deleted {
			return
		}
		m.deleted, m.text, m.plan = true, "", false
		if live && m.num > 0 {
			c.printf("✗ #%d from %s was deleted", m.num, shortName(m.sender))
		}
	}
}

// applyEdit puts an m.replace edit's new content on the message it edits
// and, when live, prints the message again marked as edited.
func (c *client) applyEdit(evt *event.Event, orig id.EventID, content *event.MessageEventContent, live bool) {
	nc := content.NewContent
	if nc == nil {
		// Not a valid edit; the fallback body is all there is.
		nc = &event.MessageEventContent{MsgType: content.MsgType, Body: strings.TrimPrefix(content.Body, "* ")}
	}
	m := c.msgs[orig]
	if m == nil {
		// The original is older than what this client has seen.
		m = &message{id: orig, sender: evt.Sender, ts: time.UnixMilli(evt.Timestamp), msgType: nc.MsgType}
		c.setContent(m, nc)
		m.edited = true
		if live {
			c.printEdit(m, time.UnixMilli(evt.Timestamp))
		}
		return
	}
	if m.sender != evt.Sender || m.deleted {
		return // only the sender may edit, per the spec
	}
	m.msgType = cmp.Or(nc.MsgType, m.msgType)
	c.setContent(m, nc)
	m.edited = true
	if live {
		c.printEdit(m, time.UnixMilli(evt.Timestamp))
	}
}

// setContent renders a message's (new) content onto m.
func (c *client) setContent(m *message, content *event.MessageEventContent) {
	m.text = messageText(content)
	m.mentionsMe = c.mentionsMe(content, m.text)
	if c.isBot(m.sender) && looksLikePlan(m.text) {
		m.plan = true
	}
}

// messageText is what a message says, as terminal text.
func messageText(content *event.MessageEventContent) string {
	var text string
	if content.Format == event.FormatHTML && content.FormattedBody != "" {
		text = renderHTML(content.FormattedBody)
	}
	if text == "" {
		text = strings.TrimSpace(content.Body)
		if content.RelatesTo.GetReplyTo() != "" {
			text = event.TrimReplyFallbackText(text)
		}
	}
	switch content.MsgType {
	case event.MsgImage, event.MsgFile, event.MsgAudio, event.MsgVideo:
		text = fmt.Sprintf("[%s] %s", strings.TrimPrefix(string(content.MsgType), "m."), text)
	}
	return text
}

// mentionsMe tells whether content pings this user: through m.mentions
// when the sender set it, else by naming the user in the text.
func (c *client) mentionsMe(content *event.MessageEventContent, text string) bool {
	me := id.UserID(c.cfg.UserID)
	if content.Mentions != nil {
		return content.Mentions.Room || slices.Contains(content.Mentions.UserIDs, me)
	}
	return strings.Contains(content.Body, string(me)) || strings.Contains(text, string(me))
}

func (c *client) isBot(u id.UserID) bool {
	if c.bot != "" {
		return u == c.bot
	}
	return u != id.UserID(c.cfg.UserID)
}

// add records a new message and, when live, prints it.
func (c *client) add(m *message, live bool) {
	c.msgs[m.id] = m
	c.order = append(c.order, m)
	if live {
		c.show(m)
	}
}

// show prints a message, numbering it the first time.
func (c *client) show(m *message) {
	if m.num == 0 {
		c.shown = append(c.shown, m)
		m.num = len(c.shown)
	}
	c.printMessage(fmt.Sprintf("#%d", m.num), m, m.ts)
}

func (c *client) printEdit(m *message, at time.Time) {
	ref := "[edited]"
	if m.num > 0 {
		ref = fmt.Sprintf("[edited #%d]", m.num)
	}
	c.printMessage("↻ "+ref, m, at)
}

// printMessage prints "<lead> <time> <sender> [tags]: <text>", with a
// multi-line text indented below the header. A message that mentions this
// user starts with "» ".
func (c *client) printMessage(lead string, m *message, at time.Time) {
	var tags []string
	switch m.msgType {
	case event.MsgNotice:
		tags = append(tags, "notice")
	case event.MsgEmote:
		tags = append(tags, "emote")
	}
	if m.replyTo != "" {
		tags = append(tags, "reply to "+c.ref(m.replyTo))
	}
	if m.edited && !strings.HasPrefix(lead, "↻") {
		tags = append(tags, "edited")
	}
	header := fmt.Sprintf("%s %s %s", lead, c.timestamp(at), shortName(m.sender))
	if len(tags) > 0 {
		header += " [" + strings.Join(tags, ", ") + "]"
	}
	if m.mentionsMe {
		header = "» " + header
	}
	text := m.text
	if text == "" {
		text = "(empty message)"
	}
	if !strings.Contains(text, "\n") {
		c.printf("%s: %s", header, text)
		return
	}
	var b strings.Builder
	b.WriteString(header + ":")
	for line := range strings.SplitSeq(text, "\n") {
		b.WriteString("\n    " + line)
	}
	c.printf("%s", b.String())
}

// ref names a message for the operator: "#N" when it was printed.
func (c *client) ref(evtID id.EventID) string {
	m := c.msgs[evtID]
	switch {
	case m == nil:
		return "an earlier message"
	case m.num > 0:
		return fmt.Sprintf("#%d", m.num)
	default:
		return "an earlier message from " + shortName(m.sender)
	}
}

// timestamp prints a time of today as 15:04 and an older one with its date.
func (c *client) timestamp(t time.Time) string {
	now := c.cfg.Clock()
	t = t.In(now.Location())
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04")
	}
	return t.Format("Jan 2 15:04")
}

// shortName is a user id's localpart.
func shortName(u id.UserID) string {
	local, _, err := u.Parse()
	if err != nil || local == "" {
		return string(u)
	}
	return local
}

// printf writes one or more whole lines to Out; c.mu must be held.
func (c *client) printf(format string, args ...any) {
	if _, err := fmt.Fprintf(c.cfg.Out, format+"\n", args...); err != nil {
		c.logger.Debug("write output", "err", err)
	}
}
