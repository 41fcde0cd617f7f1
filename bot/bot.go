package bot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto/cryptohelper"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/bot/agent"
	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/lease"
	"github.com/nomoshq/nomos/internal/loop"
	"github.com/nomoshq/nomos/internal/metrics"
	"github.com/nomoshq/nomos/internal/schedule"
	"github.com/nomoshq/nomos/internal/supervisor"
	"github.com/nomoshq/nomos/internal/zerobridge"
	"github.com/nomoshq/nomos/report"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// Config configures the bot.
type Config struct {
	// HomeserverURL is the client-server API base URL.
	HomeserverURL string
	// UserID is the bot's account.
	UserID string
	// Password or AccessToken logs the bot in. With a password the device
	// id is kept in the crypto store, so a restart is the same device.
	Password    string
	AccessToken string
	// Operators may request changes and approve plans.
	Operators []string
	// Readers may read the history of executions and the details of
	// entities (history, show) besides the operators; nobody else may.
	Readers []string
	// AllowUnverifiedDevices lets an approval count from any device, and a
	// room for plans be unencrypted. Off by default: a room for plans must
	// be encrypted, and there an approval (reaction, reply, phrase or
	// assent) counts only when it was encrypted and sent from a device its
	// sender has cross-signed.
	AllowUnverifiedDevices bool
	// Rooms are the rooms besides OpsRoom where plans are asked for and
	// decided. In any other room the bot answers reads only; a plan made
	// for one is carded in OpsRoom.
	Rooms []string
	// Store and Executions are the source of truth and the lifecycle.
	Store      *store.Store
	Executions *executions.Service
	// CryptoDB holds the E2EE state, device id and sync token. The caller
	// closes it once Run has returned for the last time.
	CryptoDB *dbutil.Database
	// PickleKey encrypts the crypto store's secrets at rest. Required.
	PickleKey []byte
	// RecoveryKeyFile holds the recovery key of the bot's cross-signing
	// keys: read when present, written when the keys are first created.
	RecoveryKeyFile string
	// Redis carries results from the actuator (nomos:results).
	Redis asynq.RedisConnOpt
	// OwnPath are the entities between Nomos and its homeserver, by slug
	// (matrix.served_by): the reverse proxy in front of it, the
	// container it runs in. A card that restarts, stops or reboots one
	// of them, or what they run on, warns that the room may go quiet
	// until it is back.
	OwnPath []string
	// StatusURL is the status page's address (web.public_url): each card
	// links to its execution's page under it, StatusURL/executions/<id>.
	// May be empty.
	StatusURL string
	// EditInterval is the least time between two edits of one card.
	// Default 2s.
	EditInterval time.Duration
	// ReadAllWait bounds how long `check updates on all` waits for each
	// container's read; one that has not ended by then is named as timed
	// out. Default 3m: apt-get update against a slow mirror.
	ReadAllWait time.Duration
	// QuietPeriod: a failure is escalated with a mention when no operator
	// has spoken in the room for this long. Default 5m.
	QuietPeriod time.Duration
	// ExpiryWarning: a plan this close to expiring gets a mention.
	// Default 5m.
	ExpiryWarning time.Duration
	// ExpiryCheckInterval is how often plans are checked for ExpiryWarning,
	// and for a card that never went out (the homeserver failed it). Default
	// 30s.
	ExpiryCheckInterval time.Duration
	// Agent answers free-form messages from operators; nil means the bot
	// works from its command grammar and runbooks alone.
	Agent *agent.Agent
	// RunChecks runs the prober: each check definition is sent to the
	// actuator as a read-only probe when it is due.
	RunChecks bool
	// RunDiscovery runs fleet discovery: each host's inventory is taken
	// through the actuator every inventory interval and on `nomos
	// discover`, and applied to the fleet.
	RunDiscovery bool
	// OpsRoom is the ops room: where plans are asked for and decided
	// (with Rooms), where every plan is carded or copied, and where failing
	// checks and what discovery finds are announced. Empty means none of
	// that happens there.
	OpsRoom string
	// SignalCheckInterval is how often signals are looked at for
	// announcing. Default 5s.
	SignalCheckInterval time.Duration
	// AlertDelay is how long a signal must stay open before it is
	// announced, to let a one-off blip pass. Default 0.
	AlertDelay time.Duration
	// Metrics records how long the homeserver takes with each event sent
	// and the bot with each /sync; nil records nothing.
	Metrics *metrics.Metrics
	// FlapWindow: a check that fails again this soon after it was
	// announced is announced only if it is still failing when the window
	// ends. Default 15m.
	FlapWindow time.Duration
	// MuteFor is how long 🔇 on an alert, or a bare "mute" in reply to
	// it, keeps new alerts of its kind on its entity quiet. Default 4h.
	MuteFor time.Duration
	// Briefs says when the daily brief and the weekly report are posted
	// in OpsRoom; nil posts none on a schedule ("brief" still answers).
	Briefs *report.Schedule
	// BackupMaxAge is how old a guest's newest backup may be before the
	// daily brief names it (report.backup_max_age); zero leaves backups
	// out of the brief.
	BackupMaxAge time.Duration
	// Schedules run catalogue actions and runbooks at cron times, on the
	// leading bot (docs/operations.md, "Schedules").
	Schedules []ScheduledRun
	// Windows open maintenance windows at cron times.
	Windows []WindowSchedule
	// ScheduleTick is how often the scheduler looks for due briefs,
	// schedules and windows. Default 30s.
	ScheduleTick time.Duration
	// SessionRetention is how long an agent session nobody has touched is
	// kept before the leading bot deletes it (agent.session_retention); 0
	// keeps every session.
	SessionRetention time.Duration
	Logger           *slog.Logger
	Clock            func() time.Time
}

// Bot is the running Matrix front.
type Bot struct {
	cfg    Config
	cli    *mautrix.Client
	crypto *cryptohelper.CryptoHelper
	store  *store.Store
	exec   *executions.Service
	logger *slog.Logger
	now    func() time.Time
	ops    map[id.UserID]bool
	// readers may read history and details besides the operators.
	readers map[id.UserID]bool
	// inspector withdraws a cancelled plan's order from the queue.
	inspector *asynq.Inspector
	// results consumes the actuator's reports while the bot runs, and
	// reports holds its leases on the reports it applies.
	results *asynq.Server
	reports *executions.ResultsHandler
	rdb     redis.UniversalClient

	startedAt time.Time
	cards     *editor
	// agentTurns tracks the agent turns running beside the sync loop.
	agentTurns sync.WaitGroup

	mu           sync.Mutex
	lastOperator map[id.RoomID]time.Time
	undecryptNot map[string]bool
	runbooks     []store.Runbook
	refused      refusedWarner
	// refusedAt is when each person was last told, per plan, why their
	// decision did not count.
	refusedAt map[string]time.Time
	// alertWarnedAt and alertFailures pace the warning that alerts
	// cannot be posted.
	alertWarnedAt time.Time
	alertFailures int

	// verifier answers operators who verify the bot by emoji.
	verifier *verifier

	// syncs says whether the sync loop is alive (SyncHealth).
	syncs *syncTracker
	// sched runs the briefs, the schedules and the windows.
	sched *schedule.Scheduler
}

// New validates cfg and builds the bot; Run connects it.
func New(cfg Config) (*Bot, error) {
	switch {
	case cfg.HomeserverURL == "" || cfg.UserID == "":
		return nil, errors.New("bot: HomeserverURL and UserID are required")
	case cfg.Password == "" && cfg.AccessToken == "":
		return nil, errors.New("bot: Password or AccessToken is required")
	case cfg.Store == nil || cfg.Executions == nil:
		return nil, errors.New("bot: Store and Executions are required")
	case cfg.CryptoDB == nil || len(cfg.PickleKey) == 0:
		return nil, errors.New("bot: CryptoDB and PickleKey are required")
	case cfg.Redis == nil:
		return nil, errors.New("bot: Redis is required")
	}
	cfg.EditInterval = cmp.Or(cfg.EditInterval, 2*time.Second)
	cfg.ReadAllWait = cmp.Or(cfg.ReadAllWait, 3*time.Minute)
	cfg.QuietPeriod = cmp.Or(cfg.QuietPeriod, 5*time.Minute)
	cfg.ExpiryWarning = cmp.Or(cfg.ExpiryWarning, 5*time.Minute)
	cfg.ExpiryCheckInterval = cmp.Or(cfg.ExpiryCheckInterval, 30*time.Second)
	cfg.SignalCheckInterval = cmp.Or(cfg.SignalCheckInterval, 5*time.Second)
	cfg.FlapWindow = cmp.Or(cfg.FlapWindow, 15*time.Minute)
	cfg.MuteFor = cmp.Or(cfg.MuteFor, 4*time.Hour)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	b := &Bot{
		cfg: cfg, store: cfg.Store, exec: cfg.Executions, logger: cfg.Logger, now: cfg.Clock,
		ops: map[id.UserID]bool{}, readers: map[id.UserID]bool{}, lastOperator: map[id.RoomID]time.Time{}, undecryptNot: map[string]bool{},
		syncs:     &syncTracker{now: cfg.Clock},
		refusedAt: map[string]time.Time{},
	}
	for _, op := range cfg.Operators {
		b.ops[id.UserID(op)] = true
	}
	for _, r := range cfg.Readers {
		b.readers[id.UserID(r)] = true
	}
	b.cards = newEditor(cfg.EditInterval, cfg.Clock, b.editCard, b.logger)
	b.sched = schedule.New(schedule.Config{Slots: cfg.Store, Tick: cfg.ScheduleTick, Clock: cfg.Clock, Logger: b.logger.With("component", "schedule")})
	if err := b.addJobs(); err != nil {
		return nil, err
	}
	return b, nil
}

// Run logs in, sets up encryption and syncs until ctx ends, with the
// results consumer, the reconciler, the card editor and the watches beside
// the sync. Run may be called again once it has returned.
func (b *Bot) Run(ctx context.Context) error {
	return supervisor.New(b.logger, b.Services()...).Run(ctx)
}

// Services are the bot's parts in start order, for a supervisor: Run runs
// them under one, and a process may run them under its own (only while it
// leads, say). The last one, "sync", reports the homeserver's health.
func (b *Bot) Services() []supervisor.Service {
	svcs := []supervisor.Service{
		// No Stop: closing the crypto helper would close CryptoDB, which
		// its owner closes, and a later Run needs.
		{Name: "matrix", Start: b.startMatrix},
		{Name: "results", Start: b.startResults, Stop: b.stopResults},
		{Name: "report_leases", Run: b.sweepReports},
		{Name: "approval_checks", Run: b.answerApprovalChecks},
		{Name: "card_editor", Start: b.startEditor, Stop: func() { b.cards.stop() }},
		{Name: "reconciler", Run: func(ctx context.Context) error { b.exec.RunReconciler(ctx); return nil }},
	}
	if b.cfg.RunChecks {
		svcs = append(svcs, supervisor.Service{Name: "prober", Run: func(ctx context.Context) error { b.exec.RunProber(ctx); return nil }})
	}
	if b.cfg.RunDiscovery {
		svcs = append(svcs, supervisor.Service{Name: "discovery", Run: func(ctx context.Context) error { b.exec.RunDiscovery(ctx); return nil }})
	}
	if b.cfg.OpsRoom != "" {
		svcs = append(svcs, supervisor.Service{Name: "alerts", Run: func(ctx context.Context) error {
			loop.Every(ctx, b.cfg.SignalCheckInterval, func(ctx context.Context) {
				b.closeWindows(ctx)
				b.announceSignals(ctx)
				b.announceDiscoveries(ctx)
			})
			return nil
		}})
	}
	svcs = append(svcs, supervisor.Service{Name: "scheduler", Run: b.sched.Run})
	return append(svcs,
		supervisor.Service{Name: "expiry", Run: func(ctx context.Context) error {
			loop.Every(ctx, b.cfg.ExpiryCheckInterval, func(ctx context.Context) {
				b.postUncarded(ctx)
				b.warnExpiring(ctx)
			})
			return nil
		}},
		supervisor.Service{Name: "executions_listener", Run: b.listenExecutions},
		// Agent turns run on the sync's context: once it ends, they end.
		supervisor.Service{Name: "sync", Start: b.catchUp, Run: b.sync, Stop: b.agentTurns.Wait, Health: b.SyncHealth},
	)
}

// startMatrix logs in, loads the runbooks and fixes the time of the first
// sync ever, before which no message is answered.
func (b *Bot) startMatrix(ctx context.Context) error {
	if err := b.connect(ctx); err != nil {
		return err
	}
	if err := b.loadRunbooks(ctx); err != nil {
		return err
	}
	first, err := b.store.SetBotStateOnce(ctx, "first_sync_at", b.now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		return err
	}
	b.startedAt, _ = time.Parse(time.RFC3339Nano, first)
	return nil
}

// startResults consumes the actuator's reports, each under a short lease
// (executions.ResultsHandler.Lease); the inspector withdraws cancelled
// orders and finds the reports a killed bot held.
func (b *Bot) startResults(context.Context) error {
	b.rdb = b.cfg.Redis.MakeRedisClient().(redis.UniversalClient)
	b.reports = &executions.ResultsHandler{Service: b.exec, OnRefused: b.onRefusedReport,
		Lease: lease.Config{Redis: b.rdb, Owner: "bot", Logger: b.logger}}
	b.results = asynq.NewServer(b.cfg.Redis, tasks.ResultsServerConfig(asynq.Config{
		Concurrency:       tasks.ResultsConcurrency,
		TaskCheckInterval: tasks.PollInterval, // results re-invoke the agent; a poll delay is felt
		Logger:            tasks.Logger(b.logger),
		LogLevel:          asynq.WarnLevel,
	}))
	if err := b.results.Start(b.reports); err != nil {
		b.rdb.Close()
		return fmt.Errorf("start results consumer: %w", err)
	}
	b.inspector = asynq.NewInspector(b.cfg.Redis)
	return nil
}

// answerApprovalChecks answers the actuators' questions, asked before
// each order, whether its execution is still approved.
func (b *Bot) answerApprovalChecks(ctx context.Context) error {
	h := &executions.ResultsHandler{Service: b.exec, OnRefused: b.onRefusedReport}
	h.ServeApprovalChecks(ctx, b.cfg.Redis)
	return nil
}

func (b *Bot) stopResults() {
	b.inspector.Close()
	b.results.Shutdown()
	b.rdb.Close()
}

// sweepReports puts back at once the reports a killed bot held.
func (b *Bot) sweepReports(ctx context.Context) error {
	b.reports.SweepReports(ctx, b.inspector)
	return nil
}

// startEditor gives this run a fresh card editor: a stopped one takes no
// more edits.
func (b *Bot) startEditor(context.Context) error {
	b.cards = newEditor(b.cfg.EditInterval, b.cfg.Clock, b.editCard, b.logger)
	return nil
}

// listenExecutions brings each execution's card up to date as it changes.
// Each change is handled on its own goroutine: posting one card must not
// hold up the result of another execution. Handlers re-read the execution,
// so their order does not matter.
func (b *Bot) listenExecutions(ctx context.Context) error {
	var handlers sync.WaitGroup
	defer handlers.Wait()
	onEvent := func(ev store.ExecutionEvent) {
		handlers.Add(1)
		go func() { defer handlers.Done(); b.onExecutionEvent(ctx, ev) }()
	}
	err := b.store.ListenExecutions(ctx, onEvent, func() { b.catchUpCards(ctx) })
	if err != nil && ctx.Err() == nil {
		b.logger.Error("executions listener stopped", "err", err)
	}
	return nil
}

// catchUp brings the recent cards up to date before the first sync.
func (b *Bot) catchUp(ctx context.Context) error {
	b.catchUpCards(ctx)
	return nil
}

// sync runs /sync until ctx ends, retrying when it stops.
func (b *Bot) sync(ctx context.Context) error {
	b.logger.Info("bot syncing", "user_id", b.cli.UserID, "device_id", b.cli.DeviceID)
	b.syncs.start()
	for {
		err := b.cli.SyncWithContext(ctx)
		if ctx.Err() != nil {
			return nil
		}
		b.logger.Warn("sync stopped; retrying", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}

// connect logs in and initialises end-to-end encryption. The device id,
// crypto state and sync token live in CryptoDB, so a restart resumes as the
// same device from where it stopped.
func (b *Bot) connect(ctx context.Context) error {
	cli, err := mautrix.NewClient(b.cfg.HomeserverURL, id.UserID(b.cfg.UserID), b.cfg.AccessToken)
	if err != nil {
		return fmt.Errorf("matrix client: %w", err)
	}
	cli.Log = zerobridge.Logger(b.logger)
	b.cli = cli
	b.watch(cli)
	helper, err := cryptohelper.NewCryptoHelper(cli, b.cfg.PickleKey, b.cfg.CryptoDB)
	if err != nil {
		return fmt.Errorf("crypto: %w", err)
	}
	if b.cfg.AccessToken == "" {
		localpart, _, _ := id.UserID(b.cfg.UserID).Parse()
		helper.LoginAs = &mautrix.ReqLogin{
			Type:                     mautrix.AuthTypePassword,
			Identifier:               mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: localpart},
			Password:                 b.cfg.Password,
			InitialDeviceDisplayName: "Nomos",
		}
	} else {
		who, err := cli.Whoami(ctx)
		if err != nil {
			return fmt.Errorf("matrix whoami: %w", err)
		}
		cli.DeviceID = who.DeviceID
	}
	helper.DecryptErrorCallback = b.onDecryptError
	if err := helper.Init(ctx); err != nil {
		return fmt.Errorf("crypto init: %w", err)
	}
	b.crypto = helper
	cli.Crypto = helper
	// mautrix saves the sync token before handlers run; keep the previous
	// one until a response has been handled, so a crash replays it (and the
	// handled-events table skips what was already done).
	cli.Store = &deferredSyncStore{SyncStore: cli.Store}
	if err := b.crossSign(ctx); err != nil {
		b.logger.Warn("cross-signing not set up; Element will show the device as unverified", "err", err)
	}
	if err := b.startVerifier(ctx); err != nil {
		return err
	}
	syncer := cli.Syncer.(mautrix.ExtensibleSyncer)
	syncer.OnEventType(event.StateMember, b.withStore(b.onMember))
	syncer.OnEventType(event.EventMessage, b.withStore(b.onMessage))
	syncer.OnEventType(event.EventReaction, b.withStore(b.onReaction))
	syncer.OnEventType(event.EventRedaction, b.withStore(b.onRedaction))
	return nil
}

// withStore holds an event until Postgres answers. A handler that meets
// a database down takes the event for no decision and moves on, so an
// approval sent while Postgres restarts would be lost; waiting here
// blocks the sync loop instead, and the event is handled once it is back.
func (b *Bot) withStore(handle func(context.Context, *event.Event)) func(context.Context, *event.Event) {
	return func(ctx context.Context, evt *event.Event) {
		b.awaitStore(ctx)
		handle(ctx, evt)
	}
}

// awaitStore waits until Postgres answers and reports whether it had to:
// false means the database was up, so an error just met was not its
// absence.
func (b *Bot) awaitStore(ctx context.Context) (waited bool) {
	wait := 100 * time.Millisecond
	for {
		err := b.store.Ping(ctx)
		if err == nil || ctx.Err() != nil {
			return waited && err == nil
		}
		if !waited {
			b.logger.Warn("database unreachable; waiting for it", "err", err)
		}
		waited = true
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// deferredSyncStore persists a sync token only once the response that
// followed it has been handled.
type deferredSyncStore struct {
	mautrix.SyncStore
	mu      sync.Mutex
	pending string
}

func (s *deferredSyncStore) SaveNextBatch(ctx context.Context, userID id.UserID, nextBatch string) error {
	s.mu.Lock()
	prev := s.pending
	s.pending = nextBatch
	s.mu.Unlock()
	if prev == "" {
		return nil
	}
	return s.SyncStore.SaveNextBatch(ctx, userID, prev)
}

func (s *deferredSyncStore) LoadNextBatch(ctx context.Context, userID id.UserID) (string, error) {
	s.mu.Lock()
	pending := s.pending
	s.mu.Unlock()
	if pending != "" {
		return pending, nil
	}
	return s.SyncStore.LoadNextBatch(ctx, userID)
}

func (b *Bot) isOperator(u id.UserID) bool { return b.ops[u] }

func (b *Bot) operatorMentions() []id.UserID {
	out := make([]id.UserID, 0, len(b.ops))
	for _, op := range b.cfg.Operators {
		out = append(out, id.UserID(op))
	}
	return out
}

func (b *Bot) loadRunbooks(ctx context.Context) error {
	rbs, err := b.store.Runbooks(ctx)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.runbooks = rbs
	return nil
}
