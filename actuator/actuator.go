package actuator

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"golang.org/x/crypto/ssh"

	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/internal/supervisor"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// Config configures an Actuator. Zero durations take their defaults.
type Config struct {
	// RedisURL locates the Redis that carries orders and results, such as
	// redis://127.0.0.1:6379/0. Required.
	RedisURL string
	// VerifyKey is the bot's order-signing public key. Only orders and
	// probe requests it verifies run. Required.
	VerifyKey ed25519.PublicKey
	// PreviousVerifyKey is the bot's order key being rotated out. While it
	// is set, orders and probe requests signed with it run too, so the bot
	// can switch keys without a gap; drop it once the last order it signed
	// has expired (tasks.MaxOrderTTL after the bot switched). Optional.
	PreviousVerifyKey ed25519.PublicKey
	// ReportSigningKey is the actuator's own Ed25519 key. It signs every
	// progress report, result and probe result; the bot holds its public
	// half and refuses anything else on the results queue. Required.
	ReportSigningKey ed25519.PrivateKey
	// Name is this actuator's name. An order or probe addressed to
	// another name is refused, and every report carries it. Default
	// tasks.DefaultActuator.
	Name string
	// Site is the site this actuator serves. It consumes only that site's
	// queues (tasks.OrderQueue, tasks.ProbeQueue) and refuses an order or
	// probe signed for a host of another site, whichever queue it came
	// from. Default tasks.DefaultSite.
	Site string
	// SSHSigner is the actuator's SSH private key. Required.
	SSHSigner ssh.Signer
	// KnownHostsFile pins every host's SSH key; a host that is not in it,
	// or presents another key, is refused. Required.
	KnownHostsFile string
	// SSHUser is the login on the hosts. Default root.
	SSHUser string
	// JournalPath is the local append-only journal that keeps an order
	// from running twice. Its directory is created if need be. Required.
	JournalPath string
	// Concurrency is how many orders run at once. Default 32: an order
	// mostly waits, on the bot's answer and on its host, and a burst of
	// approvals should not queue behind four. Each host still runs at
	// most 10 commands at once (the sessions sshd allows on a connection).
	Concurrency int
	// ProbeConcurrency is how many probes run at once, in a pool of their
	// own and on SSH connections of their own: a burst of probes, or
	// probes stuck on a dead host, never hold up an approved order.
	// Default 8.
	ProbeConcurrency int
	// ProbeHostShare is how many of those probes one host may hold at
	// once; its further probes wait on the queue, not in a worker, so a
	// host that hangs cannot hold up the others'. Default half of
	// ProbeConcurrency, at least 1.
	ProbeHostShare int
	// CommandTimeout bounds each command; a command still running then is
	// killed and its execution fails. Default 10m.
	CommandTimeout time.Duration
	// ProvisionTimeout bounds a whole pct_create. Default 30m.
	ProvisionTimeout time.Duration
	// PreviewTimeout bounds the reads of one plan's preview, connection
	// included. Default tasks.PreviewTimeout (5s).
	PreviewTimeout time.Duration
	// ProgressInterval is the least time between two progress reports of
	// one execution. Default 2s.
	ProgressInterval time.Duration
	// HeartbeatInterval is the most time between two progress reports of a
	// running execution, output or not. Default 10s.
	HeartbeatInterval time.Duration
	// TaskCheckInterval is how often idle queues are polled for new work.
	// Default tasks.PollInterval (10ms); asynq's own default of 1s adds a
	// second to every order.
	TaskCheckInterval time.Duration
	// RetryDelay is the pause between attempts of the DNS gate and of apt
	// during pct_create. Default 5s.
	RetryDelay time.Duration
	// ShutdownGrace is how long running executions may go on once Run's
	// context ends; then their commands are killed and they are reported
	// as outcome_unknown. Default 10s.
	ShutdownGrace time.Duration
	// HAWait bounds how long a step that Proxmox handed to HA ("Requesting
	// HA stop for CT 105") waits for the container to reach the state the
	// step asked for; past it the step fails with the state it saw.
	// Default 3m: HA acts on its next rounds, and a shutdown may take its
	// own 60s.
	HAWait time.Duration
	// PollInterval is how often the actuator reads a container's state
	// while it waits for HA, or for a lock to clear. Default 2s.
	PollInterval time.Duration
	// ApprovalWait is how long the actuator waits for the bot to confirm
	// that an order is still approved before it asks again; it asks until
	// the order expires. Default 5s.
	ApprovalWait time.Duration
	// OrderLease is how long an order this actuator took stays its own
	// after it last said so: it renews the lease (tasks.OrderLease) every
	// third of this while the order runs. An order taken by an actuator
	// that died before it began it is sent again within two thirds of
	// this after the lease lapses, by any actuator of the site that runs.
	// Default 3s.
	OrderLease time.Duration
	// Logger receives the actuator's logs. Default: discarded.
	Logger *slog.Logger
	// Clock tells the time for expiry checks, the journal, snapshot names
	// and reports. Default time.Now.
	Clock func() time.Time
}

// Actuator consumes orders and probes and carries them out over SSH. Build
// one with New and start it with Run.
type Actuator struct {
	cfg    Config
	log    *slog.Logger
	redis  asynq.RedisConnOpt
	ssh    *SSHRunner
	runner Runner
	// probeSSH and probeRunner carry probes and inventories on
	// connections of their own, so they never take an order's sessions.
	probeSSH    *SSHRunner
	probeRunner Runner
	// probeHosts bounds the probe workers each host holds.
	probeHosts *probeHosts
	journal    *journal
	running    atomic.Bool
	metrics    *metrics
	// answers routes the bot's answers about approvals to the orders
	// waiting for them.
	answers answerBox
	// checks gathers the orders to ask the bot about.
	checks approvalBatcher

	// orderKeys verify orders, probe and inventory requests: the bot's
	// key and, during a rotation, its previous one.
	orderKeys tasks.VerifyKeys

	// Set by Run before the first task arrives.
	client        *asynq.Client
	rdb           redis.UniversalClient // the approval check's lists, the order leases
	inspector     *asynq.Inspector      // finds orders a dead actuator took
	workCtx       context.Context       // commands; cancelled after the shutdown grace
	cancelWork    context.CancelFunc
	reportCtx     context.Context // result delivery; cancelled last
	cancelReports context.CancelFunc

	mu     sync.Mutex // guards active and idleCh
	active int
	idleCh chan struct{}
}

// New checks cfg, connects nothing yet, and opens the journal.
func New(cfg Config) (*Actuator, error) {
	cfg.SSHUser = cmp.Or(cfg.SSHUser, "root")
	cfg.Name = cmp.Or(cfg.Name, tasks.DefaultActuator)
	cfg.Site = cmp.Or(cfg.Site, tasks.DefaultSite)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, 32)
	cfg.ProbeConcurrency = cmp.Or(cfg.ProbeConcurrency, 8)
	cfg.ProbeHostShare = cmp.Or(cfg.ProbeHostShare, max(1, cfg.ProbeConcurrency/2))
	cfg.CommandTimeout = cmp.Or(cfg.CommandTimeout, 10*time.Minute)
	cfg.ProvisionTimeout = cmp.Or(cfg.ProvisionTimeout, 30*time.Minute)
	cfg.PreviewTimeout = cmp.Or(cfg.PreviewTimeout, tasks.PreviewTimeout)
	cfg.ProgressInterval = cmp.Or(cfg.ProgressInterval, 2*time.Second)
	cfg.HeartbeatInterval = cmp.Or(cfg.HeartbeatInterval, 10*time.Second)
	cfg.TaskCheckInterval = cmp.Or(cfg.TaskCheckInterval, tasks.PollInterval)
	cfg.RetryDelay = cmp.Or(cfg.RetryDelay, 5*time.Second)
	cfg.ShutdownGrace = cmp.Or(cfg.ShutdownGrace, 10*time.Second)
	cfg.HAWait = cmp.Or(cfg.HAWait, 3*time.Minute)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, 2*time.Second)
	cfg.ApprovalWait = cmp.Or(cfg.ApprovalWait, 5*time.Second)
	cfg.OrderLease = cmp.Or(cfg.OrderLease, 3*time.Second)
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	log := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)).With("component", "actuator")

	redisOpt, errs := cfg.validate()
	sshCfg := SSHConfig{
		User: cfg.SSHUser, Signer: cfg.SSHSigner, KnownHostsFile: cfg.KnownHostsFile,
		DialTimeout: 10 * time.Second, Logger: log,
	}
	runner, err := NewSSHRunner(sshCfg)
	if err != nil {
		errs = append(errs, err)
	}
	probeSSHCfg := sshCfg
	probeSSHCfg.DialTimeout = probeDialTimeout
	probeRunner, _ := NewSSHRunner(probeSSHCfg)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("actuator config: %w", err)
	}
	j, err := openJournal(cfg.JournalPath, cfg.Clock())
	if err != nil {
		return nil, err
	}
	m := newMetrics()
	return &Actuator{cfg: cfg, log: log, orderKeys: tasks.RotatingKeys(cfg.VerifyKey, cfg.PreviousVerifyKey),
		redis: redisOpt, ssh: runner, runner: timedRunner{runner, m.ssh}, probeSSH: probeRunner, probeRunner: timedRunner{probeRunner, m.ssh},
		probeHosts: newProbeHosts(cfg.ProbeHostShare),
		journal:    j, metrics: m}, nil
}

// validate collects every mistake in cfg at once, and parses the Redis URL.
func (cfg *Config) validate() (asynq.RedisConnOpt, []error) {
	var errs []error
	var redisOpt asynq.RedisConnOpt
	if cfg.RedisURL == "" {
		errs = append(errs, errors.New("redis url is required"))
	} else if opt, err := tasks.ParseRedisURL(cfg.RedisURL); err != nil {
		errs = append(errs, fmt.Errorf("redis url: %w", err))
	} else {
		redisOpt = opt
	}
	if len(cfg.VerifyKey) != ed25519.PublicKeySize {
		errs = append(errs, fmt.Errorf("verify key: want an Ed25519 public key of %d bytes, got %d", ed25519.PublicKeySize, len(cfg.VerifyKey)))
	}
	switch {
	case len(cfg.PreviousVerifyKey) == 0:
	case len(cfg.PreviousVerifyKey) != ed25519.PublicKeySize:
		errs = append(errs, fmt.Errorf("previous verify key: want an Ed25519 public key of %d bytes, got %d", ed25519.PublicKeySize, len(cfg.PreviousVerifyKey)))
	case cfg.PreviousVerifyKey.Equal(cfg.VerifyKey):
		errs = append(errs, errors.New("previous verify key: it is the verify key itself; set it to the key being rotated out, or leave it out"))
	}
	if len(cfg.ReportSigningKey) != ed25519.PrivateKeySize {
		errs = append(errs, fmt.Errorf("report signing key: want an Ed25519 private key of %d bytes, got %d", ed25519.PrivateKeySize, len(cfg.ReportSigningKey)))
	}
	if err := tasks.ValidateActuatorName(cfg.Name); err != nil {
		errs = append(errs, err)
	}
	if err := policy.ValidateSiteName(cfg.Site); err != nil {
		errs = append(errs, err)
	}
	if cfg.JournalPath == "" {
		errs = append(errs, errors.New("journal path is required"))
	}
	if cfg.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency must be at least 1, got %d", cfg.Concurrency))
	}
	if cfg.ProbeConcurrency < 1 {
		errs = append(errs, fmt.Errorf("probe concurrency must be at least 1, got %d", cfg.ProbeConcurrency))
	}
	if cfg.ProbeConcurrency >= 1 && (cfg.ProbeHostShare < 1 || cfg.ProbeHostShare > cfg.ProbeConcurrency) {
		errs = append(errs, fmt.Errorf("probe host share must be from 1 to the probe concurrency (%d), got %d", cfg.ProbeConcurrency, cfg.ProbeHostShare))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"command timeout", cfg.CommandTimeout}, {"provision timeout", cfg.ProvisionTimeout}, {"preview timeout", cfg.PreviewTimeout},
		{"progress interval", cfg.ProgressInterval}, {"heartbeat interval", cfg.HeartbeatInterval},
		{"task check interval", cfg.TaskCheckInterval}, {"retry delay", cfg.RetryDelay},
		{"shutdown grace", cfg.ShutdownGrace}, {"ha wait", cfg.HAWait}, {"poll interval", cfg.PollInterval},
		{"approval wait", cfg.ApprovalWait}, {"order lease", cfg.OrderLease},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %s", d.name, d.v))
		}
	}
	return redisOpt, errs
}

func (a *Actuator) now() time.Time { return a.cfg.Clock() }

// Run reports what an earlier run left unfinished, then consumes orders and
// probes until ctx ends. It then stops taking work, lets running executions
// finish for ShutdownGrace, kills what is left (reported as
// outcome_unknown), and closes the journal and every connection. Run may be
// called once.
func (a *Actuator) Run(ctx context.Context) error {
	if !a.running.CompareAndSwap(false, true) {
		return errors.New("actuator: Run called twice")
	}
	var q queues
	var answers reader
	return supervisor.New(a.log,
		supervisor.Service{Name: "connections", Start: a.connect, Stop: a.disconnect},
		supervisor.Service{Name: "recover", Start: a.recoverOnStart},
		supervisor.Service{Name: "answers", Start: answers.start(a.readAnswers), Stop: answers.stop},
		supervisor.Service{Name: "orphans", Run: func(ctx context.Context) error { a.resendOrphans(ctx); return nil }},
		supervisor.Service{Name: "queues", Start: q.start(a), Stop: q.stop(a)},
	).Run(ctx)
}

// connect opens the queue client and the contexts handlers run on: they
// outlive Run's context, for the shutdown grace and the last reports.
func (a *Actuator) connect(ctx context.Context) error {
	a.client = asynq.NewClient(a.redis)
	a.rdb = a.redis.MakeRedisClient().(redis.UniversalClient)
	a.inspector = asynq.NewInspector(a.redis)
	a.workCtx, a.cancelWork = context.WithCancel(context.WithoutCancel(ctx))
	a.reportCtx, a.cancelReports = context.WithCancel(context.WithoutCancel(ctx))
	return nil
}

func (a *Actuator) disconnect() {
	a.cancelWork()
	a.cancelReports()
	a.client.Close()
	a.rdb.Close()
	a.inspector.Close()
	if err := errors.Join(a.ssh.Close(), a.probeSSH.Close()); err != nil {
		a.log.Warn("close SSH connections", "err", err)
	}
	if err := a.journal.Close(); err != nil {
		a.log.Error("close journal", "err", err)
	}
}

// recoverOnStart reports what an earlier run left unfinished; a stop asked
// for meanwhile is no failure.
func (a *Actuator) recoverOnStart(ctx context.Context) error {
	if err := a.recover(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// reader runs a loop of its own until Stop: the bot's answers must keep
// coming while the orders that wait for them drain, after Run's context
// has ended.
type reader struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (r *reader) start(loop func(context.Context)) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
		r.done = make(chan struct{})
		go func() { defer close(r.done); loop(ctx) }()
		return nil
	}
}

func (r *reader) stop() { r.cancel(); <-r.done }

// queues are the asynq servers: orders and probes are served by two
// pools, so probes can never take the workers an approved order needs.
type queues struct{ orders, probes *asynq.Server }

func (q *queues) start(a *Actuator) func(context.Context) error {
	return func(context.Context) error {
		q.orders = a.newServer(tasks.OrderQueue(a.cfg.Site), a.cfg.Concurrency, 0)
		orderMux := asynq.NewServeMux()
		orderMux.HandleFunc(tasks.TypeExecutionRun, a.handleRun)
		if err := q.orders.Start(orderMux); err != nil {
			return fmt.Errorf("start actuator: %w", err)
		}
		// A probe put back while its host is busy (deferProbe) is a
		// scheduled task; look for due ones often enough that its wait
		// stays near probeDeferDelay.
		q.probes = a.newServer(tasks.ProbeQueue(a.cfg.Site), a.cfg.ProbeConcurrency, 2*probeDeferDelay)
		probeMux := asynq.NewServeMux()
		probeMux.HandleFunc(tasks.TypeCheckRun, a.handleCheck)
		probeMux.HandleFunc(tasks.TypeInventoryRun, a.handleInventory)
		probeMux.HandleFunc(tasks.TypePreviewRun, a.handlePreview)
		if err := q.probes.Start(probeMux); err != nil {
			q.orders.Shutdown()
			return fmt.Errorf("start actuator probes: %w", err)
		}
		a.log.Info("actuator ready", "name", a.cfg.Name, "site", a.cfg.Site, "queues", []string{tasks.OrderQueue(a.cfg.Site), tasks.ProbeQueue(a.cfg.Site)},
			"concurrency", a.cfg.Concurrency, "probe_concurrency", a.cfg.ProbeConcurrency)
		return nil
	}
}

// stop stops taking work from both queues, drains what runs, then shuts
// the servers down.
func (q *queues) stop(a *Actuator) func() {
	return func() {
		a.log.Info("actuator stopping", "running", a.activeCount())
		q.orders.Stop()
		q.probes.Stop()
		a.drain(a.cancelWork, a.cancelReports)
		q.orders.Shutdown()
		q.probes.Shutdown()
		a.log.Info("actuator stopped")
	}
}

// newServer serves queue with concurrency workers. delayedCheck is how
// often scheduled tasks are moved to the queue once due; zero is asynq's
// default, 5s.
func (a *Actuator) newServer(queue string, concurrency int, delayedCheck time.Duration) *asynq.Server {
	return asynq.NewServer(a.redis, asynq.Config{
		Concurrency:              concurrency,
		DelayedTaskCheckInterval: delayedCheck,
		Queues:                   map[string]int{queue: 1},
		TaskCheckInterval:        a.cfg.TaskCheckInterval,
		// drain bounds the handlers; asynq must not give up on them
		// first and put their orders back on the queue.
		ShutdownTimeout: a.cfg.ShutdownGrace + 30*time.Second,
		Logger:          tasks.Logger(a.log),
		LogLevel:        asynq.WarnLevel,
	})
}

// drain waits for running handlers: for ShutdownGrace, then after killing
// their commands, then after giving up on reports that cannot be sent.
func (a *Actuator) drain(cancelWork, cancelReports context.CancelFunc) {
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-a.idle():
			return true
		case <-t.C:
			return false
		}
	}
	if wait(a.cfg.ShutdownGrace) {
		return
	}
	a.log.Warn("stopping executions still running after the shutdown grace", "running", a.activeCount())
	cancelWork()
	if wait(10 * time.Second) {
		return
	}
	a.log.Error("results could not be delivered before shutdown; the next start reports them as outcome_unknown")
	cancelReports()
	<-a.idle()
}

// enter counts a running handler; call the returned func when it is done.
func (a *Actuator) enter() func() {
	a.mu.Lock()
	a.active++
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		a.active--
		if a.active == 0 && a.idleCh != nil {
			close(a.idleCh)
			a.idleCh = nil
		}
		a.mu.Unlock()
	}
}

// idle returns a channel that is closed when no handler runs.
func (a *Actuator) idle() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.active == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if a.idleCh == nil {
		a.idleCh = make(chan struct{})
	}
	return a.idleCh
}

func (a *Actuator) activeCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.active
}

// recover reports every execution the journal saw start but not finish as
// outcome_unknown (or failed, when no command of it was sent), then marks
// it finished. The mark follows the report, so
// a crash in between reports it again rather than never.
func (a *Actuator) recover(ctx context.Context) error {
	for _, u := range a.journal.Unfinished() {
		now := a.now()
		res := tasks.Result{
			ExecutionID: u.ID,
			Status:      tasks.StatusOutcomeUnknown,
			Error: fmt.Sprintf("The actuator stopped while this execution was running (it started at %s), so its outcome is unknown: "+
				"the command may or may not have finished. Check the target, then mark the execution reconciled.", u.StartedAt.UTC().Format(time.RFC3339)),
			Began:      true,
			StartedAt:  u.StartedAt,
			FinishedAt: now,
		}
		if !u.Sent {
			res.Status = tasks.StatusFailed
			res.Error = fmt.Sprintf("The actuator stopped before it sent any command of this execution to the host (it started at %s): "+
				"nothing ran. Ask again to try it.", u.StartedAt.UTC().Format(time.RFC3339))
		}
		if err := a.deliverResult(ctx, res); err != nil {
			return fmt.Errorf("recover execution %s: %w", u.ID, err)
		}
		if err := a.journal.Finish(u.ID, res.Status); err != nil {
			return fmt.Errorf("recover execution %s: %w", u.ID, err)
		}
		a.log.Warn("reported an execution interrupted by a stop", "execution_id", u.ID, "started_at", u.StartedAt, "status", res.Status)
	}
	return nil
}

// enqueueTimeout bounds one attempt to put a message on the queue.
const enqueueTimeout = 5 * time.Second

// enqueue puts t on its queue once. A message whose task id is already
// queued or retained counts as delivered.
func (a *Actuator) enqueue(ctx context.Context, t *asynq.Task) error {
	ctx, cancel := context.WithTimeout(ctx, enqueueTimeout)
	defer cancel()
	_, err := a.client.EnqueueContext(ctx, t)
	if errors.Is(err, asynq.ErrTaskIDConflict) || errors.Is(err, asynq.ErrDuplicateTask) {
		return nil
	}
	return err
}

// deliverResult redacts res and enqueues it, retrying until it is on the
// queue or ctx ends.
func (a *Actuator) deliverResult(ctx context.Context, res tasks.Result) error {
	res = redactResult(res)
	res.Actuator = a.cfg.Name
	t, err := tasks.NewResultTask(a.cfg.ReportSigningKey, res)
	if err != nil {
		return err
	}
	backoff := 100 * time.Millisecond
	for {
		err := a.enqueue(ctx, t)
		if err == nil {
			return nil
		}
		a.log.Warn("could not enqueue a result; retrying", "execution_id", res.ExecutionID, "status", res.Status, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("enqueue result: %w (last error: %v)", context.Cause(ctx), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// reportProgress enqueues one progress report. Progress is advisory: a
// report that cannot be sent is logged and dropped.
func (a *Actuator) reportProgress(ctx context.Context, p tasks.Progress) {
	p.Actuator = a.cfg.Name
	t, err := tasks.NewProgressTask(a.cfg.ReportSigningKey, p)
	if err == nil {
		err = a.enqueue(ctx, t)
	}
	if err != nil && ctx.Err() == nil {
		a.log.Warn("could not enqueue progress", "execution_id", p.ExecutionID, "seq", p.Seq, "err", err)
	}
}

// redactResult redacts every free-text field of a result.
func redactResult(r tasks.Result) tasks.Result {
	r.Error = redact.String(r.Error)
	r.Output = redact.String(r.Output)
	if r.Notes != nil {
		notes := make([]string, len(r.Notes))
		for i, n := range r.Notes {
			notes[i] = redact.String(n)
		}
		r.Notes = notes
	}
	if r.Phases != nil {
		phases := make([]tasks.Phase, len(r.Phases))
		for i, p := range r.Phases {
			p.Note = redact.String(p.Note)
			phases[i] = p
		}
		r.Phases = phases
	}
	return r
}
