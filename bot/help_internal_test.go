package bot

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/nomoshq/nomos/policy"
)

// TestEveryActionHasAVerbAndHelp walks policy's catalogue: every action
// can be asked for by a verb of the room's grammar, and help has a line
// for that verb. An action added without a verb fails here.
func TestEveryActionHasAVerbAndHelp(t *testing.T) {
	t.Parallel()
	for _, spec := range policy.Catalogue() {
		var words []string
		for _, v := range grammar {
			if slices.Contains(v.actions, spec.Action) {
				words = append(words, v.words...)
			}
		}
		if len(words) == 0 {
			t.Errorf("%s: no verb of the grammar asks for it", spec.Action)
			continue
		}
		if !slices.ContainsFunc(words, func(w string) bool { _, _, ok := HelpFor(w); return ok }) {
			t.Errorf("%s: help has no line for any of its verbs %v", spec.Action, words)
		}
	}
	for _, v := range grammar {
		if _, _, ok := HelpFor(v.words[0]); !ok {
			t.Errorf("verb %s: help <verb> has nothing to say", v.words[0])
		}
	}
}

// TestHelpExamplesWork: each example help gives is understood as typed,
// and each is in docs/user-guide.md, so the guide and help say the same.
func TestHelpExamplesWork(t *testing.T) {
	t.Parallel()
	guide, err := os.ReadFile("../docs/user-guide.md")
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := Help()
	for _, s := range helpSections {
		for _, e := range s.entries {
			if e.example == "" {
				continue
			}
			if c := ParseCommand(e.example, nil); c.Kind == CmdUnknown {
				t.Errorf("help's example %q is not understood (hint %q)", e.example, c.Hint)
			}
			if !strings.Contains(string(guide), "`"+e.example+"`") {
				t.Errorf("docs/user-guide.md does not show help's example `%s`", e.example)
			}
			if !strings.Contains(plain, e.example) {
				t.Errorf("help does not show the example %q", e.example)
			}
		}
	}
}

// TestHelpForAVerb: help <verb> finds the verb by any of its words and
// tells more; an unknown word is not found.
func TestHelpForAVerb(t *testing.T) {
	t.Parallel()
	for verb, want := range map[string]string{
		"reboot":  "Every container on it stops",
		"bounce":  "restart <service>",
		"logs":    "at most 100",
		"journal": "50 lines by default",
		"create":  "debian-13",
		"stop":    "start | stop | reboot <lxc|vm>",
	} {
		plain, html, ok := HelpFor(verb)
		if !ok || !strings.Contains(plain, want) || html == "" {
			t.Errorf("HelpFor(%q) = %v %q, want it to say %q", verb, ok, plain, want)
		}
	}
	if _, _, ok := HelpFor("frobnicate"); ok {
		t.Error("HelpFor(frobnicate) found something")
	}
	if c := ParseCommand("help reboot", nil); c.Kind != CmdHelp || c.Target != "reboot" {
		t.Errorf("ParseCommand(help reboot) = %v %q", c.Kind, c.Target)
	}
}
