package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var hostService = Target{Type: TargetService, ID: "svc-caddy", Slug: "service:caddy", Host: "strong", Unit: "caddy"}

func TestRender(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		params Params
		target Target
		want   []string
	}{
		{"restart", RestartParams{}, jellyfin, []string{"pct exec 101 -- systemctl restart jellyfin.service"}},
		{"restart bare unit", RestartParams{}, postgres, []string{"pct exec 105 -- systemctl restart postgresql.service"}},
		{"restart on the host", RestartParams{}, hostService, []string{"systemctl restart caddy.service"}},
		{"systemctl service", SystemctlParams{Verb: VerbReload}, jellyfin, []string{"pct exec 101 -- systemctl reload jellyfin.service"}},
		{"systemctl lxc", SystemctlParams{Verb: VerbDisable, Unit: "apt-daily.timer"}, lxc101, []string{"pct exec 101 -- systemctl disable apt-daily.timer"}},
		{"systemctl escaped unit", SystemctlParams{Verb: VerbStart, Unit: `mnt-data\x2dvol.mount`}, lxc101,
			[]string{`pct exec 101 -- systemctl start 'mnt-data\x2dvol.mount'`}},
		{"pct_exec", PctExecParams{Command: "df -h; echo 'it''s'"}, lxc101,
			[]string{`pct exec 101 -- sh -c 'df -h; echo '\''it'\'''\''s'\'''`}},
		{"apt audit", AptUpgradeParams{}, lxc101, []string{
			"pct exec 101 -- apt-get -q -o Acquire::Retries=3 update",
			"pct exec 101 -- apt list --upgradable",
		}},
		{"apt upgrade", AptUpgradeParams{Mode: AptUpgrade}, lxc101, []string{
			"pct exec 101 -- apt-get -q -o Acquire::Retries=3 update",
			"pct exec 101 -- env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Acquire::Retries=3 -o Dpkg::Options::=--force-confold upgrade",
		}},
		{"pct_create defaults", PctCreateParams{Hostname: "web"}, hostStrong, []string{
			"pct create $VMID $TEMPLATE --hostname web --cores 1 --memory 512 --rootfs local-lvm:8 --net0 name=eth0,bridge=vmbr0,ip=dhcp --unprivileged 1 --features nesting=1 --onboot 1 --tags nomos",
			"pct start $VMID",
		}},
		{"pct_create without nesting or onboot", PctCreateParams{Hostname: "web", Nesting: new(false), Onboot: new(false)}, hostStrong, []string{
			"pct create $VMID $TEMPLATE --hostname web --cores 1 --memory 512 --rootfs local-lvm:8 --net0 name=eth0,bridge=vmbr0,ip=dhcp --unprivileged 1 --onboot 0 --tags nomos",
			"pct start $VMID",
		}},
		{"pct_create privileged", PctCreateParams{Hostname: "web", Privileged: true}, hostStrong, []string{
			"pct create $VMID $TEMPLATE --hostname web --cores 1 --memory 512 --rootfs local-lvm:8 --net0 name=eth0,bridge=vmbr0,ip=dhcp --unprivileged 0 --onboot 1 --tags nomos",
			"pct start $VMID",
		}},
		{"pct_create described", PctCreateParams{Hostname: "web", Description: CreateDescription("@alice:example.org", "", "0198c0de-0000-7000-8000-000000000001", "it's for the wiki")}, hostStrong, []string{
			"pct create $VMID $TEMPLATE --hostname web --cores 1 --memory 512 --rootfs local-lvm:8 --net0 name=eth0,bridge=vmbr0,ip=dhcp --unprivileged 1 --features nesting=1 --onboot 1 --tags nomos " +
				`--description 'Created by Nomos for @alice:example.org, execution 0198c0de-0000-7000-8000-000000000001. Reason: it'\''s for the wiki'`,
			"pct start $VMID",
		}},
		{"pct_create full", PctCreateParams{
			VMID: 150, Hostname: "paperless", Cores: 2, Memory: 2048, DiskGB: 16, IP: "192.168.8.50/24", GW: "192.168.8.1",
			Storage: "local-zfs", Template: "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst", Nameserver: "1.1.1.1",
			Services: []string{"docker.io", "git"}, PostInstall: "curl -fsSL https://get.docker.com | sh\ndocker compose up -d",
			Privileged: true, Nesting: new(true),
		}, hostStrong, []string{
			"pct create 150 local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --hostname paperless --cores 2 --memory 2048 --rootfs local-zfs:16 --net0 name=eth0,bridge=vmbr0,ip=192.168.8.50/24,gw=192.168.8.1 --unprivileged 0 --features nesting=1 --onboot 1 --tags nomos --nameserver 1.1.1.1",
			"pct start 150",
			"pct exec 150 -- apt-get -q -o Acquire::Retries=3 update",
			"pct exec 150 -- env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Acquire::Retries=3 install docker.io git",
			"pct exec 150 -- sh -c 'curl -fsSL https://get.docker.com | sh\ndocker compose up -d'",
		}},
		{"pct_start", PctStartParams{}, lxc101, []string{"pct start 101"}},
		{"pct_stop", PctStopParams{}, lxc101, []string{"pct shutdown 101 --timeout 60 --forceStop 1"}},
		{"pct_reboot", PctRebootParams{}, lxc101, []string{"pct reboot 101"}},
		{"pct_snapshot", PctSnapshotParams{Name: "pre-upgrade"}, lxc101, []string{"pct snapshot 101 pre-upgrade"}},
		{"pct_rollback", PctRollbackParams{Name: "pre-upgrade"}, lxc101, []string{"pct rollback 101 pre-upgrade"}},
		{"pct_rollback past newer snapshots", PctRollbackParams{Name: "a1", Discard: []string{"c3", "b2"}}, lxc101,
			[]string{"pct delsnapshot 101 c3", "pct delsnapshot 101 b2", "pct rollback 101 a1"}},
		{"pct_destroy", PctDestroyParams{}, lxc131, []string{"pct destroy 131"}},
		{"pct_destroy purge", PctDestroyParams{Purge: true}, lxc131, []string{"pct destroy 131 --purge 1"}},
		{"run", RunParams{Command: "pct list"}, hostStrong, []string{"sh -c 'pct list'"}},
	}
	for _, tt := range tests {
		got, err := Render(tt.params, tt.target)
		if err != nil {
			t.Errorf("%s: Render: %v", tt.name, err)
			continue
		}
		if d := diff(tt.want, got); d != "" {
			t.Errorf("%s: Render %s", tt.name, d)
		}
		p, _ := ValidateParams(tt.params)
		checkSteps(t, p, got)
	}
}

func TestRenderRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		params   Params
		target   Target
		sentinel error
		want     string
	}{
		{"restart an lxc", RestartParams{}, lxc101, ErrInvalidTarget, "restart takes a service target, got lxc:101"},
		{"pct_create in an lxc", PctCreateParams{Hostname: "web"}, lxc101, ErrInvalidTarget, "pct_create takes a host target"},
		{"run in a service", RunParams{Command: "ls"}, jellyfin, ErrInvalidTarget, "run takes a host target"},
		{"systemctl lxc without unit", SystemctlParams{Verb: VerbStop}, lxc101, ErrInvalidParams, "params.unit: is required for an lxc target: which unit to stop"},
		{"systemctl other unit", SystemctlParams{Verb: VerbStop, Unit: "ssh"}, jellyfin, ErrInvalidParams, "params.unit: must be empty or jellyfin.service for target service:jellyfin"},
		{"snapshot without name", PctSnapshotParams{}, lxc101, ErrInvalidParams, "params.name: is required before rendering"},
		{"invalid params", PctExecParams{Command: "ls\x00"}, lxc101, ErrInvalidParams, "NUL"},
		{"slug and vmid disagree", PctStartParams{}, Target{Type: TargetLXC, ID: "x", Slug: "lxc:101", Host: "strong", VMID: 102}, ErrInvalidTarget, "target.vmid 102 does not match slug"},
		{"type and slug disagree", PctStartParams{}, Target{Type: TargetHost, ID: "x", Slug: "lxc:101", Host: "strong", VMID: 101}, ErrInvalidTarget, "does not match slug"},
		{"no id", PctStartParams{}, Target{Type: TargetLXC, Slug: "lxc:101", Host: "strong", VMID: 101}, ErrInvalidTarget, "target.id"},
		{"bad host", PctStartParams{}, Target{Type: TargetLXC, ID: "x", Slug: "lxc:101", Host: "strong;reboot", VMID: 101}, ErrInvalidTarget, "target.host"},
		{"host slug and name disagree", RunParams{Command: "ls"}, Target{Type: TargetHost, ID: "x", Slug: "host:strong", Host: "hubris"}, ErrInvalidTarget, "does not match slug"},
		{"bad unit", RestartParams{}, Target{Type: TargetService, ID: "x", Slug: "service:x", Host: "strong", VMID: 101, Unit: "x;reboot"}, ErrInvalidTarget, "target.unit"},
	}
	for _, tt := range tests {
		_, err := Render(tt.params, tt.target)
		if !errors.Is(err, tt.sentinel) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Render error %v, want %v containing %q", tt.name, err, tt.sentinel, tt.want)
		}
	}
}

func TestSnapshotName(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 7, 6, 12, 15, 0, 0, time.FixedZone("CEST", 2*3600))
	got := SnapshotName(at)
	if got != "nomos-20260706-101500" {
		t.Errorf("SnapshotName = %q", got)
	}
	if err := ValidateSnapshotName(got); err != nil {
		t.Errorf("SnapshotName %q does not validate: %v", got, err)
	}
}

func TestCatalogue(t *testing.T) {
	t.Parallel()
	specs := Catalogue()
	if len(specs) != len(kinds) {
		t.Fatalf("catalogue has %d actions, parameter kinds %d", len(specs), len(kinds))
	}
	verbs := map[string]bool{}
	for _, s := range specs {
		if _, ok := kinds[s.Action]; !ok {
			t.Errorf("%s has no parameter type", s.Action)
		}
		if verbs[s.Verb] {
			t.Errorf("verb %q is used twice", s.Verb)
		}
		verbs[s.Verb] = true
		if len(s.Targets) == 0 || s.Summary == "" {
			t.Errorf("%s is incomplete: %+v", s.Action, s)
		}
		got, err := Lookup(s.Action)
		if err != nil || got.Verb != s.Verb {
			t.Errorf("Lookup(%s) = %+v, %v", s.Action, got, err)
		}
	}
	specs[0].Targets[0] = TargetHost
	if again, _ := Lookup(specs[0].Action); again.Targets[0] == TargetHost {
		t.Errorf("Catalogue returned shared slices")
	}
	if _, err := Lookup("nope"); !errors.Is(err, ErrUnknownAction) {
		t.Errorf("Lookup(nope) = %v", err)
	}
}
