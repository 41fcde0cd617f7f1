package hostgate_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nomoshq/nomos/hostgate"
)

const (
	actuatorKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOmrmM6qXoSGRkbWZb1NjfTUvJQDu8gvO8AJHNpDqdTR nomos-actuator"
	gateLine    = `restrict,from="192.168.1.5",command="/usr/local/bin/nomos gate" ` + actuatorKey
	adminKey    = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQDGq0xKAo9V1cE4Nq7EM4T3RkXzG0m root@pve1"
)

// node is one simulated Proxmox node: a root directory, optionally
// sharing /etc/pve with others as pmxcfs does.
type node struct {
	name string
	root string
}

// newNode makes a node's root with /etc/pve a link to pve (the cluster's
// shared directory) when pve is not empty, and root's authorized_keys a
// link into it, as pve-cluster sets them up.
func newNode(t *testing.T, name, pve string, binary bool) node {
	t.Helper()
	root := t.TempDir()
	mkdir(t, filepath.Join(root, "root", ".ssh"))
	if pve != "" {
		mkdir(t, filepath.Join(root, "etc"))
		if err := os.Symlink(pve, filepath.Join(root, "etc", "pve")); err != nil {
			t.Fatal(err)
		}
		mkdir(t, filepath.Join(pve, "priv"))
		mkdir(t, filepath.Join(pve, "nodes", name))
		if err := os.Symlink("/etc/pve/priv/authorized_keys", filepath.Join(root, "root", ".ssh", "authorized_keys")); err != nil {
			t.Fatal(err)
		}
	}
	if binary {
		mkdir(t, filepath.Join(root, "usr", "local", "bin"))
		write(t, filepath.Join(root, "usr", "local", "bin", "nomos"), "#!/bin/true\n", 0o755)
	}
	return node{name: name, root: root}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func (n node) install(t *testing.T, dryRun bool) (hostgate.InstallReport, string) {
	t.Helper()
	var out bytes.Buffer
	rep, err := hostgate.Install(hostgate.InstallConfig{
		Root: n.root, PublicKey: actuatorKey + "\n", From: "192.168.1.5", Node: n.name, DryRun: dryRun, Out: &out,
		Now: func() time.Time { return time.Date(2026, 7, 6, 10, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		t.Fatalf("install on %s: %v\n%s", n.name, err, out.String())
	}
	return rep, out.String()
}

// TestInstallOnANodeOfItsOwn: a node whose authorized_keys is its own
// file (no /etc/pve) gets the line once, with its other lines and mode
// kept, and a changed or bare line for the key is replaced, saying so.
func TestInstallOnANodeOfItsOwn(t *testing.T) {
	t.Parallel()
	n := newNode(t, "pve1", "", true)
	keys := filepath.Join(n.root, "root", ".ssh", "authorized_keys")

	// No file yet: it is made, mode 0600.
	rep, out := n.install(t, false)
	if rep.Line != hostgate.LineAdded || rep.Shared || rep.File != "/root/.ssh/authorized_keys" {
		t.Errorf("fresh file: %+v", rep)
	}
	if d := cmp.Diff(gateLine+"\n", read(t, keys)); d != "" {
		t.Errorf("fresh file (-want +got):\n%s", d)
	}
	if info, _ := os.Stat(keys); info.Mode().Perm() != 0o600 {
		t.Errorf("fresh file mode %v, want 0600", info.Mode().Perm())
	}
	if !strings.Contains(out, "this node's own") {
		t.Errorf("output does not say the file is this node's own:\n%s", out)
	}

	// Other lines, a comment and the file's mode stay; the line is added
	// once and a second install changes nothing, not even the file.
	before := "# admins\n" + adminKey + "\n\ncommand=\"/bin/backup\" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBackupBackupBackupBackupBackupBackupBack backup"
	write(t, keys, before, 0o640)
	if rep, _ = n.install(t, false); rep.Line != hostgate.LineAdded {
		t.Errorf("second key: %+v", rep)
	}
	want := before + "\n" + gateLine + "\n"
	if d := cmp.Diff(want, read(t, keys)); d != "" {
		t.Errorf("with other lines (-want +got):\n%s", d)
	}
	info, _ := os.Stat(keys)
	if info.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want the file's 0640 kept", info.Mode().Perm())
	}
	rep, out = n.install(t, false)
	after, _ := os.Stat(keys)
	if rep.Line != hostgate.LineUnchanged || !os.SameFile(info, after) || read(t, keys) != want || !strings.Contains(out, "already there") {
		t.Errorf("a second install: %+v, same file %v\n%s", rep, os.SameFile(info, after), out)
	}

	// A line for the key with other options, and a duplicate of it, become
	// the one gate line, in the first one's place.
	write(t, keys, adminKey+"\nno-pty "+actuatorKey+"\n# x\n"+actuatorKey+"\n", 0o600)
	rep, out = n.install(t, false)
	if rep.Line != hostgate.LineReplaced {
		t.Errorf("changed options: %+v", rep)
	}
	if d := cmp.Diff(adminKey+"\n"+gateLine+"\n# x\n", read(t, keys)); d != "" {
		t.Errorf("changed options (-want +got):\n%s", d)
	}
	for _, w := range []string{"had other options (no-pty)", "A second line for the key is removed"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}

	// A bare line for the key is a root shell, and is said to be one.
	write(t, keys, actuatorKey+"\n", 0o600)
	if _, out = n.install(t, false); !strings.Contains(out, "root shell") {
		t.Errorf("a bare key line:\n%s", out)
	}

	// -dry-run says and writes nothing.
	write(t, keys, adminKey+"\n", 0o600)
	if rep, out = n.install(t, true); rep.Line != hostgate.LineAdded || read(t, keys) != adminKey+"\n" || !strings.Contains(out, "would be added") {
		t.Errorf("dry run: %+v, file %q\n%s", rep, read(t, keys), out)
	}
}

// TestInstallOnACluster: on Proxmox VE, root's authorized_keys is a link
// to /etc/pve/priv/authorized_keys, which every node shares. Two nodes
// installing in turn leave one line there, the link stays a link, and
// the nodes known to lack the binary are named.
func TestInstallOnACluster(t *testing.T) {
	t.Parallel()
	pve := t.TempDir()
	pve1 := newNode(t, "pve1", pve, true)
	pve2 := newNode(t, "pve2", pve, false)
	mkdir(t, filepath.Join(pve, "nodes", "pve3"))
	shared := filepath.Join(pve, "priv", "authorized_keys")
	// What pvecm updatecerts merged: each node's own key.
	write(t, shared, adminKey+"\nssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQDpve2pve2pve2pve2pve2pve2pve root@pve2\n", 0o600)
	before := read(t, shared)

	rep, out := pve1.install(t, false)
	if rep.Line != hostgate.LineAdded || !rep.Shared || rep.File != "/etc/pve/priv/authorized_keys" {
		t.Errorf("pve1: %+v", rep)
	}
	for _, w := range []string{
		"/root/.ssh/authorized_keys is a link to /etc/pve/priv/authorized_keys",
		"the cluster's shared file", "applies to every node of the cluster",
		"✓ pve1: nomos is at /usr/local/bin/nomos (this node)",
		"? pve2: not known from here", "? pve3: not known from here",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("pve1's output lacks %q:\n%s", w, out)
		}
	}
	if d := cmp.Diff(before+gateLine+"\n", read(t, shared)); d != "" {
		t.Errorf("shared file after pve1 (-want +got):\n%s", d)
	}
	if target, err := os.Readlink(filepath.Join(pve1.root, "root", ".ssh", "authorized_keys")); err != nil || target != "/etc/pve/priv/authorized_keys" {
		t.Errorf("pve1's authorized_keys is no longer the link: %q %v", target, err)
	}

	rep, out = pve2.install(t, false)
	if rep.Line != hostgate.LineUnchanged {
		t.Errorf("pve2: %+v", rep)
	}
	if d := cmp.Diff(before+gateLine+"\n", read(t, shared)); d != "" {
		t.Errorf("shared file after pve2 (-want +got):\n%s", d)
	}
	if got := rep.Missing(); !slices.Equal(got, []string{"pve2"}) {
		t.Errorf("missing = %v, want pve2", got)
	}
	for _, w := range []string{
		"✓ pve1: nomos is at /usr/local/bin/nomos (its own nomos gate -install recorded /usr/local/bin/nomos at 2026-07-06T10:00:00Z)",
		"✗ pve2: no nomos at /usr/local/bin/nomos (this node)", "refuses every command from the actuator's key",
		"? pve3: not known from here",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("pve2's output lacks %q:\n%s", w, out)
		}
	}
	if _, err := os.Stat(filepath.Join(pve, "nodes", "pve2", "nomos-gate")); err == nil {
		t.Errorf("pve2, which lacks the binary, left a marker saying it has it")
	}
}

func TestInstallRefusesBadInput(t *testing.T) {
	t.Parallel()
	n := newNode(t, "pve1", "", true)
	for _, tt := range []struct {
		cfg  hostgate.InstallConfig
		want string
	}{
		{hostgate.InstallConfig{PublicKey: "restrict " + actuatorKey}, "without options"},
		{hostgate.InstallConfig{PublicKey: "ssh-ed25519 not-base64!!"}, "not base64"},
		{hostgate.InstallConfig{PublicKey: actuatorKey + " \"x\"\ncommand=\"sh\""}, "comment"},
		{hostgate.InstallConfig{PublicKey: actuatorKey, Binary: "nomos"}, "absolute"},
		{hostgate.InstallConfig{PublicKey: actuatorKey, Binary: "/usr/local/bin/no mos"}, "absolute"},
		{hostgate.InstallConfig{PublicKey: actuatorKey, From: `1.2.3.4",command="sh`}, "from"},
	} {
		tt.cfg.Root, tt.cfg.Node, tt.cfg.Out = n.root, "pve1", new(bytes.Buffer)
		if _, err := hostgate.Install(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want an error about %s", tt.cfg, err, tt.want)
		}
	}
	if _, err := os.Stat(filepath.Join(n.root, "root", ".ssh", "authorized_keys")); err == nil {
		t.Errorf("a refused install wrote authorized_keys")
	}
}
