package policy

import "slices"

// checkKinds are the probes the actuator can run for a check, each a fixed
// read-only command whose values are validated first. The seed loader
// accepts exactly these and the actuator runs exactly these; a test on
// each side keeps them in step.
var checkKinds = []string{"http", "tcp", "systemd", "disk", "pct_status", "dns", "ping"}

// CheckKinds returns every check kind, in a stable order.
func CheckKinds() []string { return slices.Clone(checkKinds) }

// IsCheckKind reports whether kind is one of CheckKinds.
func IsCheckKind(kind string) bool { return slices.Contains(checkKinds, kind) }
