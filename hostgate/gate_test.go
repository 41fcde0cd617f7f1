package hostgate_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nomoshq/nomos/hostgate"
)

// TestMain doubles as the gate itself when a test runs this binary as one,
// so the real syscall.Exec path is tested as sshd would use it.
func TestMain(m *testing.M) {
	if os.Getenv("HOSTGATE_TEST_AS_GATE") == "1" {
		os.Exit(hostgate.Run(hostgate.Config{
			Command:   os.Getenv("SSH_ORIGINAL_COMMAND"),
			RulesFile: os.Getenv("HOSTGATE_TEST_RULES"),
			Environ:   os.Environ(),
			Stderr:    os.Stderr,
			Path:      []string{os.Getenv("HOSTGATE_TEST_PATH")},
		}))
	}
	os.Exit(m.Run())
}

// journal records what the gate sends to syslog.
type journal struct{ lines []string }

func (j *journal) Warning(m string) error {
	j.lines = append(j.lines, m)
	return nil
}

// execCall is what the gate asked to exec.
type execCall struct {
	Path string
	Argv []string
	Env  []string
}

// gateRun is one run of the gate with everything recorded.
type gateRun struct {
	code    int
	stderr  string
	journal []string
	execs   []execCall
}

func runGate(t *testing.T, cfg hostgate.Config) gateRun {
	t.Helper()
	var r gateRun
	var stderr bytes.Buffer
	j := &journal{}
	cfg.Stderr, cfg.Journal = &stderr, j
	if cfg.RulesFile == "" {
		cfg.RulesFile = filepath.Join(t.TempDir(), "absent.yaml")
	}
	if cfg.Path == nil {
		cfg.Path = []string{programs(t, "pct", "sh", "systemctl")}
	}
	cfg.Exec = func(path string, argv, env []string) error {
		r.execs = append(r.execs, execCall{path, argv, env})
		return errors.New("exec stopped by the test")
	}
	r.code = hostgate.Run(cfg)
	r.stderr, r.journal = stderr.String(), j.lines
	return r
}

// programs makes a directory of executables with these names.
func programs(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var sshEnv = []string{
	"SSH_CLIENT=192.0.2.7 50022 22", "SSH_CONNECTION=192.0.2.7 50022 192.0.2.1 22", "HOME=/root", "USER=root", "LOGNAME=root",
	"SSH_ORIGINAL_COMMAND=pct list", "LANG=../../tmp/evil", "LC_ALL=x", "LD_PRELOAD=/tmp/evil.so", "PATH=/tmp/evil:/usr/bin", "BASH_ENV=/tmp/evil",
}

func TestRefusalIsOneLineExit126AndJournaled(t *testing.T) {
	t.Parallel()
	r := runGate(t, hostgate.Config{Command: "bash -i", Environ: sshEnv})
	if r.code != hostgate.ExitRefused || len(r.execs) != 0 {
		t.Errorf("exit %d, execs %v; want %d and nothing run", r.code, r.execs, hostgate.ExitRefused)
	}
	if want := "nomos gate: refused: \"bash\" is not a command nomos sends to a host\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
	if len(r.journal) != 1 || !strings.Contains(r.journal[0], `from "192.0.2.7": "bash -i"`) || !strings.Contains(r.journal[0], "refused") {
		t.Errorf("journal %q, want one line naming the client and the quoted command", r.journal)
	}
}

// TestJournalLineCannotBeForged: a command that carries newlines and a
// fake log line is quoted onto one line, and a long one is capped.
func TestJournalLineCannotBeForged(t *testing.T) {
	t.Parallel()
	cmd := "reboot\nJan  1 00:00:00 pve sshd[1]: Accepted publickey for root\x1b[2J" + strings.Repeat("A", 4096)
	r := runGate(t, hostgate.Config{Command: cmd, Environ: sshEnv})
	if len(r.journal) != 1 {
		t.Fatalf("journal %q, want one line", r.journal)
	}
	line := r.journal[0]
	if strings.ContainsAny(line, "\n\r\x1b") || !strings.Contains(line, `"reboot\nJan`) || !strings.Contains(line, "(first 512 of") || len(line) > 1024 {
		t.Errorf("journal line is not quoted, one line and capped: %q", line)
	}
	if strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr %q is not one line", r.stderr)
	}
}

func TestAllowedCommandIsExecedWithItsArgvAndACleanEnvironment(t *testing.T) {
	t.Parallel()
	dir := programs(t, "pct")
	r := runGate(t, hostgate.Config{Command: "pct exec 101 -- sh -c 'echo a; id >/tmp/x'", Environ: sshEnv, Path: []string{dir}})
	want := []execCall{{
		Path: filepath.Join(dir, "pct"),
		Argv: []string{"pct", "exec", "101", "--", "sh", "-c", "echo a; id >/tmp/x"},
		Env: []string{"PATH=" + dir, "SSH_CLIENT=192.0.2.7 50022 22", "SSH_CONNECTION=192.0.2.7 50022 192.0.2.1 22",
			"HOME=/root", "USER=root", "LOGNAME=root"},
	}}
	if d := cmp.Diff(want, r.execs); d != "" {
		t.Errorf("exec (-want +got):\n%s", d)
	}
	if r.code != hostgate.ExitRefused || !strings.Contains(r.stderr, "cannot run") || len(r.journal) != 0 {
		t.Errorf("a failed exec: exit %d, stderr %q, journal %q", r.code, r.stderr, r.journal)
	}
}

func TestMissingProgramIs127(t *testing.T) {
	t.Parallel()
	r := runGate(t, hostgate.Config{Command: "pvesh get /cluster/nextid", Path: []string{t.TempDir()}})
	if r.code != hostgate.ExitNotFound || len(r.execs) != 0 || !strings.Contains(r.stderr, "pvesh is not installed") {
		t.Errorf("exit %d, stderr %q, execs %v", r.code, r.stderr, r.execs)
	}
}

func TestRulesFile(t *testing.T) {
	t.Parallel()
	write := func(text string, mode os.FileMode) string {
		p := filepath.Join(t.TempDir(), "gate.yaml")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	on := write("# nomos gate\n\nhost_shell: true\n", 0o644)
	tests := []struct {
		name, file, cmd string
		ran             bool
		why             string
	}{
		{"host shell on", on, "sh -c 'pveversion'", true, ""},
		{"host shell on, other shells still refused", on, "bash -c 'pveversion'", false, `"bash" is not a command`},
		{"host shell off", write("host_shell: false\n", 0o644), "sh -c 'pveversion'", false, "host_shell: true"},
		{"no file", "", "sh -c 'pveversion'", false, "host_shell: true"},
		{"no file, pct", "", "pct list", true, ""},
		{"writable by others", write("host_shell: true\n", 0o666), "pct list", false, "rules file is unusable"},
		{"writable by the group", write("host_shell: true\n", 0o664), "pct list", false, "writable by others"},
		{"unknown key", write("host_shell: true\nallow_all: true\n", 0o644), "pct list", false, `line 2: unknown key "allow_all"`},
		{"bad value", write("host_shell: yes\n", 0o644), "pct list", false, `must be true or false, got "yes"`},
		{"twice", write("host_shell: false\nhost_shell: true\n", 0o644), "pct list", false, "given twice"},
		{"not key: value", write("host_shell\n", 0o644), "pct list", false, "want key: value"},
		{"privileged containers on", write("privileged_containers: true\n", 0o644), "pct create 150 local:vztmpl/d.tar.zst --unprivileged 0", true, ""},
		{"privileged containers off", on, "pct create 150 local:vztmpl/d.tar.zst --unprivileged 0", false, "privileged_containers: true"},
		{"a directory", t.TempDir(), "pct list", false, "not a regular file"},
	}
	for _, tt := range tests {
		r := runGate(t, hostgate.Config{Command: tt.cmd, RulesFile: tt.file})
		switch {
		case tt.ran && (len(r.execs) != 1 || len(r.journal) != 0):
			t.Errorf("%s: %q did not run: %q", tt.name, tt.cmd, r.stderr)
		case !tt.ran && (len(r.execs) != 0 || r.code != hostgate.ExitRefused || len(r.journal) != 1):
			t.Errorf("%s: %q ran or was not refused and journaled: exit %d, execs %v", tt.name, tt.cmd, r.code, r.execs)
		case !tt.ran && !strings.Contains(r.stderr, tt.why):
			t.Errorf("%s: stderr %q does not say %q", tt.name, r.stderr, tt.why)
		}
	}
}

// TestGateExecsTheProgram runs this test binary as the gate, as sshd runs
// nomos gate, with a stand-in pct: the gate must replace itself with the
// program, passing the argv untouched (no shell sees the ;), stdin, stdout
// and the exit status through, and a clean environment.
func TestGateExecsTheProgram(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\n" +
		"printf 'PATH=%s SSH_ORIGINAL_COMMAND=%s LD_PRELOAD=%s\\n' \"$PATH\" \"${SSH_ORIGINAL_COMMAND-unset}\" \"${LD_PRELOAD-unset}\"\n" +
		"read -r line; printf '%s\\n' \"$line\"\nexit 7\n"
	if err := os.WriteFile(filepath.Join(dir, "pct"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(command string) (string, string, int) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "HOSTGATE_TEST_AS_GATE=1", "HOSTGATE_TEST_PATH="+dir,
			"HOSTGATE_TEST_RULES="+filepath.Join(dir, "absent.yaml"), "SSH_ORIGINAL_COMMAND="+command, "LD_PRELOAD=")
		cmd.Stdin = strings.NewReader("from stdin\n")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
	}
	stdout, stderr, code := run(`pct exec 101 -- sh -c 'echo a; reboot' `)
	want := "[exec]\n[101]\n[--]\n[sh]\n[-c]\n[echo a; reboot]\nPATH=" + dir + " SSH_ORIGINAL_COMMAND=unset LD_PRELOAD=unset\nfrom stdin\n"
	if stdout != want || code != 7 || stderr != "" {
		t.Errorf("stdout %q, stderr %q, exit %d; want %q, nothing and 7", stdout, stderr, code, want)
	}
	stdout, stderr, code = run("pct list; reboot")
	if stdout != "" || code != hostgate.ExitRefused || !strings.HasPrefix(stderr, "nomos gate: refused: ") {
		t.Errorf("refused command: stdout %q, stderr %q, exit %d", stdout, stderr, code)
	}
}
