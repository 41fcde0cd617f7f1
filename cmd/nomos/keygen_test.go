package main

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nomoshq/nomos/tasks"
)

// TestKeygenWritesTwoMatchingPairs checks that `nomos keygen DIR` writes
// the order and report pairs, 0600, each signing key matching its own
// verify key and not the other pair's.
func TestKeygenWritesTwoMatchingPairs(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "keys")
	var out, errOut bytes.Buffer
	if code := run([]string{"keygen", dir}, nil, &out, &errOut); code != 0 {
		t.Fatalf("keygen exit %d: %s", code, errOut.String())
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("key directory: %v, mode %v; want 0700", err, st.Mode().Perm())
	}
	for _, f := range keyFiles {
		st, err := os.Stat(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f.name, st.Mode().Perm())
		}
		if !strings.Contains(out.String(), f.name) || !strings.Contains(out.String(), f.key) {
			t.Errorf("output does not say where %s goes (%s):\n%s", f.name, f.key, out.String())
		}
	}
	msg := []byte("order 42")
	signWith := func(name string) []byte {
		priv, err := tasks.LoadSigningKey(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return ed25519.Sign(priv, msg)
	}
	verifyWith := func(name string, sig []byte) bool {
		pub, err := tasks.LoadVerifyKey(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return ed25519.Verify(pub, msg, sig)
	}
	orderSig, reportSig := signWith("orders_signing.key"), signWith("reports_signing.key")
	if !verifyWith("orders_verify.pub", orderSig) || !verifyWith("reports_verify.pub", reportSig) {
		t.Error("a signing key does not match its own verify key")
	}
	if verifyWith("orders_verify.pub", reportSig) || verifyWith("reports_verify.pub", orderSig) {
		t.Error("the order and report pairs are the same key: a report key could then sign orders")
	}
}

// TestKeygenNeverReplacesAKey runs keygen into a directory that already
// holds one of its files, a key deployed elsewhere, and checks that it
// refuses, names the file and writes nothing.
func TestKeygenNeverReplacesAKey(t *testing.T) {
	t.Parallel()
	for _, f := range keyFiles {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			existing := filepath.Join(dir, f.name)
			if err := os.WriteFile(existing, []byte("the deployed key\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			if code := run([]string{"keygen", dir}, nil, &out, &errOut); code != 1 {
				t.Fatalf("keygen over an existing %s: exit %d, want 1", f.name, code)
			}
			if !strings.Contains(errOut.String(), existing) || !strings.Contains(errOut.String(), "never replaces") {
				t.Errorf("error does not name the file it refused to replace:\n%s", errOut.String())
			}
			if data, _ := os.ReadFile(existing); string(data) != "the deployed key\n" {
				t.Errorf("%s was changed to %q", f.name, data)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("keygen wrote %d files next to the existing one, want none", len(entries)-1)
			}
		})
	}
}

// TestKeygenWantsADirectory refuses a call without exactly one directory.
func TestKeygenWantsADirectory(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"keygen"}, {"keygen", "a", "b"}} {
		var out, errOut bytes.Buffer
		if code := run(args, nil, &out, &errOut); code != 1 {
			t.Errorf("%q: exit %d, want 1", args, code)
		}
		if !strings.Contains(errOut.String(), "usage: nomos keygen DIR") {
			t.Errorf("%q: no usage line:\n%s", args, errOut.String())
		}
	}
}
