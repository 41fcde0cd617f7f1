package actuator

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/nomoshq/nomos/internal/testenv"
)

func TestHostAddr(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"pve1":              "pve1:22",
		"pve1:2222":         "pve1:2222",
		"192.168.1.10":      "192.168.1.10:22",
		"192.168.1.10:22":   "192.168.1.10:22",
		"fe80::1":           "[fe80::1]:22",
		"[fe80::1]":         "[fe80::1]:22",
		"[fe80::1]:2222":    "[fe80::1]:2222",
		"":                  "",
		"root@pve1":         "",
		"pve1:":             "",
		"pve1 -oProxy=evil": "",
		"ssh://pve1":        "",
		"a:b:c":             "",
	} {
		got, err := HostAddr(in)
		if want == "" {
			if err == nil {
				t.Errorf("HostAddr(%q) = %q, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("HostAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestPinHostKey pins a labsim node's key the way `nomos actuator -pin`
// does: the key read over the network is the node's own, the line pinned
// is one the actuator accepts, pinning again changes nothing, and a file
// that pins another key for the node is never changed.
func TestPinHostKey(t *testing.T) {
	t.Parallel()
	fleet := testenv.NewFleet(t)
	ctx := testenv.Context(t)
	dir := t.TempDir()
	addr := fleet.Sim.Addr("strong")
	key, err := ScanHostKey(ctx, addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := fleet.Sim.HostPublicKey("strong"); !bytes.Equal(key.Key.Marshal(), want.Marshal()) {
		t.Fatalf("scanned key %s, want the node's own %s", key.Fingerprint(), ssh.FingerprintSHA256(want))
	}
	diff(t, "console command", "ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub", key.ConsoleCommand())

	t.Run("a fresh host", func(t *testing.T) {
		file := filepath.Join(dir, "fresh")
		if pinned, err := key.Pinned(file); err != nil || pinned {
			t.Fatalf("Pinned before pinning = %v, %v; want false", pinned, err)
		}
		if added, err := key.Pin(file); err != nil || !added {
			t.Fatalf("Pin = %v, %v; want the key added", added, err)
		}
		data := readFile(t, file)
		diff(t, "known_hosts", key.Line()+"\n", data)
		if !slices.Contains(fleet.Sim.KnownHostsLines(), key.Line()) {
			t.Errorf("pinned line %q is not labsim's own %q", key.Line(), fleet.Sim.KnownHostsLines())
		}
		if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("a new known_hosts has mode %v (%v), want 0600", st.Mode().Perm(), err)
		}
		// The actuator's runner now reaches the node through that file.
		r, err := NewSSHRunner(SSHConfig{Signer: fleet.SSHSigner, KnownHostsFile: file})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var out strings.Builder
		if code, err := r.Run(ctx, addr, "pct list", &out, &out); err != nil || code != 0 {
			t.Errorf("pct list through the pinned key: exit %d, %v\n%s", code, err, out.String())
		}

		// Idempotent: pinning again writes nothing.
		if added, err := key.Pin(file); err != nil || added {
			t.Errorf("second Pin = %v, %v; want nothing added", added, err)
		}
		diff(t, "known_hosts after pinning twice", data, readFile(t, file))
	})

	t.Run("beside other hosts", func(t *testing.T) {
		file := filepath.Join(dir, "others")
		other := fleet.Sim.Addr("hubris")
		// Another node's line, without its final newline.
		otherLine := knownhosts.Line([]string{knownhosts.Normalize(other)}, fleet.Sim.HostPublicKey("hubris"))
		if err := os.WriteFile(file, []byte(otherLine), 0o644); err != nil {
			t.Fatal(err)
		}
		if added, err := key.Pin(file); err != nil || !added {
			t.Fatalf("Pin = %v, %v; want the key added", added, err)
		}
		diff(t, "known_hosts", otherLine+"\n"+key.Line()+"\n", readFile(t, file))
	})

	// Each file pins something else for the node; Pin must leave it be.
	ed, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	reinstalled, err := ssh.NewPublicKey(ed)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ssh.NewPublicKey(&ec.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	host := knownhosts.Normalize(addr)
	for _, tc := range []struct {
		name, content string
		key           HostKey
		want          []string
	}{
		{"a changed key", knownhosts.Line([]string{host}, reinstalled) + "\n", key,
			[]string{"pins ssh-ed25519 key " + ssh.FingerprintSHA256(reinstalled) + " for it at line 1", key.Fingerprint(), "ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub", "ssh-keygen -R " + host}},
		{"a key of another type", knownhosts.Line([]string{host}, ecKey) + "\n", key,
			[]string{"pins ecdsa-sha2-nistp256 key"}},
		{"a changed key after a comment", "# pinned by hand\n" + knownhosts.Line([]string{host}, reinstalled) + "\n", key,
			[]string{"at line 2"}},
		{"the node's key revoked", "@revoked * " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key.Key))) + "\n", key,
			[]string{"revokes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(file, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			added, err := tc.key.Pin(file)
			if added || !errors.Is(err, ErrHostKeyChanged) {
				t.Fatalf("Pin = %v, %v; want ErrHostKeyChanged", added, err)
			}
			for _, w := range tc.want {
				contains(t, "error", err.Error(), w)
			}
			diff(t, "known_hosts is untouched", tc.content, readFile(t, file))
		})
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
