package executions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/fleetgen"
	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// loadOperators approve the load benchmark's plans, in turn.
var loadOperators = []string{"@alice:localhost", "@bob:localhost", "@carol:localhost"}

// loadSamples is how many plans each size of the load benchmark runs, in
// rounds of that size.
const loadSamples = 200

// BenchmarkLoadApprovalToSSH approves N plans at once (N = 1, 10, 50, 200),
// restarts of services spread over 2 hosts, from 3 operators, on real
// Postgres, Redis, actuator and labsim, as the bot and the actuator are
// configured by default. Each size runs 200 plans in rounds of N, and
// reports approval → first SSH byte and command exit → result applied at
// p50 and p99, beside the floors measured in the same run: queue-floor, a
// bare asynq round trip polled as the actuator polls, and ssh-floor, a
// bare SSH connection from dial to a command's first byte. Every plan must
// end succeeded with its command run exactly once on its host: that is
// checked, the times are only reported. It reports too the CPU the process
// spent per plan, which the machine's load hardly moves: cpu-ms/plan in
// all, and approve-cpu-ms/plan from the approvals to the last plan ended
// (the burst whose CPU bounds approval → SSH; the plans are requested
// before it). Of the latter the product's part, without labsim's, is in
// a CPU profile (-cpuprofile). It counts the statements the bot's side
// sends Postgres, per plan: pg-request/plan to request it, pg-approve/plan
// from its approval to its result applied, and pg-approve-trips/plan, the
// round trips those took (a batch is one); and pg-approve-cpu-ms/plan, the
// CPU the Postgres backends of the benchmark's database spent in the
// burst (Postgres shares the cores). Run it with -benchtime 1x.
//
// NOMOS_BENCH_PROFILE=dir writes a CPU, block and mutex profile of the
// rounds that approve 50 plans at once to dir.
func BenchmarkLoadApprovalToSSH(b *testing.B) {
	ctx := testenv.Context(b)
	// 200 containers with a service each, on 2 hosts: every plan of a
	// round has a target, and a command, of its own.
	fleet := testenv.StartFleet(b, fleetgen.Seed(fleetgen.Config{Hosts: 2, Containers: loadSamples, ServicesPerContainer: 1, ChecksPerContainer: 1}))
	var targets []loadTarget
	for _, h := range fleet.Seed.Hosts {
		for _, c := range h.Containers {
			targets = append(targets, loadTarget{host: h.Name, service: c.Services[0].Name,
				command: fmt.Sprintf("pct exec %d -- systemctl restart %s", c.VMID, c.Services[0].Unit)})
		}
	}
	bs := newBenchStack(b, fleet, loadOperators)

	for _, n := range []int{1, 10, 50, 200} {
		b.Run(fmt.Sprintf("plans=%d", n), func(b *testing.B) {
			for b.Loop() {
				var toSSH, toApplied []time.Duration
				var cost roundCost
				stopProfiles := func() {}
				if dir := os.Getenv("NOMOS_BENCH_PROFILE"); dir != "" && n == 50 {
					stopProfiles = testenv.StartProfiles(b, dir)
				}
				cpuBefore := processCPU(b)
				for round := range loadSamples / n {
					ssh, applied, c := loadRound(b, ctx, bs, fleet, targets[round*n:round*n+n])
					toSSH, toApplied = append(toSSH, ssh...), append(toApplied, applied...)
					cost.approveCPU += c.approveCPU
					cost.postgresCPU += c.postgresCPU
					cost.requestStatements += c.requestStatements
					cost.approveStatements += c.approveStatements
					cost.approveRoundTrips += c.approveRoundTrips
				}
				stopProfiles()
				// The CPU this process (bot side, actuator and labsim) spent
				// per plan: unlike the times, it hardly moves with the load
				// others put on the machine.
				b.ReportMetric(float64((processCPU(b)-cpuBefore).Microseconds())/1000/loadSamples, "cpu-ms/plan")
				b.ReportMetric(float64(cost.approveCPU.Microseconds())/1000/loadSamples, "approve-cpu-ms/plan")
				b.ReportMetric(float64(cost.postgresCPU.Microseconds())/1000/loadSamples, "pg-approve-cpu-ms/plan")
				b.ReportMetric(float64(cost.requestStatements)/loadSamples, "pg-request/plan")
				b.ReportMetric(float64(cost.approveStatements)/loadSamples, "pg-approve/plan")
				b.ReportMetric(float64(cost.approveRoundTrips)/loadSamples, "pg-approve-trips/plan")
				// The floor's asynq server starts only now: its polls would
				// count in the plans' CPU.
				queueFloor := testenv.QueueFloor(b, bs.redis, tasks.PollInterval)
				reportOrderPath(b, fleet, queueFloor, toSSH, toApplied, 50, func(i int) (string, string) {
					t := targets[i%len(targets)]
					return t.host, t.command
				})
			}
		})
	}
}

type loadTarget struct{ host, service, command string }

// roundCost is what a round cost the process and Postgres: the CPU from
// the approvals to the last plan ended, and the statements the bot's side
// sent to request the plans and from their approval to their end.
type roundCost struct {
	approveCPU, postgresCPU              time.Duration
	requestStatements, approveStatements int64
	approveRoundTrips                    int64
}

// loadRound requests a plan for each target, approves them all at once,
// waits for every one to end, and checks that each succeeded with its
// command run once. It returns each plan's approval → first SSH byte and
// exit → applied, and the round's cost.
func loadRound(b *testing.B, ctx context.Context, bs benchStack, fleet *testenv.Fleet, targets []loadTarget) (toSSH, toApplied []time.Duration, cost roundCost) {
	svc, st := bs.svc, bs.store
	before, err := labsim.ReadLog(fleet.LogPath)
	if err != nil {
		b.Fatal(err)
	}
	statements := bs.statements.n.Load()
	ids := make([]uuid.UUID, len(targets))
	for i, t := range targets {
		p, err := svc.Request(ctx, executions.Request{Action: "restart", Target: t.service, Params: json.RawMessage(`{}`),
			RequestedBy: loadOperators[i%len(loadOperators)], Via: "cli"})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = p.Execution.ID
	}
	cost.requestStatements = bs.statements.n.Load() - statements
	statements, roundTrips := bs.statements.n.Load(), bs.statements.roundTrips.Load()
	cpu, pgCPU := processCPU(b), postgresCPU(b, ctx, bs.stats)
	approvedAt := make([]time.Time, len(targets))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range targets {
		wg.Go(func() {
			<-start
			approvedAt[i] = time.Now()
			if _, err := svc.Approve(ctx, executions.Decision{ExecutionID: ids[i], By: loadOperators[i%len(loadOperators)], Method: policy.MethodReaction}); err != nil {
				b.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	ended := make([]store.Execution, len(ids))
	deadline := time.Now().Add(2 * time.Minute)
	for i, id := range ids {
		for {
			x, err := st.GetExecution(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if x.State.Terminal() {
				ended[i] = x
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("plan %d of %d (%s) is still %s after 2 minutes: lost", i+1, len(ids), targets[i].service, x.State)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	cost.approveCPU, cost.postgresCPU = processCPU(b)-cpu, pgCPU()
	cost.approveStatements = bs.statements.n.Load() - statements
	cost.approveRoundTrips = bs.statements.roundTrips.Load() - roundTrips
	after, err := labsim.ReadLog(fleet.LogPath)
	if err != nil {
		b.Fatal(err)
	}
	runs := map[string][]labsim.LogEntry{}
	for _, e := range after[len(before):] {
		runs[e.Command] = append(runs[e.Command], e)
	}
	for i, t := range targets {
		x := ended[i]
		if x.State != store.StateSucceeded {
			b.Fatalf("restart %s ended %s, want succeeded: %s", t.service, x.State, x.Error)
		}
		if len(runs[t.command]) != 1 {
			b.Fatalf("%q ran %d times on %s for one approved plan, want once", t.command, len(runs[t.command]), t.host)
		}
		e := runs[t.command][0]
		toSSH = append(toSSH, e.TS.Sub(approvedAt[i]))
		toApplied = append(toApplied, x.UpdatedAt.Sub(e.TS.Add(time.Duration(e.DurationMS)*time.Millisecond)))
	}
	return toSSH, toApplied, cost
}

// postgresCPU returns a function that says how much CPU the Postgres
// backends serving conn's database have used since it was made: the server
// runs on the same cores, so its share of a plan belongs in the figure.
// It reads each backend's run time from /proc/<pid>/schedstat, so it
// needs Postgres on this machine; it reports -1 when it cannot read them.
// The benchmark's own connections (benchHarness), conn among them, are
// left out.
func postgresCPU(b *testing.B, ctx context.Context, conn *pgx.Conn) func() time.Duration {
	sample := func() map[int]time.Duration {
		rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND application_name <> $1`, benchHarness)
		if err != nil {
			b.Fatal(err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			b.Fatal(err)
		}
		ran := map[int]time.Duration{}
		for _, pid := range pids {
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
			if err != nil {
				continue // ended meanwhile, or not on this machine
			}
			var ns int64
			if _, err := fmt.Sscan(string(data), &ns); err == nil {
				ran[pid] = time.Duration(ns)
			}
		}
		return ran
	}
	before := sample()
	return func() time.Duration {
		after := sample()
		if len(after) == 0 {
			return -1
		}
		var d time.Duration
		for pid, t := range after {
			d += t - before[pid]
		}
		return d
	}
}

// processCPU is the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
