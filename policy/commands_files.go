package policy

import (
	"fmt"
	"path"
	"slices"
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
// names it.
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

func init() {
	// Readers print what they read: read-only for literal paths that hold
	// no secret.
	rules["cat"] = strictReader("cat", newSpec(
		"-n -A -v -E -T -b -s --number --show-all --show-nonprinting --show-ends --show-tabs --number-nonblank --squeeze-blank", ""), nil)
	grep := newSpec(
		"-i -y -v -w -x -c -l -L -o -q -s -n -h -H -b -a -I -r -R -E -F -G -P -z -Z -T -U "+
			"--ignore-case --no-ignore-case --invert-match --word-regexp --line-regexp --count "+
			"--files-with-matches --files-without-match --only-matching --quiet --silent --no-messages "+
			"--line-number --no-filename --with-filename --byte-offset --text --recursive "+
			"--dereference-recursive --extended-regexp --fixed-strings --basic-regexp --perl-regexp "+
			"--null-data --null --initial-tab --color --colour --line-buffered",
		"-e -f -m -A -B -C -d -D --regexp --file --max-count --after-context --before-context "+
			"--context --label --include --exclude --exclude-dir --exclude-from --binary-files "+
			"--directories --devices --group-separator")
	grep.optional = set("--color", "--colour")
	grep.digits = true
	for _, n := range []string{"grep", "egrep", "fgrep", "zgrep", "zegrep", "zfgrep", "rgrep"} {
		rules[n] = strictReader(n, grep, &grepShape)
	}
	for _, n := range []string{
		"head", "tail", "tac", "nl", "rev", "od", "hexdump", "strings", "base64", "base32",
		"basenc", "cut", "column", "paste", "fold", "fmt", "expand", "unexpand", "comm", "join",
		"zcat", "bzcat", "xzcat", "lzcat", "cmp", "diff",
		// last, who and users print records from any file they are given.
		"last", "lastb", "who", "users",
	} {
		rules[n] = looseReader(n)
	}
	rules["xxd"] = ruleXxd
	rules["jq"] = ruleJq
	rules["sort"] = ruleSort
	modelsPaths["uniq"] = true
	for _, n := range []string{"less", "more", "most", "pg", "man"} {
		rules[n] = rulePager(n)
	}
	for _, n := range []string{"vi", "vim", "nvim", "view", "vimdiff", "nano", "pico", "ed", "red", "ex", "emacs", "joe", "mcedit", "sensible-editor", "editor", "sudoedit", "visudo", "vipw", "vigr"} {
		rules[n] = ruleEditor(n)
	}

	// Writers.
	rules["tee"] = ruleTee
	rules["truncate"] = ruleTruncate
	rules["cp"] = ruleCopy("cp", "tS", []string{"target-directory", "suffix"})
	rules["install"] = ruleCopy("install", "gmotS", []string{"group", "mode", "owner", "target-directory", "suffix", "strip-program"})
	rules["ln"] = ruleCopy("ln", "tS", []string{"target-directory", "suffix"})
	rules["touch"] = ruleTouch
	rules["mkdir"] = ruleMkdir("mkdir")
	rules["rmdir"] = ruleMkdir("rmdir")
	rules["rm"] = ruleRm
	rules["unlink"] = ruleRm
	rules["mv"] = ruleMv
	for _, n := range []string{"chmod", "chown", "chgrp", "setfacl", "chattr"} {
		rules[n] = ruleRecursiveOwner(n)
	}
	rules["dd"] = ruleDD
	rules["rsync"] = ruleRsync
	rules["sed"] = ruleSed
	for _, n := range []string{"awk", "gawk", "mawk", "nawk", "busybox-awk"} {
		rules[n] = ruleAwk(n)
	}
	rules["tar"] = ruleTar
	rules["find"] = ruleFind
	rules["cd"] = ruleCd
	rules["pushd"] = ruleCd
	rules["popd"] = fixed(ReadOnly, "")
	for _, n := range []string{"grep", "egrep", "fgrep", "zgrep", "zegrep", "zfgrep", "rgrep",
		"head", "tail", "tac", "nl", "rev", "od", "hexdump", "strings", "base64", "base32",
		"basenc", "cut", "column", "paste", "fold", "fmt", "expand", "unexpand", "comm", "join",
		"zcat", "bzcat", "xzcat", "lzcat", "cmp", "diff", "last", "lastb", "who", "users", "less", "more", "most", "pg", "man",
		"vi", "vim", "nvim", "view", "vimdiff", "nano", "pico", "ed", "red", "ex", "emacs", "joe", "mcedit",
		"sensible-editor", "editor", "sudoedit", "visudo", "vipw", "vigr", "awk", "gawk", "mawk", "nawk", "busybox-awk",
		"cat", "tee", "truncate", "cp", "install", "ln", "touch", "mkdir", "rmdir", "rm", "unlink", "mv", "chmod", "chown", "chgrp", "setfacl", "chattr", "dd", "rsync", "sed", "tar", "find", "cd", "pushd", "sort", "xxd", "jq"} {
		modelsPaths[n] = true
	}
}

// readerShape says which operands of a reader are files.
type readerShape struct {
	// patternFirst: the first operand is a pattern unless one of patternOpts
	// is given (grep).
	patternFirst bool
	patternOpts  []string
	fileOpts     []string // options whose value is a file it reads
	recursive    func(p parsed) bool
}

var grepShape = readerShape{
	patternFirst: true,
	patternOpts:  []string{"-e", "-f", "--regexp", "--file"},
	fileOpts:     []string{"-f", "--file", "--exclude-from"},
	recursive: func(p parsed) bool {
		if p.has("-r", "-R", "--recursive", "--dereference-recursive") {
			return true
		}
		for _, o := range p.values("-d", "--directories") {
			if o.val == "recurse" {
				return true
			}
		}
		return false
	},
}

// strictReader is read-only only with the options s names and literal
// operands that hold no secret.
func strictReader(name string, s spec, shape *readerShape) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		p := s.parse(args, false)
		files := p.operands
		recursive := false
		if shape != nil {
			for _, o := range p.values(shape.fileOpts...) {
				a.reads(o.word, name)
			}
			if shape.patternFirst && !p.has(shape.patternOpts...) && len(files) > 0 {
				files = files[1:]
			}
			recursive = shape.recursive != nil && shape.recursive(p)
			if recursive && len(files) == 0 {
				files = []word{{val: ".", raw: "."}}
			}
		}
		for _, f := range files {
			if recursive {
				if what, ok := a.secretTree(f); ok {
					a.secret(name + " -r " + what)
				}
			}
			a.reads(f, name)
		}
		switch {
		case len(p.unknown) > 0:
			return cfgf("%s option %s is not on the read-only list", name, p.unknown[0])
		case p.bad:
			return cfgf("%s option without its value", name)
		case p.dynamic:
			return notLiteral(name)
		}
		return ReadOnly, ""
	}
}

// looseReader is for readers none of whose options writes a file or runs a
// program: every word that is not an option is checked as a file it may
// read, option values included.
func looseReader(name string) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		recursive := name == "diff" && (hasShort(args, "r") || hasLong(args, "recursive"))
		for _, w := range args {
			v := w
			if strings.HasPrefix(w.val, "-") {
				_, after, ok := strings.Cut(w.val, "=")
				if !ok {
					continue
				}
				v = word{val: after, dynamic: w.dynamic, glob: w.glob}
			}
			if recursive {
				if what, ok := a.secretTree(v); ok {
					a.secret(name + " -r " + what)
				}
			}
			a.reads(v, name)
		}
		if anyDynamic(args) {
			return notLiteral(name)
		}
		return ReadOnly, ""
	}
}

// ruleXxd: xxd -r writes binary, and a second operand is an output file.
func ruleXxd(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "cglosnR", []string{"cols", "groupsize", "len", "seek", "name"}, false)
	if len(p.operands) > 0 {
		a.reads(p.operands[0], "xxd")
	}
	if len(p.operands) > 1 {
		a.writeTo(p.operands[1], "xxd")
		return cfgf("xxd with two operands writes the second")
	}
	if p.has("-r", "-revert") {
		return cfgf("xxd -r writes binary data")
	}
	if p.dynamic {
		return notLiteral("xxd")
	}
	return ReadOnly, ""
}

// ruleJq: jq reads files and, through env and $ENV, the environment; it
// can also load modules from files.
func ruleJq(a *analyzer, args []word, _ int) (Class, string) {
	program := ""
	havePrg := false
	var files []word
	dynamic := false
	for i := 0; i < len(args); i++ {
		w := args[i]
		dynamic = dynamic || w.dynamic
		v := w.val
		switch {
		case v == "--args" || v == "--jsonargs":
			// What follows are values, not files.
			i = len(args)
		case v == "--arg" || v == "--argjson":
			i += 2
		case v == "--slurpfile" || v == "--rawfile":
			if i+2 < len(args) {
				a.reads(args[i+2], "jq "+v)
			}
			i += 2
		case v == "--indent":
			i++
		case v == "-f" || v == "--from-file" || v == "-L" || strings.HasPrefix(v, "-L"):
			return cfgf("jq %s loads a program from a file", v)
		case strings.HasPrefix(v, "-") && v != "-":
		case !havePrg:
			program, havePrg = v, true
		default:
			files = append(files, w)
		}
	}
	for _, f := range files {
		a.reads(f, "jq")
	}
	if hasIdent(program, "env") || hasIdent(program, "ENV") {
		a.secret("jq env prints the environment")
	}
	if hasIdent(program, "import") || hasIdent(program, "include") {
		return cfgf("jq loads modules")
	}
	if dynamic {
		return notLiteral("jq")
	}
	return ReadOnly, ""
}

// ruleSort: -o writes a file and --compress-program runs one.
func ruleSort(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "kotST", []string{"key", "output", "field-separator", "buffer-size", "temporary-directory", "parallel", "random-source", "sort", "batch-size", "files0-from", "compress-program"}, false)
	c, why := ReadOnly, ""
	if hasLong(args, "compress-program") {
		c, why = a.opaqueClass("sort --compress-program runs a program")
	}
	for _, o := range p.opts {
		// getopt_long takes any unambiguous prefix: --out=FILE is --output.
		if o.name == "-o" || len(o.name) > 3 && strings.HasPrefix("--output", o.name) {
			if o.hasVal {
				a.writeTo(o.word, "sort -o")
			}
			if c == ReadOnly {
				c, why = ConfigMutation, "sort -o writes a file"
			}
		}
	}
	if hasShort(args, "o") && c == ReadOnly {
		c, why = ConfigMutation, "sort -o writes a file"
	}
	if hasLong(args, "files0-from") && c == ReadOnly {
		c, why = ConfigMutation, "sort --files0-from reads file names from a file"
	}
	for _, o := range p.values("--random-source") {
		a.reads(o.word, "sort")
	}
	for _, f := range p.operands {
		a.reads(f, "sort")
	}
	if c == ReadOnly && p.dynamic {
		// A word known only at run time may be -o FILE.
		return cfgf("sort has arguments only known at run time (one could be -o)")
	}
	return c, why
}

// rulePager: pagers run commands and editors at a keystroke and open any
// file; they are never read-only.
func rulePager(name string) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		for _, w := range args {
			if !strings.HasPrefix(w.val, "-") {
				a.reads(w, name)
			}
		}
		return cfgf("%s is interactive and can run commands", name)
	}
}

// ruleEditor: editors write files and run commands (vim -c '!cmd', ed's
// !cmd); they are programs the classifier cannot read.
func ruleEditor(name string) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		for _, w := range args {
			if !strings.HasPrefix(w.val, "-") && !strings.HasPrefix(w.val, "+") {
				a.reads(w, name)
				if _, crit, ok := a.criticalWord(w); ok {
					return Destructive, name + " edits " + w.val + ", " + crit
				}
			}
		}
		if c, r := crudeClass(joinRaw(args), a.onHost); c == Destructive {
			return c, r
		}
		return a.opaqueClass(name + " edits files and can run commands")
	}
}

func ruleTee(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "", nil, false)
	c, why := ReadOnly, ""
	for _, f := range p.operands {
		a.writeTo(f, "tee")
		if !f.static() || !safeOutput(cleanPath(f.val)) {
			c, why = ConfigMutation, "tee writes files"
		}
	}
	return c, why
}

func ruleTruncate(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "rs", []string{"reference", "size"}, false)
	for _, f := range p.operands {
		a.writeTo(f, "truncate")
	}
	if p.dynamic {
		if c, r := crudeClass(joinRaw(args), a.onHost); c == Destructive {
			return c, r
		}
	}
	return cfgf("truncate cuts files short")
}

// ruleCopy handles cp, install and ln: the destination is the last operand
// or the -t directory; copying a secret somewhere is noted as revealing it.
func ruleCopy(name, shortVal string, longVal []string) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		p := parseOpts(args, shortVal, longVal, false)
		c, why := cfgf("%s writes files", name)
		if name == "install" && hasLong(args, "strip-program") {
			c, why = a.opaqueClass("install --strip-program runs a program")
		}
		dests := p.values("-t", "--target-directory")
		sources := p.operands
		switch {
		case len(dests) > 0:
		case name == "install" && p.has("-d", "--directory"):
			for _, d := range p.operands {
				a.writeTo(d, name)
			}
			return c, why
		case len(sources) > 1:
			dests = []opt{{word: sources[len(sources)-1]}}
			sources = sources[:len(sources)-1]
		case name == "ln" && len(sources) == 1:
			// ln TARGET makes a link named after TARGET in the working
			// directory.
			dests = []opt{{word: word{val: path.Base(sources[0].val), dynamic: sources[0].dynamic, glob: sources[0].glob}}}
		}
		if p.dynamic {
			// A word known only at run time (xargs's input, say) may shift
			// which operand is the destination: any of them may be.
			for _, s := range p.operands {
				dests = append(dests, opt{word: s})
			}
		}
		recursive := name != "ln" && (hasShort(args, "rRa") || hasLong(args, "recursive", "archive"))
		for _, d := range dests {
			a.writeTo(d.word, name)
			a.intoDir(d.word, sources, recursive, false, name)
		}
		if name != "ln" {
			for _, s := range sources {
				a.reads(s, name)
				if what, ok := a.secretTree(s); ok && recursive {
					a.secret(name + " -r " + what)
				}
			}
		}
		if p.dynamic && c < Destructive {
			if cc, r := crudeClass(joinRaw(args), a.onHost); cc == Destructive {
				return cc, r
			}
		}
		return c, why
	}
}

func ruleTouch(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "drt", []string{"date", "reference", "time"}, false)
	for _, f := range p.operands {
		a.writeTo(f, "touch")
	}
	return cfgf("touch creates files or changes their times")
}

func ruleMkdir(name string) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		p := parseOpts(args, "mZ", []string{"mode", "context"}, false)
		for _, d := range p.operands {
			if _, crit, ok := a.criticalWord(d); ok && (name == "rmdir" || !strings.HasPrefix(crit, "a path")) {
				return Destructive, name + " " + d.val + " changes " + crit
			}
		}
		return cfgf("%s changes directories", name)
	}
}

func ruleRm(a *analyzer, args []word, _ int) (Class, string) {
	if hasShort(args, "rR") || hasLong(args, "recursive") {
		return Destructive, "rm -r deletes recursively"
	}
	if hasLong(args, "no-preserve-root") {
		return Destructive, "rm --no-preserve-root"
	}
	p := parseOpts(args, "", nil, false)
	if p.dynamic && slices.ContainsFunc(p.operands, func(w word) bool { return w.expands }) {
		return Destructive, "rm with arguments only known at run time"
	}
	for _, o := range p.operands {
		if criticalPath(o.val) || (o.glob && criticalPath(path.Dir(o.val))) || criticalFile(o.val) {
			return Destructive, "rm of " + o.val
		}
		if p, crit, ok := a.criticalWord(o); ok {
			return Destructive, fmt.Sprintf("rm of %s, %s", p, crit)
		}
	}
	if p.dynamic {
		return cfgf("rm deletes files matching a pattern")
	}
	return cfgf("rm deletes files")
}

func ruleMv(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "St", []string{"suffix", "target-directory"}, false)
	if p.dynamic {
		return Destructive, "mv with arguments only known at run time"
	}
	for _, o := range p.operands {
		if criticalPath(o.val) || criticalFile(o.val) {
			return Destructive, "mv of " + o.val
		}
		if p, crit, ok := a.criticalWord(o); ok {
			return Destructive, fmt.Sprintf("mv onto or of %s, %s", p, crit)
		}
	}
	for _, o := range p.values("-t", "--target-directory") {
		a.writeTo(o.word, "mv")
	}
	return cfgf("mv moves files")
}

func ruleRecursiveOwner(name string) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		p := parseOpts(args, "", []string{"reference", "from"}, false)
		if hasShort(args, "R") || hasLong(args, "recursive") {
			for _, o := range p.operands {
				if criticalPath(o.val) || o.dynamic {
					return Destructive, fmt.Sprintf("%s -R on %s", name, o.val)
				}
			}
		}
		for _, o := range p.operands {
			if p, crit, ok := a.criticalWord(o); ok {
				return Destructive, fmt.Sprintf("%s on %s, %s", name, p, crit)
			}
		}
		return cfgf("%s changes permissions", name)
	}
}

func ruleDD(a *analyzer, args []word, _ int) (Class, string) {
	for _, w := range args {
		if v, ok := strings.CutPrefix(w.val, "if="); ok {
			a.reads(word{val: v, dynamic: w.dynamic, glob: w.glob}, "dd")
		}
	}
	for _, w := range args {
		if strings.HasPrefix(w.val, "of=") || w.dynamic {
			return Destructive, "dd of= writes raw blocks"
		}
	}
	return cfgf("dd is not on the read-only list")
}

func ruleRsync(a *analyzer, args []word, depth int) (Class, string) {
	if hasLong(args, "delete", "delete-before", "delete-during", "delete-delay", "delete-after", "delete-excluded", "remove-source-files") {
		return Destructive, "rsync --delete removes files"
	}
	if anyDynamic(args) {
		return Destructive, "rsync with arguments only known at run time"
	}
	p := parseOpts(args, "eBfTM", []string{"rsh", "rsync-path", "filter", "temp-dir", "exclude", "include", "exclude-from", "include-from", "files-from", "password-file", "log-file", "remote-option", "partial-dir", "backup-dir", "compare-dest", "copy-dest", "link-dest", "chmod", "chown", "timeout", "bwlimit", "out-format", "port"}, false)
	c, why := cfgf("rsync writes files")
	for _, o := range p.values("-e", "--rsh", "--rsync-path") {
		a.script(o.val, depth+1)
		c, why = a.opaqueClass("rsync runs the remote shell " + o.val)
	}
	if n := len(p.operands); n > 1 {
		a.writeTo(p.operands[n-1], "rsync")
		a.intoDir(p.operands[n-1], p.operands[:n-1], hasShort(args, "ra") || hasLong(args, "recursive", "archive"), true, "rsync")
		for _, s := range p.operands[:n-1] {
			if what, ok := a.secretTree(s); ok && (hasShort(args, "ra") || hasLong(args, "recursive", "archive")) {
				a.secret("rsync " + what)
			}
			a.reads(s, "rsync")
		}
	}
	return c, why
}

// ruleSed: sed is read-only when its script only edits the stream. e and
// s///e run commands, w, W and s///w write files, -i edits files in place,
// and a script from a file or one that cannot be read may do any of these.
func ruleSed(a *analyzer, args []word, depth int) (Class, string) {
	var scripts []string
	var files []word
	inPlace, fromFile, dynamic, filesDynamic := false, false, false, false
	unknown := ""
	scriptGiven := false
	for i := 0; i < len(args); i++ {
		w := args[i]
		v := w.val
		if w.dynamic && strings.HasPrefix(v, "-") {
			dynamic = true
		}
		switch {
		case v == "--":
			files = append(files, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(v, "--"):
			name, val, has := strings.Cut(v, "=")
			switch {
			case name == "--expression":
				scriptGiven = true
				if !has && i+1 < len(args) {
					i++
					val = args[i].val
					dynamic = dynamic || args[i].dynamic
				}
				scripts = append(scripts, val)
			case name == "--file":
				fromFile = true
			case strings.HasPrefix("--in-place", name) && len(name) > 4:
				inPlace = true
			case name == "--line-length" && !has:
				i++
			case slices.Contains([]string{"--quiet", "--silent", "--regexp-extended", "--null-data", "--zero-terminated", "--separate", "--unbuffered", "--posix", "--debug", "--sandbox", "--line-length", "--follow-symlinks", "--binary", "--help", "--version"}, name):
			default:
				unknown = name
			}
		case len(v) > 1 && v[0] == '-':
			for j := 1; j < len(v); j++ {
				switch v[j] {
				case 'n', 'r', 'E', 's', 'z', 'u', 'b':
				case 'i':
					inPlace = true
					j = len(v) // the rest is the backup suffix
				case 'e', 'f', 'l':
					val := v[j+1:]
					if val == "" && i+1 < len(args) {
						i++
						val = args[i].val
						dynamic = dynamic || args[i].dynamic
					}
					switch v[j] {
					case 'e':
						scriptGiven = true
						scripts = append(scripts, val)
					case 'f':
						fromFile = true
					}
					j = len(v)
				default:
					unknown = "-" + v[j:j+1]
				}
			}
		case !scriptGiven && !fromFile:
			scriptGiven = true
			scripts = append(scripts, v)
			dynamic = dynamic || w.dynamic
		default:
			// A file known only at run time may be an option too (-i).
			files = append(files, w)
			filesDynamic = filesDynamic || w.dynamic
		}
	}
	for _, f := range files {
		a.reads(f, "sed")
		if inPlace {
			a.writeTo(f, "sed -i")
		}
	}
	script := strings.Join(scripts, "\n")
	switch {
	case dynamic:
		if c, r := crudeClass(joinRaw(args), a.onHost); c == Destructive {
			return c, r
		}
		return a.opaqueClass("sed with a script or files only known at run time")
	case fromFile:
		return a.opaqueClass("sed -f runs a script file the classifier cannot read")
	}
	c, why := ReadOnly, ""
	// GNU sed lets a bracket expression hold the delimiter, as in
	// s/[/]/x/; other seds do not. A script one of them rejects does not
	// run there, so judge every reading that parses, and give up only when
	// none does.
	var effects []sedEffect
	for _, brackets := range []bool{true, false} {
		if e := sedScript(script, brackets); e.bad == "" {
			effects = append(effects, e)
		} else if len(effects) == 0 && !brackets {
			if cc, r := crudeClass(script, a.onHost); cc == Destructive {
				return cc, r
			}
			return a.opaqueClass("sed script the classifier cannot read: " + e.bad)
		}
	}
	for _, e := range effects {
		for _, cmd := range e.exec {
			if cmd != "" {
				a.script(cmd, depth+1)
			}
			if cc, r := crudeClass(script, a.onHost); cc == Destructive {
				return cc, r
			}
			c, why = a.opaqueClass("sed runs shell commands")
		}
		for _, f := range e.writes {
			a.writeTo(word{val: f, raw: f}, "sed w")
			if !safeOutput(cleanPath(f)) && c < ConfigMutation {
				c, why = ConfigMutation, "sed writes "+f
			}
		}
		for _, f := range e.reads {
			a.reads(word{val: f, raw: f}, "sed r")
		}
	}
	if inPlace {
		c, why = max(c, ConfigMutation), "sed -i edits files in place"
		if why == "" {
			why = "sed -i edits files in place"
		}
	}
	switch {
	case c > ReadOnly:
	case unknown != "":
		return cfgf("sed option %s is not on the read-only list", unknown)
	case filesDynamic:
		return cfgf("sed with files only known at run time (one could be -i)")
	}
	return c, why
}

// sedEffect is what a sed script does beyond editing the stream.
type sedEffect struct {
	exec   []string // commands of e (empty for s///e, which runs the pattern space)
	writes []string // files of w, W and s///w
	reads  []string // files of r and R
	bad    string   // why the script could not be read
}

// sedScript reads a GNU sed script. brackets tells whether a bracket
// expression in a regular expression may hold the delimiter, as in GNU sed
// but not every sed; the caller reads the script both ways.
func sedScript(s string, brackets bool) sedEffect {
	var e sedEffect
	n := len(s)
	i := 0
	depth := 0
	skipBlank := func() {
		for i < n && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	toEOL := func() string {
		start := i
		for i < n && s[i] != '\n' {
			i++
		}
		return s[start:i]
	}
	label := func() {
		skipBlank()
		for i < n && s[i] != '\n' && s[i] != ';' {
			i++
		}
	}
	for {
		for i < n && strings.IndexByte(" \t\n;", s[i]) >= 0 {
			i++
		}
		if i >= n {
			break
		}
		if s[i] == '#' {
			toEOL()
			continue
		}
		var ok bool
		if i, ok = sedAddress(s, i, brackets, false); !ok {
			e.bad = "an address"
			return e
		}
		skipBlank()
		if i < n && s[i] == ',' {
			i++
			skipBlank()
			if i, ok = sedAddress(s, i, brackets, true); !ok {
				e.bad = "an address"
				return e
			}
		}
		skipBlank()
		for i < n && s[i] == '!' {
			i++
			skipBlank()
		}
		if i >= n {
			e.bad = "a missing command"
			return e
		}
		c := s[i]
		i++
		switch c {
		case '{':
			depth++
			continue
		case '}':
			depth--
			if depth < 0 {
				e.bad = "an unexpected }"
				return e
			}
		case '=', 'd', 'D', 'g', 'G', 'h', 'H', 'n', 'N', 'p', 'P', 'x', 'z', 'F':
		case 'l', 'L', 'q', 'Q':
			skipBlank()
			for i < n && isDigit(s[i]) {
				i++
			}
		case ':':
			start := i
			label()
			if strings.TrimSpace(s[start:i]) == "" {
				e.bad = "a label without a name"
				return e
			}
		case 'b', 't', 'T', 'v':
			label()
		case 'a', 'i', 'c':
			// Text to the end of the line; a backslash before the newline
			// continues it.
			for i < n {
				if s[i] == '\\' && i+1 < n {
					i += 2
					continue
				}
				if s[i] == '\n' {
					break
				}
				i++
			}
		case 'e':
			skipBlank()
			e.exec = append(e.exec, toEOL())
		case 'r', 'R':
			skipBlank()
			e.reads = append(e.reads, toEOL())
		case 'w', 'W':
			skipBlank()
			e.writes = append(e.writes, toEOL())
		case 's', 'y':
			if i >= n || s[i] == '\n' || s[i] == '\\' {
				e.bad = "a missing delimiter"
				return e
			}
			delim := s[i]
			i++
			if i, ok = sedPart(s, i, delim, brackets && c == 's'); !ok {
				e.bad = "an unterminated " + string(c) + " command"
				return e
			}
			if i, ok = sedPart(s, i, delim, false); !ok {
				e.bad = "an unterminated " + string(c) + " command"
				return e
			}
			if c == 'y' {
				break
			}
		flags:
			for i < n {
				switch f := s[i]; {
				case f == 'g' || f == 'p' || f == 'i' || f == 'I' || f == 'm' || f == 'M' || isDigit(f):
					i++
				case f == 'e':
					e.exec = append(e.exec, "")
					i++
				case f == 'w':
					i++
					skipBlank()
					e.writes = append(e.writes, toEOL())
					break flags
				default:
					break flags
				}
			}
		default:
			e.bad = fmt.Sprintf("the unknown command %q", c)
			return e
		}
		skipBlank()
		if i < n && strings.IndexByte(";\n}#", s[i]) < 0 {
			e.bad = "text after a command"
			return e
		}
	}
	if depth != 0 {
		e.bad = "an unclosed {"
	}
	return e
}

// sedAddress reads an optional address at s[i:]; second allows the forms
// only a range's end may take (+N, ~N).
func sedAddress(s string, i int, brackets, second bool) (int, bool) {
	n := len(s)
	if i >= n {
		return i, true
	}
	switch c := s[i]; {
	case isDigit(c):
		for i < n && isDigit(s[i]) {
			i++
		}
		if i < n && s[i] == '~' {
			i++
			for i < n && isDigit(s[i]) {
				i++
			}
		}
	case c == '$':
		i++
	case second && (c == '+' || c == '~'):
		i++
		for i < n && isDigit(s[i]) {
			i++
		}
	case c == '/' || c == '\\':
		delim := byte('/')
		if c == '\\' {
			if i+1 >= n || s[i+1] == '\n' {
				return i, false
			}
			delim = s[i+1]
			i++
		}
		var ok bool
		if i, ok = sedPart(s, i+1, delim, brackets); !ok {
			return i, false
		}
		for i < n && (s[i] == 'I' || s[i] == 'M') {
			i++
		}
	}
	return i, true
}

// sedPart reads up to and past the unescaped delim.
func sedPart(s string, i int, delim byte, brackets bool) (int, bool) {
	n := len(s)
	for i < n {
		c := s[i]
		switch {
		case c == '\\':
			i += 2
			continue
		case c == delim:
			return i + 1, true
		case c == '\n' && brackets:
			return i, false
		case c == '[' && brackets:
			j := i + 1
			if j < n && s[j] == '^' {
				j++
			}
			if j < n && s[j] == ']' {
				j++
			}
			for j < n && s[j] != ']' {
				if s[j] == '[' && j+1 < n && strings.IndexByte(":.=", s[j+1]) >= 0 {
					end := strings.Index(s[j+2:], string(s[j+1])+"]")
					if end < 0 {
						return j, false
					}
					j += 2 + end + 2
					continue
				}
				j++
			}
			if j >= n {
				return j, false
			}
			i = j + 1
			continue
		}
		i++
	}
	return i, false
}

// ruleAwk: awk is a programming language, so never read-only. A program
// that only filters and prints stays config_mutation; one that runs
// commands, writes or reads other files or the environment is code the
// classifier cannot read.
func ruleAwk(name string) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		program, havePrg := "", false
		var files []word
		unsafe := ""
		for i := 0; i < len(args); i++ {
			w := args[i]
			v := w.val
			if w.dynamic && unsafe == "" {
				unsafe = "has arguments only known at run time"
			}
			switch {
			case havePrg:
				if n, _, ok := strings.Cut(v, "="); ok && isShellName(n) {
					continue
				}
				files = append(files, w)
			case v == "--":
			case v == "-F" || v == "-v":
				i++
			case strings.HasPrefix(v, "-F") || strings.HasPrefix(v, "-v"):
			case v == "-e" || v == "--source":
				if i+1 < len(args) {
					i++
					program, havePrg = args[i].val, true
				}
			case strings.HasPrefix(v, "-"):
				if unsafe == "" {
					unsafe = "option " + v + " may load code or write files"
				}
			default:
				program, havePrg = v, true
			}
		}
		for _, f := range files {
			a.reads(f, name)
		}
		if unsafe == "" {
			unsafe = awkProgram(program)
		}
		if what, ok := mentionsSecret(program); ok {
			a.secret(name + " mentions " + what)
		}
		if unsafe != "" {
			if c, r := crudeClass(program, a.onHost); c == Destructive {
				return c, r
			}
			return a.opaqueClass(name + " " + unsafe)
		}
		return cfgf("%s runs a program; it is never read-only", name)
	}
}

// hasIdent reports whether id occurs in text as a whole identifier.
func hasIdent(text, id string) bool {
	isID := func(c byte) bool { return isAlnum(c) || c == '_' }
	for i := 0; ; {
		j := strings.Index(text[i:], id)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(id)
		if (j == 0 || !isID(text[j-1])) && (end == len(text) || !isID(text[end])) {
			return true
		}
		i = j + 1
	}
}

func isShellName(n string) bool {
	if n == "" || isDigit(n[0]) {
		return false
	}
	return allBytes(n, func(c byte) bool { return isAlnum(c) || c == '_' })
}

// awkProgram returns why an awk program is more than a filter, or "".
func awkProgram(p string) string {
	// Looked for in the whole text, strings and all: a misread regular
	// expression must not hide one.
	for _, id := range []string{"system", "getline", "ENVIRON", "PROCINFO", "ARGV", "ARGC", "close"} {
		if hasIdent(p, id) {
			return "uses " + id
		}
	}
	if strings.Contains(p, "@") {
		return "uses @ (gawk's include, load and indirect calls)"
	}
	n := len(p)
	// regexOK: a / here starts a regular expression, not a division.
	regexOK := true
	inPrint := false
	printDepth, depth := 0, 0
	for i := 0; i < n; i++ {
		c := p[i]
		switch {
		case c == '"':
			i++
			for i < n && p[i] != '"' {
				if p[i] == '\\' {
					i++
				}
				i++
			}
			if i >= n {
				return "has an unterminated string"
			}
			regexOK = false
		case c == '#':
			for i < n && p[i] != '\n' {
				i++
			}
			regexOK = true
		case c == '/' && regexOK:
			i++
			for i < n && p[i] != '/' {
				switch p[i] {
				case '\\':
					i++
				case '[':
					for i < n && p[i] != ']' {
						i++
					}
				case '\n':
					return "has an unterminated regular expression"
				}
				i++
			}
			if i >= n {
				return "has an unterminated regular expression"
			}
			regexOK = false
		case c == '|':
			if i+1 < n && p[i+1] == '|' {
				i++
				regexOK = true
				continue
			}
			return "pipes to or from a command"
		case c == '>':
			if inPrint && depth == printDepth {
				return "writes to a file"
			}
			regexOK = false
		case c == '(':
			depth++
			regexOK = true
		case c == ')':
			depth--
			regexOK = false
		case c == ';' || c == '\n' || c == '{' || c == '}':
			inPrint = false
			regexOK = true
		case c == ',' || c == '!' || c == '~' || c == '&' || c == '?' || c == ':' || c == '=':
			regexOK = true
		case isAlnum(c) || c == '_':
			start := i
			for i+1 < n && (isAlnum(p[i+1]) || p[i+1] == '_') {
				i++
			}
			if id := p[start : i+1]; id == "print" || id == "printf" {
				inPrint, printDepth = true, depth
			}
			regexOK = false
		case c == ' ' || c == '\t':
		default:
			regexOK = false
		}
	}
	return ""
}

// ruleTar: listing an archive is read-only; extracting writes files,
// creating one writes the archive, and several options run programs.
func ruleTar(a *analyzer, args []word, depth int) (Class, string) {
	args = slices.Clone(args)
	// Old style: the first word is a cluster of letters without a dash.
	if len(args) > 0 && args[0].static() && args[0].val != "" && !strings.HasPrefix(args[0].val, "-") &&
		allBytes(args[0].val, func(c byte) bool { return isAlnum(c) }) {
		args[0].val = "-" + args[0].val
	}
	runners := []string{"to-command", "checkpoint-action", "use-compress-program", "compress-program", "info-script", "new-volume-script", "rsh-command", "rmt-command", "index-file", "listed-incremental", "volno-file"}
	s := newSpec(
		"-c -x -t -d -r -u -A -v -z -j -J -a -p -h -O -k -m -P -S -W -s -Z -B -i -l -U -o "+
			"--create --extract --get --list --diff --compare --append --update --concatenate --catenate --delete "+
			"--verbose --gzip --gunzip --ungzip --bzip2 --xz --zstd --lzma --lzip --lzop --compress --uncompress --auto-compress "+
			"--numeric-owner --same-permissions --preserve-permissions --dereference --to-stdout "+
			"--keep-old-files --skip-old-files --keep-newer-files --absolute-names --sparse --full-time --totals "+
			"--no-same-owner --no-same-permissions --same-owner --overwrite --overwrite-dir --wildcards "+
			"--no-wildcards --anchored --no-anchored --ignore-case --no-ignore-case --no-recursion --recursion "+
			"--one-file-system --acls --no-acls --xattrs --no-xattrs --selinux --no-selinux --force-local "+
			"--exclude-vcs --exclude-backups --exclude-caches --show-transformed-names --check-links "+
			"--ignore-zeros --ignore-failed-read --utc --warning --no-auto-compress --interactive --confirmation",
		"-f -C -b -X -H -K -N -V -T -g -F -I -L "+
			"--file --directory --blocking-factor --record-size --exclude --exclude-from --strip-components "+
			"--transform --xform --owner --group --mode --mtime --format --label --starting-file --newer "+
			"--after-date --newer-mtime --files-from --tape-length")
	s.optional = set("--checkpoint", "--occurrence", "--totals", "--warning", "--exclude", "--backup", "--one-top-level", "--sort", "--quoting-style")
	p := s.parse(args, false)
	for _, o := range p.opts {
		name := strings.TrimPrefix(o.name, "--")
		if !strings.HasPrefix(o.name, "--") || len(name) < 3 {
			continue
		}
		for _, r := range runners {
			if strings.HasPrefix(r, name) {
				if o.hasVal && o.val != "" {
					cmd := o.val
					if r == "checkpoint-action" {
						var ok bool
						if _, cmd, ok = strings.Cut(o.val, "exec="); !ok {
							cmd = ""
						}
					}
					if cmd != "" {
						a.script(cmd, depth+1)
					}
				}
				return a.opaqueClass("tar --" + r + " runs a program")
			}
		}
	}
	if p.has("-I", "-F", "-g") {
		for _, o := range p.values("-I", "-F") {
			a.script(o.val, depth+1)
		}
		return a.opaqueClass("tar -I, -F or -g runs a program or writes a state file")
	}
	archives := p.values("-f", "--file")
	for _, f := range archives {
		if strings.Contains(f.val, ":") && !p.has("--force-local") {
			return a.opaqueClass("tar -f " + f.val + " runs rsh for a remote archive")
		}
	}
	for _, o := range p.values("-X", "--exclude-from", "-T", "--files-from") {
		a.reads(o.word, "tar")
	}
	extract := p.has("-x", "--extract", "--get")
	create := p.has("-c", "--create", "-r", "--append", "-u", "--update", "-A", "--concatenate", "--catenate", "--delete")
	toStdout := p.has("-O", "--to-stdout")
	c, why := ReadOnly, ""
	switch {
	case extract && !toStdout:
		dirs := p.values("-C", "--directory")
		if len(dirs) == 0 {
			dirs = []opt{{word: word{val: ".", raw: "."}}}
		}
		for _, d := range dirs {
			_, crit, ok := a.criticalWord(d.word)
			if !ok && strings.HasPrefix(d.word.val, "/") && path.Clean(d.word.val) == "/" {
				crit, ok = "over the whole system", true
			}
			if ok {
				return Destructive, "tar -x extracts into " + d.word.val + ", " + crit
			}
		}
		c, why = cfgf("tar -x extracts files")
	case create:
		for _, f := range archives {
			a.writeTo(f.word, "tar")
			if !f.word.static() || f.val != "-" && !safeOutput(cleanPath(f.val)) {
				c, why = cfgf("tar writes the archive %s", f.val)
			}
		}
		for _, src := range p.operands {
			if what, ok := a.secretTree(src); ok {
				a.secret("tar " + what)
			}
			a.reads(src, "tar")
		}
	default:
		for _, f := range archives {
			a.reads(f.word, "tar")
		}
		if extract {
			for _, src := range archives {
				a.reads(src.word, "tar")
			}
		}
	}
	switch {
	case c > ReadOnly:
		return c, why
	case len(p.unknown) > 0:
		return cfgf("tar option %s is not on the read-only list", p.unknown[0])
	case p.bad:
		return cfgf("tar option without its value")
	case p.dynamic:
		return notLiteral("tar")
	case p.has("-T", "--files-from"):
		return cfgf("tar -T reads file names from a file")
	}
	return ReadOnly, ""
}

// ruleFind: -exec and kin run a command per file, with each file name in
// place of {}; -delete deletes; -fprint and kin write files.
func ruleFind(a *analyzer, args []word, depth int) (Class, string) {
	c, why := ReadOnly, ""
	for i := 0; i < len(args); i++ {
		switch v := args[i].val; v {
		case "-delete":
			return Destructive, "find -delete deletes files"
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j].val != ";" && args[j].val != "+" {
				j++
			}
			inner := slices.Clone(args[i+1 : j])
			for k, w := range inner {
				if strings.Contains(w.val, "{}") {
					inner[k] = word{val: w.val, raw: w.raw, dynamic: true, expands: true}
				}
			}
			if len(inner) > 0 {
				base, _ := commandBase(inner[0].val)
				switch base {
				case "rm", "shred", "unlink", "rmdir", "wipefs", "truncate":
					return Destructive, "find " + v + " " + base + " deletes files in bulk"
				}
				a.argv(inner, depth)
			}
			c, why = ConfigMutation, "find "+v+" runs a command for each file"
			i = j
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			if i+1 < len(args) {
				a.writeTo(args[i+1], "find "+v)
			}
			return cfgf("find %s writes a file", v)
		case "-files0-from":
			c, why = cfgf("find -files0-from reads names from a file")
		}
	}
	if slices.ContainsFunc(args, func(w word) bool { return w.expands }) {
		return Destructive, "find with arguments only known at run time (one could be -delete)"
	}
	if c == ReadOnly && anyDynamic(args) {
		return cfgf("find with a pattern the shell expands")
	}
	return c, why
}

// ruleCd follows the working directory, so relative paths read or written
// later are judged where they are.
func ruleCd(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "", nil, false)
	dirs := []string{"~"}
	if len(p.operands) > 0 {
		dirs = nil
		// With words known only at run time, any static one may be the
		// directory.
		for _, o := range p.operands {
			if o.static() && o.val != "-" {
				dirs = append(dirs, o.val)
			}
		}
	}
	for _, d := range dirs {
		for _, c := range a.resolve(d) {
			if !slices.Contains(a.cwds, c) {
				a.cwds = append(a.cwds, c)
			}
		}
	}
	if p.dynamic {
		a.cwdUnknown = true
		return notLiteral("cd")
	}
	return ReadOnly, ""
}
