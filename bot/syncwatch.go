package bot

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"maunium.net/go/mautrix"

	"github.com/nomoshq/nomos/internal/metrics"
)

// syncTimeout is how long mautrix's /sync long-polls when nothing happens.
const syncTimeout = 30 * time.Second

// syncStaleAfter is how long the sync loop may go without an answer from
// the homeserver before it counts as unhealthy: three idle long-polls.
const syncStaleAfter = 3 * syncTimeout

// ErrNotSynced is what SyncHealth returns while the bot is still logging
// in or waiting for its first /sync, within syncStaleAfter of starting: it
// cannot tell yet, which is not a failure.
var ErrNotSynced = errors.New("the bot has not synced with the homeserver yet")

// syncTracker remembers when the homeserver last answered a /sync.
type syncTracker struct {
	now func() time.Time

	mu      sync.Mutex
	started time.Time // when the sync loop began; zero before
	last    time.Time // when a /sync last answered; zero before
	lastErr error     // why the last /sync failed, since the last answer
}

// start begins a sync loop; what an earlier loop of the same bot heard
// (before it stopped leading, say) says nothing of this one.
func (t *syncTracker) start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.started, t.last, t.lastErr = t.now(), time.Time{}, nil
}

func (t *syncTracker) answered() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last, t.lastErr = t.now(), nil
}

func (t *syncTracker) failed(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastErr = err
}

// health is nil while the homeserver answered a /sync within
// syncStaleAfter.
func (t *syncTracker) health() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	cause := ""
	if t.lastErr != nil {
		cause = " (last error: " + t.lastErr.Error() + ")"
	}
	switch {
	case t.started.IsZero():
		return ErrNotSynced
	case t.last.IsZero() && now.Sub(t.started) <= syncStaleAfter:
		return fmt.Errorf("%w%s", ErrNotSynced, cause)
	case t.last.IsZero():
		return fmt.Errorf("no /sync has answered since the bot started %s ago%s", now.Sub(t.started).Round(time.Second), cause)
	case now.Sub(t.last) > syncStaleAfter:
		return fmt.Errorf("the last /sync answered %s ago%s", now.Sub(t.last).Round(time.Second), cause)
	}
	return nil
}

// trackedSyncer is mautrix's syncer, telling the tracker of every answer
// and failure of /sync and timing how long each answer takes to handle.
type trackedSyncer struct {
	*mautrix.DefaultSyncer
	t *syncTracker
	m *metrics.Metrics
}

var _ mautrix.ExtensibleSyncer = (*trackedSyncer)(nil)
var _ mautrix.DispatchableSyncer = (*trackedSyncer)(nil)

func (s *trackedSyncer) ProcessResponse(ctx context.Context, res *mautrix.RespSync, since string) error {
	s.t.answered()
	start := time.Now()
	err := s.DefaultSyncer.ProcessResponse(ctx, res, since)
	s.m.MatrixSync(time.Since(start))
	return err
}

func (s *trackedSyncer) OnFailedSync(res *mautrix.RespSync, err error) (time.Duration, error) {
	s.t.failed(err)
	return s.DefaultSyncer.OnFailedSync(res, err)
}

// LastSync is when the homeserver last answered the bot's /sync in the
// current sync loop; zero before the first answer.
func (b *Bot) LastSync() time.Time {
	b.syncs.mu.Lock()
	defer b.syncs.mu.Unlock()
	return b.syncs.last
}

// SyncHealth says whether the sync loop is alive: nil when the homeserver
// answered a /sync in the last 90 seconds (three idle long-polls), an
// error matching ErrNotSynced while the bot is starting, and another
// error, naming the last failure, once the answers have stopped. It is
// /readyz's homeserver_sync check.
func (b *Bot) SyncHealth(context.Context) error {
	return b.syncs.health()
}

// watch has the tracker hear of every /sync of cli, and the metrics of
// every /sync and every event sent. It must run before the crypto helper
// registers its own hooks on the syncer.
func (b *Bot) watch(cli *mautrix.Client) {
	if ds, ok := cli.Syncer.(*mautrix.DefaultSyncer); ok {
		cli.Syncer = &trackedSyncer{DefaultSyncer: ds, t: b.syncs, m: b.cfg.Metrics}
	}
	cli.ResponseHook = timeSends(b.cfg.Metrics)
}
