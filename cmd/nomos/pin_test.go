package main

import (
	"crypto/ed25519"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/nomoshq/nomos/actuator"
	"github.com/nomoshq/nomos/internal/testenv"
)

// TestActuatorPin runs `nomos actuator -pin` against a labsim node: it
// shows the node's own fingerprint and the command that shows it on the
// node, pins only once the operator types yes, changes nothing when run
// again, and refuses, leaving the file as it was, when another key is
// pinned for the node.
func TestActuatorPin(t *testing.T) {
	t.Parallel()
	fleet := testenv.NewFleet(t)
	addr := fleet.Sim.Addr("strong")
	nodeKey := fleet.Sim.HostPublicKey("strong")
	wantLine := knownhosts.Line([]string{knownhosts.Normalize(addr)}, nodeKey) + "\n"
	dir := t.TempDir()

	pin := func(t *testing.T, stdin string, environ []string, args ...string) (string, error) {
		t.Helper()
		out := &syncBuffer{}
		env := &roleEnv{environ: environ, stdin: strings.NewReader(stdin), stdout: out, stderr: out, logger: testenv.Logger(t)}
		err := runActuator(testenv.Context(t), env, append([]string{"-pin", addr}, args...))
		return out.String(), err
	}
	shows := func(t *testing.T, out string) {
		t.Helper()
		for _, want := range []string{ssh.FingerprintSHA256(nodeKey), "ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub"} {
			if !strings.Contains(out, want) {
				t.Errorf("output does not show %q:\n%s", want, out)
			}
		}
	}

	t.Run("declined", func(t *testing.T) {
		file := filepath.Join(dir, "declined")
		out, err := pin(t, "no\n", nil, "-known-hosts", file)
		if !errors.Is(err, errNotConfirmed) {
			t.Errorf("answering no: %v, want errNotConfirmed", err)
		}
		shows(t, out)
		if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("answering no wrote %s (%v)", file, err)
		}
		// No answer at all (stdin closed) is no.
		if _, err := pin(t, "", nil, "-known-hosts", file); !errors.Is(err, errNotConfirmed) {
			t.Errorf("without an answer: %v, want errNotConfirmed", err)
		}
	})

	t.Run("a fresh host, then again", func(t *testing.T) {
		file := filepath.Join(dir, "fresh")
		out, err := pin(t, "yes\n", nil, "-known-hosts", file)
		if err != nil {
			t.Fatalf("pin: %v\n%s", err, out)
		}
		shows(t, out)
		if got := readText(t, file); got != wantLine {
			t.Errorf("known_hosts = %q, want %q", got, wantLine)
		}
		out, err = pin(t, "", nil, "-known-hosts", file)
		if err != nil || !strings.Contains(out, "pinned in "+file+" already; nothing to do") {
			t.Errorf("pinning again: %v\n%s", err, out)
		}
		if strings.Contains(out, "Type yes") {
			t.Errorf("pinning again asked to confirm:\n%s", out)
		}
		if got := readText(t, file); got != wantLine {
			t.Errorf("known_hosts after pinning again = %q, want %q", got, wantLine)
		}
	})

	t.Run("the config's file, with -yes", func(t *testing.T) {
		file := filepath.Join(dir, "from-config")
		config := writeFile(t, dir, "actuator.yaml", "actuator:\n  known_hosts_file: "+file+"\n")
		out, err := pin(t, "", nil, "-yes")
		if err == nil || !strings.Contains(err.Error(), "set actuator.known_hosts_file") {
			t.Errorf("without a config: %v, want it to ask for actuator.known_hosts_file\n%s", err, out)
		}
		outEnv := &syncBuffer{}
		env := &roleEnv{configPath: config, stdin: strings.NewReader(""), stdout: outEnv, stderr: outEnv, logger: testenv.Logger(t)}
		if err := runActuator(testenv.Context(t), env, []string{"-pin", addr, "-yes"}); err != nil {
			t.Fatalf("pin -yes: %v\n%s", err, outEnv.String())
		}
		shows(t, outEnv.String())
		if got := readText(t, file); got != wantLine {
			t.Errorf("known_hosts = %q, want %q", got, wantLine)
		}
	})

	t.Run("a changed key", func(t *testing.T) {
		pub, _, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		other, err := ssh.NewPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		old := knownhosts.Line([]string{knownhosts.Normalize(addr)}, other) + "\n"
		file := writeFile(t, dir, "changed", old)
		out, err := pin(t, "yes\n", nil, "-known-hosts", file, "-yes")
		if !errors.Is(err, actuator.ErrHostKeyChanged) || !strings.Contains(err.Error(), "someone is in the middle") {
			t.Errorf("a changed key: %v, want ErrHostKeyChanged\n%s", err, out)
		}
		if got := readText(t, file); got != old {
			t.Errorf("known_hosts was changed to %q", got)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		for _, args := range [][]string{{"-yes"}, {"-known-hosts", "x"}, {"extra"}} {
			env := &roleEnv{stdin: strings.NewReader(""), stdout: &syncBuffer{}, stderr: &syncBuffer{}, logger: testenv.Logger(t)}
			if err := runActuator(testenv.Context(t), env, args); err == nil {
				t.Errorf("nomos actuator %s ran, want it refused", strings.Join(args, " "))
			}
		}
		env := &roleEnv{stdin: strings.NewReader("yes\n"), stdout: &syncBuffer{}, stderr: &syncBuffer{}, logger: testenv.Logger(t)}
		if err := runActuator(testenv.Context(t), env, []string{"-pin", "root@" + addr, "-known-hosts", filepath.Join(dir, "bad")}); err == nil || !strings.Contains(err.Error(), "want a host name or address") {
			t.Errorf("-pin root@host: %v, want it refused", err)
		}
	})
}

func readText(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
