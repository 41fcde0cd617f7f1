package actuator

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"golang.org/x/crypto/ssh"

	"github.com/nomoshq/nomos/hostgate"
	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// waitTimeout bounds every wait for something the actuator sends. Tests
// never assert on timing; this only keeps a broken test from hanging.
const waitTimeout = 60 * time.Second

// fleet is one node: a running Jellyfin with a working resolver, a running
// web server, and a stopped container. vmid 100 is free, so it is what
// pvesh hands out first.
func fleet() []labsim.Host {
	return []labsim.Host{{Name: "pve1", Containers: []labsim.Container{
		{VMID: 101, Hostname: "jellyfin", IP: "10.0.0.21/24", Gateway: "10.0.0.1", Nameserver: "1.1.1.1", Status: "running",
			Services: []labsim.Service{{Name: "jellyfin", Port: 8096, HealthPath: "/health", Active: true, Enabled: true}}},
		{VMID: 102, Hostname: "web", IP: "10.0.0.22/24", Gateway: "10.0.0.1", Status: "running",
			Services: []labsim.Service{{Name: "nginx", Port: 80, Active: true, Enabled: true}}},
		{VMID: 103, Hostname: "spare", IP: "10.0.0.23/24", Gateway: "10.0.0.1", Status: "stopped"},
	}}}
}

// bundle is one test's world: labsim over real SSH, its own Redis
// database, an order key pair, a running actuator, a queue client and a
// collector of everything on the results queue.
type bundle struct {
	dir        string
	simCfg     labsim.Config
	sim        *labsim.Sim
	simLog     string
	addr       string
	clientKey  ssh.Signer
	knownHosts string
	journal    string
	redisURL   string
	signKey    ed25519.PrivateKey
	reportKey  ed25519.PublicKey
	cfg        Config
	queue      *asynq.Client
	results    *collector

	stopActuator func()
	// act is the running actuator.
	act *Actuator
}

// option adjusts a bundle before its actuator starts.
type option func(t *testing.T, b *bundle)

func withConfig(f func(*Config)) option {
	return func(_ *testing.T, b *bundle) { f(&b.cfg) }
}

// withGate restarts labsim with its node enforcing nomos gate with these
// rules. Put it before options that depend on labsim's address.
func withGate(rules hostgate.Rules) option {
	return func(t *testing.T, b *bundle) {
		if err := b.sim.Close(); err != nil {
			t.Fatal(err)
		}
		b.simCfg.Gate = &rules
		b.startSim(t)
	}
}

func setup(t *testing.T, opts ...option) *bundle {
	t.Helper()
	dir := t.TempDir()
	b := &bundle{
		dir:        dir,
		simLog:     filepath.Join(dir, "labsim", "commands.jsonl"),
		knownHosts: filepath.Join(dir, "known_hosts"),
		journal:    filepath.Join(dir, "actuator", "journal"),
		redisURL:   testenv.RedisURL(t),
	}

	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.clientKey, err = ssh.NewSignerFromKey(priv); err != nil {
		t.Fatal(err)
	}
	authorized := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authorized, ssh.MarshalAuthorizedKey(b.clientKey.PublicKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	b.simCfg = labsim.Config{
		Hosts:              fleet(),
		StateDir:           filepath.Join(dir, "labsim"),
		AuthorizedKeysFile: authorized,
		LogPath:            b.simLog,
		Logger:             testenv.Logger(t).With("side", "labsim"),
		Gate:               testenv.GateFromEnv(),
	}
	b.startSim(t)

	pub, signKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	b.signKey = signKey
	reportPub, reportKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	b.reportKey = reportPub
	b.cfg = Config{
		RedisURL:          b.redisURL,
		VerifyKey:         pub,
		ReportSigningKey:  reportKey,
		SSHSigner:         b.clientKey,
		KnownHostsFile:    b.knownHosts,
		JournalPath:       b.journal,
		ProgressInterval:  50 * time.Millisecond,
		HeartbeatInterval: 200 * time.Millisecond,
		TaskCheckInterval: 20 * time.Millisecond,
		RetryDelay:        10 * time.Millisecond,
		ShutdownGrace:     2 * time.Second,
		Logger:            testenv.Logger(t),
	}

	b.results = newCollector(t, b.redisURL, reportPub, signKey)
	opt, err := asynq.ParseRedisURI(b.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	b.queue = asynq.NewClient(opt)
	t.Cleanup(func() { b.queue.Close() })

	for _, o := range opts {
		o(t, b)
	}
	b.start(t)
	return b
}

// startSim runs labsim on b's config until the test ends.
func (b *bundle) startSim(t *testing.T) {
	t.Helper()
	sim, err := labsim.New(b.simCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sim.Close(); err != nil {
			t.Errorf("close labsim: %v", err)
		}
	})
	b.sim = sim
	b.addr = b.sim.Addr("pve1")
	if err := labsim.WriteKnownHosts(b.knownHosts, b.sim.KnownHostsLines()); err != nil {
		t.Fatal(err)
	}
}

// start runs an actuator on b's config until the test ends or stop.
func (b *bundle) start(t *testing.T) {
	t.Helper()
	a, err := New(b.cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	b.act = a
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	b.stopActuator = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(b.stopActuator)
}

// restart stops the actuator and starts a new one on the same journal, as
// after a restart of the process.
func (b *bundle) restart(t *testing.T) {
	t.Helper()
	b.stopActuator()
	b.start(t)
}

// Targets in the fleet.

func (b *bundle) jellyfin() tasks.Target {
	return tasks.Target{ID: "svc-jellyfin", Slug: "service:jellyfin", Type: "service", Host: "pve1", HostAddr: b.addr,
		VMID: 101, Hostname: "jellyfin", Unit: "jellyfin.service", Port: 8096, HealthPath: "/health"}
}

func (b *bundle) lxc(vmid int, hostname string) tasks.Target {
	return tasks.Target{ID: "ct-" + strconv.Itoa(vmid), Slug: "lxc:" + strconv.Itoa(vmid), Type: "lxc", Host: "pve1", HostAddr: b.addr,
		VMID: vmid, Hostname: hostname}
}

func (b *bundle) node() tasks.Target {
	return tasks.Target{ID: "node-pve1", Slug: "host:pve1", Type: "host", Host: "pve1", HostAddr: b.addr}
}

// order builds the order the bot would sign for p on target: the plan it
// derives, its hash and class, valid for ten minutes.
func (b *bundle) order(t *testing.T, id string, p policy.Params, target tasks.Target) tasks.Order {
	t.Helper()
	pt := policyTarget(target)
	plan, err := policy.NewPlan(p, pt)
	if err != nil {
		t.Fatalf("plan %s: %v", id, err)
	}
	hash, err := policy.PlanHash(plan)
	if err != nil {
		t.Fatal(err)
	}
	risk, err := policy.Classify(plan.Params, pt, nil)
	if err != nil {
		t.Fatal(err)
	}
	params, err := policy.MarshalParams(plan.Params)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	return tasks.Order{
		ExecutionID: id, Actuator: tasks.DefaultActuator, Action: string(p.Action()), Target: target, Params: params, Steps: plan.Steps,
		RiskClass: risk.Class.String(), PlanHash: hash, IssuedAt: now, ExpiresAt: now.Add(10 * time.Minute),
	}
}

// sign signs o with the bot's key.
func (b *bundle) sign(t *testing.T, o tasks.Order) []byte {
	t.Helper()
	env, err := tasks.SignOrder(b.signKey, o)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// send signs o and enqueues it as the bot does.
func (b *bundle) send(t *testing.T, o tasks.Order) []byte {
	t.Helper()
	env := b.sign(t, o)
	if _, err := b.queue.Enqueue(tasks.NewRunTask(o.Site, o.ExecutionID, env)); err != nil {
		t.Fatalf("enqueue order %s: %v", o.ExecutionID, err)
	}
	return env
}

// deliver enqueues an envelope with no task id, as a redelivery or a
// stranger with access to Redis would.
func (b *bundle) deliver(t *testing.T, envelope []byte) {
	t.Helper()
	if _, err := b.queue.Enqueue(asynq.NewTask(tasks.TypeExecutionRun, envelope, asynq.Queue(tasks.OrderQueue(tasks.DefaultSite)), asynq.MaxRetry(0))); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
}

// probe signs c as the bot's prober does, filling in what it leaves out,
// and enqueues it.
func (b *bundle) probe(t *testing.T, c tasks.CheckRun) {
	t.Helper()
	if c.Actuator == "" {
		c.Actuator = tasks.DefaultActuator
	}
	if c.IssuedAt.IsZero() {
		c.IssuedAt = time.Now()
	}
	if c.ExpiresAt.IsZero() {
		c.ExpiresAt = c.IssuedAt.Add(time.Minute)
	}
	task, err := tasks.NewCheckRunTask(b.signKey, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.queue.Enqueue(task); err != nil {
		t.Fatalf("enqueue probe %s: %v", c.CheckID, err)
	}
}

// run sends o and waits for its result.
func (b *bundle) run(t *testing.T, o tasks.Order) tasks.Result {
	t.Helper()
	b.send(t, o)
	return b.results.result(t, o.ExecutionID)
}

// journalOnce returns the journal once ready accepts it. The result goes
// out before its "finished" line is written, so a test that has the
// result may have to wait a moment for the line.
func (b *bundle) journalOnce(t *testing.T, ready func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		data, err := os.ReadFile(b.journal)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if ready(string(data)) {
			return string(data)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the journal never got there:\n%s", data)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// commands returns what labsim received, in order.
func (b *bundle) commands(t *testing.T) []labsim.LogEntry {
	t.Helper()
	entries, err := labsim.ReadLog(b.simLog)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return entries
}

func commandLines(entries []labsim.LogEntry) []string {
	out := []string{}
	for _, e := range entries {
		out = append(out, e.Command)
	}
	return out
}

// ssh runs cmd on the simulated host as its admin, as someone at the
// node's console would, so the gate (when a test turns it on) does not
// apply: tests use it to look at the host or change it behind the
// actuator's back.
func (b *bundle) ssh(t *testing.T, cmd string) string {
	t.Helper()
	r, err := NewSSHRunner(SSHConfig{Signer: b.clientKey, KnownHostsFile: b.knownHosts, User: labsim.AdminUser})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out strings.Builder
	code, err := r.Run(testenv.Context(t), b.addr, cmd, &out, &out)
	if err != nil || code != 0 {
		t.Fatalf("%s: exit %d, %v\n%s", cmd, code, err, out.String())
	}
	return out.String()
}

func diff(t *testing.T, what string, want, got any, opts ...cmp.Option) {
	t.Helper()
	if d := cmp.Diff(want, got, opts...); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}

func contains(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s: want %q in:\n%s", what, w, got)
		}
	}
}

// collector records every message on the results queue, in the order the
// queue hands them out. It verifies each against the actuator's report key
// and fails the test on anything that does not verify.
type collector struct {
	t       *testing.T
	pub     ed25519.PublicKey
	mu      sync.Mutex
	msgs    []message
	changed chan struct{}

	// The bot's side of the approval check: it answers with signKey on
	// rdb, yes unless the execution is in withdrawn, and counts the
	// questions per execution in asked.
	signKey   ed25519.PrivateKey
	rdb       redis.UniversalClient
	withdrawn map[string]bool
	asked     map[string]int
	batches   []int
	tamper    func(*tasks.ApprovalBatchAnswer)
	// held, while open, lets the bot's side read questions; it says on
	// parked when it stops at a held one.
	held   chan struct{}
	parked chan struct{}
}

type message struct {
	Type      string
	Progress  tasks.Progress
	Result    tasks.Result
	Check     tasks.CheckResult
	Inventory tasks.InventoryResult
	Preview   tasks.PreviewResult
}

func (m message) executionID() string {
	switch m.Type {
	case tasks.TypeExecutionProgress:
		return m.Progress.ExecutionID
	case tasks.TypeExecutionResult:
		return m.Result.ExecutionID
	}
	return ""
}

func newCollector(t *testing.T, redisURL string, pub ed25519.PublicKey, signKey ed25519.PrivateKey) *collector {
	t.Helper()
	opt, err := asynq.ParseRedisURI(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := opt.MakeRedisClient().(redis.UniversalClient)
	t.Cleanup(func() { rdb.Close() })
	c := &collector{t: t, pub: pub, changed: make(chan struct{}), signKey: signKey, rdb: rdb,
		withdrawn: map[string]bool{}, asked: map[string]int{}, held: closedChan(), parked: make(chan struct{})}
	testenv.Go(t, func(ctx context.Context) {
		for ctx.Err() == nil {
			c.mu.Lock()
			held := c.held
			c.mu.Unlock()
			select {
			case <-held:
			default:
				select {
				case c.parked <- struct{}{}:
				case <-ctx.Done():
					return
				}
				select {
				case <-held:
				case <-ctx.Done():
					return
				}
			}
			if got, err := rdb.BLPop(ctx, 100*time.Millisecond, tasks.ApprovalChecks).Result(); err == nil {
				c.answer(ctx, []byte(got[1]))
			}
		}
	})
	// One worker, so messages are recorded in queue order.
	srv := asynq.NewServer(opt, tasks.ResultsServerConfig(asynq.Config{
		Concurrency:       1,
		TaskCheckInterval: 10 * time.Millisecond,
		Logger:            tasks.Logger(testenv.Logger(t).With("side", "collector")),
		LogLevel:          asynq.WarnLevel,
	}))
	if err := srv.Start(asynq.HandlerFunc(c.handle)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return c
}

func (c *collector) handle(ctx context.Context, task *asynq.Task) error {
	if task.Type() == tasks.TypeCheckResults {
		payloads, err := tasks.SplitCheckResults(task.Payload())
		if err != nil {
			c.t.Errorf("the actuator's probe results make a batch that does not split: %v", err)
			return errors.Join(err, asynq.SkipRetry)
		}
		for _, p := range payloads {
			if err := c.handle(ctx, asynq.NewTask(tasks.TypeCheckResult, p)); err != nil {
				return err
			}
		}
		return nil
	}
	m := message{Type: task.Type()}
	var err error
	switch task.Type() {
	case tasks.TypeExecutionProgress:
		m.Progress, err = tasks.VerifyProgress(tasks.VerifyKeys{c.pub}, task.Payload())
	case tasks.TypeExecutionResult:
		m.Result, err = tasks.VerifyResult(tasks.VerifyKeys{c.pub}, task.Payload())
	case tasks.TypeCheckResult:
		m.Check, err = tasks.VerifyCheckResult(tasks.VerifyKeys{c.pub}, task.Payload())
	case tasks.TypeInventoryResult:
		m.Inventory, err = tasks.VerifyInventoryResult(tasks.VerifyKeys{c.pub}, task.Payload())
	case tasks.TypePreviewResult:
		m.Preview, err = tasks.VerifyPreviewResult(tasks.VerifyKeys{c.pub}, task.Payload())
	default:
		err = errors.New("unexpected task type " + task.Type())
	}
	if err != nil {
		c.t.Errorf("the actuator put a %s on the results queue that does not verify: %v", task.Type(), err)
		return errors.Join(err, asynq.SkipRetry)
	}
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	return nil
}

// answer answers a question about approvals as the bot does: yes, unless
// the execution's approval was withdrawn; then tamper, if set, changes
// the answer before it is signed, as a forger holding the key would.
func (c *collector) answer(ctx context.Context, payload []byte) {
	q, err := tasks.VerifyApprovalBatch(tasks.VerifyKeys{c.pub}, payload)
	if err != nil {
		c.t.Errorf("the actuator asked about approvals with a message that does not verify: %v", err)
		return
	}
	ans := tasks.ApprovalBatchAnswer{Actuator: q.Actuator, Nonce: q.Nonce, At: time.Now()}
	c.mu.Lock()
	c.batches = append(c.batches, len(q.Orders))
	for _, o := range q.Orders {
		c.asked[o.ExecutionID]++
		v := tasks.ApprovalVerdict{ExecutionID: o.ExecutionID, PlanHash: o.PlanHash, Approved: !c.withdrawn[o.ExecutionID], State: "dispatched"}
		if !v.Approved {
			v.State = "cancelled"
		}
		ans.Verdicts = append(ans.Verdicts, v)
	}
	key, tamper := c.signKey, c.tamper
	c.mu.Unlock()
	if tamper != nil {
		tamper(&ans)
	}
	answer, err := tasks.SignApprovalBatchAnswer(key, ans)
	if err != nil {
		c.t.Error(err)
		return
	}
	if err := c.rdb.RPush(ctx, tasks.ApprovalQueue(q.Site, q.Actuator), answer).Err(); err != nil && ctx.Err() == nil {
		c.t.Errorf("answer the question about %d orders: %v", len(q.Orders), err)
	}
}

// hold keeps the bot's side from reading questions until the returned
// func is called. It returns once the bot's side has stopped reading.
func (c *collector) hold() (release func()) {
	ch := make(chan struct{})
	c.mu.Lock()
	c.held = ch
	c.mu.Unlock()
	<-c.parked
	return func() {
		c.mu.Lock()
		c.held = closedChan()
		c.mu.Unlock()
		close(ch)
	}
}

func closedChan() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

// tamperWith makes the bot's side change each answer before signing it.
func (c *collector) tamperWith(f func(*tasks.ApprovalBatchAnswer)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tamper = f
}

// questionSizes is how many orders each question asked about, in order.
func (c *collector) questionSizes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.batches)
}

// signWith makes the bot's side sign its answers with key.
func (c *collector) signWith(key ed25519.PrivateKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.signKey = key
}

// withdraw makes the bot's side answer that id is no longer approved.
func (c *collector) withdraw(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.withdrawn[id] = true
}

// questions is how many times the actuator asked whether id is approved.
func (c *collector) questions(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.asked[id]
}

// wait returns the messages once ok accepts them.
func (c *collector) wait(t *testing.T, what string, ok func([]message) bool) []message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for {
		c.mu.Lock()
		msgs := slices.Clone(c.msgs)
		changed := c.changed
		c.mu.Unlock()
		if ok(msgs) {
			return msgs
		}
		select {
		case <-changed:
		case <-ctx.Done():
			dump, _ := json.MarshalIndent(msgs, "", "  ")
			t.Fatalf("gave up waiting for %s; the results queue had:\n%s", what, dump)
		}
	}
}

// forExecution filters msgs to one execution's progress and results.
func forExecution(msgs []message, id string) []message {
	var out []message
	for _, m := range msgs {
		if m.executionID() == id {
			out = append(out, m)
		}
	}
	return out
}

func results(msgs []message, id string) []tasks.Result {
	var out []tasks.Result
	for _, m := range forExecution(msgs, id) {
		if m.Type == tasks.TypeExecutionResult {
			out = append(out, m.Result)
		}
	}
	return out
}

// result waits for the first result of an execution.
func (c *collector) result(t *testing.T, id string) tasks.Result {
	t.Helper()
	msgs := c.wait(t, "the result of "+id, func(msgs []message) bool { return len(results(msgs, id)) > 0 })
	return results(msgs, id)[0]
}

// nthResult waits for an execution's nth result, counting from 1.
func (c *collector) nthResult(t *testing.T, id string, n int) tasks.Result {
	t.Helper()
	msgs := c.wait(t, "result "+strconv.Itoa(n)+" of "+id, func(msgs []message) bool { return len(results(msgs, id)) >= n })
	return results(msgs, id)[n-1]
}

// check waits for a probe's result.
func (c *collector) check(t *testing.T, checkID string) tasks.CheckResult {
	t.Helper()
	find := func(msgs []message) (tasks.CheckResult, bool) {
		for _, m := range msgs {
			if m.Type == tasks.TypeCheckResult && m.Check.CheckID == checkID {
				return m.Check, true
			}
		}
		return tasks.CheckResult{}, false
	}
	msgs := c.wait(t, "probe "+checkID, func(msgs []message) bool { _, ok := find(msgs); return ok })
	r, _ := find(msgs)
	return r
}
