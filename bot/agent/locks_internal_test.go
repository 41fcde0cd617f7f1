package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestSessionLocksSerialiseOneSessionOnly(t *testing.T) {
	var l sessionLocks
	a, b := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	ctx := context.Background()

	unlockA, err := l.lock(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	// Another session is not held up.
	unlockB, err := l.lock(ctx, b)
	if err != nil {
		t.Fatalf("a second session waited for the first: %v", err)
	}
	unlockB()

	// The same session waits until the first turn unlocks.
	got := make(chan func(), 1)
	go func() {
		unlock, err := l.lock(ctx, a)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- unlock
	}()
	select {
	case <-got:
		t.Fatal("a second turn of the same session ran while the first held it")
	case <-time.After(50 * time.Millisecond):
	}
	unlockA()
	unlock, ok := <-got
	if !ok {
		t.FailNow()
	}
	unlock()

	if n := len(l.locks); n != 0 {
		t.Errorf("%d session locks left after every turn ended, want 0", n)
	}
}

func TestSessionLockGivesUpWithItsContext(t *testing.T) {
	var l sessionLocks
	id := uuid.Must(uuid.NewV7())
	unlock, err := l.lock(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.lock(ctx, id); !errors.Is(err, context.Canceled) {
		t.Fatalf("lock with a cancelled context: %v, want context.Canceled", err)
	}
	unlock()
	if n := len(l.locks); n != 0 {
		t.Errorf("%d session locks left, want 0", n)
	}
}
