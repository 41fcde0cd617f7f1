package loop_test

import (
	"context"
	"testing"
	"time"

	"github.com/nomoshq/nomos/internal/loop"
)

func TestEveryRunsAtOnceThenOnEachTick(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop.Every(ctx, time.Millisecond, func(context.Context) {
			runs++
			if runs == 3 {
				cancel()
			}
		})
	}()
	<-done
	if runs != 3 {
		t.Fatalf("runs = %d, want 3: Every must keep running fn until ctx ends, and stop then", runs)
	}
}

func TestEveryRunsOnceWhenContextAlreadyEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	runs := 0
	loop.Every(ctx, time.Hour, func(ctx context.Context) {
		runs++
		if ctx.Err() == nil {
			t.Error("fn got a live context, want the ended one passed through")
		}
	})
	if runs != 1 {
		t.Fatalf("runs = %d, want 1: the first run happens at once, then Every returns on the ended context", runs)
	}
}

func TestEveryDoesNotStackSlowRuns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	active, most, runs := 0, 0, 0
	loop.Every(ctx, time.Microsecond, func(context.Context) {
		active++
		most = max(most, active)
		time.Sleep(2 * time.Millisecond) // longer than the tick
		runs++
		if runs == 3 {
			cancel()
		}
		active--
	})
	if most != 1 {
		t.Fatalf("%d runs overlapped, want 1: a slow run must delay the next, not stack", most)
	}
}
