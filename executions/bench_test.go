package executions_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/actuator"
	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/labsim"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

// BenchmarkE2EApprovalToSSH measures, on real Postgres, Redis, actuator and
// labsim, the time from an approval to the first byte of the command on
// the host, and from the command's exit to its result applied in Postgres.
// Run with -benchtime=200x; it reports p50 and p99 of each.
func BenchmarkE2EApprovalToSSH(b *testing.B) {
	ctx := testenv.Context(b)
	st, err := store.Open(ctx, store.Config{URL: testenv.DatabaseURL(b), MaxConns: 8})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	fleet := testenv.NewFleet(b)
	if _, err := st.ApplySeed(ctx, fleet.Seed); err != nil {
		b.Fatal(err)
	}
	redisURL := testenv.RedisURL(b)
	opt, err := asynq.ParseRedisURI(redisURL)
	if err != nil {
		b.Fatal(err)
	}
	client := asynq.NewClient(opt)
	defer client.Close()
	pub, priv, _ := ed25519.GenerateKey(nil)
	rules, _ := policy.NewRules(policy.RulesConfig{Operators: []string{operator}})
	svc, err := executions.New(executions.Config{Store: st, Queue: client, SigningKey: priv, Rules: rules})
	if err != nil {
		b.Fatal(err)
	}
	results := asynq.NewServer(opt, asynq.Config{Queues: map[string]int{"nomos:results": 1}, Concurrency: 4, TaskCheckInterval: 20 * time.Millisecond, LogLevel: asynq.ErrorLevel})
	if err := results.Start(&executions.ResultsHandler{Service: svc}); err != nil {
		b.Fatal(err)
	}
	defer results.Shutdown()
	act, err := actuator.New(actuator.Config{
		RedisURL: redisURL, VerifyKey: pub, SSHSigner: fleet.SSHSigner, KnownHostsFile: fleet.KnownHostsFile,
		JournalPath: filepath.Join(b.TempDir(), "journal"),
	})
	if err != nil {
		b.Fatal(err)
	}
	actCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); act.Run(actCtx) }()
	defer func() { stop(); <-done }()

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
		started := last.TS.Add(-time.Duration(last.DurationMS) * time.Millisecond)
		toSSH = append(toSSH, started.Sub(approvedAt))
		toApplied = append(toApplied, x.UpdatedAt.Sub(last.TS))
	}
	testenv.ReportPercentiles(b, "approval-to-ssh", toSSH)
	testenv.ReportPercentiles(b, "exit-to-applied", toApplied)
}
