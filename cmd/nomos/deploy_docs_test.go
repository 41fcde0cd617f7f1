package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/nomoshq/nomos/internal/fleetseed"
)

// TestInstallGuideNamesEverySecret keeps docs/install.md in step with the
// compose file and the units: every secret file and credential they read
// is one the guide tells the operator to create, owned by the image's uid.
func TestInstallGuideNamesEverySecret(t *testing.T) {
	t.Parallel()
	guide, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	p := loadCompose(t, []string{"homeserver", "seed"}, "compose.yaml", "compose.llm.yaml")
	for name, s := range p.Secrets {
		file := filepath.Base(s.File)
		if !strings.Contains(string(guide), file) {
			t.Errorf("docs/install.md never creates secrets/%s (compose secret %s)", file, name)
		}
	}
	for _, unit := range []string{"nomos-bot.service", "nomos-actuator.service"} {
		u := parseUnit(t, filepath.Join(deployDir, "systemd", unit))
		for _, c := range append(u.credentials(), u.commentedCredentials...) {
			if !strings.Contains(string(guide), "/"+c.name) {
				t.Errorf("docs/install.md never creates credential %s for %s", c.name, unit)
			}
		}
	}
	if !strings.Contains(string(guide), "chown "+dockerUID) {
		t.Errorf("docs/install.md does not chown the secrets to the image's uid %s", dockerUID)
	}
}

// TestInstallGuideSeedLoads loads the first seed file docs/install.md has
// the operator write, as `nomos seed` would.
func TestInstallGuideSeedLoads(t *testing.T) {
	t.Parallel()
	guide, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(guide), "```yaml\nhosts:")
	block, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("docs/install.md has no ```yaml block starting with hosts:")
	}
	fsys := fstest.MapFS{"fleet.yaml": {Data: []byte("hosts:" + block)}}
	seed, err := fleetseed.Load(fsys)
	if err != nil {
		t.Fatalf("the guide's fleet.yaml would be refused: %v", err)
	}
	if len(seed.Hosts) == 0 || len(seed.Hosts[0].Containers) == 0 || len(seed.Hosts[0].Containers[0].Services) == 0 {
		t.Errorf("the guide's fleet.yaml has no service to restart in step 10: %+v", seed.Hosts)
	}
}
