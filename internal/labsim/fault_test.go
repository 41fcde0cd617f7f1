package labsim

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

func TestDNSDeadAndRepair(t *testing.T) {
	t.Parallel()
	b := setup(t)
	exec := func(cmd string) result { return b.run(t, "pve1", "pct exec 101 -- "+cmd) }

	diff(t, "inject over ssh", result{Stdout: "injected dns_dead 101\n"}, b.run(t, "pve2", "labsim fault dns_dead 101"))

	r := exec("apt-get install -y nginx")
	diff(t, "apt exit", 100, r.Exit)
	contains(t, "apt stdout", r.Stdout, "Err:1 http://deb.debian.org/debian bookworm/main amd64 nginx-common all 1.22.1-9+deb12u1\n  Temporary failure resolving 'deb.debian.org'\n")
	contains(t, "apt stderr", r.Stderr,
		"E: Failed to fetch http://deb.debian.org/debian/pool/main/n/nginx/nginx_1.22.1-9+deb12u1_amd64.deb  Temporary failure resolving 'deb.debian.org'\n",
		"E: Unable to fetch some archives, maybe run apt-get update or try with --fix-missing?\n")
	r = exec("apt-get update")
	diff(t, "apt-get update exit", 100, r.Exit)
	contains(t, "apt-get update", r.Stdout, "Temporary failure resolving 'deb.debian.org'")
	diff(t, "getent", result{Exit: 2}, exec("getent hosts deb.debian.org"))
	diff(t, "ping", result{Stderr: "ping: deb.debian.org: Temporary failure in name resolution\n", Exit: 2}, exec("ping -c 1 deb.debian.org"))
	diff(t, "host", result{Stdout: ";; connection timed out; no servers could be reached\n", Exit: 1}, exec("host deb.debian.org"))
	diff(t, "curl", result{Stderr: "curl: (6) Could not resolve host: deb.debian.org\n", Exit: 6}, exec("curl -fsS https://deb.debian.org/"))
	diff(t, "other containers unaffected", result{Stdout: "203.0.113.72    deb.debian.org\n"}, b.run(t, "pve2", "pct exec 201 -- getent hosts deb.debian.org"))
	diff(t, "an installed package needs no network", 0, exec("apt-get install -y jellyfin").Exit)

	// Another private resolver is just as dead; a public one heals.
	exec("sh -c 'echo nameserver 10.0.0.53 > /etc/resolv.conf'")
	diff(t, "getent via another private resolver", 2, exec("getent hosts deb.debian.org").Exit)
	diff(t, "repair", result{}, exec("sh -c 'echo nameserver 1.1.1.1 > /etc/resolv.conf'"))
	diff(t, "resolv.conf after repair", result{Stdout: "nameserver 1.1.1.1\n"}, exec("cat /etc/resolv.conf"))
	diff(t, "getent after repair", result{Stdout: "203.0.113.72    deb.debian.org\n"}, exec("getent hosts deb.debian.org"))
	diff(t, "install after repair", 0, exec("apt-get install -y nginx").Exit)
	diff(t, "nginx answers", result{Stdout: "200"}, exec("curl -s -o /dev/null -w %{http_code} http://localhost/"))

	diff(t, "list", result{Stdout: "dns_dead 101\n"}, b.run(t, "pve1", "labsim fault list"))
	diff(t, "clear", result{Stdout: "cleared 1 fault(s)\n"}, b.run(t, "pve1", "labsim fault clear dns_dead"))
	diff(t, "list after clear", result{}, b.run(t, "pve1", "labsim fault list"))
}

// TestDNSSelfHealScript runs the gate an actuator puts before apt: probe
// DNS, fall back to a public resolver, then install under set -e.
func TestDNSSelfHealScript(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.sim.Inject(Fault{Kind: FaultDNSDead, Target: "*"}); err != nil {
		t.Fatal(err)
	}
	const script = `pct exec 201 -- bash -c 'set -e
getent hosts deb.debian.org >/dev/null || printf "nameserver %s\n" 1.1.1.1 8.8.8.8 > /etc/resolv.conf
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
systemctl is-active redis-server'`
	diff(t, "self-heal script", result{Stdout: "Hit:1 http://deb.debian.org/debian bookworm InRelease\n" +
		"Hit:2 http://deb.debian.org/debian bookworm-updates InRelease\n" +
		"Hit:3 http://security.debian.org bookworm-security InRelease\n" +
		"Reading package lists...\nactive\n"}, b.run(t, "pve2", script))
	diff(t, "resolv.conf", result{Stdout: "nameserver 1.1.1.1\nnameserver 8.8.8.8\n"}, b.run(t, "pve2", "pct exec 201 -- cat /etc/resolv.conf"))

	// With the whole network down no resolver helps.
	if err := b.sim.Inject(Fault{Kind: FaultNetDown, Target: "201"}); err != nil {
		t.Fatal(err)
	}
	diff(t, "getent with the network down", 2, b.run(t, "pve2", "pct exec 201 -- getent hosts deb.debian.org").Exit)
	r := b.run(t, "pve2", "pct exec 201 -- apt-get install -y caddy")
	diff(t, "apt with the network down", 100, r.Exit)
	contains(t, "apt with the network down", r.Stderr, "Temporary failure resolving 'deb.debian.org'")
	diff(t, "neighbour cannot reach it", 7, b.run(t, "pve1", "pct exec 101 -- curl -s http://10.0.0.100/").Exit)
}

func TestAptFail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.sim.Inject(Fault{Kind: FaultAptFail, Target: "101"}); err != nil {
		t.Fatal(err)
	}
	r := b.run(t, "pve1", "pct exec 101 -- apt-get install -y redis-server")
	diff(t, "exit", 100, r.Exit)
	contains(t, "stderr", r.Stderr,
		"dpkg: error processing package redis-server (--configure):\n installed redis-server package post-installation script subprocess returned error exit status 1\n",
		"E: Sub-process /usr/bin/dpkg returned an error code (1)\n")
	contains(t, "stdout", r.Stdout, "Errors were encountered while processing:\n redis-server\n")
	diff(t, "no unit left behind", 4, b.run(t, "pve1", "pct exec 101 -- systemctl status redis-server").Exit)
	diff(t, "other containers install fine", 0, b.run(t, "pve2", "pct exec 201 -- apt-get install -y redis-server").Exit)

	n, err := b.sim.Clear(FaultAptFail, "101")
	if err != nil || n != 1 {
		t.Fatalf("Clear: %d, %v; want 1, nil", n, err)
	}
	diff(t, "install after clear", 0, b.run(t, "pve1", "pct exec 101 -- apt-get install -y redis-server").Exit)
}

// waitForLog polls the command log until ok accepts it; ctx bounds the wait.
func waitForLog(t *testing.T, ctx context.Context, path string, ok func([]LogEntry) bool) {
	t.Helper()
	for {
		entries, err := ReadLog(path)
		if err != nil {
			t.Fatal(err)
		}
		if ok(entries) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("log never matched (%v); log: %+v", ctx.Err(), entries)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestHang(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.sim.Inject(Fault{Kind: FaultHang, Target: "101", Match: "systemctl restart"}); err != nil {
		t.Fatal(err)
	}
	const cmd = "pct exec 101 -- systemctl restart jellyfin"
	pidBefore := mainPID(t, b.must(t, "pve1", "pct exec 101 -- systemctl status jellyfin"))

	for _, tc := range []struct {
		name   string
		cancel func(*gossh.Client, *gossh.Session)
		check  func(t *testing.T, err error)
	}{
		{"client closes the session", func(_ *gossh.Client, s *gossh.Session) { s.Close() }, nil},
		{"client closes the connection", func(c *gossh.Client, _ *gossh.Session) { c.Close() }, nil},
		{"client sends a signal", func(_ *gossh.Client, s *gossh.Session) { _ = s.Signal(gossh.SIGTERM) }, func(t *testing.T, err error) {
			var exitErr *gossh.ExitError
			if !errors.As(err, &exitErr) || exitErr.Signal() != "TERM" {
				t.Errorf("after SIGTERM: got %v, want an exit by signal TERM", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := b.dial(t, "pve1")
			defer client.Close()
			sess, err := client.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			if err := sess.Start(cmd); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- sess.Wait() }()

			// The timeout only bounds how long we give the command to
			// (wrongly) finish before cancelling it.
			ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
			defer cancel()
			select {
			case err := <-done:
				t.Fatalf("hung command finished by itself: %v", err)
			case <-ctx.Done():
			}
			tc.cancel(client, sess)
			err = <-done
			if err == nil {
				t.Fatal("cancelled command reported success")
			}
			if tc.check != nil {
				tc.check(t, err)
			}
		})
	}

	// Each cancelled command is logged with exit -1 once its session is gone.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	waitForLog(t, ctx, b.cfg.LogPath, func(entries []LogEntry) bool {
		killed := 0
		for _, e := range entries {
			if e.Command == cmd && e.Exit == exitKilled && e.VMID == 101 {
				killed++
			}
		}
		return killed == 3
	})
	diff(t, "restart never ran", pidBefore, mainPID(t, b.must(t, "pve1", "pct exec 101 -- systemctl status jellyfin")))
	diff(t, "other containers do not hang", result{}, b.run(t, "pve2", "pct exec 201 -- systemctl restart nginx"))
}

func TestDrop(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// A session already running on the host is cut too.
	if err := b.sim.Inject(Fault{Kind: FaultHang, Target: "*", Match: "sleepy"}); err != nil {
		t.Fatal(err)
	}
	client := b.dial(t, "pve1")
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := sess.Start("echo sleepy"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()

	if err := b.sim.Inject(Fault{Kind: FaultDrop, Target: "pve1"}); err != nil {
		t.Fatal(err)
	}
	var exitErr *gossh.ExitError
	if err := <-done; err == nil || errors.As(err, &exitErr) {
		t.Fatalf("running session on a dropped host: got %v, want an end without exit status", err)
	}

	_, err = b.exec(t, "pve1", "pct list")
	if err == nil || errors.As(err, &exitErr) {
		t.Fatalf("new command on a dropped host: got %v, want an end without exit status", err)
	}
	diff(t, "other host", 0, b.run(t, "pve2", "pct list").Exit)
	diff(t, "lifting the drop on the dropped host itself", result{Stdout: "cleared 1 fault(s)\n"}, b.run(t, "pve1", "labsim fault clear drop pve1"))
	diff(t, "after clear", 0, b.run(t, "pve1", "pct list").Exit)

	// The running session's entry is written once its handler wakes up,
	// which may be after the client saw the connection go.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	waitForLog(t, ctx, b.cfg.LogPath, func(entries []LogEntry) bool {
		var dropped []string
		for _, e := range entries {
			if e.Exit == exitKilled {
				dropped = append(dropped, e.Command)
			}
		}
		slices.Sort(dropped)
		return slices.Equal(dropped, []string{"echo sleepy", "pct list"})
	})
}

// TestSSHHang: a host under ssh_hang takes a new TCP connection and never
// sends its SSH version, as a wedged Proxmox node's kernel still accepts
// connections its sshd no longer serves; a command on a connection opened
// before never finishes. The other host is untouched.
func TestSSHHang(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.dial(t, "pve1")
	defer before.Close()

	diff(t, "inject", result{Stdout: "injected ssh_hang pve1\n"}, b.run(t, "pve2", "labsim fault ssh_hang pve1"))
	diff(t, "unknown host", result{Stderr: "labsim: ssh_hang: unknown host \"pve9\"\n", Exit: 2}, b.run(t, "pve2", "labsim fault ssh_hang pve9"))
	diff(t, "a vmid is not a host", result{Stderr: "labsim: ssh_hang: unknown host \"101\"\n", Exit: 2}, b.run(t, "pve2", "labsim fault ssh_hang 101"))

	// What the server says first, within a bound that is not the point:
	// pve2 sends its version, pve1 sends nothing at all.
	banner := func(host string) (string, error) {
		c, err := net.Dial("tcp", b.sim.Addr(host))
		if err != nil {
			t.Fatalf("the hung host must still accept TCP: %v", err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("SSH-2.0-probe\r\n")); err != nil {
			t.Fatal(err)
		}
		if err := c.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		return string(buf[:n]), err
	}
	if got, err := banner("pve2"); err != nil || !strings.HasPrefix(got, "SSH-2.0-labsim") {
		t.Fatalf("healthy host's greeting: %q, %v", got, err)
	}
	if got, err := banner("pve1"); !errors.Is(err, os.ErrDeadlineExceeded) || got != "" {
		t.Fatalf("hung host's greeting: got %q, %v; want nothing", got, err)
	}

	sess, err := before.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Start("pct list"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	// The command sent while the host hangs never finishes: it ends only
	// when its client goes, and is logged as killed.
	before.Close()
	var exitErr *gossh.ExitError
	if err := <-done; err == nil || errors.As(err, &exitErr) {
		t.Fatalf("command sent to the hung host: got %v, want no exit status", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	waitForLog(t, ctx, b.cfg.LogPath, func(entries []LogEntry) bool {
		return slices.ContainsFunc(entries, func(e LogEntry) bool {
			return e.Host == "pve1" && e.Command == "pct list" && e.Exit == exitKilled
		})
	})
	diff(t, "lift", result{Stdout: "cleared 1 fault(s)\n"}, b.run(t, "pve2", "labsim fault clear ssh_hang pve1"))
	diff(t, "a new connection after the fault is lifted", 0, b.run(t, "pve1", "pct list").Exit)
}

func TestControlFile(t *testing.T) {
	t.Parallel()
	b := setup(t)
	control := filepath.Join(b.cfg.StateDir, "faults.json")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(control, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	write(`{"faults": [{"kind": "dns_dead", "target": "101"}, {"kind": "hang", "target": "*", "match": "pvesh"}]}`)
	diff(t, "dns dead from the file", 2, b.run(t, "pve1", "pct exec 101 -- getent hosts deb.debian.org").Exit)
	diff(t, "list", result{Stdout: "dns_dead 101\nhang * pvesh\n"}, b.run(t, "pve2", "labsim fault list"))
	faults, err := b.sim.Faults()
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "Faults", []Fault{{Kind: FaultDNSDead, Target: "101"}, {Kind: FaultHang, Target: "*", Match: "pvesh"}}, faults)

	write(`{"faults": []}`)
	diff(t, "healed by editing the file", 0, b.run(t, "pve1", "pct exec 101 -- getent hosts deb.debian.org").Exit)

	// A broken file keeps the last good faults and says why.
	write(`{"faults": [{"kind": "dns_dead", "target": "101"}]}`)
	b.run(t, "pve1", "true")
	write(`{"faults": [{"kind": "meteor", "target": "101"}]}`)
	diff(t, "last good faults kept", 2, b.run(t, "pve1", "pct exec 101 -- getent hosts deb.debian.org").Exit)
	r := b.run(t, "pve1", "labsim fault list")
	diff(t, "list of a broken file exit", 1, r.Exit)
	contains(t, "list of a broken file", r.Stderr, `unknown fault kind "meteor"`)

	// Inject writes the same file.
	if err := os.Remove(control); err != nil {
		t.Fatal(err)
	}
	if err := b.sim.Inject(Fault{Kind: FaultAptFail, Target: "*"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(control)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"kind": "apt_fail"`)) {
		t.Errorf("control file after Inject:\n%s", data)
	}
}

func TestFaultCommandErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		cmd  string
		want result
	}{
		{"labsim fault dns_dead abc", result{Stderr: "labsim: dns_dead: target \"abc\" is not a vmid or *\n", Exit: 2}},
		{"labsim fault drop pve9", result{Stderr: "labsim: drop: unknown host \"pve9\"\n", Exit: 2}},
		{"labsim fault hang 101", result{Stderr: "labsim: hang: a command substring is required\n", Exit: 2}},
		{"labsim fault meteor 101", result{Stderr: "labsim: unknown fault kind \"meteor\" (want one of dns_dead, apt_fail, net_down, hang, drop, ssh_hang, stale_stats, agent_hung, acpi_ignored)\n", Exit: 2}},
		{"labsim fault hang '*' apt-get install", result{Stdout: "injected hang * 'apt-get install'\n"}},
	}
	for _, tt := range tests {
		diff(t, tt.cmd, tt.want, b.run(t, "pve1", tt.cmd))
	}
	if err := b.sim.Inject(Fault{Kind: FaultDNSDead, Target: "0"}); err == nil {
		t.Error("Inject accepted vmid 0")
	}
}
