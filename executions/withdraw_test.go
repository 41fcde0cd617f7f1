package executions_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// lostReply enqueues each task and then reports a failure, as when Redis
// took the write and its reply was lost. It keeps what it enqueued, as
// anyone who can read Redis could copy it.
type lostReply struct {
	next executions.Enqueuer
	mu   sync.Mutex
	sent []*asynq.Task
}

func (q *lostReply) EnqueueContext(ctx context.Context, t *asynq.Task, opts ...asynq.Option) (*asynq.TaskInfo, error) {
	if _, err := q.next.EnqueueContext(ctx, t, opts...); err != nil {
		return nil, err
	}
	q.mu.Lock()
	q.sent = append(q.sent, t)
	q.mu.Unlock()
	return nil, errors.New("redis: i/o timeout")
}

// TestWithdrawnApprovalHoldsOnTheActuator: an approved order reaches
// Redis, but its dispatch is not recorded; the operator withdraws the
// approval, so the plan is cancelled and its queued order deleted. A copy
// of the signed order put back on the queue with an asynq client then
// reaches the real actuator, which asks the bot, is told the execution is
// no longer approved, and refuses it: labsim runs nothing, and the
// execution stays cancelled with the attempt in its audit.
func TestWithdrawnApprovalHoldsOnTheActuator(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fleet := testenv.NewFleet(t)
	if _, err := b.store.ApplySeed(b.ctx, fleet.Seed); err != nil {
		t.Fatal(err)
	}
	lost := &lostReply{next: b.queue}
	svc := b.newService(t, lost, func(c *executions.Config) { c.Inspector = b.inspector })
	p, err := svc.Request(b.ctx, executions.Request{Action: "restart", Target: "jellyfin", RequestedBy: operator, Via: executions.ViaChat, RoomID: "!ops:localhost"})
	if err != nil {
		t.Fatal(err)
	}
	x, err := svc.Approve(b.ctx, executions.Decision{ExecutionID: p.Execution.ID, By: operator, Method: policy.MethodReaction})
	if err != nil || x.State != store.StateApproved || len(lost.sent) != 1 {
		t.Fatalf("approve = %s, %v, %d orders queued; want approved, its one order queued and the dispatch not recorded", x.State, err, len(lost.sent))
	}
	copied := lost.sent[0]

	// The operator withdraws the approval, as the bot does on a redaction.
	if _, err := svc.Cancel(b.ctx, x.ID, operator); err != nil {
		t.Fatal(err)
	}
	if err := b.inspector.DeleteTask(tasks.OrderQueue(tasks.DefaultSite), x.ID.String()); err != nil {
		t.Fatalf("delete the queued order: %v", err)
	}
	// Someone who copied the signed order puts it back before it expires.
	client := asynq.NewClient(b.redis)
	t.Cleanup(func() { client.Close() })
	if _, err := client.Enqueue(asynq.NewTask(copied.Type(), copied.Payload(), asynq.Queue(tasks.OrderQueue(tasks.DefaultSite)), asynq.MaxRetry(0))); err != nil {
		t.Fatal(err)
	}

	b.startWorkers(t, fleet)
	deadline := time.Now().Add(60 * time.Second)
	for {
		audit, err := b.store.AuditFor(b.ctx, x.ID)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(audit, func(e store.AuditEntry) bool { return e.Action == "execution.unapproved_order_refused" })
		if i >= 0 {
			if r, _ := audit[i].Detail["refusal"].(string); r != string(tasks.RefusedNotApproved) {
				t.Errorf("the actuator refused the copy as %q, want %s", r, tasks.RefusedNotApproved)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the actuator never refused the copy; audit: %+v", audit)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got, _ := b.store.GetExecution(b.ctx, x.ID); got.State != store.StateCancelled {
		t.Errorf("the withdrawn execution is %s, want cancelled", got.State)
	}
	for _, c := range fleet.Commands(t) {
		if strings.Contains(c, "restart") {
			t.Errorf("labsim ran %q for a withdrawn approval", c)
		}
	}
}

// TestApprovalCheckDecidesTheRaceWithAWithdrawal: the bot's yes records
// an approved execution as dispatched before it goes out, so a
// withdrawal after it is too late, and one before it makes the answer no.
func TestApprovalCheckDecidesTheRaceWithAWithdrawal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.queue.setDown(true) // the dispatch fails: both executions stay approved
	ask := func(x store.Execution) tasks.ApprovalAnswer {
		t.Helper()
		q := tasks.ApprovalCheck{ExecutionID: x.ID.String(), Actuator: tasks.DefaultActuator, PlanHash: x.PlanHash, Nonce: "n-" + x.ID.String(), At: b.clock.Now()}
		payload, err := tasks.SignApprovalCheck(b.reportKey, q)
		if err != nil {
			t.Fatal(err)
		}
		reply, err := b.svc.AnswerApprovalCheck(b.ctx, payload)
		if err != nil {
			t.Fatalf("approval check of %s: %v", x.ID, err)
		}
		if want := tasks.ApprovalQueue(tasks.DefaultSite, tasks.DefaultActuator); reply.List != want {
			t.Errorf("the answer goes to %q, want the asking actuator's %q", reply.List, want)
		}
		a, err := tasks.VerifyApprovalAnswer(tasks.VerifyKeys{b.pub}, reply.Payload, q)
		if err != nil {
			t.Fatalf("the answer to the check of %s does not verify: %v", x.ID, err)
		}
		return a
	}
	approve := func(target string) store.Execution {
		t.Helper()
		x, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: b.request(t, "restart", target, "").Execution.ID, By: operator, Method: policy.MethodReaction})
		if err != nil || x.State != store.StateApproved {
			t.Fatalf("approve %s = %s, %v", target, x.State, err)
		}
		return x
	}

	first := approve("jellyfin")
	if a := ask(first); !a.Approved {
		t.Fatalf("the check of an approved execution was answered %+v, want yes", a)
	}
	if _, err := b.svc.Cancel(b.ctx, first.ID, operator); err == nil {
		t.Error("a withdrawal after the yes cancelled the execution; want it too late")
	}
	if got, _ := b.store.GetExecution(b.ctx, first.ID); got.State != store.StateDispatched {
		t.Errorf("after the yes the execution is %s, want dispatched", got.State)
	}

	second := approve("gitea")
	if _, err := b.svc.Cancel(b.ctx, second.ID, operator); err != nil {
		t.Fatal(err)
	}
	if a := ask(second); a.Approved || a.State != string(store.StateCancelled) {
		t.Errorf("the check of a withdrawn execution was answered %+v, want no, cancelled", a)
	}
}
