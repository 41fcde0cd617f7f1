package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/nomoshq/nomos/store"
)

// TestAcknowledgeAndMuteSignal: an acknowledgement moves a raised signal
// once and records who; a mute keeps a new signal of the same kind on the
// same entity out of the announcements until it ends; both are audited.
func TestAcknowledgeAndMuteSignal(t *testing.T) {
	t.Parallel()
	s, ctx := seeded(t)
	e := entityID(t, s, "lxc:hubris/131")
	past := time.Now().Add(-time.Hour)
	g, _, err := s.RaiseSignal(ctx, store.NewSignal{EntityID: e.ID, Kind: "drift", Severity: "warning", Summary: "unclaimed", At: past})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetSignalAlertEvent(ctx, g.ID, "!room", "$alert"); err != nil {
		t.Fatal(err)
	}
	a, err := s.SignalByAlert(ctx, "!room", "$alert")
	if err != nil || a.ID != g.ID {
		t.Fatalf("SignalByAlert = %+v, %v; want %s", a, err, g.ID)
	}
	if _, err := s.SignalByAlert(ctx, "!other", "$alert"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the alert looked up in another room: %v, want ErrNotFound", err)
	}
	if ok, err := s.AcknowledgeSignal(ctx, g.ID, "@op:hs"); err != nil || !ok {
		t.Fatalf("AcknowledgeSignal = %v, %v", ok, err)
	}
	if ok, err := s.AcknowledgeSignal(ctx, g.ID, "@other:hs"); err != nil || ok {
		t.Errorf("acknowledging again = %v, %v; want no change", ok, err)
	}
	list, err := s.ListSignals(ctx, store.SignalFilter{EntityID: &e.ID})
	if err != nil || len(list) != 1 || list[0].State != "acknowledged" || list[0].AcknowledgedBy != "@op:hs" || !list[0].Open() {
		t.Fatalf("after acknowledging: %+v, %v", list, err)
	}

	until := time.Now().Add(time.Hour)
	if err := s.MuteSignal(ctx, g.ID, "@op:hs", until); err != nil {
		t.Fatal(err)
	}
	if err := s.MuteSignal(ctx, uuid.New(), "@op:hs", until); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("muting an unknown signal: %v, want ErrNotFound", err)
	}
	if err := s.ResolveSignal(ctx, e.ID, "drift", time.Time{}); err != nil {
		t.Fatal(err)
	}
	again, raised, err := s.RaiseSignal(ctx, store.NewSignal{EntityID: e.ID, Kind: "drift", Severity: "critical", Summary: "back", At: past})
	if err != nil || !raised {
		t.Fatal(raised, err)
	}
	announce := func() map[uuid.UUID]bool {
		t.Helper()
		due, err := s.SignalsToAnnounce(ctx, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ids := map[uuid.UUID]bool{}
		for _, d := range due {
			ids[d.ID] = true
		}
		return ids
	}
	if due := announce(); due[again.ID] || !due[g.ID] {
		t.Errorf("while muted, to announce: %v; want the recovery of %s, not the new signal %s", due, g.ID, again.ID)
	}
	// Shortening the mute to the past lets the new signal through.
	if err := s.MuteSignal(ctx, g.ID, "@op:hs", time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if due := announce(); !due[again.ID] {
		t.Errorf("after the mute ended, to announce: %v; want %s", due, again.ID)
	}
	rows, _, err := s.AuditPage(ctx, store.AuditQuery{Actor: "@op:hs", Entity: "lxc:hubris/131"})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, r := range rows {
		actions = append(actions, r.Action)
	}
	if diff := cmp.Diff([]string{"signal.muted", "signal.muted", "signal.acknowledged"}, actions); diff != "" {
		t.Errorf("audit of the operator's acknowledgement and mutes (-want +got):\n%s", diff)
	}
}
