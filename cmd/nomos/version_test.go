package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/nomoshq/nomos/internal/testenv"
)

// TestStamp: what the linker was given wins; otherwise the module version
// and VCS revision the toolchain recorded; otherwise dev.
func TestStamp(t *testing.T) {
	t.Parallel()
	info := func(version string, settings ...string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/nomoshq/nomos", Version: version}}
			for i := 0; i+1 < len(settings); i += 2 {
				bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
			}
			return bi, true
		}
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	tests := []struct {
		name         string
		v, c         string
		read         func() (*debug.BuildInfo, bool)
		wantV, wantC string
	}{
		{"linker", "v1.2.0-3-gabc1234", "abc1234ff", info("v9.9.9", "vcs.revision", "other"), "v1.2.0-3-gabc1234", "abc1234ff"},
		{"go install", "", "", info("v0.3.0"), "v0.3.0", ""},
		{"checkout", "", "", info("(devel)", "vcs.revision", "0f1e2d", "vcs.modified", "false"), "dev", "0f1e2d"},
		{"dirty checkout", "", "", info("(devel)", "vcs.modified", "true", "vcs.revision", "0f1e2d"), "dev", "0f1e2d-dirty"},
		{"no vcs", "", "", info("(devel)"), "dev", ""},
		{"no build info", "", "", none, "dev", ""},
	}
	for _, tt := range tests {
		v, c := stamp(tt.v, tt.c, tt.read)
		if v != tt.wantV || c != tt.wantC {
			t.Errorf("%s: stamp = %q, %q; want %q, %q", tt.name, v, c, tt.wantV, tt.wantC)
		}
	}
}

// TestMakeBuildStampsVersion builds the binary the way `make build` does
// and checks that `nomos version` prints the version and commit it was
// given, and that the Makefile takes them from git describe by default.
func TestMakeBuildStampsVersion(t *testing.T) {
	testenv.SkipIfShort(t, "it builds the nomos binary")
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is not installed; the Makefile is how Nomos is built")
	}
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "nomos")
	build := exec.Command("make", "-s", "-C", root, "build", "BIN="+bin, "VERSION=v9.8.7-test", "COMMIT=feedbeef")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("nomos version: %v\n%s", err, out)
	}
	if got, want := string(out), "nomos v9.8.7-test (commit feedbeef, "+runtime.Version()+")\n"; got != want {
		t.Errorf("nomos version = %q, want %q", got, want)
	}

	// Without overrides the Makefile asks git, or says dev outside a checkout.
	want := "dev"
	describe := exec.Command("git", "describe", "--tags", "--always", "--dirty")
	describe.Dir = root
	if d, err := describe.Output(); err == nil {
		want = strings.TrimSpace(string(d))
	}
	dry := exec.Command("make", "-s", "-n", "-C", root, "build")
	dry.Env = withoutVars(os.Environ(), "VERSION", "COMMIT")
	plan, err := dry.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, plan)
	}
	if !strings.Contains(string(plan), "-X main.version="+want+" ") {
		t.Errorf("make build would run:\n%s\nwant -X main.version=%s", plan, want)
	}
}

// withoutVars drops the named variables from an environment.
func withoutVars(env []string, names ...string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, name)
	})
}
