package backoff

import (
	"testing"
	"time"
)

// TestBackoffDoublesToItsBound: 100 ms, then twice as long each time up
// to 2 s, and from 100 ms again after a reset.
func TestBackoffDoublesToItsBound(t *testing.T) {
	t.Parallel()
	var b Backoff
	want := []time.Duration{100, 200, 400, 800, 1600, 2000, 2000}
	for i, w := range want {
		if got := b.Next(); got != w*time.Millisecond {
			t.Errorf("pause %d = %s, want %s", i+1, got, w*time.Millisecond)
		}
	}
	b.Reset()
	if got := b.Next(); got != 100*time.Millisecond {
		t.Errorf("after a reset = %s, want 100ms", got)
	}
	short := Backoff{Min: time.Millisecond, Max: 3 * time.Millisecond}
	for i, w := range []time.Duration{1, 2, 3, 3} {
		if got := short.Next(); got != w*time.Millisecond {
			t.Errorf("bounded pause %d = %s, want %s", i+1, got, w*time.Millisecond)
		}
	}
}
