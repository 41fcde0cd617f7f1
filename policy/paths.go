package policy

import (
	"path"
	"strings"
)

// Paths: which are devices, which hold what a host cannot lose, which hold
// secrets.

func cleanPath(p string) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	return p
}

func safeOutput(p string) bool {
	switch p {
	case "/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero":
		return true
	}
	rest, ok := strings.CutPrefix(p, "/dev/fd/")
	return ok && rest != "" && allBytes(rest, isDigit)
}

// isDevicePath reports whether p names something under /dev that may be a
// disk: everything there except a short list of harmless character devices.
func isDevicePath(p string) bool {
	p = cleanPath(p)
	rest, ok := strings.CutPrefix(p, "/dev/")
	if !ok || rest == "" {
		return false
	}
	switch rest {
	case "null", "zero", "full", "random", "urandom", "stdin", "stdout", "stderr",
		"tty", "console", "kmsg", "ptmx", "log":
		return false
	}
	for _, dir := range []string{"fd/", "pts/", "shm/", "mqueue/", "tcp/", "udp/", "net/"} {
		if strings.HasPrefix(rest, dir) {
			return false
		}
	}
	return true
}

// criticalDirs are system directories whose loss breaks the machine, beyond
// the top level (every /x counts).
var criticalDirs = set(
	"/usr/bin", "/usr/lib", "/usr/local", "/usr/sbin", "/usr/share", "/var/lib",
	"/etc/pve", "/etc/systemd", "/var/lib/vz", "/var/lib/pve-cluster",
	"/var/lib/mysql", "/var/lib/postgresql", "/var/lib/docker", "/var/lib/lxc",
	"/var/lib/lxcfs", "/etc/ssh",
)

// criticalPath reports whether removing, moving or recursively changing p
// would take out a system directory, a home or the working directory.
func criticalPath(p string) bool {
	switch p {
	case "", "-":
		return false
	case "*", ".", "..", "./", "../", ".*", "./*", "~", "~/", "~/*":
		return true
	}
	if !strings.HasPrefix(p, "/") {
		return false
	}
	c := path.Clean(p)
	for {
		t := strings.TrimSuffix(strings.TrimSuffix(c, "/*"), "/.")
		if t == c {
			break
		}
		c = t
	}
	if c == "" || c == "/" || c == "/*" {
		return true
	}
	return strings.Count(c, "/") == 1 || criticalDirs[c]
}

// criticalFile reports whether p lies where deleting or moving anything is
// destroying a guest or the host: Proxmox's cluster configuration, guest
// images, the boot partition, device nodes.
func criticalFile(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return guestDisk(p)
	}
	c := path.Clean(p)
	for _, dir := range []string{"/etc/pve/", "/var/lib/vz/", "/var/lib/pve-cluster/", "/boot/", "/dev/", "/mnt/pve/"} {
		if strings.HasPrefix(c+"/", dir) {
			return true
		}
	}
	return guestDisk(c)
}

func under(p string, dirs ...string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// systemFiles are files whose loss or corruption stops a host booting or
// anyone logging in.
var systemFiles = set(
	"/etc/shadow", "/etc/gshadow", "/etc/passwd", "/etc/group", "/etc/shadow-",
	"/etc/gshadow-", "/etc/passwd-", "/etc/group-", "/etc/sudoers", "/etc/fstab",
	"/etc/crypttab", "/etc/ld.so.preload", "/etc/ld.so.conf", "/etc/inittab",
	"/etc/network/interfaces", "/etc/default/grub", "/etc/kernel/cmdline",
	"/etc/hostname", "/etc/resolv.conf.lock", "/etc/nsswitch.conf",
)

// criticalWrite reports whether writing to p, an absolute cleaned path (or
// a glob over such paths), may destroy a guest, the cluster configuration,
// or the host's ability to boot or let anyone log in, and says which.
func criticalWrite(p string, onHost bool) (string, bool) {
	if !strings.HasPrefix(p, "/") {
		if guestDisk(p) {
			return "a guest disk image", true
		}
		return "", false
	}
	switch {
	case isDevicePath(p):
		return "a device", true
	case under(p, "/etc/pve", "/var/lib/pve-cluster", "/etc/corosync"):
		return "the Proxmox cluster configuration", true
	case under(p, "/var/lib/vz", "/mnt/pve"), guestDisk(p):
		return "guest disks and backups", true
	case under(p, "/boot", "/efi"):
		return "the boot partition", true
	case systemFiles[p], under(p, "/etc/sudoers.d", "/etc/pam.d", "/etc/security", "/etc/ssh", "/etc/ld.so.conf.d", "/etc/network/interfaces.d", "/root/.ssh"),
		path.Base(p) == "authorized_keys":
		return "a file the host needs to boot or let anyone log in", true
	case under(p, "/bin", "/sbin", "/lib", "/lib64", "/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib64", "/usr/libexec", "/usr/local/bin", "/usr/local/sbin"):
		return "the system's programs", true
	case onHost && (p == "/proc/sysrq-trigger" || under(p, "/sys")):
		return "the running kernel", true
	}
	if strings.ContainsAny(p, "*?[") {
		for _, e := range criticalExamples {
			if ok, err := path.Match(p, e); ok || err != nil {
				return "a path that may match " + e, true
			}
		}
	}
	return "", false
}

var criticalExamples = []string{
	"/etc/pve/lxc/100.conf", "/etc/pve/qemu-server/100.conf", "/etc/shadow",
	"/etc/passwd", "/etc/fstab", "/etc/network/interfaces", "/var/lib/vz/images/100/vm-100-disk-0.raw",
	"/var/lib/vz/dump/vzdump-lxc-100.tar.zst", "/rpool/data/subvol-100-disk-0",
	"/dev/sda", "/dev/nvme0n1", "/dev/zvol/rpool/data/vm-100-disk-0",
	"/dev/pve/vm-100-disk-0", "/boot/vmlinuz", "/root/.ssh/authorized_keys",
	"/usr/bin/bash", "/bin/sh",
}

// intoDir classifies copying sources into dir, when dir is a directory:
// each source lands on dir/<its name> (its contents on dir itself for
// "src/." and, with rsync, "src/"), and a tree copied there may replace
// any file below that, so a tree landing on a directory that holds a
// critical file is destructive. writeTo has already judged dir itself.
func (a *analyzer) intoDir(dir word, sources []word, tree, rsync bool, who string) {
	if !dir.static() {
		return
	}
	for _, d := range a.resolve(dir.val) {
		for _, src := range sources {
			name := path.Base(src.val)
			target := path.Join(d, name)
			if !src.static() || src.glob || name == "." || name == "/" || (rsync && strings.HasSuffix(src.val, "/")) {
				target = d
			}
			if _, why, ok := a.criticalWord(word{val: target, raw: target}); ok {
				a.destroy("%s writes to %s, %s", who, target, why)
				return
			}
			if !tree {
				continue
			}
			for _, e := range criticalExamples {
				if target == "/" || under(e, target) {
					a.destroy("%s copies a tree onto %s, which holds %s", who, target, e)
					return
				}
			}
		}
	}
}

// guestDisk reports whether a component of p names a guest disk, a disk
// image or a backup.
func guestDisk(p string) bool {
	for _, c := range strings.Split(p, "/") {
		for _, kind := range []string{"vm-", "base-", "subvol-", "basevol-"} {
			rest, ok := strings.CutPrefix(c, kind)
			if !ok {
				continue
			}
			id, tail, _ := strings.Cut(rest, "-")
			if id != "" && allBytes(id, isDigit) && (strings.HasPrefix(tail, "disk") || strings.HasPrefix(tail, "cloudinit") ||
				strings.HasPrefix(tail, "state") || strings.HasPrefix(tail, "tpmstate")) {
				return true
			}
		}
		if strings.HasPrefix(c, "vzdump-") {
			return true
		}
		for _, ext := range []string{".raw", ".qcow2", ".vmdk", ".vma", ".vma.zst", ".vma.gz", ".vma.lzo"} {
			if strings.HasSuffix(c, ext) {
				return true
			}
		}
	}
	return false
}

// secretFiles are files that hold keys, password hashes or tokens.
var secretFiles = set(
	"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-",
	"/etc/security/opasswd", "/etc/corosync/authkey", "/etc/mysql/debian.cnf",
	"/proc/kcore", "/dev/mem", "/dev/kmem", "/dev/port",
)

// secretDirs hold nothing but secrets.
var secretDirs = []string{
	"/etc/pve/priv", "/var/lib/pve-cluster", "/etc/ssl/private", "/etc/wireguard",
	"/root/.ssh", "/root/.gnupg", "/root/.aws", "/root/.docker", "/root/.kube",
	"/run/secrets", "/var/run/secrets",
}

// secretPath reports whether reading p, an absolute cleaned path, may print
// a secret: a private key, a password hash, an API token, a process's
// environment, a raw disk.
func secretPath(p string) bool {
	if secretFiles[p] || under(p, secretDirs...) {
		return true
	}
	if isDevicePath(p) {
		return true
	}
	if rest, ok := strings.CutPrefix(p, "/proc/"); ok {
		b := path.Base(rest)
		if b == "environ" || b == "mem" {
			return true
		}
	}
	for _, c := range strings.Split(p, "/") {
		switch c {
		case ".ssh", ".gnupg", ".aws", ".kube", ".docker":
			return true
		}
	}
	return secretBase(path.Base(p))
}

func secretBase(b string) bool {
	if strings.HasSuffix(b, ".pub") {
		return false
	}
	switch b {
	case "shadow", "gshadow", "token.cfg", "shadow.cfg", "tfa.cfg", "authkey", "authkey.key",
		".netrc", ".pgpass", ".my.cnf", ".git-credentials", "credentials", "credentials.json",
		".bash_history", ".mysql_history", ".psql_history", "config.db", "environ":
		return true
	}
	for _, p := range []string{"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", ".env", "shadow.", "gshadow.", "ssh_host_"} {
		if strings.HasPrefix(b, p) {
			return true
		}
	}
	for _, s := range []string{".key", ".pem", ".p12", ".pfx", ".keyring", ".keytab", ".pw", ".jks", ".kdbx", ".env", "_key"} {
		if strings.HasSuffix(b, s) {
			return true
		}
	}
	return false
}

// secretExamples stand for the secret files a glob may match.
var secretExamples = []string{
	"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/var/backups/shadow.bak",
	"/etc/pve/priv/authkey.key", "/etc/pve/priv/token.cfg", "/etc/pve/priv/shadow.cfg",
	"/etc/pve/priv/tfa.cfg", "/etc/pve/priv/storage/x.pw", "/etc/pve/priv/acme/x.key",
	"/etc/pve/priv/ceph.client.admin.keyring", "/etc/pve/pve-www.key",
	"/etc/pve/local/pve-ssl.key", "/etc/pve/nodes/x/pve-ssl.key",
	"/var/lib/pve-cluster/config.db", "/etc/corosync/authkey",
	"/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_ed25519_key",
	"/root/.ssh/id_rsa", "/root/.ssh/id_ed25519", "/home/x/.ssh/id_rsa",
	"/root/.env", "/root/.netrc", "/root/.pgpass", "/root/.bash_history",
	"/root/.aws/credentials", "/root/.docker/config.json", "/etc/ssl/private/x.key",
	"/etc/wireguard/wg0.conf", "/etc/ceph/ceph.client.admin.keyring",
	"/etc/mysql/debian.cnf", "/proc/1/environ", "/proc/self/environ",
	"/proc/1/mem", "/proc/kcore", "/dev/mem", "/dev/sda",
	// Guest backups and disk images hold the guests' secret files.
	"/var/lib/vz/dump/vzdump-lxc-100.tar.zst", "/var/lib/vz/images/100/vm-100-disk-0.raw",
	"/mnt/pve/backup/dump/vzdump-qemu-100.vma.zst",
}

var secretBaseExamples = []string{
	"x.key", "x.pem", "x.p12", "x.pfx", "x.keyring", "x.keytab", "x.pw", "id_rsa",
	"id_ed25519", "id_ecdsa", "token.cfg", "authkey", ".env", "x.env", ".netrc",
	".pgpass", ".my.cnf", ".git-credentials", "credentials", "shadow", "gshadow",
	"shadow.bak", "environ", "config.db", ".bash_history", "ssh_host_rsa_key",
}

// globMaySecret reports whether the glob pattern p may match a secret file.
func globMaySecret(p string) bool {
	for _, e := range secretExamples {
		if ok, err := path.Match(p, e); ok || err != nil {
			return true
		}
	}
	last := path.Base(p)
	for _, b := range secretBaseExamples {
		if ok, err := path.Match(last, b); ok || err != nil {
			return true
		}
	}
	if i := strings.IndexAny(p, "*?["); i > 0 {
		if secretPath(path.Dir(p[:i] + "x")) {
			return true
		}
	}
	return false
}

// secretText are strings whose mention in a program's text means it may
// read a secret.
var secretText = []string{
	"/etc/shadow", "/etc/gshadow", "/etc/pve/priv", ".ssh/", "/environ", "id_rsa",
	"id_ed25519", "token.cfg", "authkey", "config.db", "ENVIRON", "os.environ",
	"getenv", "$ENV", "%ENV",
}

// mentionsSecret reports a secret location named anywhere in text.
func mentionsSecret(text string) (string, bool) {
	for _, s := range secretText {
		if strings.Contains(text, s) {
			return s, true
		}
	}
	return "", false
}

// expandTilde rewrites ~ and ~user at the start of p.
func expandTilde(p string) string {
	user, rest, _ := strings.Cut(p[1:], "/")
	switch user {
	case "", "root":
		return "/root/" + rest
	case "+", "-":
		return rest
	}
	return "/home/" + user + "/" + rest
}

// resolve returns the absolute paths p may name: itself when absolute, and
// otherwise p under each directory the script may be in.
func (a *analyzer) resolve(p string) []string {
	if p == "" {
		return nil
	}
	if strings.HasPrefix(p, "~") {
		p = expandTilde(p)
	}
	if strings.HasPrefix(p, "/") {
		p = path.Clean(p)
		// /proc/PID/root/x is x as that process sees it; /proc/PID/cwd/x
		// is relative to its working directory.
		if rest, ok := strings.CutPrefix(p, "/proc/"); ok {
			_, rest, _ = strings.Cut(rest, "/")
			if r, ok := strings.CutPrefix(rest+"/", "root/"); ok {
				return append(a.resolve("/"+r), p)
			}
			if r, ok := strings.CutPrefix(rest+"/", "cwd/"); ok && r != "" {
				return append(a.resolve(r), p)
			}
		}
		return []string{p}
	}
	out := make([]string, 0, len(a.cwds))
	for _, d := range a.cwds {
		out = append(out, path.Join(d, p))
	}
	return out
}

// looksLikePath reports whether an argument of an unknown program is
// probably a path rather than a name, a number or a volume id.
func looksLikePath(v string) bool {
	switch {
	case strings.HasPrefix(v, "/"), strings.HasPrefix(v, "~"), strings.HasPrefix(v, "./"), strings.HasPrefix(v, "../"):
		return true
	case strings.Contains(v, "://"), strings.Contains(v, ":"):
		return false
	}
	return strings.Contains(v, "/") || guestDisk(v)
}

// secretWord reports whether reading the file w may print a secret, and
// names it: a secret file, or a guest backup or disk image, whose bytes hold
// the guest's own secret files.
func (a *analyzer) secretWord(w word) (string, bool) {
	v := w.val
	if v == "" || v == "-" {
		return "", false
	}
	for _, c := range a.resolve(v) {
		if secretPath(c) || w.glob && globMaySecret(c) {
			return v, true
		}
	}
	return a.imageWord(w)
}

// imageExamples stand for the guest backups and disk images a glob may
// match.
var imageExamples = []string{
	"/var/lib/vz/dump/vzdump-lxc-100-2024_01_01-00_00_00.tar.zst",
	"/var/lib/vz/dump/vzdump-qemu-100-2024_01_01-00_00_00.vma.zst",
	"/var/lib/vz/dump/vzdump-lxc-100-2024_01_01-00_00_00.tar.gz",
	"/var/lib/vz/images/100/vm-100-disk-0.raw", "/var/lib/vz/images/100/vm-100-disk-0.qcow2",
	"/mnt/pve/backup/dump/vzdump-lxc-100-2024_01_01-00_00_00.tar.zst",
}

// imageWord reports whether w names a guest backup (vzdump-*) or disk image
// (vm-*-disk-*, *.raw, *.qcow2, *.vmdk, *.vma): reading one reads the
// guest's /etc/shadow, keys and tokens along with everything else.
func (a *analyzer) imageWord(w word) (string, bool) {
	if w.val == "" || w.val == "-" {
		return "", false
	}
	for _, c := range a.resolve(w.val) {
		if guestDisk(c) {
			return w.val + ", a guest backup or disk image", true
		}
		if !w.glob {
			continue
		}
		for _, e := range imageExamples {
			if ok, err := path.Match(c, e); ok || err != nil {
				return w.val + ", which may match a guest backup or disk image", true
			}
		}
	}
	return "", false
}

// secretTree reports whether reading the directory w recursively may print
// a secret.
func (a *analyzer) secretTree(w word) (string, bool) {
	for _, c := range a.resolve(w.val) {
		if c == "/" || secretPath(c) || under(c, "/home") {
			return c, true
		}
		for _, e := range secretExamples {
			if strings.HasPrefix(e, c+"/") {
				return c, true
			}
			if !w.glob {
				continue
			}
			for anc := e; anc != "/"; anc = path.Dir(anc) {
				if ok, err := path.Match(c, anc); ok || err != nil {
					return c, true
				}
			}
		}
	}
	return "", false
}

// criticalWord reports whether writing to the file w may be destructive.
func (a *analyzer) criticalWord(w word) (p, why string, ok bool) {
	for _, c := range a.resolve(w.val) {
		if why, ok := criticalWrite(c, a.onHost); ok {
			return c, why, true
		}
		if w.glob || w.dynamic {
			if strings.Contains(w.val, "/dev/") {
				return c, "a device", true
			}
		}
	}
	if w.glob && !strings.Contains(w.val, "/") {
		for _, b := range []string{"vm-100-disk-0.raw", "x.qcow2", "authorized_keys"} {
			if ok, err := path.Match(w.val, b); ok || err != nil {
				return w.val, "a path that may match " + b, true
			}
		}
	}
	return "", "", false
}
