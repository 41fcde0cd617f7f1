package labsim

import (
	"strings"
	"testing"

	"github.com/nomoshq/nomos/hostgate"
)

// gated restarts b's simulator with the gate on.
func (b *bundle) gated(t *testing.T, rules hostgate.Rules) {
	t.Helper()
	b.cfg.Gate = &rules
	b.restart(t)
}

// TestGateMode: with the gate on, labsim answers as a node whose
// authorized_keys forces nomos gate. Allowed commands run as the argv the
// gate parsed; anything else gets the gate's line and 126, is logged as
// refused, and changes nothing.
func TestGateMode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.gated(t, hostgate.Rules{})

	if out := b.must(t, "pve1", "pct list"); !strings.Contains(out, "jellyfin") {
		t.Errorf("pct list: %q", out)
	}
	if out := b.must(t, "pve1", `pct exec 101 -- sh -c 'echo "it'\''s"; systemctl is-active jellyfin'`); out != "it's\nactive\n" {
		t.Errorf("pct exec sh -c: %q", out)
	}
	refused := []struct{ cmd, stderr string }{
		{"bash", "nomos gate: refused: \"bash\" is not a command nomos sends to a host\n"},
		{"", "nomos gate: refused: no command: this key runs only the commands nomos sends, never an interactive shell\n"},
		{"pct status 101; pct stop 101", "nomos gate: refused: not one simple command: lists of commands are refused\n"},
		{"sh -c 'pct stop 101'", "nomos gate: refused: a shell on the host itself (sh -c, which the run action sends) is off; set host_shell: true in /etc/nomos/gate.yaml to allow it\n"},
		{"pct exec 101 -- systemctl stop jellyfin; pct stop 101", "nomos gate: refused: not one simple command: lists of commands are refused\n"},
		{"labsim fault clear; pct stop 101", "nomos gate: refused: not one simple command: lists of commands are refused\n"},
		{"pct stop $(echo 101)", "nomos gate: refused: expansions and substitutions are refused\n"},
	}
	for _, r := range refused {
		got := b.run(t, "pve1", r.cmd)
		if got.Exit != hostgate.ExitRefused || got.Stderr != r.stderr || got.Stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 126 and %q", r.cmd, got.Exit, got.Stdout, got.Stderr, r.stderr)
		}
	}
	if out := b.must(t, "pve1", "pct status 101"); out != "status: running\n" {
		t.Errorf("a refused command changed container 101: %q", out)
	}
	if out := b.must(t, "pve1", "pct exec 101 -- systemctl is-active jellyfin"); out != "active\n" {
		t.Errorf("a refused command stopped jellyfin: %q", out)
	}
	b.must(t, "pve1", "labsim fault hang '*' sleep")
	if out := b.must(t, "pve1", "labsim fault list"); out != "hang * sleep\n" {
		t.Errorf("labsim's own commands pass the gate: %q", out)
	}

	entries, err := ReadLog(b.cfg.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	var logged []string
	for _, e := range entries {
		if e.Refused != "" {
			if e.Exit != hostgate.ExitRefused {
				t.Errorf("refused %q logged with exit %d", e.Command, e.Exit)
			}
			logged = append(logged, e.Command)
		} else if e.Exit == hostgate.ExitRefused {
			t.Errorf("%q exited 126 without a refusal", e.Command)
		}
	}
	if len(logged) != len(refused) {
		t.Errorf("the log marks %q as refused, want the %d refused commands", logged, len(refused))
	}
}

// TestGateModeHostShell: the run action's sh -c passes only when the
// rules allow a host shell.
func TestGateModeHostShell(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.gated(t, hostgate.Rules{HostShell: true})
	b.must(t, "pve1", "sh -c 'pct stop 101 && pct status 101'")
	if out := b.must(t, "pve1", "pct status 101"); out != "status: stopped\n" {
		t.Errorf("sh -c with host_shell did not run: %q", out)
	}
	if r := b.run(t, "pve1", "bash -c 'pct start 101'"); r.Exit != hostgate.ExitRefused {
		t.Errorf("bash -c with host_shell: exit %d, want 126", r.Exit)
	}
}
