package actuator

import (
	"crypto/ed25519"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/crypto/ssh"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{
		RedisURL:       "mysql://nope",
		VerifyKey:      pub[:10],
		KnownHostsFile: filepath.Join(dir, "missing_known_hosts"),
		CommandTimeout: -time.Second,
		Name:           "two words",
		ProbeHostShare: 9, // more than the 8 probe workers
	})
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"redis url", "verify key", "report signing key", "journal path is required", "command timeout must not be negative", "SSH private key is required", "known_hosts", `actuator name "two words"`,
		"probe host share must be from 1 to the probe concurrency (8), got 9"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	_, err = New(Config{RedisURL: "redis://127.0.0.1:1/0", VerifyKey: pub, ReportSigningKey: priv, SSHSigner: signer, JournalPath: filepath.Join(dir, "j")})
	if err == nil || !strings.Contains(err.Error(), "known_hosts file is required") {
		t.Errorf("without known_hosts: want a refusal, since host keys are always pinned; got %v", err)
	}
}

// TestRunLeavesNothingBehind runs an actuator through an order and a stop,
// then checks that every goroutine it started has ended. It does not run
// in parallel, so no other test's goroutines are about.
func TestRunLeavesNothingBehind(t *testing.T) {
	opts := []goleak.Option{goleak.IgnoreCurrent(), testenv.IgnoreDrops()}
	t.Run("run", func(t *testing.T) {
		b := setup(t)
		diff(t, "status", tasks.StatusSucceeded, b.run(t, b.order(t, "x-leak", policy.RestartParams{}, b.jellyfin())).Status)
	})
	goleak.VerifyNone(t, opts...)
}
