// Package seeds embeds the demo homelab: two Proxmox hosts, their
// containers and services, the checks that watch them, policy overrides,
// knowledge documents and runbooks. `nomos seed` upserts it; labsim serves
// the same topology over SSH.
package seeds

import "embed"

// FS holds the seed YAML files.
//
//go:embed *.yaml
var FS embed.FS
