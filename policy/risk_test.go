package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestClassBasics(t *testing.T) {
	t.Parallel()
	if !(ReadOnly < ReversibleLow && ReversibleLow < ConfigMutation && ConfigMutation < Destructive) {
		t.Fatal("classes are not ordered")
	}
	for _, c := range Classes() {
		got, err := ParseClass(c.String())
		if err != nil || got != c {
			t.Errorf("ParseClass(%q) = %v, %v", c, got, err)
		}
		b, _ := json.Marshal(c)
		var back Class
		if err := json.Unmarshal(b, &back); err != nil || back != c {
			t.Errorf("JSON round trip of %s: %s, %v, %v", c, b, back, err)
		}
	}
	if _, err := ParseClass("dangerous"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("ParseClass(dangerous) = %v", err)
	}
	var o Override
	if err := json.Unmarshal([]byte(`{"service":"postgres","min_class":"config_mutation"}`), &o); err != nil {
		t.Fatal(err)
	}
	if o.MinClass != ConfigMutation || o.MaxClass != 0 {
		t.Errorf("decoded override %+v", o)
	}
	if Class(0).Valid() || Class(9).String() != "Class(9)" {
		t.Error("invalid classes are not reported as such")
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		params Params
		target Target
		want   Class
	}{
		{"restart", RestartParams{}, jellyfin, ReversibleLow},
		{"systemctl restart", SystemctlParams{Verb: VerbRestart}, jellyfin, ReversibleLow},
		{"systemctl stop", SystemctlParams{Verb: VerbStop, Unit: "caddy"}, lxc101, ReversibleLow},
		{"systemctl enable", SystemctlParams{Verb: VerbEnable}, jellyfin, ConfigMutation},
		{"systemctl disable", SystemctlParams{Verb: VerbDisable, Unit: "x.timer"}, lxc101, ConfigMutation},
		{"pct_exec read-only", PctExecParams{Command: "df -h | tail -1"}, lxc101, ReadOnly},
		{"pct_exec write", PctExecParams{Command: "echo x > /etc/motd"}, lxc101, ConfigMutation},
		{"pct_exec destructive", PctExecParams{Command: "rm -rf /var/lib/jellyfin"}, lxc101, Destructive},
		{"pct_exec reboot in container", PctExecParams{Command: "reboot"}, lxc101, ConfigMutation},
		{"apt audit", AptUpgradeParams{}, lxc101, ReadOnly},
		{"apt upgrade", AptUpgradeParams{Mode: AptUpgrade}, lxc101, ConfigMutation},
		{"pct_create", PctCreateParams{Hostname: "web", PostInstall: "rm -rf /tmp/build"}, hostStrong, ConfigMutation},
		{"pct_create privileged", PctCreateParams{Hostname: "web", Privileged: true, PostInstall: "mkfs.ext4 /dev/sdb"}, hostStrong, Destructive},
		{"pct_start", PctStartParams{}, lxc101, ReversibleLow},
		{"pct_stop", PctStopParams{}, lxc101, ReversibleLow},
		{"pct_reboot", PctRebootParams{}, lxc101, ReversibleLow},
		{"pct_snapshot", PctSnapshotParams{Name: "x1"}, lxc101, ReversibleLow},
		{"pct_rollback", PctRollbackParams{Name: "x1"}, lxc101, Destructive},
		{"pct_destroy", PctDestroyParams{}, lxc131, Destructive},
		{"run read-only", RunParams{Command: "pct list"}, hostStrong, ReadOnly},
		{"run reboot on host", RunParams{Command: "reboot"}, hostStrong, Destructive},
		{"run pct destroy", RunParams{Command: "pct destroy 131"}, hostStrong, Destructive},
	}
	for _, tt := range tests {
		got, err := Classify(tt.params, tt.target, nil)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if got.Class != tt.want {
			t.Errorf("%s: Classify = %s %q, want %s", tt.name, got.Class, got.Reasons, tt.want)
		}
		if len(got.Reasons) == 0 {
			t.Errorf("%s: no reasons", tt.name)
		}
	}
}

func TestClassifyOverrides(t *testing.T) {
	t.Parallel()
	lxc105 := Target{Type: TargetLXC, ID: "lxc-105", Slug: "lxc:105", Host: "strong", VMID: 105, Services: []string{"postgres"}}
	tests := []struct {
		name      string
		params    Params
		target    Target
		overrides []Override
		want      Class
		reason    string
	}{
		{"raise restart of postgres", RestartParams{}, postgres,
			[]Override{{Target: "service:postgres", MinClass: ConfigMutation}}, ConfigMutation, "raised to config_mutation by policy for service:postgres"},
		{"raise on a host's run", RunParams{Command: "systemctl restart pveproxy"}, Target{Type: TargetHost, ID: "h", Slug: "host:strong", Host: "strong"},
			[]Override{{Target: "host:strong", Action: ActionRun, MinClass: Destructive}}, Destructive, "raised to destructive by policy for host:strong"},
		{"raise on a container itself", PctRebootParams{}, lxc105,
			[]Override{{Target: "lxc:105", MinClass: ConfigMutation}}, ConfigMutation, "raised to config_mutation by policy for lxc:105"},
		{"raise on another container does not apply", PctRebootParams{}, lxc105,
			[]Override{{Target: "lxc:106", MinClass: ConfigMutation}}, ReversibleLow, ""},
		{"raise applies to the container too", PctStopParams{}, lxc105,
			[]Override{{Target: "service:postgres", MinClass: ConfigMutation}}, ConfigMutation, "raised to config_mutation by policy for service:postgres"},
		{"raise to destructive", RestartParams{}, postgres,
			[]Override{{Target: "service:postgres", MinClass: Destructive}}, Destructive, "raised to destructive"},
		{"other service untouched", RestartParams{}, jellyfin,
			[]Override{{Target: "service:postgres", MinClass: Destructive}}, ReversibleLow, ""},
		{"action-scoped override matches", RestartParams{}, postgres,
			[]Override{{Target: "service:postgres", Action: ActionRestart, MinClass: ConfigMutation}}, ConfigMutation, "raised"},
		{"action-scoped override skips others", SystemctlParams{Verb: VerbReload}, postgres,
			[]Override{{Target: "service:postgres", Action: ActionRestart, MinClass: ConfigMutation}}, ReversibleLow, ""},
		{"min_class raises read-only too", PctExecParams{Command: "df -h"}, lxc105,
			[]Override{{Target: "service:postgres", MinClass: Destructive}}, Destructive, "raised to destructive by policy for service:postgres"},
		{"a host's floor covers its containers", AptUpgradeParams{Mode: AptAudit}, lxc105,
			[]Override{{Target: "host:" + lxc105.Host, MinClass: ConfigMutation}}, ConfigMutation, "raised to config_mutation by policy for host:"},
		{"another host's floor does not", AptUpgradeParams{Mode: AptAudit}, lxc105,
			[]Override{{Target: "host:elsewhere", MinClass: ConfigMutation}}, ReadOnly, ""},
		{"a cap never lowers read-only further", AptUpgradeParams{Mode: AptAudit}, lxc105,
			[]Override{{Target: "lxc:105", MaxClass: ReversibleLow}}, ReadOnly, ""},
		{"a probe reads what the checks read, whatever the floor", PctStatusParams{}, lxc105,
			[]Override{{Target: "lxc:105", MinClass: Destructive}}, ReadOnly, ""},
		{"lower enable of jellyfin", SystemctlParams{Verb: VerbEnable}, jellyfin,
			[]Override{{Target: "service:jellyfin", MaxClass: ReversibleLow}}, ReversibleLow, "lowered to reversible_low by policy for service:jellyfin"},
		{"lowering stops at reversible_low", SystemctlParams{Verb: VerbEnable}, jellyfin,
			[]Override{{Target: "service:jellyfin", MaxClass: ReadOnly}}, ReversibleLow, "lowered to reversible_low"},
		{"lowering never touches destructive", PctExecParams{Command: "rm -rf /"}, lxc105,
			[]Override{{Target: "service:postgres", MaxClass: ReadOnly}}, Destructive, ""},
		{"lowering needs the service as target", PctExecParams{Command: "apt-get update"}, lxc105,
			[]Override{{Target: "service:postgres", MaxClass: ReversibleLow}}, ConfigMutation, ""},
		{"raise beats lower", SystemctlParams{Verb: VerbEnable}, jellyfin,
			[]Override{{Target: "service:jellyfin", MaxClass: ReversibleLow}, {Target: "service:jellyfin", MinClass: Destructive}}, Destructive, "raised"},
		{"highest cap wins", SystemctlParams{Verb: VerbEnable}, jellyfin,
			[]Override{{Target: "service:jellyfin", MaxClass: ReversibleLow}, {Target: "service:jellyfin", MaxClass: ConfigMutation}}, ConfigMutation, ""},
	}
	for _, tt := range tests {
		got, err := Classify(tt.params, tt.target, tt.overrides)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if got.Class != tt.want {
			t.Errorf("%s: Classify = %s %q, want %s", tt.name, got.Class, got.Reasons, tt.want)
		}
		if tt.reason != "" && (len(got.Reasons) == 0 || !strings.HasPrefix(got.Reasons[0], tt.reason)) {
			t.Errorf("%s: reasons %q, want first %q", tt.name, got.Reasons, tt.reason)
		}
	}
}

func TestOverrideValidate(t *testing.T) {
	t.Parallel()
	bad := []Override{
		{Target: "", MinClass: ReadOnly},
		{Target: "service:Postgres", MinClass: ConfigMutation},
		{Target: "service:postgres"},
		{Target: "service:postgres", MinClass: Destructive, MaxClass: ReversibleLow},
		{Target: "service:postgres", Action: "explode", MinClass: Destructive},
		{Target: "service:postgres", MinClass: 7},
	}
	for _, o := range bad {
		if err := o.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: Validate = %v, want ErrInvalidConfig", o, err)
		}
		if _, err := Classify(RestartParams{}, postgres, []Override{o}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: Classify = %v, want ErrInvalidConfig", o, err)
		}
	}
}

func TestNeedsSnapshot(t *testing.T) {
	t.Parallel()
	tests := []struct {
		params Params
		target Target
		class  Class
		want   bool
	}{
		{PctExecParams{Command: "apt-get install -y x"}, lxc101, ConfigMutation, true},
		{PctExecParams{Command: "rm -rf /srv"}, lxc101, Destructive, true},
		{PctExecParams{Command: "df"}, lxc101, ReadOnly, false},
		{RestartParams{}, jellyfin, ReversibleLow, false},
		{RestartParams{}, postgres, ConfigMutation, true},
		{RestartParams{}, hostService, ConfigMutation, false},
		{AptUpgradeParams{Mode: AptUpgrade}, lxc101, ConfigMutation, true},
		{PctDestroyParams{}, lxc131, Destructive, false},
		{PctRollbackParams{Name: "x1"}, lxc101, Destructive, false},
		{PctCreateParams{Hostname: "web"}, hostStrong, ConfigMutation, false},
		{RunParams{Command: "reboot"}, hostStrong, Destructive, false},
	}
	for _, tt := range tests {
		if got := NeedsSnapshot(tt.params, tt.target, tt.class); got != tt.want {
			t.Errorf("NeedsSnapshot(%T, %s, %s) = %v", tt.params, tt.target.Slug, tt.class, got)
		}
	}
}
