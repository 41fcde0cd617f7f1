package policy

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var pruneTests = []struct {
	name      string
	snapshots []string // oldest first
	keep      int
	want      []string
}{
	{"none", nil, 3, nil},
	{"under keep", []string{"nomos-20261201-101500", "nomos-20261202-093000"}, 3, nil},
	{"at keep", []string{"nomos-20261201-101500", "nomos-20261202-093000", "nomos-20261203-093000"}, 3, nil},
	{"oldest go first", []string{"nomos-20261201-101500", "nomos-20261202-093000", "nomos-20261203-093000", "nomos-20261204-093000", "nomos-20261205-093000"}, 3,
		[]string{"nomos-20261201-101500", "nomos-20261202-093000"}},
	{"another's snapshots are never touched nor counted", []string{"before-upgrade", "nomos-20261201-101500", "vzdump", "nomos-20261202-093000", "nomos-20261202-093000-2", "mine"}, 1,
		[]string{"nomos-20261201-101500", "nomos-20261202-093000"}},
	{"look-alikes are not ours", []string{"nomos-2026120-101500", "nomos-20261201-101500x", "Nomos-20261201-101500", "nomos-20261201-101500-100"}, 1, nil},
	{"keep 0 prunes nothing", []string{"nomos-20261201-101500", "nomos-20261202-093000"}, 0, nil},
}

func TestSnapshotsToPrune(t *testing.T) {
	t.Parallel()
	for _, tc := range pruneTests {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, SnapshotsToPrune(tc.snapshots, tc.keep)); d != "" {
				t.Errorf("SnapshotsToPrune (-want +got):\n%s", d)
			}
		})
	}
	if name := SnapshotName(time.Date(2026, 12, 1, 10, 15, 0, 0, time.UTC)); !IsNomosSnapshot(name) || !IsNomosSnapshot(name+"-2") {
		t.Errorf("SnapshotName's %s (and its second in the same second) must read as Nomos's", name)
	}
}

// FuzzSnapshotsToPrune: whatever a host lists, the prune deletes only
// Nomos's own snapshots, oldest first, and leaves keep of them.
func FuzzSnapshotsToPrune(f *testing.F) {
	for _, tc := range pruneTests {
		f.Add(strings.Join(tc.snapshots, " "), tc.keep)
	}
	f.Fuzz(func(t *testing.T, list string, keep int) {
		snaps := strings.Fields(list)
		got := SnapshotsToPrune(snaps, keep)
		var ours []string
		for _, s := range snaps {
			if IsNomosSnapshot(s) {
				ours = append(ours, s)
			}
		}
		for _, s := range got {
			if !IsNomosSnapshot(s) || !strings.HasPrefix(s, "nomos-") {
				t.Fatalf("would delete %q, which Nomos did not make", s)
			}
		}
		if keep >= 1 && len(ours) > keep && !slices.Equal(got, ours[:len(ours)-keep]) {
			t.Fatalf("want the %d oldest of %q, got %q", len(ours)-keep, ours, got)
		}
		if (keep < 1 || len(ours) <= keep) && len(got) != 0 {
			t.Fatalf("want nothing pruned, got %q", got)
		}
	})
}

func TestSnapshotBlockerIsHashedOnlyWhenSet(t *testing.T) {
	t.Parallel()
	plan, err := NewPlan(PctExecParams{Command: "touch /x"}, lxc101)
	if err != nil {
		t.Fatal(err)
	}
	before, err := PlanHash(plan)
	if err != nil {
		t.Fatal(err)
	}
	blocked := plan
	blocked.Target.SnapshotBlocker = "bind mount mp0 (/mnt/media)"
	after, err := PlanHash(blocked)
	if err != nil {
		t.Fatal(err)
	}
	if before == after {
		t.Error("a plan that goes on without a snapshot must hash apart from one that takes it")
	}
	plan.Target.SnapshotBlocker = ""
	if again, _ := PlanHash(plan); again != before {
		t.Error("an empty blocker changed the hash")
	}
	blocked.Target.SnapshotBlocker = "line\nbreak"
	if _, err := PlanHash(blocked); err == nil {
		t.Error("a blocker of two lines was hashed")
	}
}

func TestRollbackPastNewerSnapshotsSaysWhatItDeletes(t *testing.T) {
	t.Parallel()
	r, err := Classify(PctRollbackParams{Name: "a1", Discard: []string{"c3", "b2"}}, lxc101, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Class != Destructive || !strings.Contains(strings.Join(r.Reasons, "; "), "deletes the newer snapshots c3, b2 first") {
		t.Errorf("got %s: %q", r.Class, r.Reasons)
	}
}
