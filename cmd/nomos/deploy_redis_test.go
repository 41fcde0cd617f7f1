package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRedisACLScript runs deploy/redis/acl.sh as compose does: the file
// it builds has one line per user and no comment (Redis reads neither
// comments nor continued lines in an ACL file), and each user given a
// password carries its SHA-256, never the password. A password for a
// user the template lacks, or an empty one, stops it before Redis starts.
func TestRedisACLScript(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script, template := filepath.Join(deployDir, "redis", "acl.sh"), filepath.Join(deployDir, "redis", "users.acl")
	passwords := map[string]string{"nomos-bot": "bot-" + randomToken(12), "nomos-actuator": "actuator-" + randomToken(12)}
	args := []string{script, "-o", filepath.Join(dir, "users.acl"), template}
	for user, pw := range passwords {
		file := filepath.Join(dir, user)
		if err := os.WriteFile(file, []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, user+"="+file)
	}
	out, err := exec.Command("sh", append(args, "--", "echo", "started")...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "started" {
		t.Fatalf("acl.sh: %v: %s", err, out)
	}
	built, err := os.ReadFile(filepath.Join(dir, "users.acl"))
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]string{}
	for line := range strings.Lines(string(built)) {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "user" {
			t.Fatalf("a line Redis would refuse: %q", line)
		}
		users[f[1]] = line
	}
	if !strings.Contains(users["default"], " off ") {
		t.Errorf("the default user is not off: %q", users["default"])
	}
	for user, pw := range passwords {
		sum := sha256.Sum256([]byte(pw))
		switch line := users[user]; {
		case line == "":
			t.Errorf("no user %s in:\n%s", user, built)
		case !strings.HasSuffix(strings.TrimSpace(line), " #"+hex.EncodeToString(sum[:])):
			t.Errorf("user %s does not end in its password's SHA-256: %q", user, line)
		case strings.Contains(line, pw):
			t.Errorf("user %s's password is in the file in the clear", user)
		}
	}

	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for what, pair := range map[string]string{
		"a user the template lacks": "nomos-actuator-east=" + filepath.Join(dir, "nomos-bot"),
		"an empty password":         "nomos-bot=" + empty,
		"no password file":          "nomos-bot",
	} {
		out, err := exec.Command("sh", script, "-o", filepath.Join(dir, "bad.acl"), template, pair, "--", "echo", "started").CombinedOutput()
		if err == nil || strings.Contains(string(out), "started") {
			t.Errorf("%s: acl.sh went on (%v): %s", what, err, out)
		}
		if _, err := os.Stat(filepath.Join(dir, "bad.acl")); err == nil {
			t.Errorf("%s: acl.sh wrote a file Redis would load", what)
		}
	}
}
