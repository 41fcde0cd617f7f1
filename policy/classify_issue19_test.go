package policy

import (
	"strings"
	"testing"
)

// issue19Wrappers run the command after them as it would run alone; the
// classifier unwraps each of them.
var issue19Wrappers = []string{
	"sudo ", "sudo -u root ", "env ", "env FOO=1 ", "nice ", "nice -n 5 ", "timeout 5 ",
	"nohup ", "stdbuf -oL ", "setsid ", "ionice -c3 ", "command ", "exec ", "time ",
	"doas ", "flock /tmp/l ", "busybox ", "xargs ", "xargs -0 ", "builtin ",
}

// issue19Shells run the command given to them as a script.
var issue19Shells = []func(string) string{
	func(p string) string { return "sh -c " + ShellQuote(p) },
	func(p string) string { return "bash -c " + ShellQuote(p) },
	func(p string) string { return "sudo sh -c " + ShellQuote(p) },
	func(p string) string { return "eval " + ShellQuote(p) },
	func(p string) string { return "su -c " + ShellQuote(p) },
	func(p string) string { return "echo x | xargs -I{} sh -c " + ShellQuote(p) },
	func(p string) string { return "ssh root@pve2 " + ShellQuote(p) },
	func(p string) string { return "ssh pve2 -- " + ShellQuote(p) },
	func(p string) string { return "pct exec 101 -- sh -c " + ShellQuote(p) },
	func(p string) string { return "pct exec 101 -- bash -c " + ShellQuote(p) },
	func(p string) string { return "qm guest exec 100 -- sh -c " + ShellQuote(p) },
}

// TestIssue19Wrapped runs every destructive form and every secrets read of
// issue 19 inside every wrapper and shell the classifier unwraps: each stays
// destructive, and each secrets read still names its secret.
func TestIssue19Wrapped(t *testing.T) {
	t.Parallel()
	n := 0
	for _, tt := range issueTests {
		if !strings.HasPrefix(tt.section, "19 ") || (tt.want != Destructive && !tt.secret) {
			continue
		}
		var forms []string
		if _, _, ok := plainName(tt.cmd); ok && !strings.ContainsAny(tt.cmd, "|&;") {
			for _, w := range issue19Wrappers {
				forms = append(forms, w+tt.cmd)
			}
		}
		for _, sh := range issue19Shells {
			forms = append(forms, sh(tt.cmd))
		}
		for _, f := range forms {
			n++
			got := ClassifyCommand(f, tt.place())
			if tt.want == Destructive && got.Class != Destructive {
				t.Errorf("[%s] ClassifyCommand(%q, %s) = %s %q; %q alone is destructive", tt.section, f, tt.place(), got.Class, got.Reasons, tt.cmd)
			}
			if tt.secret && len(got.Secrets) == 0 {
				t.Errorf("[%s] ClassifyCommand(%q, %s).Secrets is empty; %q alone reads a secret", tt.section, f, tt.place(), tt.cmd)
			}
		}
	}
	t.Logf("%d wrapped forms", n)
	if n < 500 {
		t.Fatalf("only %d wrapped forms checked", n)
	}
}
