package executions_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/nomoshq/nomos/actuator"
	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// BenchmarkE2EApprovalToSSH measures, on real Postgres, Redis, actuator and
// labsim, the time from an approval to the first byte of the command on
// the host, and from the command's exit to its result applied in Postgres.
// Run with -benchtime=200x; it reports p50 and p99 of each, and the floors
// measured in the same run: queue-floor, a bare asynq round trip polled as
// the actuator polls, and ssh-floor, a bare SSH connection from dial to the
// same command's first byte. Approval to SSH cannot beat their sum.
func BenchmarkE2EApprovalToSSH(b *testing.B) {
	ctx := testenv.Context(b)
	fleet := testenv.NewFleet(b)
	bs := newBenchStack(b, fleet, []string{operator})
	st, svc, opt := bs.store, bs.svc, bs.redis

	const command = "pct exec 101 -- systemctl restart jellyfin.service"
	var toSSH, toApplied []time.Duration
	for b.Loop() {
		p, err := svc.Request(ctx, executions.Request{Action: "restart", Target: "jellyfin", Params: json.RawMessage(`{}`), RequestedBy: operator, Via: "cli"})
		if err != nil {
			b.Fatal(err)
		}
		approvedAt := time.Now()
		if _, err := svc.Approve(ctx, executions.Decision{ExecutionID: p.Execution.ID, By: operator, Method: policy.MethodReaction}); err != nil {
			b.Fatal(err)
		}
		var x store.Execution
		for {
			x, err = st.GetExecution(ctx, p.Execution.ID)
			if err != nil {
				b.Fatal(err)
			}
			if x.State.Terminal() {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if x.State != store.StateSucceeded {
			b.Fatalf("execution %s", x.State)
		}
		entries, err := labsim.ReadLog(fleet.LogPath)
		if err != nil {
			b.Fatal(err)
		}
		var last labsim.LogEntry
		for _, e := range entries {
			if e.Command == command {
				last = e
			}
		}
		// labsim logs a command's start as its ts.
		toSSH = append(toSSH, last.TS.Sub(approvedAt))
		toApplied = append(toApplied, x.UpdatedAt.Sub(last.TS.Add(time.Duration(last.DurationMS)*time.Millisecond)))
	}
	queueFloor := testenv.QueueFloor(b, opt, tasks.PollInterval)
	host := hostOf(b, fleet.Seed, 101)
	reportOrderPath(b, fleet, queueFloor, toSSH, toApplied, len(toSSH), func(int) (string, string) { return host, command })
}

// reportOrderPath reports approval → SSH and exit → applied beside n of
// each floor measured now: a bare asynq round trip (queueFloor) and a
// bare SSH connection from dial to the first byte of the ith command
// target names, on its host.
func reportOrderPath(b *testing.B, fleet *testenv.Fleet, queueFloor func() time.Duration, toSSH, toApplied []time.Duration, n int, target func(i int) (host, command string)) {
	var qFloor, sshFloor []time.Duration
	for i := range n {
		qFloor = append(qFloor, queueFloor())
		host, command := target(i)
		dialed := time.Now()
		fleet.Admin(b, host, command)
		entries, err := labsim.ReadLog(fleet.LogPath)
		if err != nil {
			b.Fatal(err)
		}
		sshFloor = append(sshFloor, entries[len(entries)-1].TS.Sub(dialed))
	}
	testenv.ReportPercentiles(b, "approval-to-ssh", toSSH)
	testenv.ReportPercentiles(b, "exit-to-applied", toApplied)
	testenv.ReportPercentiles(b, "queue-floor", qFloor)
	testenv.ReportPercentiles(b, "ssh-floor", sshFloor)
}

// benchStack is what a benchmark of the order path drives, as the roles
// run it: Postgres seeded with a fleet that labsim serves, Redis, the
// bot's side (a Service that consumes results and answers the approval
// checks as the bot does) and an actuator, until the benchmark ends.
// statements counts what the bot's side sends Postgres; store is a pool
// of its own for the benchmark's reads, which it does not count.
type benchStack struct {
	store      *store.Store
	svc        *executions.Service
	redis      asynq.RedisConnOpt
	statements *statementCounter
	// stats is a connection of the benchmark's own, to ask Postgres
	// which backends serve its database.
	stats *pgx.Conn
}

// benchHarness is the application name of the benchmark's own Postgres
// connections.
const benchHarness = "nomos-bench-harness"

// statementCounter counts the statements a store sends, a batch's each
// (n), and the round trips they took: a statement alone or a batch is one.
type statementCounter struct{ n, roundTrips atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	c.roundTrips.Add(1)
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.roundTrips.Add(1)
	return ctx
}

func (c *statementCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.n.Add(1)
}

func (c *statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func newBenchStack(b *testing.B, fleet *testenv.Fleet, operators []string) benchStack {
	ctx := testenv.Context(b)
	statements := &statementCounter{}
	dbURL := testenv.DatabaseURL(b)
	svcStore, err := store.Open(ctx, store.Config{URL: dbURL, Tracer: statements})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(svcStore.Close)
	// The benchmark's own reads say so, so that postgresCPU leaves them out.
	harnessURL, err := url.Parse(dbURL)
	if err != nil {
		b.Fatal(err)
	}
	q := harnessURL.Query()
	q.Set("application_name", benchHarness)
	harnessURL.RawQuery = q.Encode()
	st, err := store.Open(ctx, store.Config{URL: harnessURL.String()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	stats, err := pgx.Connect(ctx, harnessURL.String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stats.Close(context.Background()) })
	if _, err := st.ApplySeed(ctx, fleet.Seed); err != nil {
		b.Fatal(err)
	}
	redisURL := testenv.RedisURL(b)
	opt, err := asynq.ParseRedisURI(redisURL)
	if err != nil {
		b.Fatal(err)
	}
	client := asynq.NewClient(opt)
	b.Cleanup(func() { client.Close() })
	pub, priv, _ := ed25519.GenerateKey(nil)
	reportPub, reportKey, _ := ed25519.GenerateKey(nil)
	rules, _ := policy.NewRules(policy.RulesConfig{Operators: operators})
	svc, err := executions.New(executions.Config{Store: svcStore, Queue: client, SigningKey: priv, ReportVerifyKey: reportPub, Rules: rules})
	if err != nil {
		b.Fatal(err)
	}
	// As the bot consumes results (bot.startResults).
	results := asynq.NewServer(opt, tasks.ResultsServerConfig(asynq.Config{Concurrency: tasks.ResultsConcurrency, TaskCheckInterval: tasks.PollInterval, LogLevel: asynq.ErrorLevel}))
	h := &executions.ResultsHandler{Service: svc}
	if err := results.Start(h); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(results.Shutdown)
	testenv.Go(b, func(ctx context.Context) { h.ServeApprovalChecks(ctx, opt) })
	act, err := actuator.New(actuator.Config{
		RedisURL: redisURL, VerifyKey: pub, ReportSigningKey: reportKey, SSHSigner: fleet.SSHSigner, KnownHostsFile: fleet.KnownHostsFile,
		JournalPath: filepath.Join(b.TempDir(), "journal"),
	})
	if err != nil {
		b.Fatal(err)
	}
	testenv.Go(b, func(ctx context.Context) {
		if err := act.Run(ctx); err != nil && ctx.Err() == nil {
			b.Errorf("actuator: %v", err)
		}
	})
	return benchStack{store: st, svc: svc, redis: opt, statements: statements, stats: stats}
}

// hostOf is the name of the seeded host that runs container vmid.
func hostOf(b *testing.B, seed *fleetseed.Seed, vmid int) string {
	for _, h := range seed.Hosts {
		for _, c := range h.Containers {
			if c.VMID == vmid {
				return h.Name
			}
		}
	}
	b.Fatalf("no seeded host runs container %d", vmid)
	return ""
}

// BenchmarkProbePass measures the prober's work for a fleet of 1,000
// containers with one HTTP check each, all due at once: marking stale,
// claiming every check in Postgres and enqueuing each probe on Redis. It
// reports the cost per check.
func BenchmarkProbePass(b *testing.B) {
	bb := setup(b)
	seed := &fleetseed.Seed{}
	vmid := 1000
	for h := range 10 {
		host := fleetseed.Host{Name: fmt.Sprintf("node%02d", h), SSH: fmt.Sprintf("127.0.0.1:%d", 2200+h), Cores: 32, MemoryMB: 131072, Storage: "local-zfs"}
		for i := range 100 {
			vmid++
			name := fmt.Sprintf("app%d", vmid)
			host.Containers = append(host.Containers, fleetseed.Container{
				VMID: vmid, Hostname: fmt.Sprintf("ct%d", vmid), IP: fmt.Sprintf("10.%d.0.%d/16", 50+h, 1+i), Gateway: fmt.Sprintf("10.%d.0.1", 50+h),
				Cores: 1, MemoryMB: 512, DiskGB: 8, Status: "running",
				Services: []fleetseed.Service{{Name: name, Unit: "app.service", Port: 8080, HealthPath: "/"}},
			})
			seed.Checks = append(seed.Checks, fleetseed.Check{Slug: name + "-http", Target: "service:" + name, Kind: "http", Interval: 60})
		}
		seed.Hosts = append(seed.Hosts, host)
	}
	if _, err := bb.store.ApplySeed(bb.ctx, seed); err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: bb.redis.Addr, DB: bb.redis.DB})
	defer rdb.Close()
	const checks = 1000 + 19 // the generated fleet and the demo seeds
	b.ResetTimer()
	for range b.N {
		bb.clock.Add(time.Hour)
		sent := 0
		for {
			rep, err := bb.svc.ProbeDue(bb.ctx)
			if err != nil {
				b.Fatal(err)
			}
			if rep.Sent == 0 {
				break
			}
			sent += rep.Sent
		}
		if sent != checks {
			b.Fatalf("one round sent %d probes, want %d", sent, checks)
		}
		b.StopTimer()
		if err := rdb.FlushDB(bb.ctx).Err(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*checks), "ns/check")
}
