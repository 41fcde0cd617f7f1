package bot_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto/cryptohelper"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/actuator"
	"github.com/nomoshq/nomos/bot"
	"github.com/nomoshq/nomos/bot/agent"
	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/leader"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const mcpToken = "test-token-0123456789abcdef"

// bundle is one bot with its own database, Redis database, labsim fleet,
// actuator and room on the shared Dendrite.
type bundle struct {
	ctx      context.Context
	store    *store.Store
	fleet    *testenv.Fleet
	botUser  *testenv.MatrixUser
	operator *testenv.MatrixUser
	guest    *testenv.MatrixUser
	room     id.RoomID
	dbURL    string
	redis    asynq.RedisClientOpt
	redisURL string
	execs    *executions.Service
	priv     ed25519.PrivateKey
	keys     testenv.Keys
	dir      string

	stopBot func()
	// bot is the running bot.
	bot *bot.Bot
	// tune, when set, adjusts the bot's config before it starts.
	tune func(*bot.Config)
	// llm, when set, gives the bot an agent talking to it.
	llm *testenv.ScriptedLLM
	// agentTune, when set, adjusts the agent's config.
	agentTune func(*agent.Config)
	mcp       *mcpserver.Server
	// opCrypto, when set, decrypts what the operator reads.
	opCrypto *cryptohelper.CryptoHelper
	// alerts, when set, announces signals in the room.
	alerts bool
	// operator2, when twoOperators is set, is a second operator in the room.
	operator2    *testenv.MatrixUser
	twoOperators bool
	// deadQueue, when set, gives the gate a Redis that refuses every
	// connection: approved plans stay approved, undispatched.
	deadQueue bool
	// mcpTune, when set, adjusts the MCP server's config.
	mcpTune func(*mcpserver.Config)
	// execTune, when set, adjusts the executions service's config.
	execTune func(*executions.Config)
	// fleetOpts adjust labsim, such as making it enforce nomos gate.
	fleetOpts []testenv.FleetOption
	// lead runs each bot under the leader lock, as `nomos bot` does, so
	// that several may run against one database; elector is the last's.
	lead    bool
	elector *leader.Elector
	// opsRoom makes the bundle's room the ops room; otherwise it is only
	// listed among the rooms for plans (Config.Rooms).
	opsRoom bool
	// encrypted makes the bundle's room end-to-end encrypted and requires
	// verified devices there (withEncryption).
	encrypted bool
}

// withOpsRoom makes the bundle's room the ops room.
func withOpsRoom() func(*bundle) {
	return func(b *bundle) { b.opsRoom = true }
}

// withFleet adjusts labsim in setup.
func withFleet(opts ...testenv.FleetOption) func(*bundle) {
	return func(b *bundle) { b.fleetOpts = opts }
}

// withTwoOperators adds a second operator to the room.
func withTwoOperators() func(*bundle) {
	return func(b *bundle) { b.twoOperators = true }
}

// withMCP adjusts the MCP server's config in setup.
func withMCP(tune func(*mcpserver.Config)) func(*bundle) {
	return func(b *bundle) { b.mcpTune = tune }
}

// operators lists the bundle's operators.
func (b *bundle) operators() []string {
	ops := []string{b.operator.UserID.String()}
	if b.operator2 != nil {
		ops = append(ops, b.operator2.UserID.String())
	}
	return ops
}

// withConfig adjusts the bot's config in setup.
func withConfig(tune func(*bot.Config)) func(*bundle) {
	return func(b *bundle) { b.tune = tune }
}

// withAgent adjusts the agent's config in setup.
func withAgent(tune func(*agent.Config)) func(*bundle) {
	return func(b *bundle) { b.agentTune = tune }
}

// withLLM gives the bot an agent backed by a scripted model.
func withLLM(llm *testenv.ScriptedLLM) func(*bundle) {
	return func(b *bundle) { b.llm = llm }
}

// setup starts a bot on its own database, Redis database, fleet and room
// of the shared homeserver. Under -short the test is skipped before any of
// that is built.
func setup(t testing.TB, opts ...func(*bundle)) *bundle {
	t.Helper()
	testenv.SkipIfShort(t, "the bot needs the Dendrite homeserver")
	b := &bundle{ctx: testenv.Context(t), dir: t.TempDir()}
	for _, o := range opts {
		o(b)
	}
	b.dbURL = testenv.DatabaseURL(t)
	st, err := store.Open(b.ctx, store.Config{URL: b.dbURL, MaxConns: 6})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	b.store = st
	b.fleet = testenv.NewFleet(t, b.fleetOpts...)
	if _, err := st.ApplySeed(b.ctx, b.fleet.Seed); err != nil {
		t.Fatal(err)
	}
	b.redisURL = testenv.RedisURL(t)
	opt, err := asynq.ParseRedisURI(b.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	b.redis = opt.(asynq.RedisClientOpt)
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	b.priv = priv
	b.keys = testenv.NewKeys(t)

	b.botUser = testenv.NewMatrixUser(t, "nomos")
	b.operator = testenv.NewMatrixUser(t, "operator")
	b.guest = testenv.NewMatrixUser(t, "guest")
	invite := []id.UserID{b.botUser.UserID, b.guest.UserID}
	if b.twoOperators {
		b.operator2 = testenv.NewMatrixUser(t, "operator")
		invite = append(invite, b.operator2.UserID)
	}
	req := &mautrix.ReqCreateRoom{Preset: "private_chat", Name: "ops", Invite: invite}
	if b.encrypted {
		operatorCrypto(t, b)
		req.Name, req.InitialState = "encrypted ops", encryptionState()
	}
	resp, err := b.operator.Client.CreateRoom(b.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	b.room = resp.RoomID
	if _, err := b.guest.Client.JoinRoomByID(b.ctx, b.room); err != nil {
		t.Fatal(err)
	}
	if b.operator2 != nil {
		if _, err := b.operator2.Client.JoinRoomByID(b.ctx, b.room); err != nil {
			t.Fatal(err)
		}
	}

	act, err := actuator.New(actuator.Config{
		RedisURL: b.redisURL, VerifyKey: pub, ReportSigningKey: b.keys.ReportSigning, SSHSigner: b.fleet.SSHSigner,
		KnownHostsFile: b.fleet.KnownHostsFile, JournalPath: filepath.Join(b.dir, "journal"),
		Logger: testenv.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	actCtx, stopAct := context.WithCancel(context.Background())
	actDone := make(chan struct{})
	go func() {
		defer close(actDone)
		if err := act.Run(actCtx); err != nil && actCtx.Err() == nil {
			t.Errorf("actuator: %v", err)
		}
	}()
	t.Cleanup(func() { stopAct(); <-actDone })

	b.startBot(t)
	// The bot joins on the operator's invite.
	b.waitFor(t, func(e *event.Event) bool {
		return e.Type == event.StateMember && e.GetStateKey() == b.botUser.UserID.String() && e.Content.AsMember().Membership == event.MembershipJoin
	})
	if b.encrypted {
		awaitKeyShare(t, b)
	}
	return b
}

// startBot runs a bot against the bundle until stopBot is called.
func (b *bundle) startBot(t testing.TB) {
	t.Helper()
	queue := b.redis
	if b.deadQueue {
		queue = asynq.RedisClientOpt{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond}
	}
	client := asynq.NewClient(queue)
	rules, err := policy.NewRules(policy.RulesConfig{Operators: b.operators()})
	if err != nil {
		t.Fatal(err)
	}
	ecfg := executions.Config{Store: b.store, Queue: client, SigningKey: b.priv, ReportVerifyKey: b.keys.ReportVerify, Rules: rules, Logger: testenv.Logger(t)}
	if b.execTune != nil {
		b.execTune(&ecfg)
	}
	b.execs, err = executions.New(ecfg)
	if err != nil {
		t.Fatal(err)
	}
	cryptoDB, err := dbutil.NewWithDialect(b.dbURL, "pgx")
	if err != nil {
		t.Fatal(err)
	}
	cfg := bot.Config{
		HomeserverURL: testenv.Homeserver(t).URL(), UserID: b.botUser.UserID.String(), Password: b.botUser.Password,
		Operators: b.operators(), Store: b.store, Executions: b.execs,
		CryptoDB: cryptoDB, PickleKey: []byte("test pickle key 0123456789"),
		RecoveryKeyFile: filepath.Join(b.dir, "recovery_key"), Redis: b.redis,
		EditInterval: 200 * time.Millisecond, Logger: testenv.Logger(t),
		// The dev setup: a room in the clear, for clients that speak plain
		// Matrix, takes plans only while verified devices are not required.
		Rooms: []string{b.room.String()}, AllowUnverifiedDevices: !b.encrypted,
	}
	if b.opsRoom {
		cfg.OpsRoom = b.room.String()
	}
	if b.llm != nil {
		// A request token made for the operator, as nomos mcp token
		// -scope request -for makes one: its plans are on their behalf.
		mcfg := mcpserver.Config{Store: b.store, Executions: b.execs, OpsRoomID: b.room.String(), Logger: testenv.Logger(t),
			Tokens: []mcpserver.Token{{Name: "mcp", SHA256: mcpserver.HashToken(mcpToken), Scope: mcpserver.ScopeRequest, Owner: b.operator.UserID.String()}}}
		if b.mcpTune != nil {
			b.mcpTune(&mcfg)
		}
		mcp, err := mcpserver.New(mcfg)
		if err != nil {
			t.Fatal(err)
		}
		b.mcp = mcp
		tools, err := mcp.InProcessClient(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		acfg := agent.Config{
			Store: b.store, Tools: tools, BaseURL: b.llm.URL(), APIKey: "test", Model: "scripted",
			Logger: testenv.Logger(t),
		}
		if b.agentTune != nil {
			b.agentTune(&acfg)
		}
		cfg.Agent, err = agent.New(acfg)
		if err != nil {
			t.Fatal(err)
		}
	}
	if b.alerts {
		cfg.OpsRoom, cfg.SignalCheckInterval = b.room.String(), 100*time.Millisecond
	}
	if b.tune != nil {
		b.tune(&cfg)
	}
	bt, err := bot.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.bot = bt
	run := bt.Run
	if b.lead {
		el, err := leader.New(leader.Config{Lock: store.NewLeaderLock(b.dbURL, store.LeaderLockBot), Poll: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		b.elector = el
		run = func(ctx context.Context) error { return el.Run(ctx, bt.Run) }
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := run(ctx); err != nil {
			t.Errorf("bot: %v", err)
		}
	}()
	var once sync.Once
	b.stopBot = func() {
		once.Do(func() {
			cancel()
			<-done
			client.Close()
			cryptoDB.Close()
		})
	}
	t.Cleanup(b.stopBot)
}

// say sends a message as u and returns its event id.
func (b *bundle) say(t testing.TB, u *testenv.MatrixUser, text string, replyTo id.EventID) id.EventID {
	t.Helper()
	return b.sayIn(t, b.room, u, text, replyTo)
}

// sayIn is say in any room.
func (b *bundle) sayIn(t testing.TB, room id.RoomID, u *testenv.MatrixUser, text string, replyTo id.EventID) id.EventID {
	t.Helper()
	content := &event.MessageEventContent{MsgType: event.MsgText, Body: text}
	if replyTo != "" {
		content.RelatesTo = (&event.RelatesTo{}).SetReplyTo(replyTo)
	}
	resp, err := u.Client.SendMessageEvent(b.ctx, room, event.EventMessage, content)
	if err != nil {
		t.Fatal(err)
	}
	return resp.EventID
}

// waitFor reads the room as the operator until an event matches.
func (b *bundle) waitFor(t testing.TB, match func(*event.Event) bool) *event.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	var seen []string
	for {
		resp, err := b.operator.Client.Messages(ctx, b.room, "", "", mautrix.DirectionBackward, nil, 100)
		if err == nil {
			seen = seen[:0]
			for i := len(resp.Chunk) - 1; i >= 0; i-- {
				e := resp.Chunk[i]
				_ = e.Content.ParseRaw(e.Type)
				if e.Type == event.EventEncrypted && b.opCrypto != nil {
					e.RoomID = b.room
					if dec, err := b.opCrypto.Decrypt(ctx, e); err == nil {
						e = dec
					}
				}
				if match(e) {
					return e
				}
				if e.Type == event.EventMessage {
					seen = append(seen, e.Sender.String()+": "+e.Content.AsMessage().Body)
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no matching event in the room: %v\nmessages seen:\n%s", ctx.Err(), strings.Join(seen, "\n"))
		case <-time.After(150 * time.Millisecond):
		}
	}
}

// botSays matches a bot message (not an edit) whose body contains all of parts.
func (b *bundle) botSays(parts ...string) func(*event.Event) bool {
	return func(e *event.Event) bool {
		if e.Sender != b.botUser.UserID || e.Type != event.EventMessage {
			return false
		}
		m := e.Content.AsMessage()
		if m.RelatesTo.GetReplaceID() != "" {
			return false
		}
		return containsAll(m.Body, parts)
	}
}

// cardEdited matches an edit of card whose new body contains all of parts.
func (b *bundle) cardEdited(card id.EventID, parts ...string) func(*event.Event) bool {
	return func(e *event.Event) bool {
		if e.Sender != b.botUser.UserID || e.Type != event.EventMessage {
			return false
		}
		m := e.Content.AsMessage()
		return m.RelatesTo.GetReplaceID() == card && m.NewContent != nil && containsAll(m.NewContent.Body, parts)
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func (b *bundle) count(t testing.TB, command string) int {
	n := 0
	for _, c := range b.fleet.Commands(t) {
		if c == command {
			n++
		}
	}
	return n
}

func TestRestartApprovedByReaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.say(t, b.operator, "restart jellyfin", "")
	card := b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval", "reversible_low", "pct exec 101 -- systemctl restart jellyfin.service"))
	if card.Content.AsMessage().MsgType != event.MsgNotice {
		t.Errorf("a reversible card is %s, want m.notice", card.Content.AsMessage().MsgType)
	}
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.cardEdited(card.ID, "succeeded"))
	if n := b.count(t, "pct exec 101 -- systemctl restart jellyfin.service"); n != 1 {
		t.Errorf("labsim ran the restart %d times, want once", n)
	}
}

func TestRestartApprovedByReply(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.say(t, b.operator, "gitea is down, restart it", "")
	card := b.waitFor(t, b.botSays("restart", "gitea", "awaiting approval"))
	b.say(t, b.operator, "go ahead", card.ID)
	b.waitFor(t, b.cardEdited(card.ID, "succeeded"))
	if n := b.count(t, "pct exec 102 -- systemctl restart gitea.service"); n != 1 {
		t.Errorf("labsim ran the restart %d times, want once", n)
	}
	// The only pending plan is approved by a plain "yes" too.
	b.say(t, b.operator, "restart jellyfin", "")
	card2 := b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval"))
	b.say(t, b.operator, "yes", "")
	b.waitFor(t, b.cardEdited(card2.ID, "succeeded"))
}

func TestRefusalsAndGuards(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A guest cannot request changes.
	b.say(t, b.guest, "restart jellyfin", "")
	first := b.waitFor(t, b.botSays("only the operators", b.guest.UserID.String()))

	// A guest's reaction on an operator's plan does not approve it.
	b.say(t, b.operator, "restart jellyfin", "")
	card := b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval"))
	if _, err := b.guest.Client.SendReaction(b.ctx, b.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, func(e *event.Event) bool {
		return b.botSays("only the operators", b.guest.UserID.String())(e) && e.ID != first.ID
	})
	x := b.execFor(t, card.ID)
	if x.State != store.StateAwaitingApproval {
		t.Fatalf("state after a guest's ✅ = %s", x.State)
	}
	audit, err := b.store.AuditFor(b.ctx, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(auditString(audit), b.guest.UserID.String()+" execution.decision_refused") {
		t.Errorf("the guest's attempt is not audited: %s", auditString(audit))
	}

	// Two pending plans: a bare yes is not guessed.
	b.say(t, b.operator, "restart gitea", "")
	b.waitFor(t, b.botSays("restart gitea", "awaiting approval"))
	b.say(t, b.operator, "yes", "")
	b.waitFor(t, b.botSays("2 plans are waiting", "won't guess"))

	// Deny one by reaction, then a second decision is told it is decided.
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "❌"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.cardEdited(card.ID, "denied"))
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "👍"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.botSays("already denied by "+b.operator.UserID.String()))

	// Unknown commands get a short help, never silence.
	b.say(t, b.operator, "frobnicate the flux capacitor", "")
	b.waitFor(t, b.botSays("help"))
	if n := b.count(t, "pct exec 101 -- systemctl restart jellyfin.service"); n != 0 {
		t.Errorf("labsim ran a restart nobody approved (%d)", n)
	}
}

func TestDestructiveNeedsTypedPhrase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.say(t, b.operator, "destroy teddycloud", "")
	card := b.waitFor(t, b.botSays("destroy", "lxc:hubris/131", "destructive"))
	m := card.Content.AsMessage()
	if m.MsgType != event.MsgText || m.Mentions == nil || len(m.Mentions.UserIDs) == 0 {
		t.Errorf("a destructive card must be an m.text mentioning the operators, got %s %+v", m.MsgType, m.Mentions)
	}
	x := b.execFor(t, card.ID)
	p, err := b.execs.Describe(b.ctx, x)
	if err != nil || p.Phrase == "" || !strings.Contains(m.Body, p.Phrase) {
		t.Fatalf("card does not show the phrase %q: %v", p.Phrase, err)
	}
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.botSays("type exactly", p.Phrase))
	b.say(t, b.operator, "yes", card.ID)
	if got := b.execFor(t, card.ID); got.State != store.StateAwaitingApproval {
		t.Fatalf("a yes moved a destructive plan to %s", got.State)
	}
	b.say(t, b.operator, p.Phrase, "")
	b.waitFor(t, b.cardEdited(card.ID, "succeeded"))
	if n := b.count(t, "pct destroy 131"); n != 1 {
		t.Errorf("labsim destroyed 131 %d times, want once; commands: %v", n, b.fleet.Commands(t))
	}
}

func TestRestartHandlesDecisionsMadeWhileDownAndNeverRepeats(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.say(t, b.operator, "restart jellyfin", "")
	card := b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval"))
	b.stopBot()
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	b.startBot(t)
	b.waitFor(t, b.cardEdited(card.ID, "succeeded"))
	// The old "restart jellyfin" message is not acted on again.
	b.say(t, b.operator, "pending", "")
	b.waitFor(t, b.botSays("No plan is waiting"))
	xs, err := b.store.ListExecutions(b.ctx, store.ExecutionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 1 {
		t.Errorf("%d executions after the restart, want the one", len(xs))
	}
	if n := b.count(t, "pct exec 101 -- systemctl restart jellyfin.service"); n != 1 {
		t.Errorf("labsim ran the restart %d times, want once", n)
	}
}

// execFor returns the execution a card shows. The card can reach the
// room before the bot has recorded its event id, so a missing record is
// waited for.
func (b *bundle) execFor(t testing.TB, card id.EventID) store.Execution {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		x, err := b.store.ExecutionByCard(b.ctx, card.String())
		if err == nil {
			return x
		}
		if !errors.Is(err, store.ErrNotFound) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func auditString(rows []store.AuditEntry) string {
	var parts []string
	for _, r := range rows {
		parts = append(parts, r.Actor+" "+r.Action)
	}
	return strings.Join(parts, "; ")
}

// pushGateway is a fake HTTPS push gateway that records what Dendrite sends.
type pushGateway struct {
	mu     sync.Mutex
	events []string
}

func (g *pushGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var n struct {
		Notification struct {
			EventID string `json:"event_id"`
		} `json:"notification"`
	}
	_ = json.Unmarshal(body, &n)
	g.mu.Lock()
	g.events = append(g.events, n.Notification.EventID)
	g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"rejected":[]}`)
}

func (g *pushGateway) got(eventID id.EventID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range g.events {
		if e == eventID.String() {
			return true
		}
	}
	return false
}

func TestEscalationsPushAndNoticesDoNot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	gw := &pushGateway{}
	srv := httptest.NewTLSServer(gw)
	defer srv.Close()
	kind := mautrix.PusherKindHTTP
	err := b.operator.Client.SetPusher(b.ctx, &mautrix.Pusher{
		PushKey: "nomos-test", Kind: &kind, AppID: "org.nomos.test", AppDisplayName: "test",
		DeviceDisplayName: "test", Language: "en",
		Data: mautrix.PusherData{"url": srv.URL + "/_matrix/push/v1/notify"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// A routine answer is a notice: no push.
	b.say(t, b.operator, "status", "")
	notice := b.waitFor(t, b.botSays("Fleet status"))
	// A destructive plan waiting is an escalation: pushed.
	b.say(t, b.operator, "destroy teddycloud", "")
	escalation := b.waitFor(t, b.botSays("destroy", "lxc:hubris/131"))
	deadline := time.Now().Add(60 * time.Second)
	for !gw.got(escalation.ID) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if !gw.got(escalation.ID) {
		t.Fatalf("the escalation %s never reached the push gateway", escalation.ID)
	}
	if gw.got(notice.ID) {
		t.Errorf("the routine notice %s was pushed", notice.ID)
	}
}

// isEscalation matches an m.text from the bot that mentions the operator.
func (b *bundle) isEscalation(parts ...string) func(*event.Event) bool {
	return func(e *event.Event) bool {
		if !b.botSays(parts...)(e) {
			return false
		}
		m := e.Content.AsMessage()
		if m.MsgType != event.MsgText || m.Mentions == nil {
			return false
		}
		for _, u := range m.Mentions.UserIDs {
			if u == b.operator.UserID {
				return true
			}
		}
		return false
	}
}

func TestFailureEscalatesWhenNobodyIsWatching(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(func(c *bot.Config) { c.QuietPeriod = time.Nanosecond }))
	b.say(t, b.operator, "exec 101 systemctl restart nosuch.service", "")
	card := b.waitFor(t, b.botSays("awaiting approval", "config_mutation"))
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.cardEdited(card.ID, "failed"))
	b.waitFor(t, b.isEscalation("failed", "lxc:strong/101"))
}

func TestPlanAboutToExpireIsEscalated(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(func(c *bot.Config) {
		c.ExpiryWarning = 31 * time.Minute
		c.ExpiryCheckInterval = 200 * time.Millisecond
	}))
	b.say(t, b.operator, "restart gitea", "")
	card := b.waitFor(t, b.botSays("restart gitea", "awaiting approval"))
	warning := b.waitFor(t, b.isEscalation("expires in", "service:gitea"))
	if warning.Content.AsMessage().RelatesTo.GetReplyTo() != card.ID {
		t.Errorf("the expiry warning does not reply to the card")
	}
}

// storeQuery runs one read-only query against the bundle's database.
func (b *bundle) storeQuery(t testing.TB, sql string, dest ...any) error {
	t.Helper()
	conn, err := pgx.Connect(b.ctx, b.dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(b.ctx)
	return conn.QueryRow(b.ctx, sql).Scan(dest...)
}

// withAlerts makes the bot announce signals in the test room.
func withAlerts() func(*bundle) {
	return func(b *bundle) { b.alerts = true }
}

// botBodies lists the bodies of the bot's messages (not edits), oldest first.
func (b *bundle) botBodies(t testing.TB) []string {
	t.Helper()
	resp, err := b.operator.Client.Messages(b.ctx, b.room, "", "", mautrix.DirectionBackward, nil, 200)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(resp.Chunk) - 1; i >= 0; i-- {
		e := resp.Chunk[i]
		_ = e.Content.ParseRaw(e.Type)
		if e.Type == event.EventEncrypted && b.opCrypto != nil {
			e.RoomID = b.room
			if dec, err := b.opCrypto.Decrypt(b.ctx, e); err == nil {
				e = dec
			}
		}
		if e.Sender == b.botUser.UserID && e.Type == event.EventMessage && e.Content.AsMessage().RelatesTo.GetReplaceID() == "" {
			out = append(out, e.Content.AsMessage().Body)
		}
	}
	return out
}

func countContaining(bodies []string, part string) int {
	n := 0
	for _, s := range bodies {
		if strings.Contains(s, part) {
			n++
		}
	}
	return n
}

// TestFailingCheckIsAnnouncedOnceAndItsRecoveryReplied: a check that
// starts failing is announced in the ops room (with a mention when no
// operator is around), its recovery is a reply to that, a check that flaps
// right back waits out the flap window, and a restart repeats nothing.
func TestFailingCheckIsAnnouncedOnceAndItsRecoveryReplied(t *testing.T) {
	t.Parallel()
	b := setup(t, withAlerts())
	// Results are stamped by the actuator's clock; these are recent ones.
	now := time.Now().UTC().Add(-10 * time.Minute)
	due, err := b.store.ClaimDueChecks(b.ctx, now, 1000)
	if err != nil {
		t.Fatal(err)
	}
	checks := map[string]store.DueCheck{}
	for _, c := range due {
		checks[c.Slug] = c
	}
	record := func(slug, health, detail string, at time.Time) {
		t.Helper()
		c := checks[slug]
		if err := b.store.RecordCheck(b.ctx, store.CheckObservation{CheckID: c.ID.String(), TargetID: c.TargetID.String(), Health: health, Detail: detail, At: at}); err != nil {
			t.Fatal(err)
		}
	}

	record("jellyfin-http", "unhealthy", "GET http://10.40.0.101:8096/health failed: connection refused", now)
	alert := b.waitFor(t, b.isEscalation("service:jellyfin is failing", "jellyfin-http: GET"))
	// While it is open, status lists it.
	b.say(t, b.operator, "status", "")
	b.waitFor(t, b.botSays("Fleet status", "Open signals:", "🔴 service:jellyfin check:jellyfin-http: jellyfin-http: GET"))
	record("jellyfin-http", "healthy", "GET answered 200", now.Add(time.Minute))
	recovered := b.waitFor(t, b.botSays("service:jellyfin recovered after 1m (check:jellyfin-http)"))
	if m := recovered.Content.AsMessage(); m.RelatesTo.GetReplyTo() != alert.ID || m.MsgType != event.MsgNotice {
		t.Errorf("the recovery is a %s replying to %q, want a notice replying to the alert %s", m.MsgType, m.RelatesTo.GetReplyTo(), alert.ID)
	}

	// jellyfin flaps straight back; then postgres degrades. The flap is not
	// announced again; the warning is a notice, never a mention.
	record("jellyfin-http", "unhealthy", "GET failed again", now.Add(2*time.Minute))
	record("postgres-tcp", "degraded", "slow to accept", now.Add(2*time.Minute+time.Second))
	warning := b.waitFor(t, b.botSays("service:postgres is degraded", "slow to accept"))
	if m := warning.Content.AsMessage(); m.MsgType != event.MsgNotice || (m.Mentions != nil && len(m.Mentions.UserIDs) > 0) {
		t.Errorf("a warning was sent as %s mentioning %v, want a plain notice", m.MsgType, m.Mentions)
	}

	// A restart announces nothing twice, and still notes what resolves.
	// Restarted with a flap window already over, the bot announces the
	// flap that is still failing.
	b.stopBot()
	b.tune = func(c *bot.Config) { c.FlapWindow = time.Nanosecond }
	b.startBot(t)
	b.waitFor(t, b.botSays("service:jellyfin is failing", "GET failed again"))
	record("postgres-tcp", "healthy", "something listens", now.Add(3*time.Minute))
	b.waitFor(t, b.botSays("service:postgres recovered"))
	bodies := b.botBodies(t)
	for part, want := range map[string]int{
		"service:jellyfin is failing": 2, "service:jellyfin recovered": 1,
		"service:postgres is degraded": 1, "service:postgres recovered": 1,
	} {
		if n := countContaining(bodies, part); n != want {
			t.Errorf("%d messages say %q, want %d:\n%s", n, part, want, strings.Join(bodies, "\n"))
		}
	}
}

// TestAlertThatCannotBePostedIsRetried: while the bot cannot post in the
// ops room, a failing check's alert waits; once the bot is in the room, it
// is posted there.
func TestAlertThatCannotBePostedIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp, err := b.operator.Client.CreateRoom(b.ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Name: "alerts"})
	if err != nil {
		t.Fatal(err)
	}
	alerts := resp.RoomID
	b.stopBot()
	b.tune = func(c *bot.Config) { c.OpsRoom, c.SignalCheckInterval = alerts.String(), 100*time.Millisecond }
	b.startBot(t)

	due, err := b.store.ClaimDueChecks(b.ctx, time.Now().Add(-time.Minute), 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range due {
		if c.Slug != "gitea-http" {
			continue
		}
		if err := b.store.RecordCheck(b.ctx, store.CheckObservation{CheckID: c.ID.String(), TargetID: c.TargetID.String(),
			Health: "unhealthy", Detail: "GET failed", At: time.Now().Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	// Several passes (one every 100 ms) try and fail while the bot is
	// outside the room. A failed try that kept its claim would never post.
	time.Sleep(time.Second)
	if _, err := b.operator.Client.InviteUser(b.ctx, alerts, &mautrix.ReqInviteUser{UserID: b.botUser.UserID}); err != nil {
		t.Fatal(err)
	}
	b.room = alerts
	b.waitFor(t, b.botSays("service:gitea is failing", "GET failed"))
}
