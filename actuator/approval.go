package actuator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
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
// holds no database: the bot, which has it, answers. A withdrawn
// approval, or an execution that already ran, is refused with
// RefusedNotApproved; a question left unanswered (the bot away, Redis
// flushed) is asked again every ApprovalWait until the order expires or
// the actuator stops, and then refused with RefusedUnconfirmed. Nothing of
// o has been journaled or sent while it waits.
func (a *Actuator) confirmApproved(ctx context.Context, o tasks.Order) (tasks.Refusal, error) {
	nonce, err := newNonce()
	if err != nil {
		return tasks.RefusedUnconfirmed, err
	}
	q := tasks.ApprovalCheck{ExecutionID: o.ExecutionID, Actuator: a.cfg.Name, Site: a.cfg.Site, PlanHash: o.PlanHash, Nonce: nonce, At: a.now()}
	question, err := tasks.SignApprovalCheck(a.cfg.ReportSigningKey, q)
	if err != nil {
		return tasks.RefusedUnconfirmed, err
	}
	answers := a.answers.wait(nonce)
	defer a.answers.done(nonce)
	for {
		if err := a.ask(ctx, question); err != nil {
			a.log.Warn("could not ask the bot whether an order is still approved; asking again", "execution_id", o.ExecutionID, "err", err)
		}
		t := time.NewTimer(a.cfg.ApprovalWait)
	wait:
		for {
			select {
			case payload := <-answers:
				ans, err := tasks.VerifyApprovalAnswer(a.orderKeys, payload, q)
				if err != nil {
					// Whoever else writes to the queue cannot answer.
					a.log.Warn("an answer about an order's approval did not verify", "execution_id", o.ExecutionID, "err", err)
					a.metrics.refuse(kindOrder, refusalFor(err))
					continue
				}
				t.Stop()
				if !ans.Approved {
					return tasks.RefusedNotApproved, fmt.Errorf("the bot says execution %s is %s, not approved", o.ExecutionID, ans.State)
				}
				return "", nil
			case <-t.C:
				break wait
			case <-ctx.Done():
				t.Stop()
				return tasks.RefusedUnconfirmed, fmt.Errorf("%w: the actuator stopped while it waited", errUnconfirmed)
			}
		}
		if !a.now().Before(o.ExpiresAt) {
			return tasks.RefusedUnconfirmed, fmt.Errorf("%w before the order expired at %s", errUnconfirmed, o.ExpiresAt.UTC().Format(time.RFC3339))
		}
		a.log.Warn("the bot has not confirmed an order's approval yet; asking again", "execution_id", o.ExecutionID)
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
