package bot

import (
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/seeds"
	"github.com/nomoshq/nomos/store"
)

// seedRunbooks loads the runbooks the demo ships, once.
var seedRunbooks = sync.OnceValues(func() ([]store.Runbook, error) {
	s, err := fleetseed.Load(seeds.FS)
	if err != nil {
		return nil, err
	}
	return s.Runbooks, nil
})

func testRunbooks(t testing.TB) []store.Runbook {
	t.Helper()
	rbs, err := seedRunbooks()
	if err != nil {
		t.Fatalf("load seed runbooks: %v", err)
	}
	return rbs
}

type kv = map[string]any

// commandTests is the grammar's table; FuzzParseCommand is seeded from it.
// hint marks a CmdUnknown that must carry a usage hint.
var commandTests = []struct {
	text string
	want Command
	hint bool
}{
	// Forgetting an agent session: its id, nothing else.
	{text: "forget session 0193f0a2-7c1e-7d6b-9a51-2f0c1d3e4b5a", want: Command{Kind: CmdForgetSession, Target: "0193f0a2-7c1e-7d6b-9a51-2f0c1d3e4b5a"}},
	{text: "forget session 42", want: Command{}, hint: true},
	{text: "forget session", want: Command{}, hint: true},
	{text: "forget session 0193f0a2-7c1e-7d6b-9a51-2f0c1d3e4b5a and more", want: Command{}, hint: true},

	// Help.
	{text: "help", want: Command{Kind: CmdHelp}},
	{text: "Help!", want: Command{Kind: CmdHelp}},
	{text: "?", want: Command{Kind: CmdHelp}},
	{text: "nomos: help", want: Command{Kind: CmdHelp}},
	{text: "commands", want: Command{Kind: CmdHelp}},
	{text: "what can you do?", want: Command{Kind: CmdHelp}},

	// Status.
	{text: "status", want: Command{Kind: CmdStatus}},
	{text: "Status?", want: Command{Kind: CmdStatus}},
	{text: "@nomos status", want: Command{Kind: CmdStatus}},
	{text: "fleet status please", want: Command{Kind: CmdStatus}},
	{text: "how's everything?", want: Command{Kind: CmdStatus}},

	// Listing.
	{text: "list containers", want: Command{Kind: CmdListContainers}},
	{text: "list lxcs", want: Command{Kind: CmdListContainers}},
	{text: "containers", want: Command{Kind: CmdListContainers}},
	{text: "ls", want: Command{Kind: CmdListContainers}},
	{text: "LS", want: Command{Kind: CmdListContainers}},
	{text: "list", want: Command{Kind: CmdListContainers}},
	{text: "show all containers", want: Command{Kind: CmdListContainers}},
	{text: "pct list", want: Command{Kind: CmdListContainers}},
	{text: "list services", want: Command{Kind: CmdListContainers}},
	{text: "list vms", want: Command{Kind: CmdListContainers, Target: "vm"}},
	{text: "show all VMs", want: Command{Kind: CmdListContainers, Target: "vm"}},
	{text: "list guests", want: Command{Kind: CmdListContainers, Target: "guests"}},
	{text: "guests", want: Command{Kind: CmdListContainers, Target: "guests"}},

	// Show.
	{text: "show jellyfin", want: Command{Kind: CmdShow, Target: "jellyfin"}},
	{text: "show lxc:101", want: Command{Kind: CmdShow, Target: "lxc:101"}},
	{text: "show LXC:101", want: Command{Kind: CmdShow, Target: "lxc:101"}},
	// A container's full name: its cluster and vmid.
	{text: "show lxc:strong/101", want: Command{Kind: CmdShow, Target: "lxc:strong/101"}},
	{text: "show strong/100", want: Command{Kind: CmdShow, Target: "strong/100"}},
	{text: "show me the jellyfin service", want: Command{Kind: CmdShow, Target: "jellyfin"}},
	{text: "status jellyfin", want: Command{Kind: CmdShow, Target: "jellyfin"}},
	{text: "info 101", want: Command{Kind: CmdShow, Target: "101"}},
	{text: "show container 101?", want: Command{Kind: CmdShow, Target: "101"}},
	{text: "show", want: Command{}, hint: true},

	// Restart.
	{text: "restart jellyfin", want: Command{Kind: CmdAction, Target: "jellyfin", Action: policy.ActionRestart, Params: kv{}}},
	{text: "nomos: restart jellyfin", want: Command{Kind: CmdAction, Target: "jellyfin", Action: policy.ActionRestart, Params: kv{}}},
	{text: "Nomos, restart jellyfin", want: Command{Kind: CmdAction, Target: "jellyfin", Action: policy.ActionRestart, Params: kv{}}},
	{text: "@nomos restart jellyfin", want: Command{Kind: CmdAction, Target: "jellyfin", Action: policy.ActionRestart, Params: kv{}}},
	{text: "@nomos:example.org: restart jellyfin", want: Command{Kind: CmdAction, Target: "jellyfin", Action: policy.ActionRestart, Params: kv{}}},
	{text: "!nomos restart jellyfin", want: Command{Kind: CmdAction, Target: "jellyfin", Action: policy.ActionRestart, Params: kv{}}},
	{text: "hey nomos, restart jellyfin", want: Command{Kind: CmdAction, Target: "jellyfin", Action: policy.ActionRestart, Params: kv{}}},
	{text: "Restart Jellyfin.", want: Command{Kind: CmdAction, Target: "Jellyfin", Action: policy.ActionRestart, Params: kv{}}},
	{text: "restart jellyfin please", want: Command{Kind: CmdAction, Target: "jellyfin", Action: policy.ActionRestart, Params: kv{}}},
	{text: "please restart the jellyfin service", want: Command{Kind: CmdAction, Target: "jellyfin", Action: policy.ActionRestart, Params: kv{}}},
	{text: "could you restart jellyfin?", want: Command{Kind: CmdAction, Target: "jellyfin", Action: policy.ActionRestart, Params: kv{}}},
	{text: "restart service:jellyfin", want: Command{Kind: CmdAction, Target: "service:jellyfin", Action: policy.ActionRestart, Params: kv{}}},
	{text: "bounce jellyfin", want: Command{Kind: CmdAction, Target: "jellyfin", Action: policy.ActionRestart, Params: kv{}}},
	{text: "restart container 101", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctReboot, Params: kv{}}},
	{text: "restart lxc:101", want: Command{Kind: CmdAction, Target: "lxc:101", Action: policy.ActionPctReboot, Params: kv{}}},
	{text: "restart jellyfin and gitea", want: Command{}, hint: true},
	{text: "restart it", want: Command{}, hint: true},
	{text: "restart", want: Command{}, hint: true},
	{text: "restart service", want: Command{}, hint: true},
	{text: "restart host strong", want: Command{Kind: CmdAction, Target: "strong", Action: policy.ActionNodeReboot, Params: kv{}}},

	// Nodes.
	{text: "reboot host strong", want: Command{Kind: CmdAction, Target: "strong", Action: policy.ActionNodeReboot, Params: kv{}}},
	{text: "reboot the node strong please", want: Command{Kind: CmdAction, Target: "strong", Action: policy.ActionNodeReboot, Params: kv{}}},
	{text: "reboot host:strong", want: Command{Kind: CmdAction, Target: "host:strong", Action: policy.ActionNodeReboot, Params: kv{}}},
	{text: "check updates on host strong", want: Command{Kind: CmdAction, Target: "strong", Action: policy.ActionAptUpgrade, Params: kv{"mode": "audit"}}},
	{text: "check updates on all", want: Command{Kind: CmdReadAll, Action: policy.ActionAptUpgrade, Params: kv{"mode": "audit"}}},
	{text: "check updates on all containers", want: Command{Kind: CmdReadAll, Action: policy.ActionAptUpgrade, Params: kv{"mode": "audit"}}},
	{text: "nomos: check for updates on every container", want: Command{Kind: CmdReadAll, Action: policy.ActionAptUpgrade, Params: kv{"mode": "audit"}}},
	{text: "audit updates on everything", want: Command{Kind: CmdReadAll, Action: policy.ActionAptUpgrade, Params: kv{"mode": "audit"}}},
	{text: "upgrade host strong", want: Command{Kind: CmdAction, Target: "strong", Action: policy.ActionAptUpgrade, Params: kv{"mode": "upgrade"}}},
	{text: "upgrade service jellyfin", want: Command{}, hint: true},
	{text: "run strong uptime", want: Command{Kind: CmdAction, Target: "strong", Action: policy.ActionRun, Params: kv{"command": "uptime"}}},
	{text: "run on host strong -- df -h /", want: Command{Kind: CmdAction, Target: "strong", Action: policy.ActionRun, Params: kv{"command": "df -h /"}}},
	{text: "run lxc:101 ls", want: Command{}, hint: true},

	// Logs.
	{text: "logs jellyfin", want: Command{Kind: CmdAction, Target: "jellyfin", Action: policy.ActionTailLog, Params: kv{}}},
	{text: "logs of jellyfin 20 lines", want: Command{Kind: CmdAction, Target: "jellyfin", Action: policy.ActionTailLog, Params: kv{"lines": 20}}},
	{text: "logs lxc:101 last 5", want: Command{Kind: CmdAction, Target: "lxc:101", Action: policy.ActionTailLog, Params: kv{"lines": 5}}},
	{text: "tail the gitea service 100", want: Command{Kind: CmdAction, Target: "gitea", Action: policy.ActionTailLog, Params: kv{"lines": 100}}},
	{text: "journal 101 -n 3", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionTailLog, Params: kv{"lines": 3}}},
	{text: "logs jellyfin 500", want: Command{}, hint: true},
	{text: "logs jellyfin 0", want: Command{}, hint: true},
	{text: "logs jellyfin -n 5; rm -rf /", want: Command{}, hint: true},
	{text: "logs jellyfin --unit=x --output-fields", want: Command{}, hint: true},
	{text: "logs jellyfin -f", want: Command{}, hint: true},
	{text: "logs host strong", want: Command{}, hint: true},
	{text: "logs", want: Command{}, hint: true},

	// Near misses: the verb put right is suggested, never acted on.
	{text: "restrat jellyfin", want: Command{Suggestion: "restart jellyfin"}},
	{text: "please rstart the jellyfin service", want: Command{Suggestion: "restart the jellyfin service"}},
	{text: "snapshto 101", want: Command{Suggestion: "snapshot 101"}},
	{text: "lgos jellyfin 5", want: Command{Suggestion: "logs jellyfin 5"}},
	{text: "rebot host strong", want: Command{Suggestion: "reboot host strong"}},
	{text: "frobnicate the flux capacitor", want: Command{}},
	{text: "sop 101", want: Command{Suggestion: "stop 101"}},
	{text: "xy 101", want: Command{}},

	// Probe.
	{text: "probe 101", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctStatus, Params: kv{}}},
	{text: "probe service jellyfin", want: Command{}, hint: true},

	// Container power.
	{text: "start 101", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctStart, Params: kv{}}},
	{text: "stop lxc:101", want: Command{Kind: CmdAction, Target: "lxc:101", Action: policy.ActionPctStop, Params: kv{}}},
	// Shutdown asks; stop makes it stop (for a VM, a hard power-off).
	{text: "shut down 101 now", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionGuestShutdown, Params: kv{}}},
	{text: "shutdown opnsense", want: Command{Kind: CmdAction, Target: "opnsense", Action: policy.ActionGuestShutdown, Params: kv{}}},
	{text: "stop opnsense", want: Command{Kind: CmdAction, Target: "opnsense", Action: policy.ActionPctStop, Params: kv{}}},
	// A shutdown's bound, its --timeout.
	{text: "shutdown opnsense within 120s", want: Command{Kind: CmdAction, Target: "opnsense", Action: policy.ActionGuestShutdown, Params: kv{"timeout": 120}}},
	{text: "shut down vm opnsense within 90 seconds", want: Command{Kind: CmdAction, Target: "opnsense", Action: policy.ActionGuestShutdown, Params: kv{"timeout": 90}}},
	{text: "shutdown 101 timeout 30", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionGuestShutdown, Params: kv{"timeout": 30}}},
	{text: "shutdown opnsense within soon", want: Command{}, hint: true},
	{text: "shutdown opnsense within 5 minutes", want: Command{}, hint: true},
	{text: "stop vm opnsense", want: Command{Kind: CmdAction, Target: "opnsense", Action: policy.ActionPctStop, Params: kv{}}},
	{text: "reboot vm:hubris/200", want: Command{Kind: CmdAction, Target: "vm:hubris/200", Action: policy.ActionPctReboot, Params: kv{}}},
	{text: "restart vm homeassistant", want: Command{Kind: CmdAction, Target: "homeassistant", Action: policy.ActionPctReboot, Params: kv{}}},
	{text: "destroy vm:200", want: Command{Kind: CmdAction, Target: "vm:200", Action: policy.ActionPctDestroy, Params: kv{}}},
	{text: "snapshot vm homeassistant before-update", want: Command{Kind: CmdAction, Target: "homeassistant", Action: policy.ActionPctSnapshot, Params: kv{"name": "before-update"}}},
	{text: "rollback vm:hubris/200 before-update", want: Command{Kind: CmdAction, Target: "vm:hubris/200", Action: policy.ActionPctRollback, Params: kv{"name": "before-update"}}},
	{text: "shutdown host strong", want: Command{}, hint: true},
	{text: "reboot container 101", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctReboot, Params: kv{}}},
	{text: "reboot the gitea container", want: Command{Kind: CmdAction, Target: "gitea", Action: policy.ActionPctReboot, Params: kv{}}},
	{text: "stop the jellyfin service", want: Command{Kind: CmdAction, Target: "jellyfin", Action: policy.ActionSystemctl, Params: kv{"verb": "stop"}}},
	{text: "start service gitea", want: Command{Kind: CmdAction, Target: "gitea", Action: policy.ActionSystemctl, Params: kv{"verb": "start"}}},

	// Snapshots and rollback.
	{text: "snapshot 101", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctSnapshot, Params: kv{}}},
	{text: "snap lxc:101", want: Command{Kind: CmdAction, Target: "lxc:101", Action: policy.ActionPctSnapshot, Params: kv{}}},
	{text: "snapshot lxc:101 before-upgrade", want: Command{Kind: CmdAction, Target: "lxc:101", Action: policy.ActionPctSnapshot, Params: kv{"name": "before-upgrade"}}},
	{text: "take a snapshot of 101 named PreUpgrade", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctSnapshot, Params: kv{"name": "PreUpgrade"}}},
	{text: "snapshot service:jellyfin", want: Command{}, hint: true},
	{text: "rollback lxc:101 nomos-20260706-101500", want: Command{Kind: CmdAction, Target: "lxc:101", Action: policy.ActionPctRollback, Params: kv{"name": "nomos-20260706-101500"}}},
	{text: "roll back 101 to snapshot PreUpgrade", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctRollback, Params: kv{"name": "PreUpgrade"}}},
	{text: "revert lxc:101 to before-upgrade.", want: Command{Kind: CmdAction, Target: "lxc:101", Action: policy.ActionPctRollback, Params: kv{"name": "before-upgrade"}}},
	{text: "rollback 101 k7q2", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctRollback, Params: kv{"name": "k7q2"}}},
	{text: "rollback 101", want: Command{}, hint: true},

	// Destroy.
	{text: "destroy lxc:131", want: Command{Kind: CmdAction, Target: "lxc:131", Action: policy.ActionPctDestroy, Params: kv{}}},
	{text: "destroy container 131", want: Command{Kind: CmdAction, Target: "131", Action: policy.ActionPctDestroy, Params: kv{}}},
	{text: "destroy", want: Command{}, hint: true},
	{text: "destroy service:jellyfin", want: Command{}, hint: true},
	// A near miss of a phrase must never become a new destroy request.
	{text: "please destroy lxc:131 k7q2", want: Command{}, hint: true},
	{text: "destroy 131 k7q2", want: Command{}, hint: true},

	// Exec: the rest of the line, verbatim.
	{text: "exec 101 df -h", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctExec, Params: kv{"command": "df -h"}}},
	{text: `exec lxc:101 echo 'a  b' | grep -c a; ls "x" > /tmp/o`, want: Command{Kind: CmdAction, Target: "lxc:101", Action: policy.ActionPctExec, Params: kv{"command": `echo 'a  b' | grep -c a; ls "x" > /tmp/o`}}},
	{text: "nomos: exec 101 -- cat /etc/resolv.conf", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctExec, Params: kv{"command": "cat /etc/resolv.conf"}}},
	{text: "exec in container 101 uptime", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctExec, Params: kv{"command": "uptime"}}},
	{text: "exec 101: ls", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctExec, Params: kv{"command": "ls"}}},
	{text: "Exec 101 echo $HOME && rm -rf /tmp/x.", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctExec, Params: kv{"command": "echo $HOME && rm -rf /tmp/x."}}},
	{text: "please exec 101 ls -la please", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctExec, Params: kv{"command": "ls -la please"}}},
	{text: "exec 101 `df -h`", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctExec, Params: kv{"command": "df -h"}}},
	{text: "exec 101 ```sh\ndf -h\nfree -m\n```", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctExec, Params: kv{"command": "df -h\nfree -m"}}},
	{text: "exec 101 echo `date` done", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctExec, Params: kv{"command": "echo `date` done"}}},
	{text: "exec 101 printf 'a\\n'\necho two", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctExec, Params: kv{"command": "printf 'a\\n'\necho two"}}},
	{text: "exec 101", want: Command{}, hint: true},
	{text: "exec service:jellyfin ls", want: Command{}, hint: true},

	// Decisions.
	{text: "go ahead", want: Command{Kind: CmdApprove}},
	{text: "yes", want: Command{Kind: CmdApprove}},
	{text: "Yes please!", want: Command{Kind: CmdApprove}},
	{text: "lgtm", want: Command{Kind: CmdApprove}},
	{text: "👍", want: Command{Kind: CmdApprove}},
	{text: "nomos: go ahead", want: Command{Kind: CmdApprove}},
	{text: "@nomos yes", want: Command{Kind: CmdApprove}},
	{text: "approve", want: Command{Kind: CmdApprove}},
	{text: "approve it", want: Command{Kind: CmdApprove}},
	{text: "approve k7q2", want: Command{Kind: CmdApprove, Target: "k7q2"}},
	{text: "approve plan k7q2", want: Command{Kind: CmdApprove, Target: "k7q2"}},
	{text: "no", want: Command{Kind: CmdDeny}},
	{text: "No.", want: Command{Kind: CmdDeny}},
	{text: "cancel", want: Command{Kind: CmdDeny}},
	{text: "stop", want: Command{Kind: CmdDeny}},
	{text: "stop it", want: Command{Kind: CmdDeny}},
	{text: "don't", want: Command{Kind: CmdDeny}},
	{text: "deny k7q2", want: Command{Kind: CmdDeny, Target: "k7q2"}},
	{text: "cancel k7q2", want: Command{Kind: CmdDeny, Target: "k7q2"}},
	{text: "no idea why it's down", want: Command{}},
	{text: "yes but first check disk", want: Command{}},

	// Typed confirmation phrases.
	{text: "destroy lxc:131 k7q2", want: Command{Kind: CmdConfirm, Target: "lxc:131", Action: policy.ActionPctDestroy, Phrase: "destroy lxc:131 k7q2"}},
	{text: "destroy lxc:hubris/131 k7q2", want: Command{Kind: CmdConfirm, Target: "lxc:hubris/131", Action: policy.ActionPctDestroy, Phrase: "destroy lxc:hubris/131 k7q2"}},
	{text: "Destroy LXC:131 K7Q2", want: Command{Kind: CmdConfirm, Target: "lxc:131", Action: policy.ActionPctDestroy, Phrase: "Destroy LXC:131 K7Q2"}},
	{text: "nomos: destroy lxc:131 k7q2", want: Command{Kind: CmdConfirm, Target: "lxc:131", Action: policy.ActionPctDestroy, Phrase: "destroy lxc:131 k7q2"}},
	{text: "destroy lxc:131 k7q2.", want: Command{Kind: CmdConfirm, Target: "lxc:131", Action: policy.ActionPctDestroy, Phrase: "destroy lxc:131 k7q2."}},
	{text: "exec lxc:101 m3zt", want: Command{Kind: CmdConfirm, Target: "lxc:101", Action: policy.ActionPctExec, Phrase: "exec lxc:101 m3zt"}},
	{text: "rollback lxc:101 k7q2", want: Command{Kind: CmdConfirm, Target: "lxc:101", Action: policy.ActionPctRollback, Params: kv{"name": "k7q2"}, Phrase: "rollback lxc:101 k7q2"}},
	// A plan's phrase names each destructive step; Action and Target are
	// the first one's.
	{text: "rollback lxc:strong/900 destroy lxc:strong/101 k7q2", want: Command{Kind: CmdConfirm, Target: "lxc:strong/900", Action: policy.ActionPctRollback,
		Phrase: "rollback lxc:strong/900 destroy lxc:strong/101 k7q2"}},
	{text: "Rollback LXC:strong/900\nDestroy lxc:strong/101 K7Q2", want: Command{Kind: CmdConfirm, Target: "lxc:strong/900", Action: policy.ActionPctRollback,
		Phrase: "Rollback LXC:strong/900\nDestroy lxc:strong/101 K7Q2"}},
	{text: "@nomos destroy lxc:strong/101 destroy lxc:strong/102 destroy lxc:hubris/131 k7q2", want: Command{Kind: CmdConfirm, Target: "lxc:strong/101", Action: policy.ActionPctDestroy,
		Phrase: "destroy lxc:strong/101 destroy lxc:strong/102 destroy lxc:hubris/131 k7q2"}},

	// Provisioning, the seeds' central workflow, without an LLM.
	{text: "create lxc wiki on hubris", want: Command{Kind: CmdAction, Target: "hubris", Action: policy.ActionPctCreate, Params: kv{"hostname": "wiki"}}},
	{text: "create a container called wiki on hubris", want: Command{Kind: CmdAction, Target: "hubris", Action: policy.ActionPctCreate, Params: kv{"hostname": "wiki"}}},
	{text: "create lxc wiki on hubris cores 2 memory 2G disk 20G ip 10.40.0.150/24 gw 10.40.0.1", want: Command{Kind: CmdAction, Target: "hubris",
		Action: policy.ActionPctCreate, Params: kv{"hostname": "wiki", "cores": 2, "memory": 2048, "disk_gb": 20, "ip": "10.40.0.150/24", "gw": "10.40.0.1"}}},
	{text: "new ct db on strong memory 512M template local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst", want: Command{Kind: CmdAction, Target: "strong",
		Action: policy.ActionPctCreate, Params: kv{"hostname": "db", "memory": 512, "template": "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"}}},
	{text: "create lxc wiki on hubris template Debian-13", want: Command{Kind: CmdAction, Target: "hubris", Action: policy.ActionPctCreate, Params: kv{"hostname": "wiki", "template": "debian-13"}}},
	{text: "create lxc wiki on hubris template ubuntu-24.04", want: Command{Kind: CmdAction, Target: "hubris", Action: policy.ActionPctCreate, Params: kv{"hostname": "wiki", "template": "ubuntu-24.04"}}},
	{text: "create lxc wiki on hubris disk 8", want: Command{Kind: CmdAction, Target: "hubris", Action: policy.ActionPctCreate, Params: kv{"hostname": "wiki", "disk_gb": 8}}},
	{text: "create lxc wiki", want: Command{}, hint: true},
	{text: "create lxc wiki on hubris memory lots", want: Command{}, hint: true},
	{text: "create lxc wiki on hubris disk 1.5G", want: Command{}, hint: true},
	{text: "create lxc wiki on hubris colour blue", want: Command{}, hint: true},

	// Snapshots of a container.
	{text: "snapshots 101", want: Command{Kind: CmdSnapshots, Target: "101"}},
	{text: "snapshots vm homeassistant", want: Command{Kind: CmdSnapshots, Target: "homeassistant"}},
	{text: "list snapshots of lxc:strong/101", want: Command{Kind: CmdSnapshots, Target: "lxc:strong/101"}},
	{text: "show snapshots of jellyfin", want: Command{Kind: CmdSnapshots, Target: "jellyfin"}},
	{text: "snapshots", want: Command{}, hint: true},

	// What needs attention.
	{text: "problems", want: Command{Kind: CmdProblems}},
	{text: "What's wrong?", want: Command{Kind: CmdProblems}},
	{text: "what is unhealthy", want: Command{Kind: CmdProblems}},
	{text: "is anything down?", want: Command{Kind: CmdProblems}},

	// Pending and history.
	{text: "pending", want: Command{Kind: CmdPending}},
	{text: "what's pending?", want: Command{Kind: CmdPending}},
	{text: "show pending", want: Command{Kind: CmdPending}},
	{text: "show me pending", want: Command{Kind: CmdPending}},
	{text: "status of the fleet", want: Command{Kind: CmdStatus}},
	{text: "the jellyfin container is down", want: Command{}},
	{text: "history", want: Command{Kind: CmdHistory}},
	{text: "show history", want: Command{Kind: CmdHistory}},
	{text: "recent executions", want: Command{Kind: CmdHistory}},
	{text: "history jellyfin", want: Command{Kind: CmdHistory, Target: "jellyfin"}},
	{text: "show history of lxc:101", want: Command{Kind: CmdHistory, Target: "lxc:101"}},

	// Resolve.
	{text: "resolve k7q2 it did restart, checked by hand", want: Command{Kind: CmdResolve, Target: "k7q2", Params: kv{"note": "it did restart, checked by hand"}}},
	{text: "nomos: reconcile plan k7q2 never ran", want: Command{Kind: CmdResolve, Target: "k7q2", Params: kv{"note": "never ran"}}},
	{text: "resolve k7q2", want: Command{}, hint: true},

	// Runbooks: natural phrasings; the grammar wins where both match.
	{text: "jellyfin is down, restart it", want: Command{Kind: CmdAction, Target: "jellyfin", Action: policy.ActionRestart, Params: kv{},
		Runbook: "restart-service", Steps: []store.RunbookStep{{Action: "restart", Params: kv{}}}}},
	{text: "Jellyfin is down!", want: Command{Kind: CmdAction, Target: "Jellyfin", Action: policy.ActionRestart, Params: kv{},
		Runbook: "restart-service", Steps: []store.RunbookStep{{Action: "restart", Params: kv{}}}}},
	{text: "@nomos the jellyfin service is down", want: Command{Kind: CmdAction, Target: "jellyfin", Action: policy.ActionRestart, Params: kv{},
		Runbook: "restart-service", Steps: []store.RunbookStep{{Action: "restart", Params: kv{}}}}},
	{text: "jellyfin’s down", want: Command{Kind: CmdAction, Target: "jellyfin", Action: policy.ActionRestart, Params: kv{},
		Runbook: "restart-service", Steps: []store.RunbookStep{{Action: "restart", Params: kv{}}}}},
	{text: "gitea isn't responding", want: Command{Kind: CmdAction, Target: "gitea", Action: policy.ActionRestart, Params: kv{},
		Runbook: "restart-service", Steps: []store.RunbookStep{{Action: "restart", Params: kv{}}}}},
	{text: "reload jellyfin", want: Command{Kind: CmdAction, Target: "jellyfin", Action: policy.ActionSystemctl, Params: kv{"verb": "reload"},
		Runbook: "reload-service", Steps: []store.RunbookStep{{Action: "systemctl", Params: kv{"verb": "reload"}}}}},
	{text: "upgrade 101 please", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionAptUpgrade, Params: kv{"mode": "upgrade"},
		Runbook: "upgrade-container", Steps: []store.RunbookStep{{Action: "apt_upgrade", Params: kv{"mode": "upgrade"}}}}},
	{text: "upgrade and reboot 101", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionAptUpgrade, Params: kv{"mode": "upgrade"},
		Runbook: "upgrade-and-reboot", Steps: []store.RunbookStep{{Action: "apt_upgrade", Params: kv{"mode": "upgrade"}}, {Action: "pct_reboot", Params: kv{}}}}},
	{text: "What needs updating on lxc:101?", want: Command{Kind: CmdAction, Target: "lxc:101", Action: policy.ActionAptUpgrade, Params: kv{"mode": "audit"},
		Runbook: "audit-updates", Steps: []store.RunbookStep{{Action: "apt_upgrade", Params: kv{"mode": "audit"}}}}},
	{text: "check updates on 101", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionAptUpgrade, Params: kv{"mode": "audit"},
		Runbook: "audit-updates", Steps: []store.RunbookStep{{Action: "apt_upgrade", Params: kv{"mode": "audit"}}}}},
	{text: "gitea is hung", want: Command{Kind: CmdAction, Target: "gitea", Action: policy.ActionPctReboot, Params: kv{},
		Runbook: "reboot-container", Steps: []store.RunbookStep{{Action: "pct_reboot", Params: kv{}}}}},
	{text: "fix dns on 101", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctExec,
		Params:  kv{"command": "printf 'nameserver 1.1.1.1\\nnameserver 9.9.9.9\\n' > /etc/resolv.conf && getent hosts deb.debian.org"},
		Runbook: "fix-container-dns", Steps: []store.RunbookStep{{Action: "pct_exec", Params: kv{"command": "printf 'nameserver 1.1.1.1\\nnameserver 9.9.9.9\\n' > /etc/resolv.conf && getent hosts deb.debian.org"}}}}},
	{text: "reboot 101", want: Command{Kind: CmdAction, Target: "101", Action: policy.ActionPctReboot, Params: kv{}}},
	// A slug of the wrong type does not fit a service runbook.
	{text: "lxc:101 is down", want: Command{}},

	// Unknown.
	{text: "", want: Command{}},
	{text: "nomos", want: Command{}},
	{text: "hello there", want: Command{}},
	{text: "what is the meaning of life", want: Command{}},
	{text: "> <@op:example.org> restart gitea\n\nthanks", want: Command{}},
}

// stripUnspecified strips what the table does not spell out.
func stripUnspecified(c Command) Command {
	c.Raw, c.Hint = "", ""
	return c
}

func TestParseCommand(t *testing.T) {
	t.Parallel()
	rbs := testRunbooks(t)
	for _, tt := range commandTests {
		t.Run(tt.text, func(t *testing.T) {
			t.Parallel()
			got := ParseCommand(tt.text, rbs)
			if got.Raw != tt.text {
				t.Errorf("Raw = %q, want the message as received", got.Raw)
			}
			if diff := cmp.Diff(tt.want, stripUnspecified(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ParseCommand(%q) (-want +got):\n%s", tt.text, diff)
			}
			if tt.hint && (got.Kind != CmdUnknown || got.Hint == "") {
				t.Errorf("ParseCommand(%q) = %v with hint %q, want CmdUnknown with a usage hint", tt.text, got.Kind, got.Hint)
			}
			if got.Kind == CmdAction && got.Params == nil {
				t.Errorf("ParseCommand(%q): a CmdAction must have non-nil Params", tt.text)
			}
		})
	}
}

func TestParseCommandReplyFallback(t *testing.T) {
	t.Parallel()
	got := ParseCommand("> <@op:example.org> Plan k7q2: restart jellyfin\n> more\n\ngo ahead", nil)
	if got.Kind != CmdApprove {
		t.Errorf("reply with fallback: got %v, want approve", got.Kind)
	}
}

func TestParseCommandTooLong(t *testing.T) {
	t.Parallel()
	got := ParseCommand("exec 101 "+strings.Repeat("x", maxCommandBytes), nil)
	if got.Kind != CmdUnknown || got.Hint == "" {
		t.Errorf("oversized message: got %v with hint %q, want CmdUnknown with a hint", got.Kind, got.Hint)
	}
}

// TestRunbookPrecedence checks that the grammar is tried before runbooks
// and that an unknown step action disqualifies a runbook.
func TestRunbookPrecedence(t *testing.T) {
	t.Parallel()
	rbs := []store.Runbook{
		{Slug: "catch-restart", TargetType: "service", Triggers: []string{"restart {target}"}, Steps: []store.RunbookStep{{Action: "restart"}}},
		{Slug: "bogus", TargetType: "service", Triggers: []string{"{target} is on fire"}, Steps: []store.RunbookStep{{Action: "ignite"}}},
		{Slug: "no-slot", TargetType: "service", Triggers: []string{"everything is on fire"}, Steps: []store.RunbookStep{{Action: "restart"}}},
		{Slug: "weak", TargetType: "service", Triggers: []string{"{target} down"}, Steps: []store.RunbookStep{{Action: "restart"}}},
		{Slug: "strong", TargetType: "service", Triggers: []string{"{target} down hard"}, Steps: []store.RunbookStep{{Action: "restart", Params: kv{"unit": "{{target}}.service"}}}},
	}
	tests := []struct {
		text        string
		wantKind    CommandKind
		wantRunbook string
		wantParams  map[string]any
	}{
		{"restart jellyfin", CmdAction, "", kv{}},
		{"jellyfin is on fire", CmdUnknown, "", nil},
		{"everything is on fire", CmdUnknown, "", nil},
		{"jellyfin down", CmdAction, "weak", kv{}},
		{"jellyfin down hard", CmdAction, "strong", kv{"unit": "jellyfin.service"}},
	}
	for _, tt := range tests {
		got := ParseCommand(tt.text, rbs)
		if got.Kind != tt.wantKind || got.Runbook != tt.wantRunbook {
			t.Errorf("ParseCommand(%q) = %v runbook %q, want %v runbook %q", tt.text, got.Kind, got.Runbook, tt.wantKind, tt.wantRunbook)
		}
		if diff := cmp.Diff(tt.wantParams, got.Params, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("ParseCommand(%q) params (-want +got):\n%s", tt.text, diff)
		}
	}
	// Steps are copies: filling a target never writes into the runbook.
	if got := rbs[4].Steps[0].Params["unit"]; got != "{{target}}.service" {
		t.Errorf("runbook params were modified: %v", got)
	}
}

func TestCommandHelp(t *testing.T) {
	t.Parallel()
	plain, html := Help()
	for _, want := range []string{"status", "list containers", "restart <service>", "exec <lxc|vm> <command>", "shutdown <lxc|vm>", "list vms / list guests", "pending", "history", "go ahead"} {
		if !strings.Contains(plain, want) {
			t.Errorf("Help plain text lacks %q", want)
		}
	}
	if !strings.Contains(html, "<code>restart &lt;service&gt;</code>") {
		t.Errorf("Help HTML does not escape usages:\n%s", html)
	}
	checkHTML(t, html)
	if s := ShortHelp(); !strings.Contains(s, "help") || len(s) > 400 {
		t.Errorf("ShortHelp = %q, want a short line that mentions help", s)
	}
	if plain, _ := NoticeUnknown(Command{Hint: "usage: exec <lxc> <command>"}); plain != "usage: exec <lxc> <command>" {
		t.Errorf("NoticeUnknown with a hint = %q", plain)
	}
	if plain, _ := NoticeUnknown(Command{}); plain != ShortHelp() {
		t.Errorf("NoticeUnknown without a hint = %q, want ShortHelp", plain)
	}
}

func FuzzParseCommand(f *testing.F) {
	for _, tt := range commandTests {
		f.Add(tt.text)
	}
	rbs := testRunbooks(f)
	f.Fuzz(func(t *testing.T, text string) {
		got := ParseCommand(text, rbs)
		if again := ParseCommand(text, rbs); !cmp.Equal(got, again) {
			t.Fatalf("ParseCommand(%q) is not deterministic", text)
		}
		if got.Kind.String() == "CommandKind(?)" {
			t.Fatalf("ParseCommand(%q) kind %d", text, got.Kind)
		}
		// "no" and its kin are never read as assent.
		if d, ok := policy.ParseDecision(text); ok && d == policy.Deny && got.Kind == CmdApprove {
			t.Fatalf("ParseCommand(%q) approves a refusal", text)
		}
		switch got.Kind {
		case CmdAction:
			if _, err := policy.Lookup(got.Action); err != nil {
				t.Fatalf("ParseCommand(%q) action %q: %v", text, got.Action, err)
			}
			if got.Target == "" || got.Params == nil {
				t.Fatalf("ParseCommand(%q) = %+v, want a target and params", text, got)
			}
			if got.Action == policy.ActionPctExec && got.Runbook == "" {
				cmdText, _ := got.Params["command"].(string)
				if cmdText == "" || !strings.Contains(text, cmdText) {
					t.Fatalf("ParseCommand(%q) exec command %q is not verbatim from the message", text, cmdText)
				}
			}
		case CmdConfirm:
			if _, _, err := policy.ParseSlug(got.Target); err != nil || got.Phrase == "" || !strings.Contains(text, got.Phrase) {
				t.Fatalf("ParseCommand(%q) = %+v, want a slug target and the phrase as typed", text, got)
			}
		case CmdShow, CmdResolve:
			if got.Target == "" {
				t.Fatalf("ParseCommand(%q) = %v without a target", text, got.Kind)
			}
		}
	})
}

// TestGrammarWithoutRunbooks: a homelab without the demo's runbooks still
// reloads, enables and disables units and checks for or installs upgrades
// from the grammar; where a runbook matches, it wins (TestParseCommand).
func TestGrammarWithoutRunbooks(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		text string
		want Command
		hint bool
	}{
		{text: "reload caddy", want: Command{Kind: CmdAction, Target: "caddy", Action: policy.ActionSystemctl, Params: kv{"verb": "reload"}}},
		{text: "enable the jellyfin service", want: Command{Kind: CmdAction, Target: "jellyfin", Action: policy.ActionSystemctl, Params: kv{"verb": "enable"}}},
		{text: "disable gitea", want: Command{Kind: CmdAction, Target: "gitea", Action: policy.ActionSystemctl, Params: kv{"verb": "disable"}}},
		{text: "check updates on 102", want: Command{Kind: CmdAction, Target: "102", Action: policy.ActionAptUpgrade, Params: kv{"mode": "audit"}}},
		{text: "check for updates on lxc:strong/102", want: Command{Kind: CmdAction, Target: "lxc:strong/102", Action: policy.ActionAptUpgrade, Params: kv{"mode": "audit"}}},
		{text: "list updates in 102", want: Command{Kind: CmdAction, Target: "102", Action: policy.ActionAptUpgrade, Params: kv{"mode": "audit"}}},
		{text: "reload host strong", want: Command{}, hint: true},

		{text: "upgrade 102", want: Command{Kind: CmdAction, Target: "102", Action: policy.ActionAptUpgrade, Params: kv{"mode": "upgrade"}}},
	} {
		got := ParseCommand(tt.text, nil)
		if diff := cmp.Diff(tt.want, stripUnspecified(got), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("ParseCommand(%q) (-want +got):\n%s", tt.text, diff)
		}
		if tt.hint && (got.Kind != CmdUnknown || got.Hint == "") {
			t.Errorf("ParseCommand(%q) = %v with hint %q, want CmdUnknown with a usage hint", tt.text, got.Kind, got.Hint)
		}
	}
}
