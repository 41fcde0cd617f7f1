// Package soak is the fault suite: each case runs the real stack (a
// Postgres cluster and a Redis server of its own, Dendrite, labsim and the
// `nomos bot` and `nomos actuator` processes built from this checkout),
// breaks one part of it on purpose, again and again, and checks that every
// approved order ran at most once and no decision was lost.
//
// `go test` runs a few trials of each case; NOMOS_SOAK=1 (make soak) runs
// the full counts and writes the results to docs/reliability.md.
package soak
