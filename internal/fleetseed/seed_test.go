package fleetseed

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/seeds"
)

func TestDemoSeedShape(t *testing.T) {
	t.Parallel()
	seed, err := Load(seeds.FS)
	if err != nil {
		t.Fatalf("load demo seed: %v", err)
	}
	var lxcs, services int
	for _, h := range seed.Hosts {
		lxcs += len(h.Containers)
		for _, c := range h.Containers {
			services += len(c.Services)
		}
	}
	if len(seed.Hosts) != 2 || lxcs < 10 || services < 18 {
		t.Errorf("demo fleet has %d hosts, %d lxcs, %d services; want 2, about 12, about 20", len(seed.Hosts), lxcs, services)
	}
	if len(seed.Knowledge) < 10 || len(seed.Runbooks) < 5 || len(seed.Policy) < 5 || len(seed.Checks) < 10 {
		t.Errorf("demo seed has %d docs, %d runbooks, %d policies, %d checks", len(seed.Knowledge), len(seed.Runbooks), len(seed.Policy), len(seed.Checks))
	}
}

func TestLoadErrorsNameFileAndLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file, data string
		wantLine         int
		wantMsg          string
	}{
		{"syntax", "fleet.yaml", "hosts:\n  - name: a\n    ssh: [\n", 3, "did not find expected node content"},
		{"unknown field", "fleet.yaml", "hosts:\n  - name: a\n    colour: red\n", 3, "field colour not found"},
		{"wrong type", "fleet.yaml", "hosts:\n  - name: a\n    cores: many\n", 3, "cannot unmarshal"},
		{"bad vmid", "fleet.yaml", "hosts:\n  - name: a\n    containers:\n      - vmid: 7\n        hostname: x\n        ip: dhcp\n", 4, "vmid 7"},
		{"bad ip", "fleet.yaml", "hosts:\n  - name: a\n    containers:\n      - vmid: 100\n        hostname: x\n        ip: 10.0.0.1\n", 4, "want CIDR"},
		{"shell in unit", "fleet.yaml", "hosts:\n  - name: a\n    containers:\n      - vmid: 100\n        hostname: x\n        ip: dhcp\n        services:\n          - name: s\n            unit: \"s;reboot\"\n", 8, "systemd unit"},
		{"duplicate service", "fleet.yaml", "hosts:\n  - name: a\n    containers:\n      - vmid: 100\n        hostname: x\n        ip: dhcp\n        services:\n          - name: s\n          - name: s\n", 9, "duplicate entity service:s"},
		{"dangling edge", "fleet.yaml", "hosts:\n  - name: a\nrelationships:\n  - { from: host:a, to: service:nope, type: depends_on }\n", 4, "no such entity"},
		{"bad edge type", "fleet.yaml", "hosts:\n  - name: a\n  - name: b\nrelationships:\n  - { from: host:a, to: host:b, type: likes }\n", 5, "want one of"},
		{"check target", "fleet.yaml", "hosts:\n  - name: a\nchecks:\n  - { slug: c, target: host:zz, kind: http }\n", 4, "no such entity"},
		{"site with a colon", "fleet.yaml", "hosts:\n  - name: a\n    site: \"east:orders\"\n", 2, "site \"east:orders\""},
		{"risk class", "fleet.yaml", "hosts:\n  - name: a\npolicy:\n  - { target: host:a, risk_class: scary }\n", 4, "risk_class"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(fstest.MapFS{tt.file: {Data: []byte(tt.data)}})
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a *Error", err)
			}
			if se.File != tt.file || se.Line != tt.wantLine {
				t.Errorf("located at %s:%d, want %s:%d (%v)", se.File, se.Line, tt.file, tt.wantLine, err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("err = %q, want it to mention %q", err, tt.wantMsg)
			}
		})
	}
}

// TestLoadReportsEveryMistake: a seed with a mistake in each section
// and in two files reports all of them at once, each at its file and line,
// so its author fixes them in one pass.
func TestLoadReportsEveryMistake(t *testing.T) {
	t.Parallel()
	fleet := `hosts:
  - name: Bad_Host
    containers:
      - vmid: 7
        hostname: web
        ip: 10.0.0.5
        services:
          - name: web
            unit: "web;reboot"
  - name: b
relationships:
  - { from: host:b, to: service:nope, type: depends_on }
  - { from: host:b, to: host:b, type: likes }
`
	rest := `checks:
  - { slug: c, target: host:b, kind: exec }
  - { slug: c, target: host:b, kind: ping, interval_seconds: 1 }
policy:
  - { target: host:b, risk_class: scary }
knowledge:
  - { slug: k, title: "", body: "" }
runbooks:
  - { slug: r, title: R, target_type: vm, triggers: [x] }
`
	_, err := Load(fstest.MapFS{"fleet.yaml": {Data: []byte(fleet)}, "more.yaml": {Data: []byte(rest)}})
	if err == nil {
		t.Fatal("Load accepted a seed full of mistakes")
	}
	var got []string
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("err = %T %v, want every mistake joined", err, err)
	}
	for _, e := range joined.Unwrap() {
		var se *Error
		if !errors.As(e, &se) {
			t.Fatalf("%v is a %T, want a *Error", e, e)
		}
		got = append(got, se.Error())
	}
	want := []string{
		`fleet.yaml:2: host name "Bad_Host": want a DNS label (a-z, 0-9, -)`,
		`fleet.yaml:4: container vmid 7: want 100..999999999`,
		`fleet.yaml:4: container 7 ip "10.0.0.5": want CIDR such as 10.0.0.5/24, or dhcp`,
		`fleet.yaml:8: service web unit "web;reboot": want a systemd unit name such as web.service`,
		`fleet.yaml:12: relationship to service:nope: no such entity in the seed`,
		`fleet.yaml:13: relationship type "likes": want one of hosts, runs, depends_on, routes_to`,
		`fleet.yaml:13: relationship from and to are the same entity`,
		`more.yaml:2: check kind "exec": want one of ` + strings.Join(policy.CheckKinds(), ", "),
		`more.yaml:3: duplicate check c`,
		`more.yaml:3: check c interval_seconds 1: want at least 5`,
		`more.yaml:5: policy risk_class "scary": want one of read_only, reversible_low, config_mutation, destructive`,
		`more.yaml:7: knowledge k: title and body are required`,
		`more.yaml:9: runbook r target_type "vm": want one of host, lxc, service`,
		`more.yaml:9: runbook r: needs at least one trigger and one step`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reported mistakes (-want +got):\n%s", diff)
	}
}

// TestSeedAcceptsThePlanUnitNames: a seed accepts exactly the unit names a plan
// accepts (policy.ValidateUnit), a bare name meaning name.service.
func TestSeedAcceptsThePlanUnitNames(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		unit string
		ok   bool
	}{
		{"jellyfin.service", true},
		{"jellyfin", true},
		{"getty@tty1.service", true},
		{"data.automount", true},
		{"getty@.service", false},
		{"a@b@c.service", false},
		{"-.mount", false},
		{"a..service", false},
	} {
		data := "hosts:\n  - name: a\n    containers:\n      - vmid: 100\n        hostname: x\n        ip: dhcp\n        services:\n          - name: s\n            unit: \"" + tt.unit + "\"\n"
		_, err := Load(fstest.MapFS{"fleet.yaml": {Data: []byte(data)}})
		if (err == nil) != tt.ok || (policy.ValidateUnit(tt.unit) == nil) != tt.ok {
			t.Errorf("unit %q: seed err = %v, policy err = %v; want both to accept it: %v", tt.unit, err, policy.ValidateUnit(tt.unit), tt.ok)
		}
	}
}

// TestEveryCheckKindCanBeSeeded: a seed may name exactly the check kinds
// the actuator runs (policy.CheckKinds), ping among them.
func TestEveryCheckKindCanBeSeeded(t *testing.T) {
	t.Parallel()
	for _, kind := range policy.CheckKinds() {
		data := "hosts:\n  - name: a\nchecks:\n  - { slug: c, target: host:a, kind: " + kind + " }\n"
		if _, err := Load(fstest.MapFS{"fleet.yaml": {Data: []byte(data)}}); err != nil && strings.Contains(err.Error(), "check kind") {
			t.Errorf("kind %s: %v", kind, err)
		}
	}
	_, err := Load(fstest.MapFS{"fleet.yaml": {Data: []byte("hosts:\n  - name: a\nchecks:\n  - { slug: c, target: host:a, kind: exec }\n")}})
	if err == nil || !strings.Contains(err.Error(), `check kind "exec"`) {
		t.Errorf("kind exec: err = %v, want it refused", err)
	}
}
