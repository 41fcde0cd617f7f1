package actuator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nomoshq/nomos/internal/backoff"
	"github.com/nomoshq/nomos/tasks"
)

// errUnconfirmed: the bot did not confirm an order's approval in time.
var errUnconfirmed = errors.New("the bot did not confirm the approval")

// confirmApproved asks the bot whether o's execution is still approved,
// and waits for its signed answer to that very question. The actuator
// holds no database: the bot, which has it, answers. Orders that arrive
// together are asked about in one question (approvalBatcher). A
// withdrawn approval, or an execution that already ran, is refused with
// RefusedNotApproved; a question left unanswered (the bot away, Redis
// flushed) is asked again every ApprovalWait until the order expires or
// the actuator stops, and then refused with RefusedUnconfirmed. Nothing of
// o has been journaled or sent while it waits.
func (a *Actuator) confirmApproved(ctx context.Context, o tasks.Order) (tasks.Refusal, error) {
	w := &approvalWaiter{item: tasks.ApprovalItem{ExecutionID: o.ExecutionID, PlanHash: o.PlanHash}, verdict: make(chan tasks.ApprovalVerdict, 1)}
	defer a.checks.leave(w)
	for {
		a.checks.join(w)
		a.askPending()
		t := time.NewTimer(a.cfg.ApprovalWait)
		select {
		case v := <-w.verdict:
			t.Stop()
			if !v.Approved {
				return tasks.RefusedNotApproved, fmt.Errorf("the bot says execution %s is %s, not approved", o.ExecutionID, v.State)
			}
			return "", nil
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return tasks.RefusedUnconfirmed, fmt.Errorf("%w: the actuator stopped while it waited", errUnconfirmed)
		}
		if !a.now().Before(o.ExpiresAt) {
			return tasks.RefusedUnconfirmed, fmt.Errorf("%w before the order expired at %s", errUnconfirmed, o.ExpiresAt.UTC().Format(time.RFC3339))
		}
		a.log.Warn("the bot has not confirmed an order's approval yet; asking again", "execution_id", o.ExecutionID)
	}
}

// questionsOut bounds the questions about approvals awaiting an answer.
// Orders that arrive while one is out wait, and go in the next question
// together: under a burst a question carries many orders, and a lone
// order is asked about at once. One rather than two: a burst of 50 then
// asked 35 questions for 200 orders rather than 70, for 0.5 ms less CPU
// an order (docs/operations.md, "Latency, measured"). A question that is
// lost holds the next one for ApprovalWait at most, which is what the
// orders in it wait before they ask again anyway.
const questionsOut = 1

// approvalWaiter is an order waiting for the bot's verdict.
type approvalWaiter struct {
	item    tasks.ApprovalItem
	verdict chan tasks.ApprovalVerdict // buffered: a verdict never blocks
}

// approvalBatcher gathers the orders waiting to be asked about.
type approvalBatcher struct {
	mu      sync.Mutex
	pending []*approvalWaiter
	out     int // questions awaiting an answer
}

// join adds w to the next question, unless it is already in it.
func (b *approvalBatcher) join(w *approvalWaiter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.Contains(b.pending, w) {
		b.pending = append(b.pending, w)
	}
}

// leave takes w out of the next question: it no longer waits.
func (b *approvalBatcher) leave(w *approvalWaiter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending = slices.DeleteFunc(b.pending, func(p *approvalWaiter) bool { return p == w })
}

// take returns the orders of the next question, if one may go out now.
// A question names each execution once: a second delivery of an order
// whose first is in it waits for the next question, and the journal
// then lets only one of them begin.
func (b *approvalBatcher) take() []*approvalWaiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.out >= questionsOut || len(b.pending) == 0 {
		return nil
	}
	var batch, rest []*approvalWaiter
	named := map[string]bool{}
	for _, w := range b.pending {
		if len(batch) == tasks.MaxApprovalBatch || named[w.item.ExecutionID] {
			rest = append(rest, w)
			continue
		}
		named[w.item.ExecutionID] = true
		batch = append(batch, w)
	}
	b.pending = rest
	b.out++
	return batch
}

func (b *approvalBatcher) answered() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.out--
}

// askPending sends the waiting orders' question, if one may go out, and
// waits for its answer in the background: when that comes, or after
// ApprovalWait, the next question goes out with whatever waits by then.
func (a *Actuator) askPending() {
	batch := a.checks.take()
	if batch == nil {
		return
	}
	go func() {
		a.askBatch(a.workCtx, batch)
		a.checks.answered()
		if a.workCtx.Err() == nil {
			a.askPending()
		}
	}()
}

// askBatch asks about the orders of batch in one signed question and
// hands each its verdict from the bot's answer. An answer that does not
// verify, or answers another question, counts for nothing; without a
// valid one by ApprovalWait, each order asks again on its own schedule.
func (a *Actuator) askBatch(ctx context.Context, batch []*approvalWaiter) {
	nonce, err := newNonce()
	if err != nil {
		a.log.Error("could not ask the bot about approvals", "err", err)
		return
	}
	q := tasks.ApprovalBatch{Actuator: a.cfg.Name, Site: a.cfg.Site, Nonce: nonce, At: a.now(), Orders: make([]tasks.ApprovalItem, len(batch))}
	for i, w := range batch {
		q.Orders[i] = w.item
	}
	question, err := tasks.SignApprovalBatch(a.cfg.ReportSigningKey, q)
	if err != nil {
		a.log.Error("could not ask the bot about approvals", "orders", len(batch), "err", err)
		return
	}
	answers := a.answers.wait(nonce)
	defer a.answers.done(nonce)
	if err := a.ask(ctx, question); err != nil {
		a.log.Warn("could not ask the bot whether orders are still approved; they ask again", "orders", len(batch), "err", err)
		return
	}
	t := time.NewTimer(a.cfg.ApprovalWait)
	defer t.Stop()
	for {
		select {
		case payload := <-answers:
			ans, err := tasks.VerifyApprovalBatchAnswer(a.orderKeys, payload, q)
			if err != nil {
				// Whoever else writes to the list cannot answer.
				a.log.Warn("an answer about orders' approval did not verify", "orders", len(batch), "err", err)
				a.metrics.refuse(kindOrder, refusalFor(err))
				continue
			}
			for i, v := range ans.Verdicts {
				select {
				case batch[i].verdict <- v:
				default:
				}
			}
			return
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// ask pushes a signed question on the list the bot reads.
func (a *Actuator) ask(ctx context.Context, question []byte) error {
	ctx, cancel := context.WithTimeout(ctx, enqueueTimeout)
	defer cancel()
	_, err := a.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.RPush(ctx, tasks.ApprovalChecks, question)
		p.Expire(ctx, tasks.ApprovalChecks, tasks.ApprovalListTTL)
		return nil
	})
	return err
}

// answerTimeout bounds one blocking read of the answers list, so that a
// stop is seen.
const answerTimeout = time.Second

// readAnswers pops the bot's answers from this actuator's list until ctx
// ends, and passes each to the order that waits for it. Only the nonce
// is read here; the waiter verifies the rest. An answer nobody waits for
// (late, or a copy) is dropped. While Redis is away it tries again, 100
// ms after the first failure growing to 2 s.
func (a *Actuator) readAnswers(ctx context.Context) {
	list := tasks.ApprovalQueue(a.cfg.Site, a.cfg.Name)
	var pause backoff.Backoff
	for ctx.Err() == nil {
		got, err := a.rdb.BLPop(ctx, answerTimeout, list).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("could not read the bot's answers about approvals; trying again", "err", err)
				pause.Wait(ctx)
			}
			continue
		}
		pause.Reset()
		payload := []byte(got[1])
		if !a.answers.deliver(tasks.AnswerNonce(payload), payload) {
			a.log.Debug("an answer about an order's approval that nothing waits for")
		}
	}
}

func newNonce() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("approval check nonce: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// answerBox routes answers to the orders waiting for them, by nonce.
type answerBox struct {
	mu      sync.Mutex
	waiting map[string]chan []byte
}

func (b *answerBox) wait(nonce string) <-chan []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiting == nil {
		b.waiting = map[string]chan []byte{}
	}
	ch := make(chan []byte, 4)
	b.waiting[nonce] = ch
	return ch
}

func (b *answerBox) done(nonce string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.waiting, nonce)
}

// deliver hands payload to the waiter for nonce without blocking, and
// reports whether one waits.
func (b *answerBox) deliver(nonce string, payload []byte) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch, ok := b.waiting[nonce]
	if !ok || nonce == "" {
		return false
	}
	select {
	case ch <- payload:
	default:
	}
	return true
}
