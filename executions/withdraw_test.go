package executions_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
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

// approveUndispatched requests a restart of target and approves it while
// the queue is down, so it stays approved.
func (b *bundle) approveUndispatched(t *testing.T, target string) store.Execution {
	t.Helper()
	x, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: b.request(t, "restart", target, "").Execution.ID, By: operator, Method: policy.MethodReaction})
	if err != nil || x.State != store.StateApproved {
		t.Fatalf("approve %s = %s, %v", target, x.State, err)
	}
	return x
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

	first := b.approveUndispatched(t, "jellyfin")
	if a := ask(first); !a.Approved {
		t.Fatalf("the check of an approved execution was answered %+v, want yes", a)
	}
	if _, err := b.svc.Cancel(b.ctx, first.ID, operator); err == nil {
		t.Error("a withdrawal after the yes cancelled the execution; want it too late")
	}
	if got, _ := b.store.GetExecution(b.ctx, first.ID); got.State != store.StateDispatched {
		t.Errorf("after the yes the execution is %s, want dispatched", got.State)
	}

	second := b.approveUndispatched(t, "gitea")
	if _, err := b.svc.Cancel(b.ctx, second.ID, operator); err != nil {
		t.Fatal(err)
	}
	if a := ask(second); a.Approved || a.State != string(store.StateCancelled) {
		t.Errorf("the check of a withdrawn execution was answered %+v, want no, cancelled", a)
	}
}

// TestApprovalBatchIsAnsweredOrderByOrder: a question about several
// orders gets one signed answer with a verdict for each, as a question
// about each alone would: yes for an approved execution of that plan
// (recorded as dispatched first), no for a withdrawn one, another plan's
// order, an execution the bot does not have, or an id that is none. A
// question that does not verify, comes from another actuator or asks
// about too many orders is refused and audited, and nothing is answered.
func TestApprovalBatchIsAnsweredOrderByOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.queue.setDown(true) // the dispatch fails: the executions stay approved
	approved, withdrawn, replanned := b.approveUndispatched(t, "jellyfin"), b.approveUndispatched(t, "gitea"), b.approveUndispatched(t, "caddy")
	if _, err := b.svc.Cancel(b.ctx, withdrawn.ID, operator); err != nil {
		t.Fatal(err)
	}
	q := tasks.ApprovalBatch{Actuator: tasks.DefaultActuator, Nonce: "n-batch", At: b.clock.Now(), Orders: []tasks.ApprovalItem{
		{ExecutionID: approved.ID.String(), PlanHash: approved.PlanHash},
		{ExecutionID: withdrawn.ID.String(), PlanHash: withdrawn.PlanHash},
		{ExecutionID: replanned.ID.String(), PlanHash: "another-plan"},
		{ExecutionID: "01a23d2b-0000-7000-8000-000000000000", PlanHash: approved.PlanHash},
		{ExecutionID: "not-a-uuid", PlanHash: approved.PlanHash},
	}}
	payload, err := tasks.SignApprovalBatch(b.reportKey, q)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := b.svc.AnswerApprovalCheck(b.ctx, payload)
	if err != nil {
		t.Fatalf("answer the question: %v", err)
	}
	if want := tasks.ApprovalQueue(tasks.DefaultSite, tasks.DefaultActuator); reply.List != want {
		t.Errorf("the answer goes to %q, want the asking actuator's %q", reply.List, want)
	}
	a, err := tasks.VerifyApprovalBatchAnswer(tasks.VerifyKeys{b.pub}, reply.Payload, q)
	if err != nil {
		t.Fatalf("the answer does not verify as the answer to the question: %v", err)
	}
	var got []string
	for _, v := range a.Verdicts {
		got = append(got, fmt.Sprintf("%t %s", v.Approved, v.State))
	}
	want := []string{"true dispatched", "false cancelled", "false approved", "false unknown", "false unknown"}
	if d := gocmp.Diff(want, got); d != "" {
		t.Errorf("verdicts (-want +got):\n%s", d)
	}
	if x, _ := b.store.GetExecution(b.ctx, approved.ID); x.State != store.StateDispatched {
		t.Errorf("after the yes the execution is %s, want dispatched", x.State)
	}
	if len(reply.Applied) != 1 || reply.Applied[0].Execution.ID != approved.ID {
		t.Errorf("the answer changed %+v, want the approved execution only", reply.Applied)
	}
	if x, _ := b.store.GetExecution(b.ctx, replanned.ID); x.State != store.StateApproved {
		t.Errorf("the execution asked about for another plan is %s, want it left approved", x.State)
	}
	if !slices.Contains(auditActions(t, b, withdrawn.ID), "execution.not_approved_answered") {
		t.Error("the no to the withdrawn execution is not in its audit")
	}

	_, forger, _ := ed25519.GenerateKey(nil)
	many := make([]tasks.ApprovalItem, tasks.MaxApprovalBatch+1)
	for i := range many {
		many[i] = tasks.ApprovalItem{ExecutionID: fmt.Sprintf("x%d", i), PlanHash: "h"}
	}
	oversized, err := json.Marshal(tasks.ApprovalBatch{Version: tasks.Version, Actuator: tasks.DefaultActuator, Nonce: "n", At: b.clock.Now(), Orders: many})
	if err != nil {
		t.Fatal(err)
	}
	seal := func(key ed25519.PrivateKey, body []byte) []byte {
		p, err := json.Marshal(tasks.Envelope{Version: tasks.Version, Type: tasks.TypeApprovalBatch, Body: body,
			Signature: ed25519.Sign(key, tasks.SignedBytes(tasks.TypeApprovalBatch, body))})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	elsewhere, err := tasks.SignApprovalBatch(b.reportKey, tasks.ApprovalBatch{Actuator: "elsewhere", Nonce: "n", At: b.clock.Now(), Orders: q.Orders[:1]})
	if err != nil {
		t.Fatal(err)
	}
	forged, err := tasks.SignApprovalBatch(forger, q)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		payload []byte
		want    executions.ReportRefusal
	}{
		"signed by another key":     {forged, executions.RefusedBadSignature},
		"from another actuator":     {elsewhere, executions.RefusedWrongActuator},
		"about too many orders":     {seal(b.reportKey, oversized), executions.RefusedMalformed},
		"an answer, not a question": {reply.Payload, executions.RefusedBadSignature},
	} {
		reply, err := b.svc.AnswerApprovalCheck(b.ctx, tc.payload)
		var refused *executions.RefusedReportError
		if !errors.As(err, &refused) || refused.Reason != tc.want || reply.Payload != nil {
			t.Errorf("%s: %+v, %v; want refused as %s and no answer", name, reply, err, tc.want)
		}
	}
}
