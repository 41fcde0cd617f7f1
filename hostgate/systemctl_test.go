package hostgate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nomoshq/nomos/hostgate"
)

// listed are the host_units of the tests: a node's own caddy may be
// restarted and reloaded, and pveproxy, protected, restarted.
var listed = []hostgate.HostUnit{
	{Unit: "caddy.service", Verbs: []string{"restart", "reload"}},
	{Unit: "pveproxy.service", Verbs: []string{"restart"}},
}

// TestSystemctlOnTheNode: on the node itself systemctl may only ask
// (is-active, status), never of a .target; it changes a unit only with a
// verb the rules' host_units lists for it, and never one of the units
// that keep the node reachable and in its cluster unless listed. In a
// container, through pct exec, the systemctl actions are as before.
func TestSystemctlOnTheNode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cmd   string
		units []hostgate.HostUnit
		why   string // "" when it passes
	}{
		{"systemctl is-active 'caddy.service'", nil, ""},
		{"systemctl is-active pveproxy", nil, ""},
		{"systemctl status ssh.service", nil, ""},
		{"systemctl status corosync", nil, ""},
		{"systemctl start reboot.target", nil, "a .target is never allowed"},
		{"systemctl start poweroff.target", nil, "a .target is never allowed"},
		{"systemctl start poweroff.target", []hostgate.HostUnit{{Unit: "caddy.service", Verbs: []string{"start"}}}, "a .target is never allowed"},
		{"systemctl is-active multi-user.target", nil, "a .target is never allowed"},
		{"systemctl stop pve-cluster.service", nil, "pve-cluster.service keeps the node reachable and in its cluster"},
		{"systemctl disable ssh.service", nil, "ssh.service keeps the node reachable"},
		{"systemctl stop sshd", nil, "sshd.service keeps the node reachable"},
		{"systemctl stop ssh.socket", nil, "ssh.socket keeps the node reachable"},
		{"systemctl restart corosync", nil, "corosync.service keeps"},
		{"systemctl restart pvedaemon", listed, "pvedaemon.service keeps"},
		{"systemctl stop pve-ha-lrm.service", nil, "keeps"},
		{"systemctl stop pve-ha-crm.service", nil, "keeps"},
		{"systemctl restart pveproxy", listed, ""},
		{"systemctl stop pveproxy", listed, "host_units in /etc/nomos/gate.yaml lists pveproxy.service with stop"},
		{"systemctl restart caddy.service", nil, "host_units in /etc/nomos/gate.yaml lists caddy.service with restart"},
		{"systemctl restart caddy.service", listed, ""},
		{"systemctl reload caddy", listed, ""},
		{"systemctl stop caddy.service", listed, "lists caddy.service with stop"},
		{"systemctl restart caddy.socket", listed, "lists caddy.socket with restart"},
		{"systemctl kill caddy.service", listed, `"kill" is not a verb nomos sends`},
		{"systemctl isolate rescue.target", nil, "a .target is never allowed"},
		{"systemctl mask ssh.service", nil, `"mask" is not a verb nomos sends`},
		{"systemctl poweroff", nil, "want 2 arguments"},
		{"systemctl reboot", listed, "want 2 arguments"},
		{"systemctl restart caddy pveproxy", listed, "want 2 arguments"},
		{"systemctl --now restart caddy", listed, "want 2 arguments"},
		{"systemctl restart -H evil", listed, "not accepted by policy"},
		// In a container, what the systemctl action sends.
		{"pct exec 101 -- systemctl restart jellyfin.service", nil, ""},
		{"pct exec 101 -- systemctl disable ssh.service", nil, ""},
	}
	for _, tt := range tests {
		for _, shell := range []bool{false, true} {
			r := hostgate.Rules{HostShell: shell, HostUnits: tt.units}
			argv, err := hostgate.Check(tt.cmd, r)
			switch {
			case tt.why == "" && err != nil:
				t.Errorf("%q with %+v: %v", tt.cmd, r, err)
			case tt.why != "" && err == nil:
				t.Errorf("%q with %+v passed as %q", tt.cmd, r, argv)
			case tt.why != "" && (!errors.Is(err, hostgate.ErrRefused) || !strings.Contains(err.Error(), tt.why)):
				t.Errorf("%q with %+v: refusal %v does not say %q", tt.cmd, r, err, tt.why)
			}
		}
	}
}

// TestHostUnitsRules: host_units lists units and the verbs systemctl may
// use on each, as a YAML block; names are checked as policy checks them,
// a .target is refused, and so is a verb nomos never sends.
func TestHostUnitsRules(t *testing.T) {
	t.Parallel()
	got, err := hostgate.ParseRules("host_shell: false\nhost_units:\n  # the node's own reverse proxy\n  caddy: restart, reload\n\tpveproxy.service: restart\nprivileged_containers: false\n")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(hostgate.Rules{HostUnits: listed}, got); diff != "" {
		t.Errorf("ParseRules (-want +got):\n%s", diff)
	}
	if got, err := hostgate.ParseRules("host_units:\n"); err != nil || len(got.HostUnits) != 0 {
		t.Errorf("an empty host_units: %+v, %v", got, err)
	}
	for text, why := range map[string]string{
		"host_units:\n  reboot.target: start\n":                    "line 2: reboot.target: a .target is never allowed",
		"host_units:\n  caddy: restart, kill\n":                    `line 2: caddy.service: "kill" is not a verb`,
		"host_units:\n  caddy:\n":                                  "line 2: caddy.service: list at least one verb",
		"host_units:\n  'caddy; reboot': restart\n":                "line 2: not a unit",
		"host_units:\n  caddy: restart\n  caddy.service: reload\n": "line 3: caddy.service given twice",
		"host_units: caddy restart\n":                              "line 1: host_units takes a block",
		"  caddy: restart\n":                                       "line 1: an indented line outside host_units",
		"host_units:\n  caddy restart\n":                           "line 2: want UNIT: VERB, VERB",
		"host_units:\n  caddy: restart\nhost_units:\n":             "line 3: host_units given twice",
	} {
		if _, err := hostgate.ParseRules(text); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseRules(%q) = %v, want an error saying %q", text, err, why)
		}
	}
}
