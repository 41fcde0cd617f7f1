package labsim

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testClock is a clock tests move by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var epoch = time.Date(2024, 11, 30, 10, 0, 0, 0, time.UTC)

// testFleet is two nodes of one cluster, lab: pve1 with a running Jellyfin
// and a stopped Pi-hole, pve2 with a DHCP web server.
func testFleet() []Host {
	return []Host{
		{Name: "pve1", Cluster: "lab", Containers: []Container{
			{VMID: 101, Hostname: "jellyfin", IP: "10.0.0.21/24", Gateway: "10.0.0.1", Cores: 4, MemoryMB: 4096, DiskGB: 32, Status: "running",
				Services: []Service{{Name: "jellyfin", Port: 8096, HealthPath: "/health", Active: true, Enabled: true}}},
			{VMID: 102, Hostname: "pihole", IP: "10.0.0.22/24", Gateway: "10.0.0.1", Status: "stopped",
				Services: []Service{{Name: "pihole-FTL", Port: 80, Active: true, Enabled: true}}},
		}},
		{Name: "pve2", Cluster: "lab", Containers: []Container{
			{VMID: 201, Hostname: "web", IP: "dhcp", Status: "running",
				Services: []Service{{Name: "nginx", Port: 80, Active: true, Enabled: true}}},
		}},
	}
}

// bundle is one running simulator and a client that may log in to it.
type bundle struct {
	sim        *Sim
	cfg        Config
	clock      *testClock
	key        gossh.Signer
	knownHosts string
}

func newKey(t *testing.T) gossh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return setupFleet(t, testFleet())
}

// setupFleet starts a simulator of hosts, its config changed by tune.
func setupFleet(t *testing.T, hosts []Host, tune ...func(*Config)) *bundle {
	t.Helper()
	dir := t.TempDir()
	key := newKey(t)
	authKeys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authKeys, gossh.MarshalAuthorizedKey(key.PublicKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	clock := &testClock{t: epoch}
	b := &bundle{
		cfg: Config{
			Hosts:              hosts,
			StateDir:           filepath.Join(dir, "state"),
			AuthorizedKeysFile: authKeys,
			LogPath:            filepath.Join(dir, "commands.jsonl"),
			Clock:              clock.Now,
		},
		clock:      clock,
		key:        key,
		knownHosts: filepath.Join(dir, "known_hosts"),
	}
	for _, f := range tune {
		f(&b.cfg)
	}
	b.start(t)
	return b
}

// start runs a simulator over b's state dir and pins its host keys.
func (b *bundle) start(t *testing.T) {
	t.Helper()
	sim, err := New(b.cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := sim.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := sim.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	b.sim = sim
	if err := WriteKnownHosts(b.knownHosts, sim.KnownHostsLines()); err != nil {
		t.Fatal(err)
	}
}

func (b *bundle) restart(t *testing.T) {
	t.Helper()
	if err := b.sim.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	b.start(t)
}

func (b *bundle) clientConfig(t *testing.T, key gossh.Signer) *gossh.ClientConfig {
	t.Helper()
	cb, err := knownhosts.New(b.knownHosts)
	if err != nil {
		t.Fatal(err)
	}
	return &gossh.ClientConfig{
		User:            "root",
		Auth:            []gossh.AuthMethod{gossh.PublicKeys(key)},
		HostKeyCallback: cb,
		Timeout:         30 * time.Second,
	}
}

func (b *bundle) dial(t *testing.T, host string) *gossh.Client {
	t.Helper()
	c, err := gossh.Dial("tcp", b.sim.Addr(host), b.clientConfig(t, b.key))
	if err != nil {
		t.Fatalf("dial %s: %v", host, err)
	}
	return c
}

type result struct {
	Stdout string
	Stderr string
	Exit   int
}

// exec runs cmd on host and returns what came back; err is set only when
// the session ended without an exit status.
func (b *bundle) exec(t *testing.T, host, cmd string) (result, error) {
	t.Helper()
	client := b.dial(t, host)
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		return result{}, err
	}
	defer sess.Close()
	var stdout, stderr bytes.Buffer
	sess.Stdout, sess.Stderr = &stdout, &stderr
	err = sess.Run(cmd)
	r := result{Stdout: stdout.String(), Stderr: stderr.String()}
	var exitErr *gossh.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		r.Exit = exitErr.ExitStatus()
	default:
		return r, err
	}
	return r, nil
}

func (b *bundle) run(t *testing.T, host, cmd string) result {
	t.Helper()
	r, err := b.exec(t, host, cmd)
	if err != nil {
		t.Fatalf("%s: %q: %v", host, cmd, err)
	}
	return r
}

// must runs cmd and fails the test unless it exits 0.
func (b *bundle) must(t *testing.T, host, cmd string) string {
	t.Helper()
	r := b.run(t, host, cmd)
	if r.Exit != 0 {
		t.Fatalf("%s: %q exited %d\nstdout: %s\nstderr: %s", host, cmd, r.Exit, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

func diff(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}

func contains(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s: want %q in:\n%s", what, w, got)
		}
	}
}

func TestPctListStatusStartStopPersist(t *testing.T) {
	t.Parallel()
	b := setup(t)

	diff(t, "pct list", result{Stdout: "" +
		"VMID       Status     Lock         Name                \n" +
		"101        running                 jellyfin            \n" +
		"102        stopped                 pihole              \n"}, b.run(t, "pve1", "pct list"))
	diff(t, "status", result{Stdout: "status: running\n"}, b.run(t, "pve1", "pct status 101"))

	diff(t, "stop", result{}, b.run(t, "pve1", "pct stop 101"))
	diff(t, "stop again", result{Stderr: "CT 101 not running\n", Exit: 255}, b.run(t, "pve1", "pct stop 101"))
	diff(t, "status after stop", result{Stdout: "status: stopped\n"}, b.run(t, "pve1", "pct status 101"))
	diff(t, "start", result{}, b.run(t, "pve1", "pct start 102"))
	diff(t, "start again", result{Stderr: "CT 102 already running\n", Exit: 255}, b.run(t, "pve1", "pct start 102"))
	diff(t, "unknown vmid", result{Stderr: "Configuration file 'nodes/pve1/lxc/999.conf' does not exist\n", Exit: 2}, b.run(t, "pve1", "pct start 999"))
	diff(t, "container on the other node", result{Stderr: "Configuration file 'nodes/pve1/lxc/201.conf' does not exist\n", Exit: 2}, b.run(t, "pve1", "pct status 201"))
	b.must(t, "pve1", "pct stop 102 && pct destroy 102")

	oldKeys := map[string][]byte{}
	for _, h := range []string{"pve1", "pve2"} {
		oldKeys[h] = b.sim.HostPublicKey(h).Marshal()
	}
	b.restart(t)

	for _, h := range []string{"pve1", "pve2"} {
		diff(t, "host key of "+h+" after restart", oldKeys[h], b.sim.HostPublicKey(h).Marshal())
	}
	diff(t, "pct list after restart", result{Stdout: "" +
		"VMID       Status     Lock         Name                \n" +
		"101        stopped                 jellyfin            \n"}, b.run(t, "pve1", "pct list"))
}

func TestHostKeysArePinned(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first, err := New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "host key reloaded from state dir", b.sim.HostPublicKey("pve1").Marshal(), first.HostPublicKey("pve1").Marshal())
	if bytes.Equal(b.sim.HostPublicKey("pve1").Marshal(), b.sim.HostPublicKey("pve2").Marshal()) {
		t.Error("pve1 and pve2 share a host key")
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	// Pin pve2's key at pve1's address: the client must refuse pve1.
	wrong := filepath.Join(t.TempDir(), "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(b.sim.Addr("pve1"))}, b.sim.HostPublicKey("pve2"))
	if err := WriteKnownHosts(wrong, []string{line}); err != nil {
		t.Fatal(err)
	}
	cb, err := knownhosts.New(wrong)
	if err != nil {
		t.Fatal(err)
	}
	cfg := b.clientConfig(t, b.key)
	cfg.HostKeyCallback = cb
	_, err = gossh.Dial("tcp", b.sim.Addr("pve1"), cfg)
	var keyErr *knownhosts.KeyError
	if !errors.As(err, &keyErr) || len(keyErr.Want) == 0 {
		t.Fatalf("dial with the wrong pinned key: got %v, want a knownhosts.KeyError naming the pinned key", err)
	}
}

func TestUnknownClientKeyRejected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	stranger := newKey(t)
	_, err := gossh.Dial("tcp", b.sim.Addr("pve1"), b.clientConfig(t, stranger))
	if err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Fatalf("dial with a key not in authorized_keys: got %v, want an authentication failure", err)
	}
	// Keys are read at every login, so adding one needs no restart.
	f, err := os.OpenFile(b.cfg.AuthorizedKeysFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(gossh.MarshalAuthorizedKey(stranger.PublicKey())); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := gossh.Dial("tcp", b.sim.Addr("pve1"), b.clientConfig(t, stranger))
	if err != nil {
		t.Fatalf("dial after authorizing the key: %v", err)
	}
	c.Close()
}

func TestInteractiveSessionRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := b.dial(t, "pve1")
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	var stderr bytes.Buffer
	sess.Stderr = &stderr
	if err := sess.Shell(); err != nil {
		t.Fatal(err)
	}
	err = sess.Wait()
	var exitErr *gossh.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 1 {
		t.Fatalf("shell session: got %v, want exit status 1", err)
	}
	contains(t, "stderr", stderr.String(), "interactive shells are not supported")
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(keys, gossh.MarshalAuthorizedKey(newKey(t).PublicKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	good := func() Config {
		return Config{Hosts: testFleet(), StateDir: filepath.Join(dir, "s"), AuthorizedKeysFile: keys}
	}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no state dir", func(c *Config) { c.StateDir = "" }, "state dir is required"},
		{"no authorized keys", func(c *Config) { c.AuthorizedKeysFile = "" }, "authorized keys file is required"},
		{"missing authorized keys", func(c *Config) { c.AuthorizedKeysFile = filepath.Join(dir, "nope") }, "read authorized keys"},
		{"no hosts", func(c *Config) { c.Hosts = nil }, "at least one host"},
		{"bad host name", func(c *Config) { c.Hosts[0].Name = "../etc" }, "must be letters"},
		{"duplicate host", func(c *Config) { c.Hosts[1].Name = "pve1" }, "name used twice"},
		{"duplicate vmid across hosts", func(c *Config) { c.Hosts[1].Containers[0].VMID = 101 }, "vmid already used on host pve1 of cluster lab"},
		{"low vmid", func(c *Config) { c.Hosts[0].Containers[0].VMID = 99 }, "vmid must be between"},
		{"bad ip", func(c *Config) { c.Hosts[0].Containers[0].IP = "10.0.0.5" }, "want dhcp or an address with prefix length"},
		{"bad gateway", func(c *Config) { c.Hosts[0].Containers[0].Gateway = "router" }, "gateway \"router\" is not an IP address"},
		{"bad status", func(c *Config) { c.Hosts[0].Containers[0].Status = "paused" }, "want running or stopped"},
		{"bad hostname", func(c *Config) { c.Hosts[0].Containers[0].Hostname = "a_b" }, "not a valid DNS name"},
		{"unnamed service", func(c *Config) { c.Hosts[0].Containers[0].Services = []Service{{Port: 80}} }, "name or unit is required"},
		{"port clash", func(c *Config) {
			c.Hosts[0].Containers[0].Services = append(c.Hosts[0].Containers[0].Services, Service{Name: "other", Port: 8096})
		}, "port 8096 used by another service"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := good()
			tt.mutate(&cfg)
			_, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
