package hostgate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nomoshq/nomos/policy"
)

// HostUnit is a unit on the node itself that systemctl may change, and
// how: a host_units entry of the rules file.
type HostUnit struct {
	// Unit is the unit's full name, e.g. caddy.service.
	Unit string
	// Verbs are what systemctl may do to it, of hostVerbs.
	Verbs []string
}

// hostVerbs are the verbs host_units may list: those of the systemctl
// action. is-active and status need no listing.
var hostVerbs = []string{"start", "stop", "restart", "reload", "enable", "disable"}

// readVerbs are what systemctl may always do on the node: ask, as the
// actuator's systemd probe does.
var readVerbs = []string{"is-active", "status"}

// keepsTheNode are the units that keep a node reachable and in its
// cluster, by name without instance or type: stopping or disabling one
// of them can lock its owner out or break the cluster.
var keepsTheNode = []string{"ssh", "sshd", "pve-cluster", "pveproxy", "pvedaemon", "corosync", "pve-ha-crm", "pve-ha-lrm"}

// allowHostSystemctl checks systemctl VERB UNIT on the node itself, not in
// a container: is-active and status of any unit but a .target, and a
// verb that changes a unit only where r.HostUnits lists that unit with
// that verb. Without host_units a taken actuator key cannot stop, start,
// enable or disable anything on the node: not ssh, not the cluster's
// services, not reboot.target.
func allowHostSystemctl(args []string, r Rules) error {
	if len(args) < 2 {
		return refusef("systemctl on the node: want 2 arguments (a verb and a unit), got %d", len(args))
	}
	verb, unit := args[0], args[1]
	if policy.ValidateUnit(unit) != nil {
		return refusef("systemctl on the node: argument 2: not accepted by policy: %s", q(unit))
	}
	if len(args) > 2 {
		return refusef("systemctl on the node: want 2 arguments (a verb and a unit), got %d", len(args))
	}
	unit = policy.NormalizeUnit(unit)
	if strings.HasSuffix(unit, ".target") {
		return refusef("systemctl %s %s on the node: a .target is never allowed there (starting one can reboot or power off the node)", q(verb), unit)
	}
	if slices.Contains(readVerbs, verb) {
		return nil
	}
	if !slices.Contains(hostVerbs, verb) {
		return refusef("systemctl on the node: %s is not a verb nomos sends (is-active and status, or one of %s where host_units lists it)", q(verb), strings.Join(hostVerbs, ", "))
	}
	for _, u := range r.HostUnits {
		if u.Unit == unit && slices.Contains(u.Verbs, verb) {
			return nil
		}
	}
	if keepsNode(unit) {
		return refusef("systemctl %s %s on the node: %s keeps the node reachable and in its cluster, so only is-active and status, unless host_units in %s lists %s with %s",
			verb, unit, unit, DefaultRulesFile, unit, verb)
	}
	return refusef("systemctl %s %s on the node: only is-active and status, unless host_units in %s lists %s with %s", verb, unit, DefaultRulesFile, unit, verb)
}

// keepsNode reports whether unit, a full unit name, is one of keepsTheNode
// or an instance of one.
func keepsNode(unit string) bool {
	name := unit[:strings.LastIndexByte(unit, '.')]
	if at := strings.IndexByte(name, '@'); at >= 0 {
		name = name[:at]
	}
	return slices.Contains(keepsTheNode, name)
}

// parseHostUnit reads one line of the host_units block, "UNIT: VERB, VERB".
func parseHostUnit(line string) (HostUnit, error) {
	// A unit name may hold ':', a verb never does.
	i := strings.LastIndexByte(line, ':')
	if i < 0 {
		return HostUnit{}, fmt.Errorf("want UNIT: VERB, VERB, got %s", q(line))
	}
	name, verbs := strings.TrimSpace(line[:i]), line[i+1:]
	if err := policy.ValidateUnit(name); err != nil {
		return HostUnit{}, fmt.Errorf("not a unit: %s", q(name))
	}
	u := HostUnit{Unit: policy.NormalizeUnit(name)}
	if strings.HasSuffix(u.Unit, ".target") {
		return HostUnit{}, fmt.Errorf("%s: a .target is never allowed (starting one can reboot or power off the node)", u.Unit)
	}
	for _, v := range strings.FieldsFunc(verbs, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		switch {
		case slices.Contains(readVerbs, v):
			// Always allowed; listing them changes nothing.
		case !slices.Contains(hostVerbs, v):
			return HostUnit{}, fmt.Errorf("%s: %s is not a verb host_units takes (%s)", u.Unit, q(v), strings.Join(hostVerbs, ", "))
		case !slices.Contains(u.Verbs, v):
			u.Verbs = append(u.Verbs, v)
		}
	}
	if len(u.Verbs) == 0 {
		return HostUnit{}, fmt.Errorf("%s: list at least one verb (%s)", u.Unit, strings.Join(hostVerbs, ", "))
	}
	return u, nil
}
