package labsim

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

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
		runScript(ctx, env, "bash", src, stdio{in: bytes.NewReader(nil), out: &out, err: &errOut})
	})
}

func TestSeedScriptsRun(t *testing.T) {
	t.Parallel()
	sim := newOffline(t)
	for _, src := range scriptSeeds {
		var out, errOut bytes.Buffer
		env := &shellEnv{sim: sim, host: "pve1"}
		code := runScript(t.Context(), env, "bash", src, stdio{out: &out, err: &errOut})
		if code == 127 || code == exitKilled {
			t.Errorf("%q: exit %d\n%s", src, code, errOut.String())
		}
	}
}
