package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// TestActuatorKilledMidCommand SIGKILLs a real `nomos actuator` process
// while a command hangs on the host, starts it again, and checks that the
// execution is reported outcome_unknown and the command ran exactly once.
func TestActuatorKilledMidCommand(t *testing.T) {
	bin := buildNomos(t)
	fleet := testenv.NewFleet(t)
	dir := t.TempDir()
	signing, verify := filepath.Join(dir, "orders.key"), filepath.Join(dir, "orders.pub")
	if err := tasks.GenerateKeyFiles(signing, verify); err != nil {
		t.Fatal(err)
	}
	priv, err := tasks.LoadSigningKey(signing)
	if err != nil {
		t.Fatal(err)
	}
	reportSigning, reportVerify := filepath.Join(dir, "reports.key"), filepath.Join(dir, "reports.pub")
	if err := tasks.GenerateKeyFiles(reportSigning, reportVerify); err != nil {
		t.Fatal(err)
	}
	reportPub, err := tasks.LoadVerifyKey(reportVerify)
	if err != nil {
		t.Fatal(err)
	}
	redisURL := testenv.RedisURL(t)
	metricsPort := strconv.Itoa(testenv.FreePort(t))
	environ := append(os.Environ(),
		// A port alone: the actuator serves its metrics on loopback.
		"NOMOS_ACTUATOR__METRICS_LISTEN=:"+metricsPort,
		"NOMOS_REDIS__URL="+redisURL,
		"NOMOS_ACTUATOR__SSH_KEY_FILE="+fleet.SSHKeyFile,
		"NOMOS_ACTUATOR__KNOWN_HOSTS_FILE="+fleet.KnownHostsFile,
		"NOMOS_ACTUATOR__JOURNAL_FILE="+filepath.Join(dir, "journal"),
		"NOMOS_ORDERS__VERIFY_KEY_FILE="+verify,
		"NOMOS_REPORTS__SIGNING_KEY_FILE="+reportSigning,
	)
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "actuator")
		cmd.Env = environ
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}

	// Collect what the actuator reports.
	opt, err := asynq.ParseRedisURI(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	reports := make(chan *asynq.Task, 64)
	results := asynq.NewServer(opt, asynq.Config{Queues: map[string]int{tasks.QueueResults: 1}, TaskCheckInterval: 20 * time.Millisecond, LogLevel: asynq.ErrorLevel})
	answerApprovals(t, opt, priv)
	if err := results.Start(asynq.HandlerFunc(func(_ context.Context, task *asynq.Task) error { reports <- task; return nil })); err != nil {
		t.Fatal(err)
	}
	defer results.Shutdown()

	// A signed order to restart jellyfin, whose command will hang.
	const command = "pct exec 101 -- systemctl restart jellyfin.service"
	if err := fleet.Sim.Inject(labsim.Fault{Kind: labsim.FaultHang, Target: "101", Match: "systemctl restart jellyfin"}); err != nil {
		t.Fatal(err)
	}
	target := policy.Target{Type: policy.TargetService, ID: "svc-jellyfin", Slug: "service:jellyfin", Host: "strong", VMID: 101, Unit: "jellyfin.service"}
	plan, err := policy.NewPlan(policy.RestartParams{}, target)
	if err != nil {
		t.Fatal(err)
	}
	hash, err := policy.PlanHash(plan)
	if err != nil {
		t.Fatal(err)
	}
	var hostAddr string
	for _, h := range fleet.Seed.Hosts {
		if h.Name == "strong" {
			hostAddr = h.SSH
		}
	}
	const id = "01a22c00-0000-7000-8000-00000000beef"
	envelope, err := tasks.SignOrder(priv, tasks.Order{
		ExecutionID: id, Actuator: "actuator", Action: "restart", Params: json.RawMessage(`{}`), Steps: plan.Steps, RiskClass: "reversible_low", PlanHash: hash,
		Target:   tasks.Target{ID: target.ID, Slug: target.Slug, Type: "service", Host: "strong", HostAddr: hostAddr, VMID: 101, Unit: "jellyfin.service"},
		IssuedAt: time.Now(), ExpiresAt: time.Now().Add(15 * time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	first := start()
	client := asynq.NewClient(opt)
	defer client.Close()
	if _, err := client.Enqueue(tasks.NewRunTask(tasks.DefaultSite, id, envelope)); err != nil {
		t.Fatal(err)
	}
	// Wait until the command is on the host: the actuator acknowledges with
	// a progress report just before it sends the command.
	waitReport(t, reports, func(task *asynq.Task) bool { return task.Type() == tasks.TypeExecutionProgress })
	waitUntil(t, func() bool { return slices.Contains(fleet.Sim.Running(), command) })

	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if _, err := fleet.Sim.Clear(labsim.FaultHang, ""); err != nil {
		t.Fatal(err)
	}

	second := start()
	defer func() { _ = second.Process.Signal(syscall.SIGTERM); _ = second.Wait() }()
	task := waitReport(t, reports, func(task *asynq.Task) bool { return task.Type() == tasks.TypeExecutionResult })
	r, err := tasks.VerifyResult(tasks.VerifyKeys{reportPub}, task.Payload())
	if err != nil {
		t.Fatal(err)
	}
	if r.ExecutionID != id || r.Status != tasks.StatusOutcomeUnknown {
		t.Fatalf("after the restart the actuator reported %s for %s, want outcome_unknown", r.Status, r.ExecutionID)
	}
	// The same order delivered again is refused, never re-run.
	if _, err := client.Enqueue(tasks.NewRunTask(tasks.DefaultSite, id+"-again", envelope)); err != nil {
		t.Fatal(err)
	}
	task = waitReport(t, reports, func(task *asynq.Task) bool { return task.Type() == tasks.TypeExecutionResult })
	if r, err := tasks.VerifyResult(tasks.VerifyKeys{reportPub}, task.Payload()); err != nil || r.Status != tasks.StatusRefused || r.Refusal != tasks.RefusedReplay {
		t.Errorf("a redelivered order got %s/%s, want refused as a replay", r.Status, r.Refusal)
	}
	// Its own /metrics counts the replay and the journal's one execution.
	resp, err := http.Get("http://127.0.0.1:" + metricsPort + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`nomos_actuator_requests_refused_total{kind="order",reason="replay"} 1`,
		`nomos_actuator_journal_executions 1`, `nomos_actuator_journal_unfinished 0`, "go_goroutines "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the actuator's /metrics lacks %s:\n%s", want, body)
		}
	}
	n := 0
	for _, c := range fleet.Commands(t) {
		if c == command {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the command reached the host %d times, want once", n)
	}
}

func waitReport(t *testing.T, reports chan *asynq.Task, match func(*asynq.Task) bool) *asynq.Task {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case task := <-reports:
			if match(task) {
				return task
			}
		case <-deadline:
			t.Fatal("timed out waiting for the actuator's report")
		}
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMetricsAddrIsLoopbackUnlessNamed: a port alone serves the
// actuator's metrics on loopback; only a named address serves them
// elsewhere.
func TestMetricsAddrIsLoopbackUnlessNamed(t *testing.T) {
	t.Parallel()
	for listen, want := range map[string]string{
		":9464":          "127.0.0.1:9464",
		"127.0.0.1:9464": "127.0.0.1:9464",
		"[::1]:9464":     "[::1]:9464",
		"0.0.0.0:9464":   "0.0.0.0:9464",
		"10.0.0.5:9464":  "10.0.0.5:9464",
	} {
		if got := metricsAddr(listen); got != want {
			t.Errorf("metricsAddr(%q) = %q, want %q", listen, got, want)
		}
	}
}

// answerApprovals answers the actuator's approval checks as the bot does
// for approved orders (the actuator asks about the orders that reach it
// together in one question), signing with key, until the test ends.
func answerApprovals(t *testing.T, opt asynq.RedisConnOpt, key ed25519.PrivateKey) {
	rdb := opt.MakeRedisClient().(redis.UniversalClient)
	t.Cleanup(func() { rdb.Close() })
	testenv.Go(t, func(ctx context.Context) {
		for ctx.Err() == nil {
			got, err := rdb.BLPop(ctx, 100*time.Millisecond, tasks.ApprovalChecks).Result()
			if err != nil {
				continue
			}
			var env tasks.Envelope
			var q tasks.ApprovalBatch
			if json.Unmarshal([]byte(got[1]), &env) != nil || env.Type != tasks.TypeApprovalBatch || json.Unmarshal(env.Body, &q) != nil {
				t.Errorf("the actuator asked with a question that does not parse: %q", got[1])
				continue
			}
			ans := tasks.ApprovalBatchAnswer{Actuator: q.Actuator, Nonce: q.Nonce, At: time.Now()}
			for _, o := range q.Orders {
				ans.Verdicts = append(ans.Verdicts, tasks.ApprovalVerdict{ExecutionID: o.ExecutionID, PlanHash: o.PlanHash, Approved: true, State: "dispatched"})
			}
			answer, err := tasks.SignApprovalBatchAnswer(key, ans)
			if err != nil {
				t.Error(err)
				continue
			}
			rdb.RPush(ctx, tasks.ApprovalQueue(q.Site, q.Actuator), answer)
		}
	})
}
