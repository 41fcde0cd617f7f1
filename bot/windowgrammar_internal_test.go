package bot

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// windowCommandTests is the table of the window verbs;
// FuzzParseWindowCommand is seeded from it. hint marks a CmdUnknown that
// must carry a usage hint.
var windowCommandTests = []struct {
	text string
	want Command
	hint bool
}{
	{"windows", Command{Kind: CmdWindows}, false},
	{"window list", Command{Kind: CmdWindows}, false},
	{"window service:jellyfin 2h swapping the disk", Command{Kind: CmdWindow, Target: "service:jellyfin",
		Params: kv{"duration": "2h0m0s", "reason": "swapping the disk"}}, false},
	{"@nomos: window 101 90m kernel update", Command{Kind: CmdWindow, Target: "101",
		Params: kv{"duration": "1h30m0s", "reason": "kernel update"}}, false},
	{"window service:jellyfin 1d allow reversible_low disk swap", Command{Kind: CmdWindow, Target: "service:jellyfin",
		Params: kv{"duration": "24h0m0s", "allow": "reversible_low", "reason": "disk swap"}}, false},
	{"window service:jellyfin 2h allow destructive x", Command{Kind: CmdWindow, Target: "service:jellyfin",
		Params: kv{"duration": "2h0m0s", "allow": "destructive", "reason": "x"}}, false},
	{"window jellyfin", Command{}, true},
	{"window jellyfin 2h", Command{}, true},
	{"window jellyfin soon because", Command{}, true},
	{"window jellyfin 2x because", Command{}, true},
	{"window jellyfin 0d because", Command{}, true},
	{"window jellyfin 2h allow", Command{}, true},
	{"end window", Command{Kind: CmdEndWindow}, false},
	{"end window nightly", Command{Kind: CmdEndWindow, Target: "nightly"}, false},
	{"end window a b", Command{}, true},
	{"end of the day", Command{}, false},
	{"allow reversible_low service:jellyfin k7q2", Command{Kind: CmdAllow, Phrase: "allow reversible_low service:jellyfin k7q2"}, false},
	{"allow reversible_low service:jellyfin", Command{}, true},
	{"allow everything service:jellyfin k7q2", Command{}, true},
}

func TestParseWindowCommands(t *testing.T) {
	t.Parallel()
	for _, tt := range windowCommandTests {
		t.Run(tt.text, func(t *testing.T) {
			t.Parallel()
			got := ParseCommand(tt.text, nil)
			if diff := cmp.Diff(tt.want, stripUnspecified(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ParseCommand(%q) (-want +got):\n%s", tt.text, diff)
			}
			if tt.hint && (got.Kind != CmdUnknown || got.Hint == "") {
				t.Errorf("ParseCommand(%q) = %v with hint %q, want CmdUnknown with a usage hint", tt.text, got.Kind, got.Hint)
			}
		})
	}
}

// FuzzParseWindowCommand: whatever the text, a window command has a
// target, a positive duration of at most the days it names and a reason,
// and a standing approval's phrase starts with allow.
func FuzzParseWindowCommand(f *testing.F) {
	for _, tt := range windowCommandTests {
		f.Add(tt.text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got := ParseCommand(text, nil)
		switch got.Kind {
		case CmdWindow:
			d, err := time.ParseDuration(got.Params["duration"].(string))
			if got.Target == "" || err != nil || d <= 0 || got.Params["reason"] == "" {
				t.Fatalf("ParseCommand(%q) = %+v, want a target, a positive duration and a reason", text, got)
			}
		case CmdAllow:
			if !strings.HasPrefix(got.Phrase, "allow ") {
				t.Fatalf("ParseCommand(%q) phrase %q", text, got.Phrase)
			}
		}
	})
}
