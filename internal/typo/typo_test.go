package typo_test

import (
	"testing"

	"github.com/nomoshq/nomos/internal/typo"
)

func TestDistance(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"restart", "restart", 0},
		{"restrat", "restart", 1}, // a swap of neighbours is one slip
		{"retsart", "restart", 1},
		{"ab", "ba", 1},
		{"ca", "abc", 3}, // optimal string alignment: no edits inside a swap
		{"rstart", "restart", 1},
		{"restartt", "restart", 1},
		{"snapshto", "snapshot", 1},
		{"", "abc", 3},
		{"destructive_quorom", "destructive_quorum", 1},
	} {
		if got := typo.Distance(tt.a, tt.b); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := typo.Distance(tt.b, tt.a); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetric)", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestNearest(t *testing.T) {
	t.Parallel()
	verbs := []string{"restart", "reload", "reboot", "start", "stop", "snapshot", "snapshots"}
	for _, tt := range []struct {
		word  string
		limit int
		want  string
	}{
		{"rstart", 1, "restart"},
		{"restrat", 1, "restart"},
		{"rsetrta", 1, ""},
		{"stp", 1, "stop"},
		{"restart", 2, ""}, // a known word needs no suggestion
		{"frobnicate", 2, ""},
		{"snapshotz", 1, "snapshot"}, // first among equals
	} {
		got, ok := typo.Nearest(tt.word, verbs, tt.limit)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("Nearest(%q, %d) = %q, %v; want %q", tt.word, tt.limit, got, ok, tt.want)
		}
	}
	for n, want := range map[int]int{0: 0, 2: 0, 3: 1, 7: 1, 8: 2, 20: 2} {
		if got := typo.Near(n); got != want {
			t.Errorf("Near(%d) = %d, want %d", n, got, want)
		}
	}
}
