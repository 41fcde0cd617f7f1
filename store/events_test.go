package store_test

import (
	"testing"

	"github.com/nomoshq/nomos/internal/testenv"
)

// TestClaimEventResumesOnlyUnfinishedHandling: a decision the bot was
// handling when it died is claimed again on replay; one it finished, or
// an event handled once and for all, is not.
func TestClaimEventResumesOnlyUnfinishedHandling(t *testing.T) {
	t.Parallel()
	s := testenv.Store(t)
	ctx := testenv.Context(t)
	const room = "!ops:localhost"

	claim := func(ev string) bool {
		t.Helper()
		ok, err := s.ClaimEvent(ctx, room, ev)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !claim("$a") {
		t.Fatal("first claim of $a = false, want true")
	}
	if !claim("$a") {
		t.Error("claim of $a, whose handling never finished = false, want true: the replay must handle it again")
	}
	if err := s.FinishEvent(ctx, "$a"); err != nil {
		t.Fatal(err)
	}
	if claim("$a") {
		t.Error("claim of $a after it finished = true, want false: it would be decided twice")
	}

	if ok, err := s.MarkEventHandled(ctx, room, "$b"); err != nil || !ok {
		t.Fatalf("MarkEventHandled($b) = %v, %v", ok, err)
	}
	if claim("$b") {
		t.Error("claim of $b, marked handled for good = true, want false")
	}
	if ok, err := s.MarkEventHandled(ctx, room, "$a"); err != nil || ok {
		t.Errorf("MarkEventHandled($a) after its claim = %v, %v; want false", ok, err)
	}
}
