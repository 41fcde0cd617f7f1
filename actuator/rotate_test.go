package actuator

import (
	"crypto/ed25519"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// TestOrderKeyRotation walks the bot's order key through a rotation: while
// the actuator holds both verify keys, orders and probes signed with either
// run; once the previous key is dropped, an order signed with it is refused
// and runs nothing, as a forged one would.
func TestOrderKeyRotation(t *testing.T) {
	t.Parallel()
	newPub, newKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, withConfig(func(c *Config) {
		c.PreviousVerifyKey = c.VerifyKey
		c.VerifyKey = newPub
	}))
	oldKey := b.signKey
	restart := func(id string) tasks.Order { return b.order(t, id, policy.RestartParams{}, b.jellyfin()) }

	// The bot still signs with the old key: its orders and probes run.
	old := restart("x-old-during-overlap")
	diff(t, "an order signed with the previous key, during the overlap", tasks.StatusSucceeded, b.run(t, old).Status)
	b.probe(t, tasks.CheckRun{CheckID: "check-old-key", TargetID: "entity-jellyfin", Kind: "pct_status", Target: b.jellyfin()})
	diff(t, "a probe signed with the previous key, during the overlap", healthy, b.results.check(t, "check-old-key").Health)

	// The bot has switched to the new key, for its answers too.
	b.signKey = newKey
	b.results.signWith(newKey)
	switched := restart("x-new-during-overlap")
	diff(t, "an order signed with the new key, during the overlap", tasks.StatusSucceeded, b.run(t, switched).Status)
	b.probe(t, tasks.CheckRun{CheckID: "check-new-key", TargetID: "entity-jellyfin", Kind: "pct_status", Target: b.jellyfin()})
	diff(t, "a probe signed with the new key, during the overlap", healthy, b.results.check(t, "check-new-key").Health)

	// The overlap ends: the actuator restarts without the previous key.
	b.stopActuator()
	b.cfg.PreviousVerifyKey = nil
	b.start(t)
	before := len(b.commands(t))
	b.signKey = oldKey
	late := restart("x-old-after-overlap")
	refused := b.run(t, late)
	diff(t, "an order signed with the removed key", tasks.StatusRefused, refused.Status)
	diff(t, "refusal", tasks.RefusedBadSignature, refused.Refusal)
	diff(t, "the refusal vouches for no plan", "", refused.PlanHash)
	diff(t, "labsim ran nothing for it", before, len(b.commands(t)))

	b.signKey = newKey
	diff(t, "an order signed with the new key, after the overlap", tasks.StatusSucceeded, b.run(t, restart("x-new-after-overlap")).Status)
}

func TestNewChecksPreviousVerifyKey(t *testing.T) {
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
	for _, tc := range []struct {
		name     string
		previous ed25519.PublicKey
		want     string
	}{
		{"truncated", pub[:10], "previous verify key: want an Ed25519 public key of 32 bytes, got 10"},
		{"the verify key itself", pub, "previous verify key: it is the verify key itself"},
	} {
		_, err := New(Config{
			RedisURL: "redis://127.0.0.1:1/0", VerifyKey: pub, PreviousVerifyKey: tc.previous, ReportSigningKey: priv,
			SSHSigner: signer, KnownHostsFile: filepath.Join(dir, "known_hosts"), JournalPath: filepath.Join(dir, "j"),
		})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}
