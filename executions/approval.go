package executions

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/nomoshq/nomos/internal/backoff"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// ApprovalReply is the bot's signed answer to an actuator's question, and
// the Redis list of the actuator that asked.
type ApprovalReply struct {
	List    string
	Payload []byte
	// Applied is what answering changed: each approved execution is
	// recorded as dispatched.
	Applied []Applied
}

// AnswerApprovalCheck verifies an actuator's question about an approval
// (tasks.ApprovalChecks), about one order (tasks.TypeApprovalCheck) or
// several (tasks.TypeApprovalBatch), and answers it in the same form. A
// question that does not verify, or comes from another actuator, is
// refused like any report: the error is a *RefusedReportError and
// nothing is answered.
func (s *Service) AnswerApprovalCheck(ctx context.Context, payload []byte) (ApprovalReply, error) {
	if tasks.MessageType(payload) == tasks.TypeApprovalBatch {
		q, err := tasks.VerifyApprovalBatch(s.reportKeys, payload)
		if err != nil {
			return ApprovalReply{}, s.refuseUnverified(ctx, tasks.TypeApprovalBatch, payload, err)
		}
		if err := s.checkActuator(ctx, tasks.TypeApprovalBatch, tasks.Claims{Actuator: q.Actuator}); err != nil {
			return ApprovalReply{}, err
		}
		return s.answerApprovalBatch(ctx, q)
	}
	q, err := tasks.VerifyApprovalCheck(s.reportKeys, payload)
	if err != nil {
		return ApprovalReply{}, s.refuseUnverified(ctx, tasks.TypeApprovalCheck, payload, err)
	}
	if err := s.checkActuator(ctx, tasks.TypeApprovalCheck, tasks.Claims{ExecutionID: q.ExecutionID, Actuator: q.Actuator}); err != nil {
		return ApprovalReply{}, err
	}
	return s.answerApproval(ctx, q)
}

// answerApproval answers an actuator that asks, just before it would
// begin an order, whether the execution is still approved. It says yes
// only for an execution approved for the order's plan hash and not yet
// begun. An approved execution is recorded as dispatched before the yes
// goes out, so a withdrawal either comes first and the actuator is told
// no, or comes after and is told it is too late: never both.
func (s *Service) answerApproval(ctx context.Context, q tasks.ApprovalCheck) (ApprovalReply, error) {
	var x store.Execution
	found := false
	if id, err := uuid.Parse(q.ExecutionID); err == nil {
		x, err = s.store.GetExecution(ctx, id)
		switch {
		case err == nil:
			found = true
		case !errors.Is(err, store.ErrNotFound):
			return ApprovalReply{}, err
		}
	}
	x, approved, err := s.stillApproved(ctx, x, found, q.PlanHash)
	if err != nil {
		return ApprovalReply{}, err
	}
	ans := tasks.ApprovalAnswer{ExecutionID: q.ExecutionID, Actuator: q.Actuator, PlanHash: q.PlanHash, Nonce: q.Nonce,
		Approved: approved, State: cmp.Or(string(x.State), "unknown"), At: s.now()}
	payload, err := tasks.SignApprovalAnswer(s.cfg.SigningKey, ans)
	if err != nil {
		return ApprovalReply{}, err
	}
	reply := ApprovalReply{List: tasks.ApprovalQueue(q.Site, q.Actuator), Payload: payload}
	if !approved {
		s.answeredNo(ctx, x, q.ExecutionID, q.PlanHash, q.Actuator)
		return reply, nil
	}
	reply.Applied = []Applied{{Execution: x, Changed: true}}
	return reply, nil
}

// answerApprovalBatch answers a question about several orders as
// answerApproval answers each, from one read of all their executions,
// with one signed answer.
func (s *Service) answerApprovalBatch(ctx context.Context, q tasks.ApprovalBatch) (ApprovalReply, error) {
	ids := make([]uuid.UUID, 0, len(q.Orders))
	for _, o := range q.Orders {
		if id, err := uuid.Parse(o.ExecutionID); err == nil {
			ids = append(ids, id)
		}
	}
	xs, err := s.store.ExecutionsByID(ctx, ids)
	if err != nil {
		return ApprovalReply{}, err
	}
	ans := tasks.ApprovalBatchAnswer{Actuator: q.Actuator, Nonce: q.Nonce, At: s.now(), Verdicts: make([]tasks.ApprovalVerdict, 0, len(q.Orders))}
	var applied []Applied
	for _, o := range q.Orders {
		var x store.Execution
		found := false
		if id, err := uuid.Parse(o.ExecutionID); err == nil {
			x, found = xs[id]
		}
		x, approved, err := s.stillApproved(ctx, x, found, o.PlanHash)
		if err != nil {
			return ApprovalReply{}, err
		}
		ans.Verdicts = append(ans.Verdicts, tasks.ApprovalVerdict{ExecutionID: o.ExecutionID, PlanHash: o.PlanHash,
			Approved: approved, State: cmp.Or(string(x.State), "unknown")})
		if approved {
			applied = append(applied, Applied{Execution: x, Changed: true})
		} else {
			s.answeredNo(ctx, x, o.ExecutionID, o.PlanHash, q.Actuator)
		}
	}
	payload, err := tasks.SignApprovalBatchAnswer(s.cfg.SigningKey, ans)
	if err != nil {
		return ApprovalReply{}, err
	}
	return ApprovalReply{List: tasks.ApprovalQueue(q.Site, q.Actuator), Payload: payload, Applied: applied}, nil
}

// answeredNo logs, and audits against the execution when there is one,
// that the actuator was told an order is not approved.
func (s *Service) answeredNo(ctx context.Context, x store.Execution, claimedID, planHash, actuator string) {
	s.logger.Warn("told the actuator an order is not approved", "execution_id", clip(claimedID, maxClaimBytes), "state", cmp.Or(string(x.State), "unknown"))
	if x.ID == uuid.Nil {
		return
	}
	if err := s.store.AppendAudit(ctx, store.AuditEntry{Actor: s.cfg.Actor, Action: "execution.not_approved_answered", ExecutionID: &x.ID,
		Detail: map[string]any{"state": x.State, "plan_hash": planHash, "actuator": actuator}}); err != nil {
		s.logger.Error("audit an approval check answered no", "execution_id", x.ID, "err", err)
	}
}

// approvalWorkers bounds how many questions are answered at once: each
// costs a Postgres transaction, and whoever writes to Redis can push
// questions.
const approvalWorkers = 16

// ServeApprovalChecks answers the actuators' questions about approvals
// until ctx ends. It pops them from tasks.ApprovalChecks with a blocking
// read, so an answer leaves as soon as its question arrives, and pushes
// each answer on the list of the actuator that asked. A question that
// cannot be answered for now (Postgres away) is tried again, 100 ms after
// the first failure growing to 2 s, for as long as the actuator would
// wait; a refused one is heard by OnRefused.
func (h *ResultsHandler) ServeApprovalChecks(ctx context.Context, opt asynq.RedisConnOpt) {
	rdb := opt.MakeRedisClient().(redis.UniversalClient)
	defer rdb.Close()
	questions := make(chan []byte)
	var wg sync.WaitGroup
	for range approvalWorkers {
		wg.Go(func() {
			for q := range questions {
				h.answer(ctx, rdb, q)
			}
		})
	}
	defer wg.Wait()
	defer close(questions)
	var pause backoff.Backoff
	for ctx.Err() == nil {
		got, err := rdb.BLPop(ctx, time.Second, tasks.ApprovalChecks).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				h.Service.logger.Warn("could not read the actuators' questions about approvals; trying again", "err", err)
				pause.Wait(ctx)
			}
			continue
		}
		pause.Reset()
		select {
		case questions <- []byte(got[1]):
		case <-ctx.Done():
		}
	}
}

// answerFor is how long a question that cannot be answered yet is tried
// again: the actuator asks anew after its approval_wait (5 s by default).
const answerFor = 10 * time.Second

func (h *ResultsHandler) answer(ctx context.Context, rdb redis.UniversalClient, payload []byte) {
	ctx, cancel := context.WithTimeout(ctx, answerFor)
	defer cancel()
	var pause backoff.Backoff
	for {
		reply, err := h.Service.AnswerApprovalCheck(ctx, payload)
		if refused := refusedReports(err); len(refused) > 0 {
			if h.OnRefused != nil {
				h.OnRefused(ctx, *refused[0])
			}
			return
		}
		if err == nil {
			_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.RPush(ctx, reply.List, reply.Payload)
				p.Expire(ctx, reply.List, tasks.ApprovalListTTL)
				return nil
			})
			if err == nil {
				for _, a := range reply.Applied {
					if a.Changed && h.OnChange != nil {
						h.OnChange(ctx, a)
					}
				}
				return
			}
		}
		if ctx.Err() != nil {
			h.Service.logger.Warn("gave up answering a question about an approval; the actuator asks again", "err", err)
			return
		}
		pause.Wait(ctx)
	}
}

// stillApproved reports whether x, the execution an order names (found
// false when there is none), may begin now for planHash, and records an
// approved one as dispatched first.
func (s *Service) stillApproved(ctx context.Context, x store.Execution, found bool, planHash string) (store.Execution, bool, error) {
	if !found {
		return store.Execution{}, false, nil
	}
	if x.PlanHash != planHash || x.Approval == nil || x.Approval.Decision != "approved" || x.Approval.PlanHash != x.DecisionHash() {
		return x, false, nil
	}
	switch x.State {
	case store.StateDispatched:
		return x, true, nil
	case store.StateApproved:
		got, err := s.store.Transition(ctx, store.Transition{
			ID: x.ID, From: []store.ExecutionState{store.StateApproved}, To: store.StateDispatched,
			Audit: store.AuditEntry{Actor: s.cfg.Actor, Action: "execution.dispatched"},
		})
		var conflict *store.StateConflictError
		if errors.As(err, &conflict) {
			// Dispatch recorded it meanwhile, or a withdrawal cancelled it.
			return conflict.Current, conflict.Current.State == store.StateDispatched, nil
		}
		if err != nil {
			return x, false, err
		}
		return got, true, nil
	}
	return x, false, nil
}
