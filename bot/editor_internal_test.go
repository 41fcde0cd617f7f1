package bot

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestEditorRetriesFailedEdit: an edit the homeserver does not take is
// tried again until it goes through, so a result that ends while the
// homeserver is away still reaches its card.
func TestEditorRetriesFailedEdit(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	done := make(chan struct{})
	e := newEditor(0, time.Now, func(context.Context, uuid.UUID) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls < 3 {
			return errors.New("homeserver away")
		}
		close(done)
		return nil
	}, slog.New(slog.DiscardHandler))
	defer e.stop()
	e.update(uuid.New())
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the edit was not tried again after it failed")
	}
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if calls != 3 {
		t.Errorf("the edit ran %d times, want 3: twice failing, then once more", calls)
	}
}
