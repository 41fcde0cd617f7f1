//go:build !nomosdev

package main

import (
	"context"
	"fmt"
)

// devBuild reports whether this binary is the development build, the one
// with `nomos dev`, `nomos labsim` and `nomos chat` (docs/architecture.md, "The
// development build").
const devBuild = false

// devOnlyRoles stand in for the development build's roles: the production
// build links neither labsim nor the dev stack, and says how to get them.
func devOnlyRoles() map[string]role {
	return map[string]role{
		"labsim": {summary: labsimSummary + " (development build only)", run: devOnly("labsim")},
		"dev":    {summary: devSummary + " (development build only)", run: devOnly("dev")},
		"chat":   {summary: chatSummary + " (development build only)", run: devOnly("chat")},
	}
}

func devOnly(name string) func(context.Context, *roleEnv, []string) error {
	return func(context.Context, *roleEnv, []string) error {
		return fmt.Errorf("this is the production build, which leaves out the dev stack and labsim; `nomos %s` is in the development build: `make build/dev`, or go build -tags goolm,nomosdev ./cmd/nomos", name)
	}
}
