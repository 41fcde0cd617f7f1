package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/tasks"
)

// notifySocket is a unixgram socket standing where systemd's
// NOTIFY_SOCKET would, reading what a unit's process sends.
type notifySocket struct {
	path string
	conn *net.UnixConn
}

func newNotifySocket(t *testing.T) *notifySocket {
	t.Helper()
	// A short directory: a socket's path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &notifySocket{path: path, conn: conn}
}

// waitFor reads datagrams until one holds want as a line, and returns the
// ones before it. The deadline only keeps a broken run from hanging.
func (s *notifySocket) waitFor(t *testing.T, want string) []string {
	t.Helper()
	var before []string
	buf := make([]byte, 4096)
	for {
		if err := s.conn.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		n, err := s.conn.Read(buf)
		if err != nil {
			t.Fatalf("waiting for %q on NOTIFY_SOCKET: %v; got %q", want, err, before)
		}
		msg := string(buf[:n])
		for line := range strings.SplitSeq(msg, "\n") {
			if line == want {
				return before
			}
		}
		before = append(before, msg)
	}
}

// TestActuatorTellsSystemd runs `nomos actuator` as a Type=notify unit
// with WatchdogSec= would, with a real unixgram NOTIFY_SOCKET and real
// Redis: READY=1 once every service has started, WATCHDOG=1 while its
// Redis consumer is registered and its journal writable, and STOPPING=1 on
// SIGTERM. With its journal gone, the pings stop, STATUS says why, and
// /healthz (what compose's health check asks) answers 503; with it back,
// both recover.
func TestActuatorTellsSystemd(t *testing.T) {
	bin := buildNomos(t)
	sock := newNotifySocket(t)
	dir := t.TempDir()
	verify := filepath.Join(dir, "orders.pub")
	if err := tasks.GenerateKeyFiles(filepath.Join(dir, "orders.key"), verify); err != nil {
		t.Fatal(err)
	}
	reportSigning := filepath.Join(dir, "reports.key")
	if err := tasks.GenerateKeyFiles(reportSigning, filepath.Join(dir, "reports.pub")); err != nil {
		t.Fatal(err)
	}
	writeFakeSecret(t, filepath.Join(dir, "ssh_key"), "ssh_key")
	writeFakeSecret(t, filepath.Join(dir, "known_hosts"), "known_hosts")
	journal := filepath.Join(dir, "journal")
	port := strconv.Itoa(testenv.FreePort(t))
	cmd := exec.Command(bin, "actuator")
	cmd.Env = append(os.Environ(),
		"NOTIFY_SOCKET="+sock.path,
		"WATCHDOG_USEC=400000", // pings every 0.2 s
		"NOMOS_ACTUATOR__METRICS_LISTEN=:"+port,
		"NOMOS_REDIS__URL="+testenv.RedisURL(t),
		"NOMOS_ACTUATOR__SSH_KEY_FILE="+filepath.Join(dir, "ssh_key"),
		"NOMOS_ACTUATOR__KNOWN_HOSTS_FILE="+filepath.Join(dir, "known_hosts"),
		"NOMOS_ACTUATOR__JOURNAL_FILE="+journal,
		"NOMOS_ORDERS__VERIFY_KEY_FILE="+verify,
		"NOMOS_REPORTS__SIGNING_KEY_FILE="+reportSigning,
	)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	defer func() {
		if !exited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()

	if before := sock.waitFor(t, "READY=1"); len(before) != 0 {
		t.Errorf("sent %q before READY=1", before)
	}
	sock.waitFor(t, "WATCHDOG=1")
	healthz := func() (int, string) {
		t.Helper()
		resp, err := http.Get("http://127.0.0.1:" + port + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := healthz(); code != http.StatusOK {
		t.Errorf("/healthz while healthy: %d %s", code, body)
	}

	// The journal's path stops being a writable file.
	if err := os.Rename(journal, journal+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(journal, 0o700); err != nil {
		t.Fatal(err)
	}
	before := sock.waitFor(t, "STATUS=unhealthy: actuator: journal: open "+journal+": is a directory")
	// Every datagram after that, until the journal is back, must be an
	// unhealthy STATUS rather than a ping.
	if code, body := healthz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "journal") {
		t.Errorf("/healthz without a journal: %d %s, want 503 naming the journal", code, body)
	}
	buf := make([]byte, 4096)
	if err := sock.conn.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	n, err := sock.conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if msg := string(buf[:n]); strings.Contains(msg, "WATCHDOG=1") {
		t.Errorf("pinged the watchdog without a journal: %q (before: %q)", msg, before)
	}
	if err := os.Remove(journal); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(journal+".moved", journal); err != nil {
		t.Fatal(err)
	}
	sock.waitFor(t, "WATCHDOG=1")
	if code, body := healthz(); code != http.StatusOK {
		t.Errorf("/healthz with the journal back: %d %s", code, body)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sock.waitFor(t, "STOPPING=1")
	exited = true
	if err := cmd.Wait(); err != nil {
		t.Errorf("actuator after SIGTERM: %v", err)
	}
}
