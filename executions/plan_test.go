package executions_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/actuator"
	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

const operator2 = "@operator2:localhost"

// newService builds another Service over the bundle's store and queue,
// as a restarted bot would, with its config adjusted by tune.
func (b *bundle) newService(t *testing.T, queue executions.Enqueuer, tune func(*executions.Config)) *executions.Service {
	t.Helper()
	rules, err := policy.NewRules(policy.RulesConfig{Operators: []string{operator, operator2}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := executions.Config{
		Store: b.store, Queue: queue, SigningKey: b.keys.OrderSigning, ReportVerifyKey: b.keys.ReportVerify, Rules: rules,
		Logger: testenv.Logger(t), Clock: b.clock.Now,
	}
	if tune != nil {
		tune(&cfg)
	}
	svc, err := executions.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// startActuator runs a real actuator against the fleet until the test
// ends.
func (b *bundle) startActuator(t *testing.T, fleet *testenv.Fleet) {
	t.Helper()
	act, err := actuator.New(actuator.Config{
		RedisURL: redisURL(b.redis), VerifyKey: b.pub, ReportSigningKey: b.reportKey, SSHSigner: fleet.SSHSigner,
		KnownHostsFile: fleet.KnownHostsFile, JournalPath: filepath.Join(t.TempDir(), "journal"),
		Logger: testenv.Logger(t), Clock: b.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := act.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("actuator: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// consumeResults consumes the results queue with svc until the returned
// func is called or the test ends.
func (b *bundle) consumeResults(t *testing.T, svc *executions.Service) (stop func()) {
	t.Helper()
	results := asynq.NewServer(b.redis, tasks.ResultsServerConfig(asynq.Config{TaskCheckInterval: 50 * time.Millisecond, LogLevel: asynq.ErrorLevel}))
	h := &executions.ResultsHandler{Service: svc}
	if err := results.Start(h); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	answering := make(chan struct{})
	go func() { defer close(answering); h.ServeApprovalChecks(ctx, b.redis) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-answering; results.Shutdown() }) }
	t.Cleanup(stop)
	return stop
}

// waitPlan polls a plan's steps until done accepts them.
func (b *bundle) waitPlan(t *testing.T, planID uuid.UUID, done func([]store.Execution) bool) []store.Execution {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		steps, err := b.store.PlanSteps(b.ctx, planID)
		if err != nil {
			t.Fatal(err)
		}
		if done(steps) {
			return steps
		}
		if time.Now().After(deadline) {
			t.Fatalf("plan %s never got there: %s", planID, stepStates(steps))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func stepStates(steps []store.Execution) string {
	var s []string
	for _, x := range steps {
		s = append(s, string(x.State))
	}
	return strings.Join(s, " ")
}

func allTerminal(steps []store.Execution) bool {
	return !slices.ContainsFunc(steps, func(x store.Execution) bool { return !x.State.Terminal() })
}

// counter counts how often each command ran on the fleet.
func counter(t *testing.T, fleet *testenv.Fleet) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, c := range fleet.Commands(t) {
		n[c]++
	}
	return n
}

const (
	restartJellyfin = "pct exec 101 -- systemctl restart jellyfin.service"
	restartNosuch   = "pct exec 101 -- systemctl restart nosuch.service"
	restartGitea    = "pct exec 102 -- systemctl restart gitea.service"
)

// threeSteps asks for restart jellyfin, restart a unit that does not
// exist, restart gitea.
func threeSteps() []executions.Step {
	return []executions.Step{
		{Action: "restart", Target: "jellyfin"},
		{Action: "systemctl", Target: "lxc:strong/101", Params: json.RawMessage(`{"verb":"restart","unit":"nosuch"}`)},
		{Action: "restart", Target: "gitea"},
	}
}

// TestPlanStopsAtTheFailedStep: a three-step plan whose second step fails
// runs exactly two commands on the fleet and reports the third skipped.
// One approval covers the plan, bound to the hash over every step; the
// third step's order is never even queued.
func TestPlanStopsAtTheFailedStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fleet := testenv.NewFleet(t)
	if _, err := b.store.ApplySeed(b.ctx, fleet.Seed); err != nil {
		t.Fatal(err)
	}
	p, err := b.svc.Request(b.ctx, executions.Request{Steps: threeSteps(), RequestedBy: operator, Via: executions.ViaChat, RoomID: "!ops:localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 3 || p.Execution.ID != *p.Execution.PlanID {
		t.Fatalf("planned %d steps, head %s plan %v", len(p.Steps), p.Execution.ID, p.Execution.PlanID)
	}
	var hashes []string
	for i, st := range p.Steps {
		hashes = append(hashes, st.Execution.PlanHash)
		want := store.StateWaiting
		if i == 0 {
			want = store.StateAwaitingApproval
		}
		if st.Execution.State != want || st.Execution.Position != i+1 || st.Execution.PlanCode != p.Execution.PlanCode {
			t.Errorf("step %d: %s at %d code %s, want %s at %d sharing the plan's code", i+1, st.Execution.State, st.Execution.Position, st.Execution.PlanCode, want, i+1)
		}
	}
	whole, _ := policy.StepsHash(hashes)
	if p.Execution.Plan == nil || p.Execution.Plan.Hash != whole || p.Execution.Plan.Steps != 3 {
		t.Fatalf("plan info %+v, want the hash over the three steps", p.Execution.Plan)
	}
	// A later step cannot be decided, and no forged report moves it.
	if _, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: p.Steps[2].Execution.ID, By: operator, Method: policy.MethodReaction}); err == nil {
		t.Fatal("a later step of the plan was approved on its own")
	}
	_, err = b.result(t, tasks.Result{ExecutionID: p.Steps[1].Execution.ID.String(), PlanHash: p.Steps[1].Execution.PlanHash, Status: tasks.StatusSucceeded})
	refusal(t, err, executions.RefusedNotDispatched)

	b.startWorkers(t, fleet)
	x, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: p.Execution.ID, By: operator, Method: policy.MethodReaction, EventID: "$yes"})
	if err != nil {
		t.Fatal(err)
	}
	if x.Approval == nil || x.Approval.PlanHash != whole {
		t.Fatalf("approval %+v, want it bound to the plan hash %s", x.Approval, whole)
	}
	steps := b.waitPlan(t, p.Execution.ID, allTerminal)
	if got := stepStates(steps); got != "succeeded failed skipped" {
		t.Fatalf("steps ended %s, want succeeded failed skipped", got)
	}
	if !strings.Contains(steps[2].Error, "step 2 did not succeed") {
		t.Errorf("the skipped step says %q", steps[2].Error)
	}
	if steps[2].Approval == nil || steps[2].Approval.PlanHash != whole {
		t.Errorf("the skipped step carries approval %+v, want the plan's", steps[2].Approval)
	}
	ran := counter(t, fleet)
	if len(fleet.Commands(t)) != 2 || ran[restartJellyfin] != 1 || ran[restartNosuch] != 1 {
		t.Errorf("the fleet ran %q, want exactly the first two steps once each", fleet.Commands(t))
	}
	if _, err := b.inspector.GetTaskInfo(tasks.OrderQueue(tasks.DefaultSite), steps[2].ID.String()); err == nil {
		t.Error("the skipped step's order was queued")
	}
	audit := strings.Join(auditActions(t, b, steps[2].ID), " ")
	if !strings.Contains(audit, "execution.skipped") || strings.Contains(audit, "execution.dispatched") {
		t.Errorf("the third step's audit is %q, want it skipped and never dispatched", audit)
	}
	// Nothing revives the skipped step: the reconciler leaves it be.
	b.clock.Add(time.Hour)
	if _, err := b.svc.Reconcile(b.ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.store.GetExecution(b.ctx, steps[2].ID); got.State != store.StateSkipped {
		t.Errorf("after a reconcile the skipped step is %s", got.State)
	}
}

// TestPlanSurvivesARestartBetweenSteps: step 1 succeeds while Redis
// refuses the bot, so step 2 is approved but not sent when the service
// goes away. A new service's reconciler sends step 2 and the plan
// finishes: every step ran exactly once.
func TestPlanSurvivesARestartBetweenSteps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fleet := testenv.NewFleet(t)
	if _, err := b.store.ApplySeed(b.ctx, fleet.Seed); err != nil {
		t.Fatal(err)
	}
	b.startActuator(t, fleet)
	steps := []executions.Step{{Action: "restart", Target: "jellyfin"}, {Action: "restart", Target: "gitea"}}
	p, err := b.svc.Request(b.ctx, executions.Request{Steps: steps, RequestedBy: operator, Via: executions.ViaChat, RoomID: "!ops:localhost"})
	if err != nil {
		t.Fatal(err)
	}
	stopResults := b.consumeResults(t, b.svc)
	if _, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: p.Execution.ID, By: operator, Method: policy.MethodReply}); err != nil {
		t.Fatal(err)
	}
	b.queue.setOrdersDown(true)
	got := b.waitPlan(t, p.Execution.ID, func(xs []store.Execution) bool {
		return xs[0].State == store.StateSucceeded && xs[1].State == store.StateApproved
	})
	// The service stops here, with step 2 approved and never sent.
	stopResults()
	if _, err := b.inspector.GetTaskInfo(tasks.OrderQueue(tasks.DefaultSite), got[1].ID.String()); err == nil {
		t.Fatal("step 2 was queued while Redis refused the bot")
	}

	again := b.newService(t, &flakyQueue{next: b.queue.next}, nil)
	b.consumeResults(t, again)
	b.clock.Add(time.Minute)
	rep, err := again.Reconcile(b.ctx)
	if err != nil || rep.Dispatched != 1 {
		t.Fatalf("reconcile after the restart = %+v, %v; want step 2 dispatched", rep, err)
	}
	got = b.waitPlan(t, p.Execution.ID, allTerminal)
	if s := stepStates(got); s != "succeeded succeeded" {
		t.Fatalf("steps ended %s", s)
	}
	ran := counter(t, fleet)
	if ran[restartJellyfin] != 1 || ran[restartGitea] != 1 {
		t.Errorf("ran %v, want each step once", ran)
	}
	if rep, err := again.Reconcile(b.ctx); err != nil || rep != (executions.ReconcileReport{}) {
		t.Errorf("a reconcile of the finished plan did %+v, %v", rep, err)
	}
}

// TestDestroyingARunningContainerStopsItFirst: the host says the
// container runs, so the plan is stop then destroy; one typed phrase
// approves both, and they run in that order.
func TestDestroyingARunningContainerStopsItFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fleet := testenv.NewFleet(t)
	if _, err := b.store.ApplySeed(b.ctx, fleet.Seed); err != nil {
		t.Fatal(err)
	}
	b.startWorkers(t, fleet)
	if state, err := b.svc.ContainerState(b.ctx, "teddycloud", operator); err != nil || state != "stopped" {
		t.Fatalf("teddycloud is %q, %v; want stopped", state, err)
	}
	state, err := b.svc.ContainerState(b.ctx, "lxc:strong/104", operator)
	if err != nil || state != "running" {
		t.Fatalf("lxc:strong/104 is %q, %v; want running", state, err)
	}
	p, err := b.svc.Request(b.ctx, executions.Request{Target: "lxc:strong/104", RequestedBy: operator, Via: executions.ViaChat, RoomID: "!ops:localhost",
		Steps: []executions.Step{{Action: "pct_stop"}, {Action: "pct_destroy"}}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Execution.GateClass() != "destructive" || p.Execution.RiskClass != "reversible_low" || !strings.HasPrefix(p.Phrase, "destroy lxc:strong/104 "+p.Execution.PlanCode) {
		t.Fatalf("plan class %s, first step %s, phrase %q", p.Execution.GateClass(), p.Execution.RiskClass, p.Phrase)
	}
	if _, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: p.Execution.ID, By: operator, Method: policy.MethodReaction}); !errors.Is(err, policy.ErrMethodNotAllowed) {
		t.Fatalf("a reaction on a plan with a destructive step = %v, want ErrMethodNotAllowed", err)
	}
	if _, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: p.Execution.ID, By: operator, Method: policy.MethodPhrase, Phrase: p.Phrase}); err != nil {
		t.Fatal(err)
	}
	steps := b.waitPlan(t, p.Execution.ID, allTerminal)
	if s := stepStates(steps); s != "succeeded succeeded" {
		t.Fatalf("steps ended %s (%s)", s, steps[1].Error)
	}
	var order []string
	for _, c := range fleet.Commands(t) {
		if strings.HasPrefix(c, "pct shutdown 104") || strings.HasPrefix(c, "pct destroy 104") || strings.HasPrefix(c, "pct snapshot 104") {
			order = append(order, c)
		}
	}
	if want := []string{"pct shutdown 104 --timeout 60 --forceStop 1", "pct destroy 104"}; !slices.Equal(order, want) {
		t.Errorf("ran %q, want %q", order, want)
	}
	if e, err := b.store.EntityBySlug(b.ctx, "lxc:strong/104"); err != nil || e.Lifecycle != "destroyed" {
		t.Errorf("lxc:strong/104 is %s after the plan, %v", e.Lifecycle, err)
	}
}

// TestPlanDecisionsTakeEveryStep: denying, expiring or cancelling a plan
// takes its waiting steps with it, and none of them is ever sent.
func TestPlanDecisionsTakeEveryStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ask := func() executions.Planned {
		p, err := b.svc.Request(b.ctx, executions.Request{Steps: threeSteps(), RequestedBy: operator, Via: executions.ViaChat, RoomID: "!ops:localhost"})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	denied := ask()
	if _, err := b.svc.Deny(b.ctx, executions.Decision{ExecutionID: denied.Execution.ID, By: operator, Method: policy.MethodReply}); err != nil {
		t.Fatal(err)
	}
	cancelled := ask()
	if _, err := b.svc.Cancel(b.ctx, cancelled.Execution.ID, operator); err != nil {
		t.Fatal(err)
	}
	expired := ask()
	b.clock.Add(time.Hour)
	if _, err := b.svc.Reconcile(b.ctx); err != nil {
		t.Fatal(err)
	}
	for want, p := range map[string]executions.Planned{"denied": denied, "cancelled": cancelled, "expired": expired} {
		steps, err := b.store.PlanSteps(b.ctx, p.Execution.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got := stepStates(steps); got != strings.Repeat(want+" ", 2)+want {
			t.Errorf("a %s plan's steps are %s", want, got)
		}
		for _, x := range steps {
			if _, err := b.inspector.GetTaskInfo(tasks.OrderQueue(tasks.DefaultSite), x.ID.String()); err == nil {
				t.Errorf("step %d of the %s plan was queued", x.Position, want)
			}
		}
	}
}

// TestPlanCancelledMidwayKeepsWhatRan: withdrawing a plan's approval once
// its first step went out cancels only the steps not yet sent.
func TestPlanCancelledMidwayKeepsWhatRan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := b.svc.Request(b.ctx, executions.Request{Steps: threeSteps(), RequestedBy: operator, Via: executions.ViaChat, RoomID: "!ops:localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: p.Execution.ID, By: operator, Method: policy.MethodReply}); err != nil {
		t.Fatal(err)
	}
	head, err := b.svc.Cancel(b.ctx, p.Steps[1].Execution.ID, operator)
	if err != nil {
		t.Fatal(err)
	}
	steps, _ := b.store.PlanSteps(b.ctx, head.ID)
	if got := stepStates(steps); got != "dispatched cancelled cancelled" {
		t.Fatalf("after cancelling mid-plan the steps are %s", got)
	}
	if _, err := b.svc.Cancel(b.ctx, head.ID, operator); !errors.Is(err, executions.ErrNotPending) {
		t.Errorf("cancelling a plan with nothing left to cancel = %v, want ErrNotPending", err)
	}
}

// TestPlanRequestsAreCheckedWhole: a plan with one bad step is refused
// whole, naming the step, and nothing is kept.
func TestPlanRequestsAreCheckedWhole(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tooMany := make([]executions.Step, policy.MaxPlanSteps+1)
	for i := range tooMany {
		tooMany[i] = executions.Step{Action: "restart", Target: "jellyfin"}
	}
	for name, r := range map[string]executions.Request{
		"bad second step": {Steps: []executions.Step{{Action: "restart", Target: "jellyfin"}, {Action: "pct_exec", Target: "101", Params: json.RawMessage(`{"command":""}`)}}},
		"unknown target":  {Steps: []executions.Step{{Action: "restart", Target: "jellyfin"}, {Action: "restart", Target: "plex"}}},
		"both forms":      {Action: "restart", Target: "jellyfin", Steps: []executions.Step{{Action: "restart"}, {Action: "restart"}}},
		"too many steps":  {Steps: tooMany},
	} {
		r.RequestedBy, r.Via = operator, executions.ViaChat
		if _, err := b.svc.Request(b.ctx, r); err == nil {
			t.Errorf("%s: the plan was accepted", name)
		} else if name == "bad second step" && !strings.Contains(err.Error(), "step 2 (pct_exec)") {
			t.Errorf("%s: %v does not name the step", name, err)
		}
	}
	if xs, err := b.store.ListExecutions(b.ctx, store.ExecutionFilter{}); err != nil || len(xs) != 0 {
		t.Errorf("refused plans kept %d executions (%v)", len(xs), err)
	}
}

// TestSelfApprovalOff: with approvals.self_approval off, whoever asked
// cannot approve, and neither can the operator an agent asked for; the
// refusal is audited and another operator approves.
func TestSelfApprovalOff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc := b.newService(t, b.queue, func(c *executions.Config) { c.ForbidSelfApproval = true })
	for _, r := range []executions.Request{
		{Action: "restart", Target: "jellyfin", RequestedBy: operator, Via: executions.ViaChat},
		{Action: "restart", Target: "gitea", RequestedBy: "agent", OnBehalfOf: operator, Via: executions.ViaAgent, Reason: "it looks stuck"},
	} {
		r.RoomID = "!ops:localhost"
		p, err := svc.Request(b.ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		x := p.Execution
		if x.OnBehalfOf != r.OnBehalfOf || x.RequestedBy != r.RequestedBy {
			t.Errorf("recorded %s on behalf of %q", x.RequestedBy, x.OnBehalfOf)
		}
		if _, err := svc.Approve(b.ctx, executions.Decision{ExecutionID: x.ID, By: operator, Method: policy.MethodReply}); !errors.Is(err, executions.ErrSelfApproval) {
			t.Fatalf("%s via %s approved by %s = %v, want ErrSelfApproval", r.Action, r.Via, operator, err)
		}
		audit, _ := b.store.AuditFor(b.ctx, x.ID)
		if last := audit[len(audit)-1]; last.Action != "execution.decision_refused" || last.Actor != operator || !strings.Contains(last.Detail["reason"].(string), "another operator") {
			t.Errorf("the refusal is audited as %+v", last)
		}
		// A denial by the asker still counts: nobody needs a second person
		// to stop something.
		got, err := svc.Approve(b.ctx, executions.Decision{ExecutionID: x.ID, By: operator2, Method: policy.MethodReply})
		if err != nil || got.State != store.StateDispatched || got.Approval.DecidedBy != operator2 {
			t.Fatalf("the other operator's approval = %s %v", got.State, err)
		}
	}
	p, err := svc.Request(b.ctx, executions.Request{Action: "restart", Target: "jellyfin", RequestedBy: operator, Via: executions.ViaChat})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := svc.Deny(b.ctx, executions.Decision{ExecutionID: p.Execution.ID, By: operator, Method: policy.MethodReply}); err != nil || got.State != store.StateDenied {
		t.Errorf("the asker's own denial = %s %v, want denied", got.State, err)
	}
}

// TestDestructiveQuorum: with a quorum of two, a destructive plan needs
// the phrase from two different operators; the same operator twice does
// not count, a denial before the quorum decides the plan, and nothing
// after a decision changes it.
func TestDestructiveQuorum(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := executions.New(executions.Config{Store: b.store, Queue: b.queue, SigningKey: testenv.NewKeys(t).OrderSigning,
		Rules: mustRules(t, operator), DestructiveQuorum: 2}); err == nil {
		t.Error("a quorum of 2 with one operator was accepted")
	}
	svc := b.newService(t, b.queue, func(c *executions.Config) { c.DestructiveQuorum = 2 })
	p, err := svc.Request(b.ctx, executions.Request{Action: "pct_destroy", Target: "teddycloud", RequestedBy: operator, Via: executions.ViaChat})
	if err != nil {
		t.Fatal(err)
	}
	id := p.Execution.ID
	phrase := func(by string) (store.Execution, error) {
		return svc.Approve(b.ctx, executions.Decision{ExecutionID: id, By: by, Method: policy.MethodPhrase, Phrase: p.Phrase, EventID: "$" + by})
	}
	x, err := phrase(operator)
	var pending *executions.QuorumPendingError
	if !errors.As(err, &pending) || pending.Votes != 1 || pending.Quorum != 2 {
		t.Fatalf("the first phrase = %v, want approval 1 of 2 recorded", err)
	}
	if x.State != store.StateAwaitingApproval || len(x.Votes) != 1 || x.Votes[0].Voter != operator {
		t.Fatalf("after one phrase: %s with votes %+v", x.State, x.Votes)
	}
	if _, err := phrase(operator); !errors.Is(err, executions.ErrSameApprover) {
		t.Fatalf("the same operator's second phrase = %v, want ErrSameApprover", err)
	}
	if _, err := b.inspector.GetTaskInfo(tasks.OrderQueue(tasks.DefaultSite), id.String()); err == nil {
		t.Fatal("the plan went out on one operator's phrase")
	}
	x, err = phrase(operator2)
	if err != nil || x.State != store.StateDispatched || x.Approval.DecidedBy != operator2 || len(x.Votes) != 2 {
		t.Fatalf("the second operator's phrase = %s %+v %v", x.State, x.Approval, err)
	}
	audit := strings.Join(auditActions(t, b, id), " ")
	if strings.Count(audit, "execution.approval_vote") != 2 || strings.Count(audit, "execution.approved") != 1 ||
		!strings.Contains(audit, "execution.decision_refused") {
		t.Errorf("audit %q", audit)
	}

	// A denial after one phrase wins; a phrase after it is too late.
	q, err := svc.Request(b.ctx, executions.Request{Action: "pct_destroy", Target: "131", RequestedBy: operator, Via: executions.ViaChat})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Approve(b.ctx, executions.Decision{ExecutionID: q.Execution.ID, By: operator, Method: policy.MethodPhrase, Phrase: q.Phrase}); !errors.As(err, &pending) {
		t.Fatal(err)
	}
	if _, err := svc.Deny(b.ctx, executions.Decision{ExecutionID: q.Execution.ID, By: operator2, Method: policy.MethodReply}); err != nil {
		t.Fatal(err)
	}
	var decided *executions.AlreadyDecidedError
	if _, err := svc.Approve(b.ctx, executions.Decision{ExecutionID: q.Execution.ID, By: operator2, Method: policy.MethodPhrase, Phrase: q.Phrase}); !errors.As(err, &decided) || decided.Existing.Decision != "denied" {
		t.Errorf("a phrase after the denial = %v, want already denied", err)
	}
}

// TestQuorumRacesDecideOnce: two operators' phrases and a denial arrive
// at once, many times over. Each plan ends with one decision, approved
// only when both phrases counted, and never a database error.
func TestQuorumRacesDecideOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc := b.newService(t, b.queue, func(c *executions.Config) { c.DestructiveQuorum = 2 })
	for range 10 {
		p, err := svc.Request(b.ctx, executions.Request{Action: "pct_destroy", Target: "131", RequestedBy: operator, Via: executions.ViaChat})
		if err != nil {
			t.Fatal(err)
		}
		id := p.Execution.ID
		var wg sync.WaitGroup
		errs := make(chan error, 3)
		for _, by := range []string{operator, operator2} {
			wg.Go(func() {
				_, err := svc.Approve(b.ctx, executions.Decision{ExecutionID: id, By: by, Method: policy.MethodPhrase, Phrase: p.Phrase})
				errs <- err
			})
		}
		wg.Go(func() {
			_, err := svc.Deny(b.ctx, executions.Decision{ExecutionID: id, By: operator2, Method: policy.MethodReply})
			errs <- err
		})
		wg.Wait()
		close(errs)
		for err := range errs {
			var decided *executions.AlreadyDecidedError
			if err != nil && !errors.Is(err, executions.ErrQuorumPending) && !errors.As(err, &decided) && !errors.Is(err, executions.ErrNotPending) {
				t.Fatalf("a racing decision failed: %v", err)
			}
		}
		x, err := b.store.GetExecution(b.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case x.Approval == nil:
			t.Fatalf("no decision after the race: %s", x.State)
		case x.Approval.Decision == "denied" && x.State != store.StateDenied,
			x.Approval.Decision == "approved" && (x.State != store.StateDispatched || len(x.Votes) != 2):
			t.Fatalf("decision %s with state %s and %d votes", x.Approval.Decision, x.State, len(x.Votes))
		}
	}
}

func mustRules(t *testing.T, ops ...string) *policy.Rules {
	t.Helper()
	r, err := policy.NewRules(policy.RulesConfig{Operators: ops})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPlanApprovesItselfOnlyWhenEveryStepWould: a plan of named probes
// approves itself and runs its steps in order; one free-form step among
// them, even one that classifies read_only, makes the whole plan wait
// for a person, and nothing is sent.
func TestPlanApprovesItselfOnlyWhenEveryStepWould(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fleet := testenv.NewFleet(t)
	if _, err := b.store.ApplySeed(b.ctx, fleet.Seed); err != nil {
		t.Fatal(err)
	}
	b.startWorkers(t, fleet)
	probes, err := b.svc.Request(b.ctx, executions.Request{Via: executions.ViaAgent, RequestedBy: "agent", OnBehalfOf: operator,
		Steps: []executions.Step{{Action: "pct_status", Target: "101"}, {Action: "pct_status", Target: "102"}}})
	if err != nil {
		t.Fatal(err)
	}
	if probes.Execution.Approval == nil || probes.Execution.Approval.Method != "auto" {
		t.Fatalf("a plan of probes was not approved automatically: %+v", probes.Execution.Approval)
	}
	steps := b.waitPlan(t, probes.Execution.ID, allTerminal)
	if s := stepStates(steps); s != "succeeded succeeded" {
		t.Fatalf("the probes ended %s", s)
	}

	mixed, err := b.svc.Request(b.ctx, executions.Request{Via: executions.ViaMCP, RequestedBy: "mcp:claude", RoomID: "!ops:localhost", Reason: "look",
		Steps: []executions.Step{{Action: "pct_status", Target: "101"}, {Action: "pct_exec", Target: "101", Params: json.RawMessage(`{"command":"uptime"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if mixed.Execution.State != store.StateAwaitingApproval || mixed.Execution.Approval != nil {
		t.Fatalf("a plan with a free-form step is %s with approval %+v, want it waiting for a person", mixed.Execution.State, mixed.Execution.Approval)
	}
	for _, st := range mixed.Steps {
		if _, err := b.inspector.GetTaskInfo(tasks.OrderQueue(tasks.DefaultSite), st.Execution.ID.String()); err == nil {
			t.Errorf("step %d was queued before anyone approved", st.Execution.Position)
		}
	}
}

// rollbackThenDestroy is the plan of issue 19: roll one container back,
// then stop and destroy another, as an agent asks for it over MCP.
func rollbackThenDestroy() []executions.Step {
	return []executions.Step{
		{Action: "pct_rollback", Target: "lxc:strong/102", Params: json.RawMessage(`{"name":"pre-upgrade"}`)},
		{Action: "pct_stop", Target: "lxc:strong/101"},
		{Action: "pct_destroy", Target: "lxc:strong/101"},
	}
}

// TestPlanPhraseNamesEveryDestructiveStep: a plan that rolls one container
// back and then destroys another asks for a phrase that names both, in
// order; the phrase that names only the rollback, what such a plan asked
// for before, approves nothing and is audited as refused.
func TestPlanPhraseNamesEveryDestructiveStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := b.svc.Request(b.ctx, executions.Request{Steps: rollbackThenDestroy(), RequestedBy: "claude", Via: executions.ViaMCP, Reason: "clean up"})
	if err != nil {
		t.Fatal(err)
	}
	code := p.Execution.PlanCode
	if want := "rollback lxc:strong/102 destroy lxc:strong/101 " + code; p.Phrase != want {
		t.Fatalf("phrase = %q, want %q", p.Phrase, want)
	}
	id := p.Execution.ID
	for _, short := range []string{
		"rollback lxc:strong/102 " + code,
		"destroy lxc:strong/101 " + code,
		"destroy lxc:strong/101 rollback lxc:strong/102 " + code,
		"rollback lxc:strong/102 stop lxc:strong/101 destroy lxc:strong/101 " + code,
	} {
		_, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: id, By: operator, Method: policy.MethodPhrase, Phrase: short})
		if !errors.Is(err, executions.ErrPhraseMismatch) || !strings.Contains(err.Error(), p.Phrase) {
			t.Errorf("%q = %v, want ErrPhraseMismatch naming %q", short, err, p.Phrase)
		}
	}
	if _, err := b.inspector.GetTaskInfo(tasks.OrderQueue(tasks.DefaultSite), id.String()); err == nil {
		t.Fatal("a phrase that does not name the destroy sent the plan")
	}
	if n := strings.Count(strings.Join(auditActions(t, b, id), " "), "execution.decision_refused"); n != 4 {
		t.Errorf("%d refusals audited, want 4", n)
	}
	// Describe, which the card and the bot's phrase check use, agrees.
	d, err := b.svc.Describe(b.ctx, p.Execution)
	if err != nil || d.Phrase != p.Phrase {
		t.Fatalf("Describe's phrase = %q, %v; want %q", d.Phrase, err, p.Phrase)
	}
	x, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: id, By: operator, Method: policy.MethodPhrase, Phrase: strings.ToUpper(p.Phrase[:1]) + p.Phrase[1:]})
	if err != nil || x.State != store.StateDispatched {
		t.Fatalf("the full phrase = %s, %v", x.State, err)
	}
}

// TestQuorumCountsPerPlan: with a quorum of two, each operator's phrase
// for a plan of several steps must name every destructive step, and the
// two approvals take the whole plan: no step goes out on one.
func TestQuorumCountsPerPlan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc := b.newService(t, b.queue, func(c *executions.Config) { c.DestructiveQuorum = 2 })
	p, err := svc.Request(b.ctx, executions.Request{Steps: rollbackThenDestroy(), RequestedBy: "claude", Via: executions.ViaMCP})
	if err != nil {
		t.Fatal(err)
	}
	id := p.Execution.ID
	approve := func(by, phrase string) error {
		_, err := svc.Approve(b.ctx, executions.Decision{ExecutionID: id, By: by, Method: policy.MethodPhrase, Phrase: phrase, EventID: "$" + by})
		return err
	}
	var pending *executions.QuorumPendingError
	if err := approve(operator, p.Phrase); !errors.As(err, &pending) || pending.Votes != 1 {
		t.Fatalf("the first phrase = %v, want approval 1 of 2", err)
	}
	if err := approve(operator2, "rollback lxc:strong/102 "+p.Execution.PlanCode); !errors.Is(err, executions.ErrPhraseMismatch) {
		t.Fatalf("the second operator's short phrase = %v, want ErrPhraseMismatch", err)
	}
	steps, err := b.store.PlanSteps(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := stepStates(steps); got != "awaiting_approval waiting waiting" || len(steps[0].Votes) != 1 {
		t.Fatalf("after one full and one short phrase: %s with %d votes", got, len(steps[0].Votes))
	}
	if err := approve(operator2, p.Phrase); err != nil {
		t.Fatalf("the second operator's full phrase = %v", err)
	}
	x, err := b.store.GetExecution(b.ctx, id)
	if err != nil || x.State != store.StateDispatched || len(x.Votes) != 2 || x.Approval.PlanHash != x.DecisionHash() {
		t.Fatalf("after two full phrases: %s, %d votes, %v", x.State, len(x.Votes), err)
	}
}
