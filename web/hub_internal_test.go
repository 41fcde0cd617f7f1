package web

import "testing"

// TestSlowClientIsDroppedNotWaitedFor: a client that stops reading is cut
// off once its buffer is full; publishing never blocks and the others
// keep every event.
func TestSlowClientIsDroppedNotWaitedFor(t *testing.T) {
	h := newHub(4, 3)
	slow, fast := h.subscribe(), h.subscribe()
	for i := range 10 {
		h.publish(liveEvent{Kind: "execution", State: string(rune('a' + i))})
		<-fast
	}
	n := 0
	for range slow {
		n++
	}
	if n != 4 {
		t.Errorf("the slow client got %d events before it was dropped, want its buffer of 4", n)
	}
	if clients, dropped := h.stats(); clients != 1 || dropped != 1 {
		t.Errorf("hub has %d clients and dropped %d, want 1 and 1", clients, dropped)
	}
	h.subscribe()
	h.subscribe()
	if c := h.subscribe(); c != nil {
		t.Error("a fourth client was let in past the limit of 3")
	}
	h.unsubscribe(fast)
	h.unsubscribe(fast) // twice is harmless
	h.closeAll()
	if clients, _ := h.stats(); clients != 0 {
		t.Errorf("%d clients left after closeAll", clients)
	}
}
