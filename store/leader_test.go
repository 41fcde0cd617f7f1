package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

// TestLeaderLockIsHeldByOneAndFreedWithItsConnection: of two contenders
// one holds the lock; when its connection dies (as when its process is
// killed) it learns it has lost it and the other takes it.
func TestLeaderLockIsHeldByOneAndFreedWithItsConnection(t *testing.T) {
	url := testenv.DatabaseURL(t)
	ctx := testenv.Context(t)
	a, b := store.NewLeaderLock(url, store.LeaderLockBot), store.NewLeaderLock(url, store.LeaderLockBot)
	t.Cleanup(a.Release)
	t.Cleanup(b.Release)
	if ok, err := a.TryAcquire(ctx); err != nil || !ok {
		t.Fatalf("first TryAcquire = %v, %v; want true", ok, err)
	}
	if ok, err := b.TryAcquire(ctx); err != nil || ok {
		t.Fatalf("second TryAcquire while held = %v, %v; want false", ok, err)
	}
	if err := a.Held(ctx); err != nil {
		t.Fatalf("Held by the holder = %v, want nil", err)
	}
	if err := b.Held(ctx); !errors.Is(err, store.ErrLeaderLockLost) {
		t.Fatalf("Held by the other = %v, want ErrLeaderLockLost", err)
	}
	// Kill the holder's backend from outside, as Postgres does when the
	// holder's process dies.
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND classid = $1 AND objid = $2`, 0x4e4d, store.LeaderLockBot); err != nil {
		t.Fatal(err)
	}
	if err := a.Held(ctx); err == nil {
		t.Fatal("Held after the holder's connection was killed = nil, want an error")
	}
	// The backend ends a moment after it is told to.
	for {
		ok, err := b.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("TryAcquire once the holder is gone: %v", err)
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the lock was never freed after its holder's connection died")
		case <-time.After(20 * time.Millisecond):
		}
	}
	// The old holder reconnects but cannot take it back.
	if ok, err := a.TryAcquire(ctx); err != nil || ok {
		t.Fatalf("the old holder's TryAcquire = %v, %v; want false", ok, err)
	}
	b.Release()
	if ok, err := a.TryAcquire(ctx); err != nil || !ok {
		t.Fatalf("TryAcquire after Release = %v, %v; want true", ok, err)
	}
}

// TestLeaderLocksOfOtherDatabasesDoNotMeet: advisory locks are per
// database, so two deployments on one server each have a leader.
func TestLeaderLocksOfOtherDatabasesDoNotMeet(t *testing.T) {
	ctx := testenv.Context(t)
	a, b := store.NewLeaderLock(testenv.DatabaseURL(t), store.LeaderLockBot), store.NewLeaderLock(testenv.DatabaseURL(t), store.LeaderLockBot)
	t.Cleanup(a.Release)
	t.Cleanup(b.Release)
	for _, l := range []*store.LeaderLock{a, b} {
		if ok, err := l.TryAcquire(ctx); err != nil || !ok {
			t.Fatalf("TryAcquire = %v, %v; want true in each database", ok, err)
		}
	}
}
