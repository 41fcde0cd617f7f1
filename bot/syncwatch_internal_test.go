package bot

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
)

// TestSyncHealth: the sync loop is healthy only while /sync answers; a
// homeserver that stops answering, or never answers at all, is reported
// with the last failure, and "not yet" lasts only as long as one answer
// may take.
func TestSyncHealth(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 7, 6, 14, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	b := &Bot{syncs: &syncTracker{now: clock}}
	cli, err := mautrix.NewClient("http://127.0.0.1:1", "@nomos:example.org", "token")
	if err != nil {
		t.Fatal(err)
	}
	b.watch(cli)
	ctx := context.Background()
	syncer := cli.Syncer
	answer := func() {
		t.Helper()
		if err := syncer.ProcessResponse(ctx, &mautrix.RespSync{}, "s1"); err != nil {
			t.Fatal(err)
		}
	}
	fail := func(msg string) {
		t.Helper()
		if _, err := syncer.OnFailedSync(nil, errors.New(msg)); err != nil {
			t.Fatal(err)
		}
	}
	healthy := func(when string) {
		t.Helper()
		if err := b.SyncHealth(ctx); err != nil {
			t.Errorf("%s: SyncHealth = %v, want nil", when, err)
		}
	}
	notYet := func(when string) {
		t.Helper()
		if err := b.SyncHealth(ctx); !errors.Is(err, ErrNotSynced) {
			t.Errorf("%s: SyncHealth = %v, want ErrNotSynced", when, err)
		}
	}
	unhealthy := func(when string, wants ...string) {
		t.Helper()
		err := b.SyncHealth(ctx)
		if err == nil || errors.Is(err, ErrNotSynced) {
			t.Errorf("%s: SyncHealth = %v, want a failure", when, err)
			return
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: SyncHealth = %q, want it to say %q", when, err, w)
			}
		}
	}

	notYet("before the loop starts")
	b.syncs.start()
	fail("connection refused")
	now = now.Add(syncStaleAfter)
	notYet("while the first answer may still come")
	now = now.Add(time.Second)
	unhealthy("when the homeserver never answered", "no /sync has answered", "connection refused")

	answer()
	healthy("after an answer")
	now = now.Add(syncStaleAfter)
	healthy("an idle long-poll later")
	fail("502 Bad Gateway")
	now = now.Add(time.Second)
	unhealthy("once the answers stopped", "the last /sync answered 1m31s ago", "502 Bad Gateway")

	answer()
	healthy("when the homeserver answers again")

	// A new sync loop, as when the bot leads again after standing by,
	// starts from nothing: the last loop's answers say nothing of it.
	b.syncs.start()
	notYet("when a new loop starts")
}
