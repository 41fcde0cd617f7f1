//go:build nomosdev

package main

// devBuild reports whether this binary is the development build, the one
// with `nomos dev`, `nomos labsim` and `nomos chat` (docs/architecture.md, "The
// development build").
const devBuild = true

// devOnlyRoles are the roles only the development build runs.
func devOnlyRoles() map[string]role {
	return map[string]role{
		"labsim": {summary: labsimSummary, run: runLabsim},
		"dev":    {summary: devSummary, run: runDev},
		"chat":   {summary: chatSummary, run: runChat},
	}
}
