// Package devstack starts and reuses the real services Nomos runs beside:
// Postgres, Redis and a Dendrite homeserver. Both `nomos dev` and the test
// environment use it, so the demo and the tests run on the same parts.
package devstack
