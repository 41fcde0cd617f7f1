package labsim

import (
	"strings"
	"testing"
)

// TestAptList covers what apt_upgrade's audit mode renders.
func TestAptList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	exec := func(cmd string) result { return b.run(t, "pve1", "pct exec 101 -- "+cmd) }

	const warning = "\nWARNING: apt does not have a stable CLI interface. Use with caution in scripts.\n\n"
	diff(t, "nothing upgradable", result{Stdout: "Listing...\n", Stderr: warning}, exec("apt list --upgradable"))
	r := exec("apt list --installed")
	diff(t, "list installed exit", 0, r.Exit)
	contains(t, "list installed", r.Stdout, "curl/bookworm 7.88.1-10+deb12u8 amd64 [installed]\n")
	if want := "jq/"; strings.Contains(r.Stdout, want) {
		t.Errorf("list --installed shows %s, which is not installed:\n%s", want, r.Stdout)
	}
	diff(t, "apt-get has no list", result{Stderr: "E: Invalid operation list\n", Exit: 100}, exec("apt-get list --upgradable"))
}
