package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at link time with -ldflags "-X main.version=…".
var version = "dev"

func runVersion(_ context.Context, env *roleEnv, _ []string) error {
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = " " + s.Value
			}
		}
	}
	fmt.Fprintf(env.stdout, "nomos %s%s %s\n", version, rev, runtime.Version())
	return nil
}
