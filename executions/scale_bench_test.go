package executions_test

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/actuator"
	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/fleetgen"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// BenchmarkScaleProberLag runs the whole probe path for the generated fleet of
// 10 hosts, 1,000 containers, 3,000 services and 5,000 checks (about 77
// probes a second) on real Postgres, Redis, actuator and labsim: the
// prober claims and signs each due check, the actuator runs it over SSH,
// and the results come back in batches. Every check's first slot is
// spread over its interval, as in a fleet that has run a while. It
// reports how late each check ran after its slot (p50, p99, max) and how
// many slots in the window got no result. The window is
// NOMOS_BENCH_PROBER_WINDOW (default 70s); run it with -benchtime 1x.
func BenchmarkScaleProberLag(b *testing.B) {
	window := 70 * time.Second
	if w, err := time.ParseDuration(os.Getenv("NOMOS_BENCH_PROBER_WINDOW")); err == nil {
		window = w
	}
	ctx := testenv.Context(b)
	dbURL := testenv.DatabaseURL(b)
	st, err := store.Open(ctx, store.Config{URL: dbURL, MaxConns: 8})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	fleet := testenv.StartFleet(b, fleetgen.Seed(fleetgen.Config{}))
	if _, err := st.ApplySeed(ctx, fleet.Seed); err != nil {
		b.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)

	redisURL := testenv.RedisURL(b)
	opt, err := asynq.ParseRedisURI(redisURL)
	if err != nil {
		b.Fatal(err)
	}
	client := asynq.NewClient(opt)
	defer client.Close()
	pub, priv, _ := ed25519.GenerateKey(nil)
	reportPub, reportKey, _ := ed25519.GenerateKey(nil)
	rules, _ := policy.NewRules(policy.RulesConfig{Operators: []string{operator}})
	svc, err := executions.New(executions.Config{Store: st, Queue: client, SigningKey: priv, ReportVerifyKey: reportPub, Rules: rules})
	if err != nil {
		b.Fatal(err)
	}
	results := asynq.NewServer(opt, tasks.ResultsServerConfig(asynq.Config{Concurrency: 4, TaskCheckInterval: 20 * time.Millisecond, LogLevel: asynq.ErrorLevel}))
	if err := results.Start(&executions.ResultsHandler{Service: svc}); err != nil {
		b.Fatal(err)
	}
	defer results.Shutdown()
	act, err := actuator.New(actuator.Config{
		RedisURL: redisURL, VerifyKey: pub, ReportSigningKey: reportKey, SSHSigner: fleet.SSHSigner, KnownHostsFile: fleet.KnownHostsFile,
		JournalPath: filepath.Join(b.TempDir(), "journal"),
	})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	actDone := make(chan struct{})
	go func() {
		defer close(actDone)
		if err := act.Run(runCtx); err != nil && runCtx.Err() == nil {
			b.Errorf("actuator: %v", err)
		}
	}()
	defer func() { stop(); <-actDone }()

	start := time.Now()
	if _, err := conn.Exec(ctx, `UPDATE check_defs SET next_run_at = $1::timestamptz + random() * make_interval(secs => interval_seconds)`, start); err != nil {
		b.Fatal(err)
	}
	due := map[uuid.UUID]time.Time{}
	rows, err := conn.Query(ctx, `SELECT id, next_run_at FROM check_defs WHERE enabled`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var id uuid.UUID
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			b.Fatal(err)
		}
		due[id] = at
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	proberDone := make(chan struct{})
	go func() { defer close(proberDone); svc.RunProber(runCtx) }()
	defer func() { stop(); <-proberDone }()

	// Each check's first result after its slot, seen by polling.
	first := map[uuid.UUID]time.Time{}
	end := start.Add(window)
	for time.Now().Before(end.Add(10 * time.Second)) {
		time.Sleep(time.Second)
		rows, err := conn.Query(ctx, `SELECT id, last_result_at FROM check_defs WHERE last_result_at IS NOT NULL`)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
			var id uuid.UUID
			var at time.Time
			if err := rows.Scan(&id, &at); err != nil {
				b.Fatal(err)
			}
			if _, seen := first[id]; !seen && !at.Before(due[id]) {
				first[id] = at
			}
		}
		if err := rows.Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	var lags []time.Duration
	missed, slots := 0, 0
	for id, at := range due {
		if at.After(end) {
			continue
		}
		slots++
		got, ok := first[id]
		if !ok {
			missed++
			continue
		}
		lags = append(lags, got.Sub(at))
	}
	if slots == 0 {
		b.Fatal("no check was due in the window")
	}
	testenv.ReportPercentiles(b, "lag", lags)
	b.ReportMetric(float64(slices.Max(append(lags, 0))/time.Millisecond), "lag-max-ms")
	b.ReportMetric(float64(slots), "slots")
	b.ReportMetric(float64(missed), "missed")
	b.Logf("%d of %d check slots in %s answered", slots-missed, slots, window)
}
