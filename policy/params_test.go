package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

type paramsTest struct {
	action Action
	raw    string
	want   Params // nil when an error is expected
	errs   []string
}

var paramsTests = []paramsTest{
	{action: ActionRestart, raw: "", want: RestartParams{}},
	{action: ActionRestart, raw: "null", want: RestartParams{}},
	{action: ActionRestart, raw: "{}", want: RestartParams{}},
	{action: ActionRestart, raw: `{"unit":"x"}`, errs: []string{"params.unit: is not a parameter of restart, which takes none"}},
	{action: ActionSystemctl, raw: `{"verb":"reload","unit":"caddy"}`, want: SystemctlParams{Verb: VerbReload, Unit: "caddy.service"}},
	{action: ActionSystemctl, raw: `{"verb":"enable"}`, want: SystemctlParams{Verb: VerbEnable}},
	{action: ActionSystemctl, raw: `{"verb":"mask","unit":"caddy"}`, errs: []string{`params.verb: must be one of enable, disable, reload, start, stop, restart, got "mask"`}},
	{action: ActionSystemctl, raw: `{"verb":"stop","unit":"caddy; reboot"}`, errs: []string{`params.unit: must be a systemd unit name`}},
	{action: ActionSystemctl, raw: `{"verb":"stop","unit":"-.mount"}`, errs: []string{`params.unit: must be a systemd unit name`}},
	{action: ActionPctExec, raw: `{"command":"df -h"}`, want: PctExecParams{Command: "df -h"}},
	{action: ActionPctExec, raw: `{"command":"echo 'a'\nls | wc -l"}`, want: PctExecParams{Command: "echo 'a'\nls | wc -l"}},
	{action: ActionPctExec, raw: `{"command":""}`, errs: []string{"params.command: is required: a shell command"}},
	{action: ActionPctExec, raw: `{"command":"   "}`, errs: []string{"params.command: is required"}},
	{action: ActionPctExec, raw: `{"command":"ls\u0000rm"}`, errs: []string{"params.command: must not contain NUL bytes (at byte 2)"}},
	{action: ActionPctExec, raw: `{"command":"ls\r\nrm"}`, errs: []string{"params.command: must not contain carriage returns"}},
	{action: ActionPctExec, raw: `{"command":"ls \u001b[2K"}`, errs: []string{"params.command: must not contain control character U+001B"}},
	{action: ActionPctExec, raw: `{"command":"echo \u202egnp.exe"}`, errs: []string{"params.command: U+202E RIGHT-TO-LEFT OVERRIDE is invisible (at byte 5)"}},
	// Characters that look like a space or a line break are word characters
	// to sh and bash: "x=1<NBSP>#; reboot" reads as a comment on the card
	// and reboots. Other invisible format characters (tags) hide text.
	{action: ActionPctExec, raw: `{"command":"x=1\u00a0#; reboot"}`, errs: []string{"params.command: U+00A0 NO-BREAK SPACE looks like a space or a line break but is not one to the shell (at byte 3)"}},
	{action: ActionPctExec, raw: `{"command":"x=1\u3164#; reboot"}`, errs: []string{"params.command: U+3164 HANGUL FILLER is invisible (at byte 3)"}},
	{action: ActionPctExec, raw: `{"command":"x=1\u2800#; reboot"}`, errs: []string{"params.command: U+2800 BRAILLE PATTERN BLANK looks like a space"}},
	{action: ActionPctExec, raw: `{"command":"x=1\u3000#; reboot"}`, errs: []string{"params.command: U+3000 IDEOGRAPHIC SPACE looks like a space"}},
	{action: ActionPctExec, raw: `{"command":"x=1\u2028#; reboot"}`, errs: []string{"params.command: U+2028 LINE SEPARATOR looks like a space"}},
	{action: ActionPctExec, raw: `{"command":"ls /srv\udb40\udc20"}`, errs: []string{"params.command: U+E0020 TAG SPACE is invisible (at byte 7)"}},
	// Quotes and comment signs drawn like the ASCII ones are letters to
	// the shell: the card would show a quoted string, and sh runs reboot.
	{action: ActionPctExec, raw: `{"command":"echo “x ; reboot ; y”"}`, errs: []string{`params.command: U+201C LEFT DOUBLE QUOTATION MARK looks like " but is not (at byte 5): the plan card must show what runs; type "`}},
	{action: ActionPctExec, raw: `{"command":"echo ‘x ; reboot ; y’"}`, errs: []string{`params.command: U+2018 LEFT SINGLE QUOTATION MARK looks like ' but is not`}},
	{action: ActionPctExec, raw: `{"command":"echo hi ＃; reboot"}`, errs: []string{`params.command: U+FF03 FULLWIDTH NUMBER SIGN looks like # but is not`}},
	{action: ActionPctExec, raw: `{"command":"echo hi ♯; reboot"}`, errs: []string{`params.command: U+266F MUSIC SHARP SIGN looks like # but is not`}},
	{action: ActionPctExec, raw: `{"command":"echo héllo 日本 ✅"}`, want: PctExecParams{Command: "echo héllo 日本 ✅"}},
	// Issue 19: every default-ignorable code point is refused, the emoji
	// presentation selector after an emoji too.
	{action: ActionPctExec, raw: `{"command":"echo héllo 日本 ✅️"}`, errs: []string{"params.command: U+FE0F VARIATION SELECTOR-16 is invisible (at byte 22)"}},
	{action: ActionPctExec, raw: `{"command":"-c id"}`, errs: []string{`params.command: must not start with "-"`}},
	{action: ActionPctExec, raw: `{"command":"` + strings.Repeat("x", MaxCommandLen+1) + `"}`, errs: []string{"params.command: must be at most 16384 bytes"}},
	{action: ActionPctExec, raw: `{"command":5}`, errs: []string{"params.command: must be a string, got number"}},
	{action: ActionPctExec, raw: `{"cmd":"ls"}`, errs: []string{"params.cmd: is not a parameter of pct_exec (known: command)"}},
	{action: ActionPctExec, raw: `{"command":"ls","command":"rm -rf /"}`, errs: []string{"params.command: is given more than once"}},
	{action: ActionPctExec, raw: `["ls"]`, errs: []string{"params: must be a JSON object, got a list"}},
	{action: ActionPctExec, raw: `{"command":"ls"} {"command":"rm"}`, errs: []string{"params: must be a single JSON object"}},
	{action: ActionPctExec, raw: `{"command":"ls"`, errs: []string{"params: not valid JSON"}},
	{action: ActionPctExec, raw: "{\"command\":\"l\xffs\"}", errs: []string{"params: must be valid UTF-8 JSON"}},
	{action: ActionAptUpgrade, raw: `{}`, want: AptUpgradeParams{Mode: AptAudit}},
	{action: ActionAptUpgrade, raw: `{"mode":"upgrade"}`, want: AptUpgradeParams{Mode: AptUpgrade}},
	{action: ActionAptUpgrade, raw: `{"mode":"dist-upgrade"}`, errs: []string{`params.mode: must be audit or upgrade, got "dist-upgrade"`}},
	{action: ActionPctCreate, raw: `{"hostname":"web"}`, want: PctCreateParams{
		Hostname: "web", Cores: 1, Memory: 512, DiskGB: 8, IP: "dhcp", Storage: "local-lvm", Bridge: "vmbr0",
		Nesting: new(true), Onboot: new(true),
	}},
	{action: ActionPctCreate, raw: `{"hostname":"web","privileged":true}`, want: PctCreateParams{
		Hostname: "web", Cores: 1, Memory: 512, DiskGB: 8, IP: "dhcp", Storage: "local-lvm", Bridge: "vmbr0",
		Privileged: true, Nesting: new(false), Onboot: new(true),
	}},
	{action: ActionPctCreate, raw: `{"hostname":"web","nesting":false,"onboot":false,"description":"Created by Nomos for @alice:example.org"}`, want: PctCreateParams{
		Hostname: "web", Cores: 1, Memory: 512, DiskGB: 8, IP: "dhcp", Storage: "local-lvm", Bridge: "vmbr0",
		Nesting: new(false), Onboot: new(false), Description: "Created by Nomos for @alice:example.org",
	}},
	{action: ActionPctCreate, raw: `{"hostname":"web","description":"x\nonboot: 0"}`, errs: []string{"params.description: must hold only letters, digits, spaces and"}},
	{action: ActionPctCreate, raw: `{"hostname":"web","description":"<img src=x onerror=alert(1)>"}`, errs: []string{"params.description: must hold only"}},
	{action: ActionPctCreate, raw: `{"hostname":"web","nesting":"yes"}`, errs: []string{"params.nesting: must be true or false"}},
	{action: ActionPctCreate, raw: `{
		"vmid": 150, "hostname": "paperless", "cores": 2, "memory": 2048, "disk_gb": 16,
		"ip": "192.168.8.50/24", "gw": "192.168.8.1", "storage": "local-zfs", "bridge": "vmbr1",
		"template": "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst", "nameserver": "1.1.1.1",
		"services": ["docker.io", "git"], "post_install": "docker compose up -d && curl -fsS http://localhost:8000/",
		"privileged": false, "nesting": true}`,
		want: PctCreateParams{
			VMID: 150, Hostname: "paperless", Cores: 2, Memory: 2048, DiskGB: 16, IP: "192.168.8.50/24", GW: "192.168.8.1",
			Storage: "local-zfs", Bridge: "vmbr1", Template: "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
			Nameserver: "1.1.1.1", Services: []string{"docker.io", "git"},
			PostInstall: "docker compose up -d && curl -fsS http://localhost:8000/", Nesting: new(true), Onboot: new(true),
		}},
	{action: ActionPctCreate, raw: `{"hostname":"foo;rm"}`, errs: []string{`params.hostname: must be a DNS label (a-z, 0-9, -), got "foo;rm"`}},
	{action: ActionPctCreate, raw: `{}`, errs: []string{"params.hostname: must be a DNS label (a-z, 0-9, -), got an empty string"}},
	{action: ActionPctCreate, raw: `{"hostname":"web","services":["docker.io","docker-compose-plugin"]}`,
		errs: []string{`params.services[1]: "docker-compose-plugin" is not in Debian's archive: put docker.io in services`}},
	{action: ActionPctCreate, raw: `{"hostname":"web","services":["git","git"]}`, errs: []string{`params.services[1]: lists "git" twice`}},
	{action: ActionPctCreate, raw: `{"hostname":"web","services":["git;reboot"]}`, errs: []string{"params.services[0]: must be a Debian package name"}},
	{action: ActionPctCreate, raw: `{"hostname":"web","services":"git"}`, errs: []string{"params.services: must be a list of strings, got string"}},
	{action: ActionPctCreate, raw: `{"hostname":"web","vmid":42}`, errs: []string{"params.vmid: must be a container id from 100 to 999999999, got 42"}},
	{action: ActionPctCreate, raw: `{"hostname":"web","vmid":"101"}`, errs: []string{"params.vmid: must be an integer, got string"}},
	{action: ActionPctCreate, raw: `{"hostname":"web","cores":2.5}`, errs: []string{"params.cores: must be an integer, got number 2.5"}},
	{action: ActionPctCreate, raw: `{"hostname":"web","cores":500,"memory":8,"disk_gb":-1}`, errs: []string{
		"params.cores: must be from 1 to 128, got 500", "params.memory: must be from 16 to 1048576 (MB), got 8", "params.disk_gb: must be from 1 to 65536 (GB), got -1"}},
	{action: ActionPctCreate, raw: `{"hostname":"web","ip":"192.168.8.50/24"}`, errs: []string{"params.gw: is required with a static ip; give the gateway of 192.168.8.0/24"}},
	{action: ActionPctCreate, raw: `{"hostname":"web","ip":"192.168.8.50/24","gw":"10.0.0.1"}`, errs: []string{`params.gw: must be another host address inside 192.168.8.0/24, got "10.0.0.1"`}},
	{action: ActionPctCreate, raw: `{"hostname":"web","ip":"192.168.8.50/24","gw":"192.168.8.50"}`, errs: []string{"params.gw: must be another host address"}},
	{action: ActionPctCreate, raw: `{"hostname":"web","ip":"dhcp","gw":"192.168.8.1"}`, errs: []string{`params.gw: must be empty with ip "dhcp"`}},
	{action: ActionPctCreate, raw: `{"hostname":"web","ip":"192.168.8.50"}`, errs: []string{`params.ip: must be "dhcp" or an IPv4 address with prefix length such as 192.168.8.50/24`}},
	{action: ActionPctCreate, raw: `{"hostname":"web","ip":"DHCP"}`, errs: []string{`params.ip: must be "dhcp" or`}},
	{action: ActionPctCreate, raw: `{"hostname":"web","nameserver":"127.0.0.53"}`, errs: []string{"params.nameserver: must be a reachable unicast resolver"}},
	{action: ActionPctCreate, raw: `{"hostname":"web","storage":"local lvm","template":"debian"}`, errs: []string{"params.storage:", "params.template:"}},
	{action: ActionPctCreate, raw: `{"hostname":"web","post_install":"apt-get install -y x\u0000"}`, errs: []string{"params.post_install: must not contain NUL bytes"}},
	{action: ActionPctCreate, raw: `{"hostname":"web","mounts":["/a"]}`, errs: []string{"params.mounts: is not a parameter of pct_create (known: vmid, hostname, cores"}},
	{action: ActionPctStart, raw: `{}`, want: PctStartParams{}},
	{action: ActionPctStop, raw: `{}`, want: PctStopParams{}},
	{action: ActionPctReboot, raw: `{}`, want: PctRebootParams{}},
	{action: ActionPctSnapshot, raw: `{}`, want: PctSnapshotParams{}},
	{action: ActionPctSnapshot, raw: `{"name":"pre-upgrade"}`, want: PctSnapshotParams{Name: "pre-upgrade"}},
	{action: ActionPctSnapshot, raw: `{"name":"pre upgrade"}`, errs: []string{"params.name: must be a snapshot name"}},
	{action: ActionPctRollback, raw: `{"name":"pre-upgrade"}`, want: PctRollbackParams{Name: "pre-upgrade"}},
	{action: ActionPctRollback, raw: `{}`, errs: []string{"params.name: is required: the snapshot to roll back to"}},
	{action: ActionPctRollback, raw: `{"name":"$(reboot)"}`, errs: []string{"params.name: must be a snapshot name"}},
	{action: ActionPctRollback, raw: `{"name":"a1","discard":["c3","b2"]}`, want: PctRollbackParams{Name: "a1", Discard: []string{"c3", "b2"}}},
	{action: ActionPctRollback, raw: `{"name":"a1","discard":[]}`, want: PctRollbackParams{Name: "a1"}},
	{action: ActionPctRollback, raw: `{"name":"a1","discard":["a1"]}`, errs: []string{"params.discard: names \"a1\" twice, or the snapshot rolled back to"}},
	{action: ActionPctRollback, raw: `{"name":"a1","discard":["x;reboot"]}`, errs: []string{"params.discard: must be a snapshot name"}},
	{action: ActionPctDestroy, raw: `{}`, want: PctDestroyParams{}},
	{action: ActionPctDestroy, raw: `{"purge":true}`, want: PctDestroyParams{Purge: true}},
	{action: ActionPctDestroy, raw: `{"purge":"yes"}`, errs: []string{"params.purge: must be true or false, got string"}},
	{action: ActionRun, raw: `{"command":"pct list"}`, want: RunParams{Command: "pct list"}},
	{action: "explode", raw: `{}`, errs: []string{`unknown action "explode" (known: restart, systemctl, pct_exec`}},
}

func TestParseParams(t *testing.T) {
	t.Parallel()
	for _, tt := range paramsTests {
		got, err := ParseParams(tt.action, json.RawMessage(tt.raw))
		if tt.want != nil {
			if err != nil {
				t.Errorf("ParseParams(%s, %s): %v", tt.action, tt.raw, err)
				continue
			}
			if d := diff(tt.want, got); d != "" {
				t.Errorf("ParseParams(%s, %s) %s", tt.action, tt.raw, d)
			}
			continue
		}
		if err == nil {
			t.Errorf("ParseParams(%s, %s) = %+v, want errors %q", tt.action, tt.raw, got, tt.errs)
			continue
		}
		sentinel := ErrInvalidParams
		if tt.action == "explode" {
			sentinel = ErrUnknownAction
		}
		if !errors.Is(err, sentinel) {
			t.Errorf("ParseParams(%s, %s) error %v does not match %v", tt.action, tt.raw, err, sentinel)
		}
		for _, want := range tt.errs {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("ParseParams(%s, %s) error:\n%v\nwant it to contain %q", tt.action, tt.raw, err, want)
			}
		}
	}
}

func TestParamErrorNamesField(t *testing.T) {
	t.Parallel()
	_, err := ParseParams(ActionPctCreate, json.RawMessage(`{"hostname":"foo;rm"}`))
	var pe *ParamError
	if !errors.As(err, &pe) || pe.Field != "hostname" {
		t.Fatalf("error %v: want a *ParamError for hostname", err)
	}
	if got, want := err.Error(), `params.hostname: must be a DNS label (a-z, 0-9, -), got "foo;rm"`; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
}

func TestValidateParams(t *testing.T) {
	t.Parallel()
	got, err := ValidateParams(SystemctlParams{Verb: VerbRestart, Unit: "caddy"})
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(SystemctlParams{Verb: VerbRestart, Unit: "caddy.service"}, got); d != "" {
		t.Errorf("ValidateParams %s", d)
	}
	if _, err := ValidateParams(nil); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("ValidateParams(nil) = %v", err)
	}
}

// roundTrip checks that canonical JSON parses back to the same parameters.
func roundTrip(t *testing.T, p Params) {
	t.Helper()
	raw, err := MarshalParams(p)
	if err != nil {
		t.Fatalf("MarshalParams(%+v): %v", p, err)
	}
	back, err := ParseParams(p.Action(), raw)
	if err != nil {
		t.Fatalf("ParseParams(MarshalParams(%+v)) = %s: %v", p, raw, err)
	}
	if d := diff(p, back); d != "" {
		t.Fatalf("round trip through %s %s", raw, d)
	}
	again, _ := MarshalParams(back)
	if string(again) != string(raw) {
		t.Fatalf("canonical JSON is not stable: %s then %s", raw, again)
	}
}

func TestMarshalParams(t *testing.T) {
	t.Parallel()
	for _, tt := range paramsTests {
		if tt.want != nil {
			roundTrip(t, tt.want)
		}
	}
	raw, err := MarshalParams(PctCreateParams{Hostname: "web", Services: []string{"git"}, PostInstall: "a<b && c>d"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"bridge":"vmbr0","cores":1,"disk_gb":8,"hostname":"web","ip":"dhcp","memory":512,"nesting":true,"onboot":true,"post_install":"a<b && c>d","services":["git"],"storage":"local-lvm"}`
	if string(raw) != want {
		t.Errorf("MarshalParams = %s\nwant %s", raw, want)
	}
}

// targetFor returns a valid target for p.
func targetFor(p Params) Target {
	if s, ok := p.(SystemctlParams); ok && s.Unit != "" {
		return lxc101
	}
	switch p.Action() {
	case ActionRestart, ActionSystemctl:
		return jellyfin
	case ActionPctCreate, ActionRun:
		return hostStrong
	}
	return lxc101
}

// FuzzParseParams fuzzes every action's parser from the table. Whatever
// parses must round-trip, render, and render to steps in which no parameter
// breaks out of its word.
func FuzzParseParams(f *testing.F) {
	for _, tt := range paramsTests {
		f.Add(string(tt.action), tt.raw)
	}
	f.Fuzz(func(t *testing.T, action, raw string) {
		p, err := ParseParams(Action(action), json.RawMessage(raw))
		if err != nil {
			if !errors.Is(err, ErrInvalidParams) && !errors.Is(err, ErrUnknownAction) {
				t.Fatalf("ParseParams error %v matches no sentinel", err)
			}
			return
		}
		roundTrip(t, p)
		if s, ok := p.(PctSnapshotParams); ok && s.Name == "" {
			p = PctSnapshotParams{Name: "auto"}
		}
		steps, err := Render(p, targetFor(p))
		if err != nil {
			t.Fatalf("Render(%+v): %v", p, err)
		}
		checkSteps(t, p, steps)
	})
}

// checkSteps parses each rendered step and checks it is one simple command
// of literal words, with free-form shell as exactly one word.
func checkSteps(t *testing.T, p Params, steps []string) {
	t.Helper()
	var shells []string
	switch p := p.(type) {
	case PctExecParams:
		shells = []string{p.Command}
	case RunParams:
		shells = []string{p.Command}
	case PctCreateParams:
		if p.PostInstall != "" {
			shells = []string{p.PostInstall}
		}
	}
	for _, step := range steps {
		step = strings.NewReplacer(VMIDPlaceholder, "123", TemplatePlaceholder, "local:vztmpl/t.tar.zst").Replace(step)
		ws, err := oneCommand(step)
		if err != nil {
			t.Fatalf("step %q is not one simple command of literal words: %v", step, err)
		}
		var words []string
		for _, w := range ws {
			if w.glob && !w.quoted {
				t.Fatalf("step %q has an unquoted glob in %q", step, w.raw)
			}
			words = append(words, w.val)
		}
		if n := len(words); n >= 2 && words[n-2] == "-c" {
			if len(shells) == 0 || words[n-1] != shells[0] {
				t.Fatalf("step %q: sh -c argument %q is not the free-form shell %q", step, words[n-1], shells)
			}
			shells = shells[1:]
		}
	}
	if len(shells) > 0 {
		t.Fatalf("free-form shell %q does not appear as one sh -c argument in %q", shells, steps)
	}
}

// TestTemplateFamilies: pct_create's template is a volume id or a family
// (distribution and release, as pveam names its templates); a family
// renders as the placeholder the actuator fills with the newest template
// of that family on the node.
func TestTemplateFamilies(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"debian-13", "debian-12", "ubuntu-24.04", "alpine-3.20", "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"} {
		if _, err := ValidateParams(PctCreateParams{Hostname: "wiki", Template: ok}); err != nil {
			t.Errorf("template %q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"debian", "Debian-13", "debian-13;reboot", "-13", "debian-13.1.2", "../debian-13", "debian 13"} {
		if _, err := ValidateParams(PctCreateParams{Hostname: "wiki", Template: bad}); err == nil || !strings.Contains(err.Error(), "template family such as debian-13") {
			t.Errorf("template %q: %v, want a refusal naming both forms", bad, err)
		}
	}
	steps, err := Render(PctCreateParams{Hostname: "wiki", Template: "debian-13"}, Target{Type: TargetHost, ID: "h", Slug: "host:hubris", Host: "hubris"})
	if err != nil || !strings.HasPrefix(steps[0], "pct create "+VMIDPlaceholder+" "+TemplatePlaceholder+" ") {
		t.Errorf("a family renders %q, %v; want the template placeholder", steps, err)
	}
}
