package tasks

import "strings"

// The wire contract's names and words have fixed shapes: a class of ASCII
// characters and a length bound. They are checked by hand rather than by
// regular expressions, which every process would compile at start-up and
// keep: a bound such as {0,251} compiles to a program unrolled that many
// times, and the fifteen of them held 0.4 MB of every role's heap and cost
// 1.2 MB of allocation before main. shape_test.go checks each against the
// regular expression it replaces.

// chars is a set of ASCII characters.
type chars [2]uint64

// charsOf makes a set as a regular expression's class writes it: single
// characters and ranges such as "a-z", with a '-' first or last standing
// for itself.
func charsOf(class string) chars {
	var c chars
	for i := 0; i < len(class); i++ {
		lo, hi := class[i], class[i]
		if i+2 < len(class) && class[i+1] == '-' {
			hi = class[i+2]
			i += 2
		}
		for b := lo; b <= hi; b++ {
			c[b>>6] |= 1 << (b & 63)
		}
	}
	return c
}

func (c chars) has(b byte) bool { return b < 128 && c[b>>6]&(1<<(b&63)) != 0 }

// all reports whether every byte of s is in c.
func (c chars) all(s string) bool {
	for i := 0; i < len(s); i++ {
		if !c.has(s[i]) {
			return false
		}
	}
	return true
}

// token is a word of min to max characters: its first in first, the
// rest in rest, and the last also in last where last is set.
type token struct {
	first, rest, last chars
	min, max          int
}

func (t token) match(s string) bool {
	if len(s) < t.min || len(s) > t.max || s == "" {
		return len(s) == 0 && t.min == 0
	}
	if !t.first.has(s[0]) || !t.rest.all(s[1:]) {
		return false
	}
	return t.last == chars{} || t.last.has(s[len(s)-1])
}

var (
	lower  = charsOf("a-z")
	digits = charsOf("0-9")
	alnum  = charsOf("A-Za-z0-9")
	alpha  = charsOf("A-Za-z")

	// nodeName is a host name label: [A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?
	nodeName = token{first: alnum, rest: charsOf("A-Za-z0-9-"), last: alnum, min: 1, max: 63}
	// statusWord is [a-z]{1,16}: a guest's status or a VM's lock.
	statusWord = token{first: lower, rest: lower, min: 1, max: 16}
	// guestName is a container's host name or a VM's name:
	// [A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?
	guestName = token{first: alnum, rest: charsOf("A-Za-z0-9.-"), last: alnum, min: 1, max: 253}
	// lockWord and haStateWord are Proxmox's words for a config lock
	// (backup, snapshot-delete, ...) and an HA state (started,
	// request_stop, ...): [a-z][a-z-]{0,31} and [a-z][a-z_-]{0,31}.
	lockWord    = token{first: lower, rest: charsOf("a-z-"), min: 1, max: 32}
	haStateWord = token{first: lower, rest: charsOf("a-z_-"), min: 1, max: 32}
	// pveTag is pve-common's pve-tag format: [A-Za-z0-9_][A-Za-z0-9_+.-]{0,63}
	pveTag = token{first: charsOf("A-Za-z0-9_"), rest: charsOf("A-Za-z0-9_+.-"), min: 1, max: 64}
	// storageType is a storage plugin's type: [a-z][a-z0-9]{0,31}
	storageType = token{first: lower, rest: charsOf("a-z0-9"), min: 1, max: 32}
	// storageID is what follows "storage" in a snapshot blocker:
	// [A-Za-z][A-Za-z0-9._-]{0,63}
	storageID = token{first: alpha, rest: charsOf("A-Za-z0-9._-"), min: 1, max: 64}
	// actuatorName is [A-Za-z0-9][A-Za-z0-9._-]{0,63}
	actuatorName = token{first: alnum, rest: charsOf("A-Za-z0-9._-"), min: 1, max: 64}
	// jobID is pve-common's pve-configid, the backup job ids:
	// [A-Za-z][A-Za-z0-9_-]{0,63}
	jobID = token{first: alpha, rest: charsOf("A-Za-z0-9_-"), min: 1, max: 64}
	// debVersion is Debian policy's version (5.6.12), its epoch, upstream
	// and revision characters: [0-9A-Za-z.+~:-]{1,96}
	debVersion = token{first: charsOf("0-9A-Za-z.+~:-"), rest: charsOf("0-9A-Za-z.+~:-"), min: 1, max: 96}
	// debName and debArch are Debian policy's package name (5.6.1) and
	// the :arch qualifier apt prints on foreign ones:
	// [a-z0-9][a-z0-9+.-]{1,127} and [a-z0-9-]{1,16}
	debName = token{first: charsOf("a-z0-9"), rest: charsOf("a-z0-9+.-"), min: 2, max: 128}
	debArch = token{first: charsOf("a-z0-9-"), rest: charsOf("a-z0-9-"), min: 1, max: 16}
	// volumeStorage and volumeName are the two halves of a Proxmox volume
	// id, STORAGE:NAME: [A-Za-z][A-Za-z0-9._-]{0,63} and [A-Za-z0-9._/+-]{1,200}
	volumeStorage = storageID
	volumeName    = token{first: charsOf("A-Za-z0-9._/+-"), rest: charsOf("A-Za-z0-9._/+-"), min: 1, max: 200}
	// blockerPath is the mount point a snapshot blocker names:
	// [A-Za-z0-9._/+-]{0,200}
	blockerPath = token{first: charsOf("A-Za-z0-9._/+-"), rest: charsOf("A-Za-z0-9._/+-"), min: 0, max: 200}
)

// isReplicationID reports whether id is pve-guest-common's replication
// job id, GUEST-JOBNUM: [1-9][0-9]{2,8}-[0-9]{1,3}.
func isReplicationID(id string) bool {
	guest, job, ok := strings.Cut(id, "-")
	return ok && token{first: charsOf("1-9"), rest: digits, min: 3, max: 9}.match(guest) &&
		token{first: digits, rest: digits, min: 1, max: 3}.match(job)
}

// isDebPackage reports whether s is a Debian package name with an
// optional :arch qualifier.
func isDebPackage(s string) bool {
	name, arch, qualified := strings.Cut(s, ":")
	return debName.match(name) && (!qualified || debArch.match(arch))
}

// isVolume reports whether v is a Proxmox volume id, STORAGE:NAME.
func isVolume(v string) bool {
	storage, name, ok := strings.Cut(v, ":")
	return ok && volumeStorage.match(storage) && volumeName.match(name)
}

// mountPoint cuts the " mpN" of a snapshot blocker, N of one to three
// digits, from the front of s.
func mountPoint(s string) (rest string, ok bool) {
	s, ok = strings.CutPrefix(s, "mp")
	n := 0
	for n < len(s) && digits.has(s[n]) {
		n++
	}
	return s[n:], ok && n >= 1 && n <= 3
}

// isBlockerPhrase reports whether part is one of the phrases a snapshot
// blocker is built from, so no text of the host's choosing reaches the
// room:
//
//	(bind|device) mount mpN[ (/PATH)]
//	(raw|subvol|qcow2|vmdk) volume[ mpN] on TYPE storage ID
func isBlockerPhrase(part string) bool {
	kind, rest, _ := strings.Cut(part, " ")
	switch kind {
	case "bind", "device":
		rest, ok := strings.CutPrefix(rest, "mount ")
		if !ok {
			return false
		}
		if rest, ok = mountPoint(rest); !ok {
			return false
		}
		if rest == "" {
			return true
		}
		path, ok := strings.CutPrefix(rest, " (/")
		path, closed := strings.CutSuffix(path, ")")
		return ok && closed && blockerPath.match(path)
	case "raw", "subvol", "qcow2", "vmdk":
		rest, ok := strings.CutPrefix(rest, "volume ")
		if !ok {
			return false
		}
		if strings.HasPrefix(rest, "mp") {
			if rest, ok = mountPoint(rest); !ok {
				return false
			}
			if rest, ok = strings.CutPrefix(rest, " "); !ok {
				return false
			}
		}
		rest, ok = strings.CutPrefix(rest, "on ")
		typ, rest, _ := strings.Cut(rest, " ")
		id, named := strings.CutPrefix(rest, "storage ")
		return ok && named && storageType.match(typ) && storageID.match(id)
	}
	return false
}
