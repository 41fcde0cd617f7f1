package chatclient

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var commandCases = []struct {
	line string
	want command
}{
	{"", command{kind: cmdNone}},
	{"   \r\n", command{kind: cmdNone}},
	{"restart jellyfin", command{kind: cmdSend, text: "restart jellyfin"}},
	{"restart jellyfin\r\n", command{kind: cmdSend, text: "restart jellyfin"}},
	{"  indented stays", command{kind: cmdSend, text: "  indented stays"}},
	{"//etc/hosts is wrong", command{kind: cmdSend, text: "/etc/hosts is wrong"}},
	{"/quit", command{kind: cmdQuit}},
	{"/QUIT", command{kind: cmdQuit}},
	{"/exit", command{kind: cmdQuit}},
	{"/help", command{kind: cmdHelp}},
	{"/react ✅", command{kind: cmdReact, text: "✅"}},
	{"/react   👍  ", command{kind: cmdReact, text: "👍"}},
	{"/react ok", command{kind: cmdReact, text: "✅"}},
	{"/react :x:", command{kind: cmdReact, text: "❌"}},
	{"/react -1", command{kind: cmdReact, text: "👎"}},
	{"/react #3 ✅", command{kind: cmdReact, text: "✅", target: 3}},
	{"/react #0 ✅", command{kind: cmdUsage, text: "usage: /react [#N] <emoji>, e.g. /react ✅"}},
	{"/react", command{kind: cmdUsage, text: "usage: /react [#N] <emoji>, e.g. /react ✅"}},
	{"/react #2", command{kind: cmdUsage, text: "usage: /react [#N] <emoji>, e.g. /react ✅"}},
	{"/react two words", command{kind: cmdUsage, text: "usage: /react [#N] <emoji>, e.g. /react ✅"}},
	{"/reply go ahead", command{kind: cmdReply, text: "go ahead"}},
	{"/reply #12 no, stop", command{kind: cmdReply, text: "no, stop", target: 12}},
	{"/reply #x yes", command{kind: cmdReply, text: "#x yes"}},
	{"/reply", command{kind: cmdUsage, text: "usage: /reply [#N] <text>, e.g. /reply go ahead"}},
	{"/approve", command{kind: cmdUnknown, text: "/approve"}},
}

func TestParseCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range commandCases {
		got := parseCommand(tc.line)
		if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(command{})); diff != "" {
			t.Errorf("parseCommand(%q) (-want +got):\n%s", tc.line, diff)
		}
	}
}

func FuzzParseCommand(f *testing.F) {
	for _, tc := range commandCases {
		f.Add(tc.line)
	}
	f.Fuzz(func(t *testing.T, line string) {
		got := parseCommand(line)
		trimmed := strings.TrimRight(line, "\r\n")
		switch {
		case strings.TrimSpace(trimmed) == "":
			if got.kind != cmdNone {
				t.Fatalf("parseCommand(%q) = %+v for a blank line", line, got)
			}
		case !strings.HasPrefix(trimmed, "/"):
			if got.kind != cmdSend || got.text != trimmed {
				t.Fatalf("parseCommand(%q) = %+v; a line without a slash is sent as typed", line, got)
			}
		}
		switch got.kind {
		case cmdReact:
			if got.text == "" || strings.ContainsAny(got.text, " \t") {
				t.Fatalf("parseCommand(%q) = %+v: a reaction key is one non-empty word", line, got)
			}
		case cmdReply:
			if got.text == "" {
				t.Fatalf("parseCommand(%q) = %+v: an empty reply", line, got)
			}
		}
		if got.target < 0 {
			t.Fatalf("parseCommand(%q) = %+v: negative target", line, got)
		}
	})
}
