package labsim

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	gossh "golang.org/x/crypto/ssh"
)

// newOffline builds a simulator that is never started, for driving the
// interpreter directly.
func newOffline(t testing.TB) *Sim {
	t.Helper()
	dir := t.TempDir()
	keys := filepath.Join(dir, "authorized_keys")
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keys, gossh.MarshalAuthorizedKey(signer.PublicKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	sim, err := New(Config{Hosts: testFleet(), StateDir: filepath.Join(dir, "state"), AuthorizedKeysFile: keys, Clock: func() time.Time { return epoch }})
	if err != nil {
		t.Fatal(err)
	}
	// Close waits for the state's last write, before TempDir goes.
	t.Cleanup(func() {
		if err := sim.Close(); err != nil {
			t.Errorf("close labsim: %v", err)
		}
	})
	return sim
}

var scriptSeeds = []string{
	"pct list", "pct status 101", "pct stop 101; pct start 101", "pct create 110 " + debian + " --hostname x --net0 name=eth0,ip=dhcp",
	"pct snapshot 101 s1 && pct rollback 101 s1 --start", "pct listsnapshot 101", "pct destroy 102", "pct config 101", "pct set 101 --cores 3",
	"pvesh get /cluster/nextid", "pveam list local", "labsim fault dns_dead 101", "labsim fault clear",
	"pct exec 101 -- systemctl status jellyfin", "pct exec 101 -- apt-get install -y nginx", "pct exec 101 -- sh -c 'echo nameserver 1.1.1.1 > /etc/resolv.conf'",
	"pct exec 101 -- curl -fsS -o /dev/null -w '%{http_code}' http://localhost:8096/health", "pct exec 101 -- ping -c 2 web",
	"pct exec 101 -- getent hosts deb.debian.org", "pct exec 101 -- df -h", "pct exec 101 -- free -m", "pct exec 101 -- ss -tlnp",
	"pct exec 101 -- journalctl -u jellyfin -n 5", "pct exec 101 -- dpkg -l", "pct exec 101 -- dig jellyfin", "pct exec 101 -- nslookup web",
	"printf '%s %d %q\\n' a 1 b", "echo -e 'a\\tb' | grep -c a | wc -l", "set -eo pipefail; false | true", "head -n 2 /etc/os-release",
	"pct exec 101 -- bash -c 'tee -a /tmp/x < /etc/hostname'", "date +%F", "uptime", "df", "free -h",
}

// FuzzRunScript feeds arbitrary scripts to the interpreter: whatever a
// client sends, labsim must answer without panicking.
func FuzzRunScript(f *testing.F) {
	for _, s := range scriptSeeds {
		f.Add(s)
	}
	sim := newOffline(f)
	f.Fuzz(func(t *testing.T, src string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		var out, errOut bytes.Buffer
		env := &shellEnv{sim: sim, host: "pve1"}
		runScript(ctx, env, "bash", src, loginProc(bytes.NewReader(nil), &out, &errOut), nil, nil)
	})
}

func TestSeedScriptsRun(t *testing.T) {
	t.Parallel()
	sim := newOffline(t)
	for _, src := range scriptSeeds {
		var out, errOut bytes.Buffer
		env := &shellEnv{sim: sim, host: "pve1"}
		code := runScript(t.Context(), env, "bash", src, loginProc(nil, &out, &errOut), nil, nil)
		if code == 127 || code == exitKilled {
			t.Errorf("%q: exit %d\n%s", src, code, errOut.String())
		}
	}
}

// TestRealShell runs constructs the old hand-written shell refused, against
// the simulated commands: labsim's shell is the interpreter the policy's
// parser belongs to.
func TestRealShell(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		cmd  string
		want result
	}{
		{`up() { pct status "$1" | grep -q running; }; up 101 && echo yes; up 102 || echo no`, result{Stdout: "yes\nno\n"}},
		{`for id in 101 102; do echo "$id $(pct status $id)"; done`, result{Stdout: "101 status: running\n102 status: stopped\n"}},
		{`n=$(pct list | grep -c running); echo "$((n + 1))"`, result{Stdout: "2\n"}},
		{`grep -c jellyfin <<< "$(pct list)"`, result{Stdout: "1\n"}},
		{"while read -r id rest; do [ \"$id\" = VMID ] || echo \"ct $id\"; done <<EOF\n$(pct list)\nEOF", result{Stdout: "ct 101\nct 102\n"}},
		{`case $(hostname) in pve*) echo node;; *) echo other;; esac`, result{Stdout: "node\n"}},
		{`x=101; pct exec "$x" -- bash -c 'f() { systemctl is-active "$1"; }; f jellyfin'`, result{Stdout: "active\n"}},
		{`pct exec 101 -- sh -c 'for u in jellyfin nosuch; do systemctl is-active -q $u && echo "$u up" || echo "$u down"; done'`, result{Stdout: "jellyfin up\nnosuch down\n"}},
		{`export GREETING=hi; bash -c 'echo $GREETING'`, result{Stdout: "hi\n"}},
		{`bash -c 'echo "$1-$2"' zero a b`, result{Stdout: "a-b\n"}},
		{`cd /tmp && echo data > f && cat /tmp/f && pwd`, result{Stdout: "data\n/tmp\n"}},
		{`echo one > /tmp/g; echo two >> /tmp/g; echo /tmp/*`, result{Stdout: "/tmp/f /tmp/g\n"}},
		{`pct stop 101 && pct status 101 && pct start 101`, result{Stdout: "status: stopped\n"}},
		{`[ -e /etc/hostname ] && [ ! -e /etc/nope ] && echo ok`, result{Stdout: "ok\n"}},
		{`cat <(pct list)`, result{Stderr: "labsim: process substitution is not simulated\n", Exit: 2}},
		{`sleep 0.01 & echo after`, result{Stdout: "after\n"}},
		{`command -v pct cd nosuch; type systemctl`, result{Stdout: "/usr/sbin/pct\ncd\n", Exit: 1}},
		{`echo 'up() { echo "sourced $1"; }' > lib.sh && . lib.sh && up 101`, result{Stdout: "sourced 101\n"}},
		{`exec >/tmp/kept; echo kept`, result{}},
		{`cat /tmp/kept; echo "$$ ${PPID} $(( $$ > 0 ))"`, result{Stdout: "kept\n4242 4242 1\n"}},
		{`printf '%999999999d' 1`, result{Stderr: "bash: printf: %999999999d: invalid format\n", Exit: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			diff(t, tt.cmd, tt.want, b.run(t, "pve1", tt.cmd))
		})
	}
	entries, err := ReadLog(b.cfg.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(tests) {
		t.Errorf("the command log has %d entries for %d commands: one per SSH command, however many programs a script runs", len(entries), len(tests))
	}
}

// TestShellStaysInSimulation: nothing a script does reaches the machine
// labsim runs on. Files, programs, the environment and the working
// directory are all the simulated host's.
func TestShellStaysInSimulation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	real := filepath.Join(t.TempDir(), "real")
	if err := os.WriteFile(real, []byte("on the host\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	created := filepath.Join(filepath.Dir(real), "created")

	diff(t, "the node's hostname file", result{Stdout: "pve1\n"}, b.run(t, "pve1", "cat /etc/hostname"))
	diff(t, "a container's, through $(<file)", result{Stdout: "jellyfin\n"}, b.run(t, "pve1", `pct exec 101 -- bash -c 'echo "$(</etc/hostname)"'`))
	diff(t, "a host file through cat", result{Stderr: "cat: " + real + ": No such file or directory\n", Exit: 1}, b.run(t, "pve1", "cat "+real))
	diff(t, "a host file through a redirection", result{Stderr: "bash: " + real + ": No such file or directory\n", Exit: 1}, b.run(t, "pve1", "read -r line < "+real))
	diff(t, "/bin/rm is the simulated rm", result{}, b.run(t, "pve1", "/bin/rm -f "+real+" && /usr/bin/env rm -f "+real))
	diff(t, "a redirection creates a simulated file", result{Stdout: "x\n"}, b.run(t, "pve1", "echo x > "+created+" && cat "+created))
	diff(t, "a program not simulated", result{Stderr: "bash: ls: command not found\n", Exit: 127}, b.run(t, "pve1", "ls /"))
	diff(t, "test -e sees simulated files only", result{Exit: 1}, b.run(t, "pve1", "test -e "+real))
	if data, err := os.ReadFile(real); err != nil || string(data) != "on the host\n" {
		t.Errorf("the host file after rm: %q, %v", data, err)
	}
	if _, err := os.Stat(created); err == nil {
		t.Errorf("a redirection created %s on the host", created)
	}

	env := b.must(t, "pve1", "pwd; env")
	want := "/root\n" + strings.Join(baseEnviron, "\n") + "\n"
	if diffEnv := cmp.Diff(strings.Split(want, "\n"), strings.Split(env, "\n"), cmpopts.SortSlices(func(a, b string) bool { return a < b }),
		cmpopts.IgnoreSliceElements(func(s string) bool { return strings.HasPrefix(s, "PWD=") || strings.HasPrefix(s, "OLDPWD=") })); diffEnv != "" {
		t.Errorf("pwd and env: only the simulated login's (-want +got):\n%s", diffEnv)
	}
}
