package main

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version and commit are set at link time, as make build does from git:
//
//	go build -ldflags "-X main.version=v0.3.0 -X main.commit=0f1e2d…" ./cmd/nomos
//
// A build without them falls back, once at start, to what the Go toolchain
// recorded (see stamp).
var version, commit string

func init() { version, commit = stamp(version, commit, debug.ReadBuildInfo) }

// stamp fills in what the linker was not given from the build info: the
// module version of a `go install …@v0.3.0` build, and the VCS revision
// of a build from a checkout (marked -dirty when it had local changes).
// A version still unknown is "dev".
func stamp(v, c string, read func() (*debug.BuildInfo, bool)) (string, string) {
	bi, ok := read()
	if !ok {
		return cmp.Or(v, "dev"), c
	}
	if v == "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	if c == "" {
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				c = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if c != "" && dirty {
			c += "-dirty"
		}
	}
	return cmp.Or(v, "dev"), c
}

func runVersion(_ context.Context, env *roleEnv, _ []string) error {
	fmt.Fprintf(env.stdout, "nomos %s\n", versionLine())
	return nil
}

// versionLine is the version, the commit when known, and the Go release
// that built the binary.
func versionLine() string {
	if commit == "" {
		return fmt.Sprintf("%s (%s)", version, runtime.Version())
	}
	return fmt.Sprintf("%s (commit %s, %s)", version, commit, runtime.Version())
}
