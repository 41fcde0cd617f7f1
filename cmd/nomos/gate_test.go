package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nomoshq/nomos/hostgate"
)

// TestGateRole runs `nomos gate` in process where nothing would be
// executed: refusals and -check.
func TestGateRole(t *testing.T) {
	t.Parallel()
	absent := filepath.Join(t.TempDir(), "gate.yaml")
	tests := []struct {
		name           string
		args, environ  []string
		code           int
		stdout, stderr string
	}{
		{"bash is refused", []string{"gate", "-rules", absent}, []string{"SSH_ORIGINAL_COMMAND=bash"},
			126, "", "nomos gate: refused: \"bash\" is not a command nomos sends to a host\n"},
		{"an interactive login is refused", []string{"gate", "-rules", absent}, nil,
			126, "", "nomos gate: refused: no command: this key runs only the commands nomos sends, never an interactive shell\n"},
		{"check allows pct list", []string{"gate", "-rules", absent, "-check", "pct list"}, nil, 0, "allowed: pct list\n", ""},
		{"check shows the argv", []string{"gate", "-rules", absent, "-check", `pct exec 101 -- sh -c "echo hi"`}, nil,
			0, "allowed: pct exec 101 -- sh -c 'echo hi'\n", ""},
		{"check refuses the run action's shell", []string{"gate", "-rules", absent, "-check", "sh -c 'pct list'"}, nil,
			126, "", "nomos gate: refused: a shell on the host itself (sh -c, which the run action sends) is off; set host_shell: true in /etc/nomos/gate.yaml to allow it\n"},
		{"no arguments", []string{"gate", "pct", "list"}, nil, 1, "", "nomos gate: unexpected argument \"pct\": the command comes from SSH_ORIGINAL_COMMAND, or from -check\n"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(tt.args, tt.environ, &stdout, &stderr)
		if code != tt.code || stdout.String() != tt.stdout || stderr.String() != tt.stderr {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %d, %q, %q", tt.name, code, stdout.String(), stderr.String(), tt.code, tt.stdout, tt.stderr)
		}
	}
}

// TestGateBinary runs the built nomos as sshd runs a forced command, with
// the request in SSH_ORIGINAL_COMMAND: an allowed probe runs as its own
// program with its output and exit status, and anything else is refused.
func TestGateBinary(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"/usr/bin/df", "/usr/bin/getent"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s is missing: %v", p, err)
		}
	}
	bin := buildNomos(t)
	absent := filepath.Join(t.TempDir(), "gate.yaml")
	gate := func(command string) (string, string, int) {
		cmd := exec.Command(bin, "gate", "-rules", absent)
		cmd.Env = []string{"SSH_ORIGINAL_COMMAND=" + command, "HOME=/root", "SSH_CLIENT=192.0.2.7 50022 22"}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
	}
	if out, errOut, code := gate("df -P '/'"); code != 0 || !strings.HasPrefix(out, "Filesystem") || errOut != "" {
		t.Errorf("df -P /: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, errOut, code := gate("getent hosts localhost"); code != 0 || !strings.Contains(out, "localhost") || errOut != "" {
		t.Errorf("getent hosts localhost: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// df's own failure comes through as df's.
	if _, errOut, code := gate("df -P /no/such/dir"); code != 1 || !strings.Contains(errOut, "df: ") {
		t.Errorf("df of a missing dir: exit %d, stderr %q; want df's exit 1 and message", code, errOut)
	}
	for _, command := range []string{"bash", "df -P /; id", "getent hosts localhost > /tmp/x", "sh -c id", "id"} {
		out, errOut, code := gate(command)
		if code != 126 || out != "" || !strings.HasPrefix(errOut, "nomos gate: refused: ") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 126 and one refusal line", command, code, out, errOut)
		}
	}
}

// TestInstallGuideInstallsTheGate keeps docs/install.md's gate section
// true: every authorized_keys line it shows forces nomos gate, the refusal
// it promises for `ssh host bash` is the one the gate prints, and the
// rules line it shows turns the host shell on.
func TestInstallGuideInstallsTheGate(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	guide := string(data)
	keyLines := 0
	for _, line := range strings.Split(guide, "\n") {
		if !strings.Contains(line, "restrict,") || !strings.Contains(line, "authorized_keys") && !strings.Contains(line, "ssh-ed25519") {
			continue
		}
		keyLines++
		// The binary by hand (/usr/local/bin) or from nomos-gate (/usr/bin).
		if l := strings.ReplaceAll(line, `\"`, `"`); !strings.Contains(l, `command="/usr/local/bin/nomos gate"`) && !strings.Contains(l, `command="/usr/bin/nomos gate"`) {
			t.Errorf("install.md authorizes the actuator's key without the gate: %s", line)
		}
	}
	if keyLines < 1 {
		t.Errorf("install.md shows no authorized_keys line")
	}
	// The guide installs the line with nomos gate -install, never by
	// appending to the shared file, and shows the line it writes.
	if strings.Contains(guide, ">> /root/.ssh/authorized_keys") {
		t.Error("install.md appends to /root/.ssh/authorized_keys, which on Proxmox VE is the cluster's shared file")
	}
	const install = "nomos gate -install -key-file ssh_key.pub -from 192.168.1.5"
	if !strings.Contains(guide, install) {
		t.Errorf("install.md does not show %q", install)
	}
	root := t.TempDir()
	pub := filepath.Join(root, "ssh_key.pub")
	if err := os.WriteFile(pub, []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOmrmM6qXoSGRkbWZb1NjfTUvJQDu8gvO8AJHNpDqdTR nomos-actuator\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"gate", "-root", root, "-node", "pve1"}, strings.Fields(strings.TrimPrefix(strings.Replace(install, "ssh_key.pub", pub, 1), "nomos gate "))...)
	if code := run(args, nil, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
		t.Fatalf("%q: exit %d", args, code)
	}
	written, err := os.ReadFile(filepath.Join(root, "root", ".ssh", "authorized_keys"))
	if err != nil {
		t.Fatal(err)
	}
	options, _, _ := strings.Cut(string(written), " ssh-ed25519 ")
	if !strings.Contains(guide, "\n"+options+" ssh-ed25519 AAAA… nomos-actuator\n") {
		t.Errorf("install.md does not show the line nomos gate -install writes, %s ssh-ed25519 …", options)
	}

	var stderr bytes.Buffer
	if code := run([]string{"gate", "-rules", filepath.Join(t.TempDir(), "absent")}, []string{"SSH_ORIGINAL_COMMAND=bash"}, &bytes.Buffer{}, &stderr); code != 126 {
		t.Fatalf("ssh host bash: exit %d, want 126", code)
	}
	promised := ""
	for _, line := range strings.Split(guide, "\n") {
		if cmd, comment, ok := strings.Cut(line, "#"); ok && strings.HasSuffix(strings.TrimSpace(cmd), " bash") && strings.HasPrefix(cmd, "ssh ") {
			promised = strings.TrimSpace(comment)
		}
	}
	if promised != strings.TrimSpace(stderr.String()) {
		t.Errorf("install.md promises %q for ssh host bash; the gate prints %q", promised, stderr.String())
	}

	if !strings.Contains(guide, "```\nhost_shell: true\n```") {
		t.Error("install.md does not show the host_shell: true line on its own")
	}
	rules, err := hostgate.ParseRules("host_shell: true\n")
	if err != nil || !rules.HostShell {
		t.Errorf("the guide's rules line: %+v, %v", rules, err)
	}
}

// TestGateInstallRole: nomos gate -install writes the forced-command line
// under -root, once, and needs the key.
func TestGateInstallRole(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	pub := filepath.Join(t.TempDir(), "ssh_key.pub")
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOmrmM6qXoSGRkbWZb1NjfTUvJQDu8gvO8AJHNpDqdTR nomos-actuator"
	if err := os.WriteFile(pub, []byte(key+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"gate", "-install", "-root", root, "-node", "pve1", "-key-file", pub, "-from", "192.168.1.5"}
	for i, want := range []string{"added to /root/.ssh/authorized_keys", "already there"} {
		var stdout, stderr bytes.Buffer
		if code := run(args, nil, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), want) {
			t.Errorf("install %d: exit %d, stdout %q, stderr %q; want %q", i+1, code, stdout.String(), stderr.String(), want)
		}
	}
	data, err := os.ReadFile(filepath.Join(root, "root", ".ssh", "authorized_keys"))
	if want := `restrict,from="192.168.1.5",command="/usr/local/bin/nomos gate" ` + key + "\n"; err != nil || string(data) != want {
		t.Errorf("authorized_keys = %q, %v; want %q", data, err, want)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"gate", "-install", "-root", root}, nil, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "needs the actuator's public key") {
		t.Errorf("without a key: exit %d, stderr %q", code, stderr.String())
	}
}

// TestGateCheckRefusesUnitControlOnTheNode: with host_shell: false, and
// with a host_units block that lists other units, nomos gate -check
// refuses each systemctl form that would take the node down or lock its
// owner out, with exit 126; it allows the probe's question and what
// host_units lists.
func TestGateCheckRefusesUnitControlOnTheNode(t *testing.T) {
	t.Parallel()
	write := func(text string) string {
		p := filepath.Join(t.TempDir(), "gate.yaml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, rules := range []string{
		write("host_shell: false\n"),
		write("host_shell: false\nhost_units:\n  caddy.service: restart, stop\n"),
	} {
		for _, command := range []string{
			"systemctl start reboot.target",
			"systemctl start poweroff.target",
			"systemctl stop pve-cluster.service",
			"systemctl disable ssh.service",
			"systemctl stop corosync",
			"systemctl restart nut-server.service",
		} {
			var stdout, stderr bytes.Buffer
			code := run([]string{"gate", "-rules", rules, "-check", command}, nil, &stdout, &stderr)
			if code != hostgate.ExitRefused || stdout.Len() != 0 || !strings.HasPrefix(stderr.String(), "nomos gate: refused: systemctl ") {
				t.Errorf("%s: -check %q: exit %d, stdout %q, stderr %q; want 126 and the refusal", rules, command, code, stdout.String(), stderr.String())
			}
		}
		var stdout, stderr bytes.Buffer
		if code := run([]string{"gate", "-rules", rules, "-check", "systemctl is-active 'pveproxy.service'"}, nil, &stdout, &stderr); code != 0 {
			t.Errorf("%s: the systemd probe's is-active: exit %d, stderr %q", rules, code, stderr.String())
		}
	}
	listed := write("host_units:\n  caddy.service: restart, stop\n")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"gate", "-rules", listed, "-check", "systemctl restart caddy.service"}, nil, &stdout, &stderr); code != 0 || stdout.String() != "allowed: systemctl restart caddy.service\n" {
		t.Errorf("a listed unit's restart: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}
