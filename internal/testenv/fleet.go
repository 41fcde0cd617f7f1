package testenv

import (
	"context"
	"crypto/ed25519"
	"encoding/pem"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/nomoshq/nomos/hostgate"
	"github.com/nomoshq/nomos/internal/devstack"
	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/seeds"
)

// Fleet is the demo homelab served by labsim for one test, with the seed
// rewritten so each host's ssh address is the port labsim really listens
// on, and the client key and known_hosts an actuator needs.
type Fleet struct {
	Seed           *fleetseed.Seed
	Sim            *labsim.Sim
	SSHKeyFile     string
	SSHSigner      ssh.Signer
	KnownHostsFile string
	LogPath        string
}

// GateFromEnv is the gate every labsim in the tests enforces by default:
// none, unless NOMOS_TEST_GATE is set, so that the whole suite can run as
// against nodes that force nomos gate. Any value turns the gate on with
// host_shell and privileged_containers, which tests of the run action and
// of privileged containers need; "strict" turns it on with neither.
func GateFromEnv() *hostgate.Rules {
	switch os.Getenv("NOMOS_TEST_GATE") {
	case "":
		return nil
	case "strict":
		return &hostgate.Rules{}
	}
	return &hostgate.Rules{HostShell: true, PrivilegedContainers: true}
}

// FleetOption changes how NewFleet runs labsim.
type FleetOption func(*labsim.Config)

// WithGate makes every host enforce nomos gate with these rules, as a real
// node whose authorized_keys forces it.
func WithGate(rules hostgate.Rules) FleetOption {
	return func(c *labsim.Config) { c.Gate = &rules }
}

// NewFleet starts labsim with the demo seed on free loopback ports. Apply
// f.Seed to a store so executions address the same ports.
func NewFleet(t testing.TB, opts ...FleetOption) *Fleet {
	t.Helper()
	fsys := fstest.MapFS{}
	names, err := fs.Glob(seeds.FS, "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		data, err := fs.ReadFile(seeds.FS, n)
		if err != nil {
			t.Fatal(err)
		}
		// One pass, so a port just written in is never read again as the
		// next one to replace (127.0.0.1:22025 starts like :2202).
		ports := strings.NewReplacer(
			"127.0.0.1:2201", fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
			"127.0.0.1:2202", fmt.Sprintf("127.0.0.1:%d", FreePort(t)))
		fsys[n] = &fstest.MapFile{Data: []byte(ports.Replace(string(data)))}
	}
	seed, err := fleetseed.Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return StartFleet(t, seed, opts...)
}

// StartFleet starts labsim serving seed, such as a fleet from
// internal/fleetgen. A host without an ssh address gets a free loopback
// port, written into the seed; apply the seed to a store afterwards.
func StartFleet(t testing.TB, seed *fleetseed.Seed, opts ...FleetOption) *Fleet {
	t.Helper()
	dir := t.TempDir()
	for i := range seed.Hosts {
		if seed.Hosts[i].SSH == "" {
			seed.Hosts[i].SSH = fmt.Sprintf("127.0.0.1:%d", FreePort(t))
		}
	}
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "nomos test actuator")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "actuator_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	sshPub, _ := ssh.NewPublicKey(pub)
	authorized := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authorized, ssh.MarshalAuthorizedKey(sshPub), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &Fleet{Seed: seed, SSHKeyFile: keyFile, SSHSigner: signer, LogPath: filepath.Join(dir, "labsim", "commands.jsonl")}
	cfg := devstack.LabsimConfig(seed, filepath.Join(dir, "labsim"), authorized, f.LogPath, Logger(t))
	cfg.Gate = GateFromEnv()
	for _, o := range opts {
		o(&cfg)
	}
	f.Sim, err = labsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Not Context(t): labsim serves until the test ends, however long
	// (the fault suite runs for an hour), and Close stops it.
	ctx, cancel := context.WithCancel(context.Background())
	if err := f.Sim.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Sim.Close(); err != nil {
			t.Errorf("close labsim: %v", err)
		}
		cancel()
	})
	f.KnownHostsFile = filepath.Join(dir, "known_hosts")
	if err := labsim.WriteKnownHosts(f.KnownHostsFile, f.Sim.KnownHostsLines()); err != nil {
		t.Fatal(err)
	}
	return f
}

// Commands returns the raw commands labsim received, in order.
func (f *Fleet) Commands(t testing.TB) []string {
	t.Helper()
	entries, err := labsim.ReadLog(f.LogPath)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Command
	}
	return out
}

// Admin runs command on a host of the fleet over SSH, as an admin at the
// node's console or in the Proxmox UI would, outside Nomos, and returns
// its output. The test fails if it does not exit 0.
func (f *Fleet) Admin(t testing.TB, host, command string) string {
	t.Helper()
	hostKeys, err := knownhosts.New(f.KnownHostsFile)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ssh.Dial("tcp", f.Sim.Addr(host), &ssh.ClientConfig{
		User: labsim.AdminUser, Auth: []ssh.AuthMethod{ssh.PublicKeys(f.SSHSigner)}, HostKeyCallback: hostKeys, Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("admin ssh %s: %v", host, err)
	}
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		t.Fatalf("admin ssh %s: %v", host, err)
	}
	defer sess.Close()
	out, err := sess.CombinedOutput(command)
	if err != nil {
		t.Fatalf("admin on %s: %s: %v\n%s", host, command, err, out)
	}
	return string(out)
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	// Below the kernel's ephemeral range (32768 and up on Linux), so no
	// outgoing connection of this or another test process takes the port
	// between now and labsim's listen; from a random start, so parallel
	// test processes rarely try the same one.
	const lo, hi = 20000, 32000
	start := lo + rand.IntN(hi-lo)
	for i := range hi - lo {
		port := lo + (start-lo+i)%(hi-lo)
		if handedOut[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		handedOut[port] = true
		return port
	}
	t.Fatal("no free port below the ephemeral range")
	return 0
}

// handedOut are the ports FreePort gave this process, never given twice.
var (
	portMu    sync.Mutex
	handedOut = map[int]bool{}
)
