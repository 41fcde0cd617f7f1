package hostgate_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nomoshq/nomos/hostgate"
	"github.com/nomoshq/nomos/policy"
)

var (
	lxc101   = policy.Target{Type: policy.TargetLXC, ID: "ct-101", Slug: "lxc:101", Host: "strong", VMID: 101}
	vm200    = policy.Target{Type: policy.TargetVM, ID: "vm-200", Slug: "vm:strong/200", Host: "strong", VMID: 200}
	jellyfin = policy.Target{Type: policy.TargetService, ID: "svc-jellyfin", Slug: "service:jellyfin", Host: "strong", VMID: 101, Unit: "jellyfin"}
	caddy    = policy.Target{Type: policy.TargetService, ID: "svc-caddy", Slug: "service:caddy", Host: "strong", Unit: "caddy"}
	strong   = policy.Target{Type: policy.TargetHost, ID: "host-strong", Slug: "host:strong", Host: "strong"}
)

// renderedPlans covers every action of the catalogue, on each kind of
// target it takes, with the parameters that change its command line.
var renderedPlans = []struct {
	params policy.Params
	target policy.Target
}{
	{policy.RestartParams{}, jellyfin},
	{policy.RestartParams{}, caddy},
	{policy.SystemctlParams{Verb: policy.VerbReload}, jellyfin},
	{policy.SystemctlParams{Verb: policy.VerbStop}, caddy},
	{policy.SystemctlParams{Verb: policy.VerbDisable, Unit: "apt-daily.timer"}, lxc101},
	{policy.SystemctlParams{Verb: policy.VerbStart, Unit: `mnt-data\x2dvol.mount`}, lxc101},
	{policy.SystemctlParams{Verb: policy.VerbEnable, Unit: "getty@tty1"}, lxc101},
	{policy.PctExecParams{Command: "df -h; echo 'it''s' | tee /tmp/x && $(reboot) `id` *"}, lxc101},
	{policy.AptUpgradeParams{}, lxc101},
	{policy.AptUpgradeParams{Mode: policy.AptUpgrade}, lxc101},
	{policy.PctCreateParams{Hostname: "web"}, strong},
	{policy.PctCreateParams{Hostname: "web", Nesting: new(false), Onboot: new(false),
		Description: policy.CreateDescription("@alice:example.org", "", "0198c0de-0000-7000-8000-000000000001", "it's the family's \"wiki\" (50% done); see #12 & ask @bob: ok?")}, strong},
	{policy.PctCreateParams{
		VMID: 150, Hostname: "paperless", Cores: 2, Memory: 2048, DiskGB: 16, IP: "192.168.8.50/24", GW: "192.168.8.1",
		Storage: "local-zfs", Bridge: "vmbr1", Template: "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst", Nameserver: "1.1.1.1",
		Services: []string{"docker.io", "git", "g++"}, PostInstall: "curl -fsSL https://get.docker.com | sh\ndocker compose up -d",
		Privileged: true, Nesting: new(true),
	}, strong},
	{policy.PctStatusParams{}, lxc101},
	{policy.PctStartParams{}, lxc101},
	{policy.PctStopParams{}, lxc101},
	{policy.PctRebootParams{}, lxc101},
	{policy.PctSnapshotParams{Name: "nomos-20260706-101500"}, lxc101},
	{policy.PctRollbackParams{Name: "pre-upgrade"}, lxc101},
	{policy.PctDestroyParams{}, lxc101},
	{policy.PctDestroyParams{Purge: true}, lxc101},
	// The same actions on a VM render qm (policy/render.go).
	{policy.PctStatusParams{}, vm200},
	{policy.PctStartParams{}, vm200},
	{policy.GuestShutdownParams{}, vm200},
	{policy.GuestShutdownParams{Timeout: 5}, vm200},
	{policy.GuestShutdownParams{}, lxc101},
	{policy.PctStopParams{}, vm200},
	{policy.PctRebootParams{}, vm200},
	{policy.PctSnapshotParams{Name: "nomos-20260706-101500"}, vm200},
	{policy.PctSnapshotParams{Name: "before-update", VMState: true}, vm200},
	{policy.PctRollbackParams{Name: "pre-upgrade", Discard: []string{"later"}}, vm200},
	{policy.PctDestroyParams{}, vm200},
	{policy.PctExecParams{Command: "ha core check; echo 'it''s' $(id)"}, vm200},
	{policy.TailLogParams{}, jellyfin},
	{policy.TailLogParams{Lines: policy.MaxLogLines}, caddy},
	{policy.TailLogParams{Lines: 1}, lxc101},
	{policy.AptUpgradeParams{}, strong},
	{policy.AptUpgradeParams{Mode: policy.AptUpgrade}, strong},
	{policy.NodeRebootParams{}, strong},
}

// fill stands in for the actuator's own: the vmid and template it picks.
func fill(step string) string {
	step = strings.Replace(step, policy.VMIDPlaceholder, "100", 1)
	return strings.Replace(step, policy.TemplatePlaceholder, "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", 1)
}

// TestEveryRenderedStepPasses renders every action as the bot does and
// checks that the gate lets each step through unchanged.
func TestEveryRenderedStepPasses(t *testing.T) {
	t.Parallel()
	for _, p := range renderedPlans {
		steps, err := policy.Render(p.params, p.target)
		if err != nil {
			t.Fatalf("%s: Render: %v", p.params.Action(), err)
		}
		rules := hostgate.Rules{}
		if c, ok := p.params.(policy.PctCreateParams); ok && c.Privileged {
			rules.PrivilegedContainers = true
		}
		if p.target.VMID == 0 && p.target.Unit != "" {
			// A service on the node itself: systemctl changes it only
			// where host_units lists it (TestSystemctlOnTheNode).
			rules.HostUnits = []hostgate.HostUnit{{Unit: policy.NormalizeUnit(p.target.Unit), Verbs: []string{"restart", "stop"}}}
		}
		for _, step := range steps {
			step = fill(step)
			if _, err := hostgate.Check(step, rules); err != nil {
				t.Errorf("%s: the gate refuses %q: %v", p.params.Action(), step, err)
			}
		}
	}
}

// actuatorCommands are the command lines the actuator builds itself, beside
// the plan's steps: provisioning, snapshots, probes and inventory.
var actuatorCommands = []string{
	// Provisioning (actuator/provision.go).
	"pvesh get /cluster/nextid",
	"pvesm status --content vztmpl",
	"pveam list local",
	"pveam list nas-templates",
	"pvesh get /nodes/strong/lxc/150/interfaces --output-format json",
	"pct exec 100 -- getent hosts deb.debian.org",
	"pct exec 100 -- getent hosts archive.ubuntu.com",
	"pct exec 100 -- cat /etc/resolv.conf",
	`pct exec 100 -- sh -c 'printf '\''nameserver 1.1.1.1\nnameserver 9.9.9.9\n'\'' > /etc/resolv.conf && touch /etc/.pve-ignore.resolv.conf'`,
	"pct exec 100 -- sh -e -c " + policy.ShellQuote("set -x\ncurl -fsS http://localhost/ || exit 1"),
	// Snapshots before a change (actuator/execute.go).
	"pct snapshot 101 nomos-20260706-101500",
	"pct snapshot 101 nomos-20260706-101500-2",
	// Probes (actuator/probe.go), on the host and in a container.
	`curl -sS -o /dev/null -w '%{http_code}' --max-time 10 'http://10.0.0.21:8096/health'`,
	`curl -sS -o /dev/null -w '%{http_code}' --max-time 10 'https://git.example.org/api/v1/version?x=1&y=a,b'`,
	"ss -ltn",
	"pct exec 101 -- ss -ltn",
	"systemctl is-active 'caddy.service'",
	"pct exec 101 -- systemctl is-active 'jellyfin.service'",
	"pct exec 101 -- systemctl is-active nginx",
	"df -P '/'",
	"pct exec 101 -- df -P '/var/lib/postgresql'",
	"pct status 101",
	"getent hosts 'deb.debian.org'",
	"pct exec 101 -- getent hosts 'deb.debian.org'",
	"ping -c 3 -W 2 '192.168.8.1'",
	"ping -c 3 -W 2 'nas.lan'",
	// VMs: the inventory, the guest agent probe and a snapshot first.
	"pvesh get /nodes/strong/qemu --output-format json",
	"qm config 200 --current 1",
	"qm listsnapshot 200",
	"qm guest cmd 200 ping",
	"qm snapshot 200 nomos-20260706-101500",
	"qm list",
	// Fleet discovery and what an operator checks by hand.
	"pvesh get /cluster/resources --type vm --output-format json",
	"pvesh get /cluster/resources --output-format json", // the inventory, nodes included
	"pvesh get /nodes/strong/lxc/101/config --output-format json",
	"pvesh get /nodes/strong/lxc/101/status/current",
	"pct config 101",
	"pct list",
	"pct listsnapshot 101",
	"pct delsnapshot 101 nomos-20260706-101500",
	"pct stop 101",
	"pvesm status",
	// The inventory (actuator/inventory.go), once a run and per container.
	"pvesh get /nodes/strong/lxc --output-format json",
	"pvesh get /nodes/pve-01/lxc --output-format json",
	"pct config 101 --current 1",
	"pct listsnapshot 9001",
	// Previews (actuator/preview.go): what a plan would change, read
	// before approval.
	"pct exec 102 -- apt-get -s upgrade",
	"pvesh get /cluster/backup --output-format json",
	"pvesm list local --content backup --vmid 101",
	"pvesm list nas-backup --content backup --vmid 101",
	"pvesh get /nodes/strong/replication --output-format json",
	"pvesm list nas-backup --content backup",
}

func TestActuatorCommandsPass(t *testing.T) {
	t.Parallel()
	for _, cmd := range actuatorCommands {
		if _, err := hostgate.Check(cmd, hostgate.Rules{}); err != nil {
			t.Errorf("the gate refuses %q: %v", cmd, err)
		}
	}
}

// TestHostShellIsOptIn: the run action's sh -c on the host passes only
// with host_shell, and then only as sh -c SCRIPT.
func TestHostShellIsOptIn(t *testing.T) {
	t.Parallel()
	steps, err := policy.Render(policy.RunParams{Command: "pveversion -v | head -1; reboot"}, strong)
	if err != nil {
		t.Fatal(err)
	}
	step := steps[0]
	_, err = hostgate.Check(step, hostgate.Rules{})
	if !errors.Is(err, hostgate.ErrRefused) || !strings.Contains(err.Error(), "host_shell: true") {
		t.Errorf("without host_shell, %q: got %v, want a refusal naming host_shell: true", step, err)
	}
	argv, err := hostgate.Check(step, hostgate.Rules{HostShell: true})
	if err != nil {
		t.Fatalf("with host_shell, %q: %v", step, err)
	}
	if d := cmp.Diff([]string{"sh", "-c", "pveversion -v | head -1; reboot"}, argv); d != "" {
		t.Errorf("argv (-want +got):\n%s", d)
	}
	for _, cmd := range []string{"bash -c id", "sh", "sh -i", "sh -c id x", "sh /tmp/x", "sh -s", "python3 -c 'import os'", "/bin/sh -c id"} {
		if _, err := hostgate.Check(cmd, hostgate.Rules{HostShell: true}); !errors.Is(err, hostgate.ErrRefused) {
			t.Errorf("with host_shell, %q passed; only sh -c SCRIPT may", cmd)
		}
	}
}

// TestPrivilegedContainersAreOptIn: pct create passes with --unprivileged 1
// only, unless the rules allow privileged containers.
func TestPrivilegedContainersAreOptIn(t *testing.T) {
	t.Parallel()
	create := "pct create 150 local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --hostname web --net0 name=eth0,bridge=vmbr0,ip=dhcp"
	for _, tt := range []struct {
		opts       string
		rules      hostgate.Rules
		refusedFor string
	}{
		{" --unprivileged 1", hostgate.Rules{}, ""},
		{" --unprivileged 1 --features nesting=1", hostgate.Rules{}, ""},
		{" --unprivileged 0", hostgate.Rules{}, "privileged_containers: true"},
		{"", hostgate.Rules{}, "privileged_containers: true"},
		{" --features nesting=1", hostgate.Rules{HostShell: true}, "privileged_containers: true"},
		{" --unprivileged 0", hostgate.Rules{PrivilegedContainers: true}, ""},
		{"", hostgate.Rules{PrivilegedContainers: true}, ""},
	} {
		_, err := hostgate.Check(create+tt.opts, tt.rules)
		switch {
		case tt.refusedFor == "" && err != nil:
			t.Errorf("%q with %+v: %v", tt.opts, tt.rules, err)
		case tt.refusedFor != "" && (err == nil || !strings.Contains(err.Error(), tt.refusedFor)):
			t.Errorf("%q with %+v: got %v, want a refusal naming %s", tt.opts, tt.rules, err, tt.refusedFor)
		}
	}
}

// TestArgvIsWhatAShellWouldSee checks quote removal on the forms the
// actuator quotes.
func TestArgvIsWhatAShellWouldSee(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cmd  string
		want []string
	}{
		{"pct exec 101 -- sh -c 'echo '\\''hi'\\''; id'", []string{"pct", "exec", "101", "--", "sh", "-c", "echo 'hi'; id"}},
		{`pct exec 101 -- sh -c "a \"b\" \$c \\d \e"`, []string{"pct", "exec", "101", "--", "sh", "-c", `a "b" $c \d \e`}},
		{"pct\tstatus \\\n 101;", []string{"pct", "status", "101"}},
		{`pct exec 101 -- systemctl start 'mnt-data\x2dvol.mount'`, []string{"pct", "exec", "101", "--", "systemctl", "start", `mnt-data\x2dvol.mount`}},
		{`curl -sS -o /dev/null -w '%{http_code}' --max-time 10 'http://a/'`, []string{"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", "http://a/"}},
	}
	for _, tt := range tests {
		got, err := hostgate.Check(tt.cmd, hostgate.Rules{})
		if err != nil {
			t.Errorf("%q: %v", tt.cmd, err)
			continue
		}
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("%q (-want +got):\n%s", tt.cmd, d)
		}
		if back, err := hostgate.Parse(hostgate.Quote(got)); err != nil || !cmp.Equal(back, got) {
			t.Errorf("Quote(%q) = %q reads back as %q, %v", got, hostgate.Quote(got), back, err)
		}
	}
}

// refusals are what a taken actuator key might try on a host, with a
// part of the reason the gate gives.
var refusals = []struct{ cmd, why string }{
	// qm: only the forms the catalogue renders (issue 21).
	{"qm set 200 --memory 64", "not a qm subcommand"},
	{"qm set 200 --hookscript local:snippets/x.sh", "not a qm subcommand"},
	{"qm importdisk 200 /tmp/x.qcow2 local-lvm", "not a qm subcommand"},
	{"qm disk import 200 /tmp/x.qcow2 local-lvm", "not a qm subcommand"},
	{"qm disk unlink 200 --idlist scsi0 --force 1", "not a qm subcommand"},
	{"qm monitor 200", "not a qm subcommand"},
	{"qm terminal 200", "not a qm subcommand"},
	{"qm vncproxy 200", "not a qm subcommand"},
	{"qm sendkey 200 ctrl-alt-delete", "not a qm subcommand"},
	{"qm reset 200", "not a qm subcommand"},
	{"qm unlock 200", "not a qm subcommand"},
	{"qm shutdown 200 --timeout 60 --forceStop 1", "not an argument or option"},
	{"qm shutdown 200 --timeout 0", "option --timeout"},
	{"qm shutdown 200 --timeout 601", "option --timeout"},
	{"qm stop 200 --skiplock 1", "not an argument or option"},
	{"qm start 200 --skiplock 1", "not an argument or option"},
	{"qm destroy 200", "want 3 arguments"},
	{"qm destroy 200 --purge 1 --skiplock 1", "not an argument or option"},
	{"qm rollback 200 ../x", "argument 2"},
	{"qm snapshot 200 x1 --vmstate 0", "option --vmstate"},
	{"qm config 200 --snapshot x1", "not an argument or option"},
	{"qm status 0200", "argument 1"},
	{"qm guest cmd 200 shutdown", "want qm guest cmd VMID ping"},
	{"qm guest cmd 200 set-user-password", "want qm guest cmd VMID ping"},
	{"qm guest passwd 200 root", "want qm guest cmd VMID ping"},
	{"qm guest exec 200 -- rm -rf /", "not a command nomos runs in a VM"},
	{"qm guest exec 200 -- sh -i", "want sh -c SCRIPT"},
	{"qm guest exec 200 sh -c id", "want qm guest cmd VMID ping"},
	{"qm guest exec-status 200 1", "want qm guest cmd VMID ping"},
	{"qm", "without a subcommand"},
	{"", "no command"},
	{"   \n", "no command"},
	{"bash", `"bash" is not a command`},
	{"bash -i", `"bash" is not a command`},
	{"/bin/sh -c id", `"/bin/sh" is not a command`},
	{"/usr/sbin/pct list", `"/usr/sbin/pct" is not a command`},
	{"./pct list", "not a command"},
	{"sh -c 'pct list'", "host_shell: true"},
	{"python3 -c 'import pty; pty.spawn(\"/bin/sh\")'", "not a command"},
	{"perl -e 'exec \"/bin/sh\"'", "not a command"},
	{"env pct list", "on the node only"},
	{"exec pct list", "not a command"},
	{"command pct list", "not a command"},
	{"sudo pct list", "not a command"},
	{"scp -t /etc/pve", "not a command"},
	{"rsync --server . /", "not a command"},
	{"cat /etc/pve/priv/authkey.key", "not a command"},
	{"systemctl poweroff", "want 2 arguments"},
	{"systemctl start reboot.target", "a .target is never allowed"},
	{"systemctl start poweroff.target", "a .target is never allowed"},
	{"systemctl stop pve-cluster.service", "keeps the node reachable"},
	{"systemctl disable ssh.service", "keeps the node reachable"},
	{"systemctl restart caddy.service", "unless host_units"},
	{"systemctl restart", "want 2 arguments"},
	{"systemctl restart 'a b'", "not accepted by policy"},
	{"systemctl restart -H evil caddy", "not accepted by policy"},
	{"systemctl restart caddy --now", "want 2 arguments"},
	{"pct list; bash", "lists of commands"},
	{"pct list && reboot", "compound"},
	{"pct list | sh", "compound"},
	{"pct list\nreboot", "lists of commands"},
	{"pct list &", "background"},
	{"! pct list", "background"},
	{"pct list > /etc/pve/storage.cfg", "redirections"},
	{"pct list 2>/dev/null", "redirections"},
	{"pct list <<EOF\nx\nEOF", "redirections"},
	{"PATH=/tmp pct list", "assignments"},
	{"LD_PRELOAD=/tmp/x.so pct list", "assignments"},
	{"pct status $(reboot)", "substitutions"},
	{"pct status `reboot`", "substitutions"},
	{"pct status $VMID", "substitutions"},
	{"pct status ${x:-101}", "substitutions"},
	{"pct status $((100+1))", "substitutions"},
	{"pct status <(reboot)", "substitutions"},
	{"pct status \"$(reboot)\"", "inside double quotes"},
	{"pct status $'101'", "$'...'"},
	{"pct status 1*", `unquoted "*"`},
	{"pct status 10?", `unquoted "?"`},
	{"pct status [1]01", `unquoted "["`},
	{"pct status {101,102}", `unquoted "{"`},
	{"pct status ~root", `unquoted "~"`},
	{"pct status !101", `unquoted "!"`},
	{"pct status 101\x00; reboot", "NUL"},
	{"f() { reboot; }; f", "lists of commands"},
	{"{ pct list; }", "compound"},
	{"(pct list)", "compound"},
	{"if true; then reboot; fi", "compound"},
	{"time pct list", "compound"},
	{"[[ -v a[$(reboot)] ]]", "compound"},
	{"pct 'list", "does not parse"},
	{"pct", "without a subcommand"},
	{"pct enter 101", `"enter" is not a pct subcommand`},
	{"pct console 101", "not a pct subcommand"},
	{"pct push 101 /etc/pve/priv/authkey.key /tmp/k", "not a pct subcommand"},
	{"pct pull 101 /etc/shadow /etc/shadow", "not a pct subcommand"},
	{"pct mount 101", "not a pct subcommand"},
	{"pct set 101 --hookscript local:snippets/x.sh", "not a pct subcommand"},
	{"pct set 101 --mp0 /:/mnt/host", "not a pct subcommand"},
	{"pct restore 101 /tmp/x.tar", "not a pct subcommand"},
	{"pct status", "want 1 arguments"},
	{"pct status 99", "container id"},
	{"pct status 0101", "container id"},
	{"pct status +101", "container id"},
	{"pct status 1000000000", "container id"},
	{"pct status 101 102", "not an argument or option"},
	{"pct start 101 --skiplock 1", `"--skiplock" is not`},
	{"pct destroy 101 --force 1", `"--force" is not`},
	{"pct destroy 101 --purge", "needs a value"},
	{"pct destroy 101 --purge yes", "want one of 0, 1"},
	{"pct destroy 101 --purge=1", "not an argument or option"},
	{"pct shutdown 101 --timeout 60 --timeout 1", "given twice"},
	{"pct snapshot 101 current", "not accepted by policy"},
	{"pct snapshot 101 -x", "not accepted by policy"},
	{"pct rollback 101 'a;b'", "not accepted by policy"},
	{"pct create 150 /etc/shadow --hostname x", "not accepted by policy"},
	{"pct create 150 local:vztmpl/d.tar.zst --mp0 /:/mnt/host", `"--mp0" is not`},
	{"pct create 150 local:vztmpl/d.tar.zst --hookscript local:snippets/x.sh", `"--hookscript" is not`},
	{"pct create 150 local:vztmpl/d.tar.zst --dev0 /dev/sda", `"--dev0" is not`},
	{"pct create 150 local:vztmpl/d.tar.zst --ssh-public-keys /root/.ssh/authorized_keys", `"--ssh-public-keys" is not`},
	{"pct create 150 local:vztmpl/d.tar.zst --password x", `"--password" is not`},
	{"pct create 150 local:vztmpl/d.tar.zst --features nesting=1,mount=nfs", "want nesting=1"},
	{"pct create 150 local:vztmpl/d.tar.zst --features nesting=1,keyctl=1", "want nesting=1"},
	{"pct create 150 local:vztmpl/d.tar.zst --features keyctl=1", "want nesting=1"},
	{"pct create 150 local:vztmpl/d.tar.zst --features fuse=1", "want nesting=1"},
	{"pct create 150 local:vztmpl/d.tar.zst --features mknod=1", "want nesting=1"},
	{"pct create 150 local:vztmpl/d.tar.zst --features 'mount=nfs;cifs'", "want nesting=1"},
	{"pct create 150 local:vztmpl/d.tar.zst --features nesting=0", "want nesting=1"},
	{"pct create 150 local:vztmpl/d.tar.zst --features nesting=1 --features keyctl=1", "given twice"},
	{"pct create 150 local:vztmpl/d.tar.zst --onboot yes", "want one of 0, 1"},
	{"pct create 150 local:vztmpl/d.tar.zst --tags prod", "want nomos"},
	{"pct create 150 local:vztmpl/d.tar.zst --tags 'nomos;prod'", "want nomos"},
	{"pct create 150 local:vztmpl/d.tar.zst --tags nomos,admin", "want nomos"},
	{"pct create 150 local:vztmpl/d.tar.zst --description 'x\nlxc.mount.entry: /dev dev none bind'", "not accepted by policy"},
	{"pct create 150 local:vztmpl/d.tar.zst --description '<script>alert(1)</script>'", "not accepted by policy"},
	{"pct create 150 local:vztmpl/d.tar.zst --description '[x](javascript:alert(1))'", "not accepted by policy"},
	{"pct create 150 local:vztmpl/d.tar.zst --description '--hookscript=local:snippets/x.sh'", "not accepted by policy"},
	{"pct create 150 local:vztmpl/d.tar.zst --description " + strings.Repeat("a", policy.MaxDescriptionLen+1), "not accepted by policy"},
	{"pct create 150 local:vztmpl/d.tar.zst --description ''", "not accepted by policy"},
	{"pct create 150 local:vztmpl/d.tar.zst --rootfs local-lvm:8,mp=/", "want STORAGE:GB"},
	{"pct create 150 local:vztmpl/d.tar.zst --rootfs /dev/sda", "want STORAGE:GB"},
	{"pct create 150 local:vztmpl/d.tar.zst --net0 name=eth0,bridge=vmbr0,ip=dhcp,firewall=0", "want name=eth0"},
	{"pct create 150 local:vztmpl/d.tar.zst --net0 name=eth0,bridge=vmbr0,ip=127.0.0.1/8", "want name=eth0"},
	{"pct create 150 local:vztmpl/d.tar.zst --hostname 'a b'", "not accepted by policy"},
	{"pct create 150 local:vztmpl/d.tar.zst --hostname x", "privileged_containers: true"},
	{"pct create 150 local:vztmpl/d.tar.zst --unprivileged 0", "privileged_containers: true"},
	{"pct exec 101", "want pct exec VMID -- COMMAND"},
	{"pct exec 101 sh -c id", "want pct exec VMID -- COMMAND"},
	{"pct exec 101 --keep-env 1 -- sh -c id", "want pct exec VMID -- COMMAND"},
	{"pct exec 101 -- bash", `"bash" is not a command nomos runs in a container`},
	{"pct exec 101 -- sh", "want sh -c SCRIPT"},
	{"pct exec 101 -- sh -i", "want sh -c SCRIPT"},
	{"pct exec 101 -- sh -c", "want sh -c SCRIPT"},
	{"pct exec 101 -- sh -c id extra", "want sh -c SCRIPT"},
	{"pct exec 101 -- rm -rf /", "not a command nomos runs in a container"},
	{"pct exec 101 -- cat /etc/shadow", "want /etc/resolv.conf"},
	{"pct exec 101 -- apt-get -y install nmap", "want -q"},
	{"pct exec 101 -- env reboot", "only env DEBIAN_FRONTEND"},
	{"pct exec 101 -- env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Acquire::Retries=3 install", "want install PACKAGE"},
	{"pct exec 101 -- env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Acquire::Retries=3 install -o APT::Update::Pre-Invoke::=reboot", "install"},
	{"pct exec 101 -- env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Acquire::Retries=3 remove bash", "want install PACKAGE"},
	{"pct exec 101 -- df -P /; reboot", "lists of commands"},
	{"pct exec 101 -- curl http://x", "not a command nomos runs in a container"},
	{"pvesh", "only pvesh get"},
	{"pvesh create /nodes/strong/lxc", "only pvesh get"},
	{"pvesh set /cluster/options --keyboard de", "only pvesh get"},
	{"pvesh delete /nodes/strong/lxc/101", "only pvesh get"},
	{"pvesh get /access/users", "not a path nomos reads"},
	{"pvesh get /cluster/config/join", "not a path nomos reads"},
	{"pvesh get /nodes/strong/storage/local/file-restore/download", "not a path nomos reads"},
	{"pvesh get /nodes/strong/lxc/101/config/../../../../access/users", "not a path nomos reads"},
	{"pvesh get /nodes/strong/syslog", "not a path nomos reads"},
	{"pvesh get /nodes/strong/lxc/101/vncproxy", "not a path nomos reads"},
	{"pvesh get /cluster/nextid --vmid 100", "not an argument or option"},
	{"pvesh get /nodes --type vm", "not an argument or option"},
	{"pveam download local debian-12", "want list"},
	{"pveam list 'local;x'", "not accepted by policy"},
	{"pvesm free local:100/vm-100-disk-0.raw", "want status"},
	{"pvesm status local", "not an argument"},
	{"pct config 101 --current 2", "want one of 0, 1"},
	{"pct config 101 --current 1 --current 1", "given twice"},
	{"pct config 101 --snapshot before", "not an argument or option"},
	{"pct config 101;reboot", "lists of commands"},
	{"pct listsnapshot 101 102", "not an argument or option"},
	{"pct listsnapshot 99", "want a container id"},
	{"pvesh get /nodes/strong/lxc --type vm", "not an argument or option"},
	{"pvesh get /nodes/../lxc --output-format json", "not a path nomos reads"},
	{"pvesh get '/nodes/strong x/lxc' --output-format json", "not a path nomos reads"},
	{"pvesm status --content images", "want vztmpl"},
	{"pvesm list local", "want pvesm list STORAGE --content backup [--vmid VMID]"},
	{"pvesm list local --content images", "want backup"},
	{"pvesm list local --vmid 101", "not an argument or option"},
	{"pvesm list local --vmid 101 --vmid 102", "given twice"},
	{"pvesm list local --content images --vmid 101", "want backup"},
	{"pvesm list local --content backup --vmid 99", "want a container id"},
	{"pvesm list 'local;x' --content backup --vmid 101", "not accepted by policy"},
	{"pvesm alloc local 101 vm-101-disk-1 4G", "want status"},
	{"pct exec 102 -- apt-get -s install nginx", "want -q"},
	{"pct exec 102 -- apt-get -s -o APT::Get::Simulate=0 upgrade", "want"},
	{"pvesh get /cluster/backup/backup-1a2b/included_volumes", "not a path nomos reads"},
	// A node's replication jobs, in the preview's one form only.
	{"pvesh get /nodes/strong/replication", "want pvesh get /nodes/NODE/replication --output-format json"},
	{"pvesh get /nodes/strong/replication --output-format text", "want pvesh get /nodes/NODE/replication --output-format json"},
	{"pvesh get /nodes/strong/replication --output-format json --guest 101", "want pvesh get /nodes/NODE/replication"},
	{"pvesh get '/nodes/strong x/replication' --output-format json", "want pvesh get /nodes/NODE/replication"},
	{"pvesh get /nodes/strong/replication/101-0/log --output-format json", "not a path nomos reads"},
	{"pvesh create /nodes/strong/replication/101-0/schedule_now", "only pvesh get"},
	{"pvesm status --content vztmpl --storage local", "not an argument"},
	{"pvesm status --content vztmpl --content vztmpl", "given twice"},
	{"pvesh get /nodes/strong/lxc/101/interfaces/eth0", "not a path nomos reads"},
	{"pvesh get /nodes/strong/qemu/101/agent/network-get-interfaces", "not a path nomos reads"},
	{"pvesh get /nodes/strong/lxc/x/interfaces", "not a path nomos reads"},
	{"pvesh get /nodes/strong/network", "not a path nomos reads"},
	{"pvesh get /nodes/strong/lxc/101/interfaces --type vm", "not an argument or option"},
	{"curl -o /etc/pve/storage.cfg https://example.org/x", "want -sS"},
	{"curl -sS -o /dev/null -w '%{http_code}' --max-time 10 file:///etc/shadow", "want an http or https URL"},
	{"curl -sS -o /dev/null -w '%{http_code}' --max-time 10 http://user:pw@example.org/", "want an http or https URL"},
	{"curl -sS -o /dev/null -w '%{http_code}' --max-time 10 'http://example.org/{a,b}'", "want an http or https URL"},
	{"curl -sS -o /dev/null -w '%{http_code}' --max-time 10 'http://example.org/$x'", "want an http or https URL"},
	{"curl -sS -o /dev/null -w '%{http_code}' --max-time 10 -K /tmp/rc", "want an http or https URL"},
	{"curl -sS -o /dev/null -w '%{http_code}' --max-time 10 http://example.org/ -o /etc/x", "not an argument or option"},
	{"curl -sS -o /dev/null -w '%{http_code}' --max-time 10 @/etc/shadow", "want an http or https URL"},
	{"ping -f 10.0.0.1", "want -c"},
	{"ping -c 3 -W 2 -f", "want a host name"},
	{"ping -c 3 -W 2 10.0.0.1 -s 65000", "not an argument"},
	{"getent shadow root", "want hosts"},
	{"getent hosts -s x", "want a host name"},
	{"df -P relative", "want an absolute path"},
	{"ss -ltnp", "want -ltn"},
	{"ss -K dst 10.0.0.1", "want -ltn"},
	{"labsim fault clear", "not a command"},
	// tail_log: exactly -u UNIT -n N --no-pager, or -n N --no-pager.
	{"journalctl -u jellyfin.service -n 5; rm -rf /", "one simple command"},
	{"journalctl -u jellyfin.service -n '5; rm -rf /' --no-pager", "want a number from 1 to 100"},
	{"journalctl -u jellyfin.service -n 101 --no-pager", "want a number from 1 to 100"},
	{"journalctl -u jellyfin.service -n 0 --no-pager", "want a number from 1 to 100"},
	{"journalctl -u jellyfin.service -n 05 --no-pager", "want a number from 1 to 100"},
	{"journalctl -u jellyfin.service -n -5 --no-pager", "want a number from 1 to 100"},
	{"journalctl -u jellyfin.service -n 50 --no-pager -f", "not an argument or option"},
	{"journalctl -u jellyfin.service -n 50 -f", "want --no-pager"},
	{"journalctl -f -n 50 --no-pager", "want -n"},
	{"journalctl --unit=jellyfin --output-fields=MESSAGE -n 5 --no-pager", "want -n"},
	{"journalctl -u --output-fields=MESSAGE -n 5 --no-pager", "not accepted by policy"},
	{"journalctl -u '*' -n 5 --no-pager", "not accepted by policy"},
	{"journalctl -u jellyfin -n 5 --no-pager --file /etc/shadow", "not an argument or option"},
	{"journalctl -n 5 --no-pager -D /etc", "not an argument or option"},
	{"journalctl --vacuum-time=1s", "want -n"},
	{"journalctl -n 5 --no-pager --rotate", "not an argument or option"},
	{"pct exec 101 -- journalctl -u jellyfin -n 5 --no-pager -o json", "not an argument or option"},
	{"pct exec 101 -- journalctl -n 5 --no-pager --flush", "not an argument or option"},
	// node_reboot: shutdown -r +1 and nothing else.
	{"shutdown -h now", "want -r"},
	{"shutdown -P +1", "want -r"},
	{"shutdown -r now", "want +1"},
	{"shutdown -r +1 'going down'", "not an argument or option"},
	{"shutdown -c", "want -r"},
	{"reboot", "not a command"},
	{"poweroff", "not a command"},
	{"pct exec 101 -- shutdown -r +1", "not a command nomos runs in a container"},
	// apt_upgrade on the node: update, list --upgradable and dist-upgrade.
	{"apt-get install -y netcat", "want -q"},
	{"apt-get -q -o Acquire::Retries=3 install netcat", "want update"},
	{"apt-get -q -o APT::Update::Pre-Invoke::=reboot update", "want Acquire::Retries=3"},
	{"apt list --installed", "want --upgradable"},
	{"env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Acquire::Retries=3 install netcat", "on the node only"},
	{"env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Acquire::Retries=3 -o Dpkg::Options::=--force-confold upgrade", "on the node only"},
	{"env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Acquire::Retries=3 -o Dpkg::Options::=--force-confold dist-upgrade -o APT::Update::Post-Invoke=reboot", "on the node only"},
	{"env LD_PRELOAD=/tmp/x.so apt-get -q -y -o Acquire::Retries=3 -o Dpkg::Options::=--force-confold dist-upgrade", "on the node only"},
	{"cat /etc/resolv.conf", "not a command"},
	{strings.Repeat("x", hostgate.MaxCommandLen+1), "more than"},
}

func TestHostileCommandsAreRefused(t *testing.T) {
	t.Parallel()
	for _, r := range []hostgate.Rules{{}, {HostShell: true}} {
		for _, tt := range refusals {
			if r.HostShell && tt.why == "host_shell: true" {
				continue
			}
			argv, err := hostgate.Check(tt.cmd, r)
			name := tt.cmd
			if len(name) > 80 {
				name = name[:80] + "…"
			}
			switch {
			case err == nil:
				t.Errorf("%+v: %q passed as %q", r, name, argv)
			case !errors.Is(err, hostgate.ErrRefused):
				t.Errorf("%+v: %q: error %v does not wrap ErrRefused", r, name, err)
			case !strings.Contains(err.Error(), tt.why):
				t.Errorf("%+v: %q: refusal %q does not say %q", r, name, err, tt.why)
			case strings.Contains(err.Error(), "\n"):
				t.Errorf("%+v: %q: refusal spans lines: %q", r, name, err)
			}
		}
	}
}

// TestReviewedHostileCommands runs the commands an adversarial review used
// against the classifier (executions/gate_test.go) straight at the gate:
// none passes on the host, none passes as a bare guest command, and each
// passes inside a container only as the sh -c script an operator approved.
func TestReviewedHostileCommands(t *testing.T) {
	t.Parallel()
	for _, cmd := range hostileCommands(t) {
		for _, form := range []string{cmd, "pct exec 101 -- " + cmd, "sh -c " + policy.ShellQuote(cmd)} {
			if argv, err := hostgate.Check(form, hostgate.Rules{}); err == nil {
				t.Errorf("%q passed as %q", form, argv)
			}
		}
		inGuest := "pct exec 101 -- sh -c " + policy.ShellQuote(cmd)
		argv, err := hostgate.Check(inGuest, hostgate.Rules{})
		if err != nil {
			t.Errorf("%q: %v; an approved script runs in its container", inGuest, err)
			continue
		}
		if want := []string{"pct", "exec", "101", "--", "sh", "-c", cmd}; !cmp.Equal(want, argv) {
			t.Errorf("%q passed as %q, want %q", inGuest, argv, want)
		}
	}
}

func TestQuoteReadsBack(t *testing.T) {
	t.Parallel()
	for _, argv := range [][]string{
		{"pct", "exec", "101", "--", "sh", "-c", "echo 'a' \"b\" $c `d` \\e\n*?[]{}~!#"},
		{"a=b", "c"},
		{"if", "x"},
		{"x", ""},
		{"x", "#y", "-z", "%{http_code}"},
	} {
		back, err := hostgate.Parse(hostgate.Quote(argv))
		if err != nil || !cmp.Equal(argv, back) {
			t.Errorf("Quote(%q) = %s reads back as %q, %v", argv, strconv.Quote(hostgate.Quote(argv)), back, err)
		}
	}
}
