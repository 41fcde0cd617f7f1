package labsim

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

func mainPID(t *testing.T, status string) string {
	t.Helper()
	m := regexp.MustCompile(`Main PID: (\d+)`).FindStringSubmatch(status)
	if m == nil {
		t.Fatalf("no Main PID in:\n%s", status)
	}
	return m[1]
}

func TestExecSystemctl(t *testing.T) {
	t.Parallel()
	b := setup(t)
	exec := func(cmd string) result { return b.run(t, "pve1", "pct exec 101 -- "+cmd) }

	diff(t, "is-active", result{Stdout: "active\n"}, exec("systemctl is-active jellyfin"))
	before := exec("systemctl status jellyfin.service")
	diff(t, "status exit", 0, before.Exit)
	contains(t, "status", before.Stdout,
		"● jellyfin.service - Jellyfin Media Server\n",
		"     Loaded: loaded (/lib/systemd/system/jellyfin.service; enabled; preset: enabled)\n",
		"     Active: active (running) since Sat 2024-11-30 10:00:00 UTC; 0s ago\n",
		"Started jellyfin.service - Jellyfin Media Server.")

	b.clock.Advance(5 * time.Minute)
	diff(t, "restart", result{}, exec("systemctl restart jellyfin"))
	after := exec("systemctl status jellyfin")
	contains(t, "status after restart", after.Stdout, "Active: active (running) since Sat 2024-11-30 10:05:00 UTC; 0s ago")
	if mainPID(t, before.Stdout) == mainPID(t, after.Stdout) {
		t.Errorf("restart kept PID %s", mainPID(t, after.Stdout))
	}
	diff(t, "journal", result{Stdout: "" +
		"Nov 30 10:05:00 jellyfin systemd[1]: Stopped jellyfin.service - Jellyfin Media Server.\n" +
		"Nov 30 10:05:00 jellyfin systemd[1]: Starting jellyfin.service - Jellyfin Media Server...\n" +
		"Nov 30 10:05:00 jellyfin jellyfin[" + mainPID(t, after.Stdout) + "]: Listening on 0.0.0.0:8096\n" +
		"Nov 30 10:05:00 jellyfin systemd[1]: Started jellyfin.service - Jellyfin Media Server.\n"},
		exec("journalctl -u jellyfin -n 4 --no-pager"))

	diff(t, "health while active", result{Stdout: "Healthy"}, exec("curl -fsS http://localhost:8096/health"))
	diff(t, "health by IP from a neighbour", result{Stdout: "200"},
		b.run(t, "pve2", "pct exec 201 -- curl -s -o /dev/null -w '%{http_code}' http://10.0.0.21:8096/health"))
	diff(t, "health by name from a neighbour", result{Stdout: "200\n"},
		b.run(t, "pve2", `pct exec 201 -- curl -s -o /dev/null -w '%{http_code}\n' http://jellyfin:8096/`))

	diff(t, "stop", result{}, exec("systemctl stop jellyfin"))
	diff(t, "is-active when stopped", result{Stdout: "inactive\n", Exit: 3}, exec("systemctl is-active jellyfin"))
	r := exec("systemctl status jellyfin")
	diff(t, "status exit when stopped", 3, r.Exit)
	contains(t, "status when stopped", r.Stdout, "○ jellyfin.service - Jellyfin Media Server\n", "     Active: inactive (dead) since Sat 2024-11-30 10:05:00 UTC; 0s ago\n")
	diff(t, "health when stopped", result{Stderr: "curl: (7) Failed to connect to localhost port 8096 after 0 ms: Couldn't connect to server\n", Exit: 7},
		exec("curl -fsS http://localhost:8096/health"))
	diff(t, "curl -s hides the error", result{Stdout: "000", Exit: 7}, exec("curl -s -o /dev/null -w %{http_code} http://127.0.0.1:8096/"))
	diff(t, "reload when stopped", result{Stderr: "jellyfin.service is not active, cannot reload.\n", Exit: 1}, exec("systemctl reload jellyfin"))

	diff(t, "status of unknown unit", result{Stderr: "Unit nosuch.service could not be found.\n", Exit: 4}, exec("systemctl status nosuch"))
	diff(t, "restart of unknown unit", result{Stderr: "Failed to restart nosuch.service: Unit nosuch.service not found.\n", Exit: 5}, exec("systemctl restart nosuch"))
	diff(t, "is-active of unknown unit", result{Stdout: "inactive\n", Exit: 3}, exec("systemctl is-active nosuch"))
	diff(t, "is-enabled of unknown unit", result{Stderr: "Failed to get unit file state for nosuch.service: No such file or directory\n", Exit: 1}, exec("systemctl is-enabled nosuch"))
	diff(t, "enable of unknown unit", result{Stderr: "Failed to enable unit: Unit file nosuch.service does not exist.\n", Exit: 1}, exec("systemctl enable nosuch"))

	// A unit that is started but not enabled does not survive a reboot.
	diff(t, "disable", result{Stderr: "Removed \"/etc/systemd/system/multi-user.target.wants/jellyfin.service\".\n"}, exec("systemctl disable jellyfin"))
	exec("systemctl start jellyfin")
	b.must(t, "pve1", "pct reboot 101")
	diff(t, "after reboot", result{Stdout: "inactive\n", Exit: 3}, exec("systemctl is-active jellyfin"))
	diff(t, "enable --now", result{Stderr: "Created symlink /etc/systemd/system/multi-user.target.wants/jellyfin.service → /lib/systemd/system/jellyfin.service.\n"},
		exec("systemctl enable --now jellyfin"))
	diff(t, "active after enable --now", result{Stdout: "active\n"}, exec("systemctl is-active jellyfin"))
	diff(t, "service wrapper", result{}, exec("service jellyfin restart"))

	b.restart(t)
	diff(t, "active after labsim restart", result{Stdout: "active\n"}, exec("systemctl is-active jellyfin"))
}

func TestAptInstall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	exec := func(cmd string) result { return b.run(t, "pve1", "pct exec 101 -- "+cmd) }

	r := exec("apt-get install -y docker-compose-plugin")
	diff(t, "unknown package", result{Stdout: "Reading package lists...\nBuilding dependency tree...\nReading state information...\n",
		Stderr: "E: Unable to locate package docker-compose-plugin\n", Exit: 100}, r)
	r = exec("apt-get install redis-server")
	diff(t, "install without -y exit", 1, r.Exit)
	contains(t, "install without -y", r.Stdout, "Do you want to continue? [Y/n] Abort.\n")

	r = exec("env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=3 install -y --no-install-recommends redis-server")
	diff(t, "install exit", 0, r.Exit)
	contains(t, "install", r.Stdout,
		"The following additional packages will be installed:\n  redis-tools\n",
		"The following NEW packages will be installed:\n  redis-server redis-tools\n",
		"Setting up redis-server (7.0.15-1~deb12u1) ...\n",
		"Created symlink /etc/systemd/system/multi-user.target.wants/redis-server.service → /lib/systemd/system/redis-server.service.\n")
	diff(t, "installed unit runs", result{Stdout: "active\n"}, exec("systemctl is-active redis-server"))
	diff(t, "installed unit enabled", result{Stdout: "enabled\n"}, exec("systemctl is-enabled redis-server"))
	contains(t, "ss", exec("ss -tlnp").Stdout, "0.0.0.0:6379", `users:(("redis-server",pid=`)
	r = exec("apt-get install -y redis-server")
	diff(t, "reinstall", result{Stdout: "Reading package lists...\nBuilding dependency tree...\nReading state information...\n" +
		"redis-server is already the newest version (7.0.15-1~deb12u1).\n0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\n"}, r)
	r = exec("apt install -y jq")
	contains(t, "apt warns about its CLI", r.Stderr, "WARNING: apt does not have a stable CLI interface. Use with caution in scripts.")
	diff(t, "apt exit", 0, r.Exit)
	contains(t, "dpkg -s", exec("dpkg -s jq").Stdout, "Status: install ok installed\n")
	diff(t, "remove", 0, exec("apt-get purge -y redis-server").Exit)
	diff(t, "removed unit", 4, exec("systemctl status redis-server").Exit)
}

func TestGuestTools(t *testing.T) {
	t.Parallel()
	b := setup(t)
	exec := func(cmd string) result { return b.run(t, "pve1", "pct exec 101 -- "+cmd) }

	diff(t, "hostname", result{Stdout: "jellyfin\n"}, exec("hostname"))
	contains(t, "os-release", exec("cat /etc/os-release").Stdout, `PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"`)
	diff(t, "resolv.conf", result{Stdout: "# --- BEGIN PVE ---\nsearch lan\nnameserver 10.0.0.1\n# --- END PVE ---\n"}, exec("cat /etc/resolv.conf"))
	diff(t, "missing file", result{Stderr: "cat: /etc/nope: No such file or directory\n", Exit: 1}, exec("cat /etc/nope"))
	diff(t, "getent a neighbour", result{Stdout: "10.0.0.22       pihole\n"}, exec("getent hosts pihole"))
	diff(t, "getent a public name", result{Stdout: "203.0.113.72    deb.debian.org\n"}, exec("getent hosts deb.debian.org"))
	diff(t, "getent an unknown short name", result{Exit: 2}, exec("getent hosts nosuchhost"))
	diff(t, "host", result{Stdout: "deb.debian.org has address 203.0.113.72\n"}, exec("host deb.debian.org"))
	diff(t, "dig +short", result{Stdout: "10.0.0.21\n"}, exec("dig +short jellyfin"))
	contains(t, "nslookup", exec("nslookup deb.debian.org").Stdout, "Server:\t\t10.0.0.1\n", "Non-authoritative answer:\nName:\tdeb.debian.org\nAddress: 203.0.113.72\n")

	r := exec("ping -c 2 web")
	diff(t, "ping exit", 0, r.Exit)
	contains(t, "ping", r.Stdout, "PING web (10.0.0.100) 56(84) bytes of data.\n", "2 packets transmitted, 2 received, 0% packet loss")
	r = exec("ping -c 3 pihole")
	diff(t, "ping a stopped container exit", 1, r.Exit)
	contains(t, "ping a stopped container", r.Stdout, "3 packets transmitted, 0 received, 100% packet loss")
	diff(t, "ping an unknown name", result{Stderr: "ping: nosuchhost: Name or service not known\n", Exit: 2}, exec("ping -c 1 nosuchhost"))

	r = exec("df -h")
	contains(t, "df -h", r.Stdout, "Filesystem                        Size  Used Avail Use% Mounted on\n", "/dev/mapper/pve-vm--101--disk--0   32G")
	contains(t, "free -m", exec("free -m").Stdout, "Mem:       4096", "Swap:       512")
	diff(t, "uptime -p", result{Stdout: "up 1 hour, 2 minutes\n"}, func() result { b.clock.Advance(62 * time.Minute); return exec("uptime -p") }())
	contains(t, "uptime", exec("uptime").Stdout, " 11:02:00 up  1:02,  0 users,  load average:")
	r = exec("ss -tlnp")
	contains(t, "ss", r.Stdout, "State  Recv-Q Send-Q   Local Address:Port    Peer Address:Port Process\n",
		"LISTEN 0      4096           0.0.0.0:8096            0.0.0.0:* users:((\"jellyfin\",pid=")
	contains(t, "uname", exec("uname -r").Stdout, "-pve\n")
	diff(t, "direct exec of an unknown program", 127, exec("frobnicate").Exit)
	contains(t, "direct exec of an unknown program", exec("frobnicate").Stderr, `Failed to exec "frobnicate"`)

	contains(t, "pveversion", b.must(t, "pve1", "pveversion"), "pve-manager/8")
	contains(t, "pveam", b.must(t, "pve1", "pveam list local"), debian)
	contains(t, "container config as a file", b.must(t, "pve1", "cat /etc/pve/lxc/101.conf"), "hostname: jellyfin\n")
}

// TestShellSemantics runs scripts through the simulated bash, as sshd would.
func TestShellSemantics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		cmd  string
		want result
	}{
		{"echo a && false || echo b", result{Stdout: "a\nb\n"}},
		{"true && false", result{Exit: 1}},
		{"! false", result{}},
		{"set -e; echo one; false; echo two", result{Stdout: "one\n", Exit: 1}},
		{"set -e; false || echo rescued; echo after", result{Stdout: "rescued\nafter\n"}},
		{"set -e; false && echo no; echo survives", result{Stdout: "survives\n"}},
		{"exit 3; echo unreachable", result{Exit: 3}},
		{"bash -c 'exit 7'", result{Exit: 7}},
		{"nosuch --flag", result{Stderr: "bash: nosuch: command not found\n", Exit: 127}},
		{"sh -c nosuch", result{Stderr: "sh: 1: nosuch: not found\n", Exit: 127}},
		{"echo 'unterminated", result{Stderr: "bash: -c: line 1: reached EOF without closing quote `'`\n", Exit: 2}},
		{"echo a &&", result{Stderr: "bash: -c: line 1: `&&` must be followed by a statement\n", Exit: 2}},
		{"; ls", result{Stderr: "bash: -c: line 1: `;` can only immediately follow a statement\n", Exit: 2}},
		{"if true; then echo x; fi", result{Stdout: "x\n"}},
		{"pct status 999 2>&1", result{Stdout: "Configuration file 'nodes/pve1/lxc/999.conf' does not exist\n", Exit: 2}},
		{"pct status 999 2>/dev/null", result{Exit: 2}},
		{"pct status 999 >/dev/null 2>&1 || echo missing", result{Stdout: "missing\n"}},
		{"pct list | grep -c running", result{Stdout: "1\n"}},
		{"pct list | grep -q nosuch", result{Exit: 1}},
		{"pct list | tail -n 1", result{Stdout: "102        stopped                 pihole              \n"}},
		{`echo "a  b" 'c  d' e\ f $HOME '$HOME'`, result{Stdout: "a  b c  d e f /root $HOME\n"}},
		{`printf '%s=%d\n' a 1 b 2`, result{Stdout: "a=1\nb=2\n"}},
		{"echo -n x; echo y", result{Stdout: "xy\n"}},
		{`sh -c 'echo "a\tb"'`, result{Stdout: "a\tb\n"}},
		{"echo hi # a comment", result{Stdout: "hi\n"}},
		{"FOO=bar echo x", result{Stdout: "x\n"}},
		{"timeout 0.05 sleep 30", result{Exit: 124}},
		{"command -v pct && command -v nosuch", result{Stdout: "/usr/sbin/pct\n", Exit: 1}},
		{"hostname", result{Stdout: "pve1\n"}},
		{"pct exec 101 -- bash -c 'set -e; systemctl is-active -q jellyfin; echo up'", result{Stdout: "up\n"}},
		{"pct exec 101 -- sh -c 'echo x > /tmp/f; echo y >> /tmp/f; cat /tmp/f; cat < /tmp/f | wc -l'", result{Stdout: "x\ny\n2\n"}},
		{"pct exec 101 -- bash -c 'echo hidden > /dev/null; echo err >&2'", result{Stderr: "err\n"}},
		{"pct exec 101 -- sh -c 'exit 42'", result{Exit: 42}},
		{"pct exec 101 -- sh -c 'set -x; true'", result{Stderr: "+ true\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			t.Parallel()
			diff(t, tt.cmd, tt.want, b.run(t, "pve1", tt.cmd))
		})
	}
}

func TestScriptFromStdin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := b.dial(t, "pve1")
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	sess.Stdin = strings.NewReader("set -e\nhostname\nsystemctl is-active jellyfin\n")
	out, err := sess.Output("pct exec 101 -- bash -s")
	if err != nil {
		t.Fatalf("bash -s: %v", err)
	}
	diff(t, "script read from stdin", "jellyfin\nactive\n", string(out))
}

// TestNodeNetwork probes services from the Proxmox node itself, as an
// actuator health check does.
func TestNodeNetwork(t *testing.T) {
	t.Parallel()
	b := setup(t)
	diff(t, "health check from the node", result{Stdout: "200"}, b.run(t, "pve1", "curl -s -o /dev/null -w %{http_code} http://10.0.0.21:8096/health"))
	diff(t, "service on a container across nodes", result{Stdout: "200"}, b.run(t, "pve2", "curl -s -o /dev/null -w %{http_code} http://jellyfin:8096/"))
	diff(t, "stopped container", 7, b.run(t, "pve1", "curl -s http://10.0.0.22/").Exit)
	diff(t, "the node's own web UI", 0, b.run(t, "pve1", "curl -fsSk https://127.0.0.1:8006/").Exit)
	diff(t, "getent from the node", result{Stdout: "10.0.0.100      web\n"}, b.run(t, "pve1", "getent hosts web"))
	contains(t, "ping from the node", b.must(t, "pve1", "ping -c 1 10.0.0.21"), "1 packets transmitted, 1 received, 0% packet loss")
	// A container's dead resolver does not touch the node's.
	if err := b.sim.Inject(Fault{Kind: FaultDNSDead, Target: "*"}); err != nil {
		t.Fatal(err)
	}
	diff(t, "node DNS with every container's resolver dead", 0, b.run(t, "pve1", "getent hosts deb.debian.org").Exit)
}

// TestNodeRebootFollowsOnboot: shutdown -r +1 on a node says when, as
// systemd's shutdown does (systemctl-logind.c, logind_show_shutdown), and
// the node comes back with only its onboot containers running, as
// pve-guests.service starts them (pve-manager PVE/API2/Nodes.pm,
// startall: onboot guests only). Another node's containers are untouched.
func TestNodeRebootFollowsOnboot(t *testing.T) {
	t.Parallel()
	hosts := testFleet()
	hosts[0].Containers[0].Onboot = true // jellyfin comes back
	hosts[0].Containers = append(hosts[0].Containers, Container{VMID: 103, Hostname: "scratch", IP: "10.0.0.23/24", Gateway: "10.0.0.1", Status: "running"})
	b := setupFleet(t, hosts)
	r := b.run(t, "pve1", "shutdown -r +1")
	diff(t, "shutdown -r +1", result{Stderr: "Reboot scheduled for Sat 2024-11-30 10:01:00 UTC, use 'shutdown -c' to cancel.\n"}, r)
	diff(t, "pct list after the reboot", ""+
		"VMID       Status     Lock         Name                \n"+
		"101        running                 jellyfin            \n"+
		"102        stopped                 pihole              \n"+
		"103        stopped                 scratch             \n", b.must(t, "pve1", "pct list"))
	contains(t, "jellyfin's journal", b.must(t, "pve1", "pct exec 101 -- journalctl -u jellyfin -n 2 --no-pager"),
		"jellyfin systemd[1]: Started jellyfin.service - Jellyfin Media Server.\n")
	diff(t, "the other node", "running", strings.Fields(b.must(t, "pve2", "pct status 201"))[1])

	diff(t, "the node's journal", result{Stdout: "-- No entries --\n"}, b.run(t, "pve1", "journalctl -u pveproxy.service -n 5 --no-pager"))
	diff(t, "shutdown -h", 1, b.run(t, "pve1", "shutdown -h now").Exit)
}

// TestNodeApt: apt_upgrade on a node reads the Debian and Proxmox indexes
// and finds the node up to date.
func TestNodeApt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	contains(t, "update", b.must(t, "pve1", "apt-get -q -o Acquire::Retries=3 update"),
		"Hit:4 http://download.proxmox.com/debian/pve bookworm InRelease\n", "Reading package lists...\n")
	diff(t, "list", "Listing...\n", b.must(t, "pve1", "apt list --upgradable"))
	contains(t, "dist-upgrade", b.must(t, "pve1", "env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Acquire::Retries=3 -o Dpkg::Options::=--force-confold dist-upgrade"),
		"0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\n")
}

// TestLoggerWritesTheJournal: logger's line is in the container's whole
// journal and in no unit's, as util-linux logger run from a shell writes
// it; journalctl -n counts from the newest.
func TestLoggerWritesTheJournal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.must(t, "pve1", "pct exec 101 -- logger -t backup 'nightly run done'")
	diff(t, "the whole journal's last line", "Nov 30 10:00:00 jellyfin backup: nightly run done\n",
		b.must(t, "pve1", "pct exec 101 -- journalctl -n 1 --no-pager"))
	if out := b.must(t, "pve1", "pct exec 101 -- journalctl -u jellyfin -n 100 --no-pager"); strings.Contains(out, "nightly") {
		t.Errorf("a unit's journal shows logger's line: %q", out)
	}
}
