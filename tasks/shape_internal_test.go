package tasks

import (
	"regexp"
	"strings"
	"testing"
)

// shapes pairs each hand-written check with the regular expression it
// replaced, which stays here as its specification.
var shapes = []struct {
	name  string
	re    string
	match func(string) bool
}{
	{"node", `^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`, nodeName.match},
	{"status", `^[a-z]{1,16}$`, statusWord.match},
	{"guest name", `^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$`, guestName.match},
	{"lock", `^[a-z][a-z-]{0,31}$`, lockWord.match},
	{"HA state", `^[a-z][a-z_-]{0,31}$`, haStateWord.match},
	{"tag", `^[A-Za-z0-9_][A-Za-z0-9_+.-]{0,63}$`, pveTag.match},
	{"storage type", `^[a-z][a-z0-9]{0,31}$`, storageType.match},
	{"blocker", `^(bind|device) mount mp\d{1,3}( \(/[A-Za-z0-9._/+-]{0,200}\))?$|^(raw|subvol|qcow2|vmdk) volume( mp\d{1,3})? on [a-z][a-z0-9]{0,31} storage [A-Za-z][A-Za-z0-9._-]{0,63}$`, isBlockerPhrase},
	{"actuator", `^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`, actuatorName.match},
	{"replication id", `^[1-9][0-9]{2,8}-[0-9]{1,3}$`, isReplicationID},
	{"deb package", `^[a-z0-9][a-z0-9+.-]{1,127}(:[a-z0-9-]{1,16})?$`, isDebPackage},
	{"deb version", `^[0-9A-Za-z.+~:-]{1,96}$`, debVersion.match},
	{"volume", `^[A-Za-z][A-Za-z0-9._-]{0,63}:[A-Za-z0-9._/+-]{1,200}$`, isVolume},
	{"job id", `^[A-Za-z][A-Za-z0-9_-]{0,63}$`, jobID.match},
}

// shapeInputs are words at and around each shape's edges: lengths at the
// bounds and one past, a bad first or last character, characters outside
// ASCII, a trailing newline (which `$` does not match before).
var shapeInputs = []string{
	"", "a", "A", "0", "-", "_", ".", "a-", "-a", "a-b", "a_b", "a.b", "a:b", "a b", "pve1", "pve-1", "pve1-",
	"running", "stopped", "snapshot-delete", "request_stop", "backup", "Running", "running\n", "ru nning",
	"zfspool", "lvmthin", "dir", "9p", "a" + strings.Repeat("b", 15), "a" + strings.Repeat("b", 16),
	"a" + strings.Repeat("b", 31), "a" + strings.Repeat("b", 32), "a" + strings.Repeat("b", 62), "a" + strings.Repeat("b", 63),
	"a" + strings.Repeat("b", 63) + "c", "a" + strings.Repeat(".", 251) + "b", "a" + strings.Repeat(".", 252) + "b",
	"a" + strings.Repeat("-", 61) + "b", "a" + strings.Repeat("-", 62) + "b", "web.lan", "web.lan.", ".web",
	"prod+db", "_tag", "+tag", "tag+", "actuator", "site-a.actuator_2", ".actuator", "dailyjob", "1job",
	"100-0", "100-999", "100-1000", "99-0", "1000000000-1", "999999999-1", "0100-1", "100-", "-1", "100--1", "100-1-1",
	"openssl", "libc6:amd64", "libc6:", "libc6:amd64:x", "a", "g++", "libstdc++6", "Openssl", "x" + strings.Repeat("y", 127), "x" + strings.Repeat("y", 128),
	"libc6:" + strings.Repeat("a", 16), "libc6:" + strings.Repeat("a", 17), "3.0.11-1~deb12u2", "1:2.36-9+deb12u4", "2.0~rc1",
	"local:backup/vzdump-lxc-101.tar.zst", "local-zfs:subvol-101-disk-0", "local:", ":x", "1local:x", "local:a:b",
	"local:" + strings.Repeat("a", 200), "local:" + strings.Repeat("a", 201), strings.Repeat("s", 64) + ":x", strings.Repeat("s", 65) + ":x",
	"bind mount mp0", "device mount mp12 (/dev/net/tun)", "bind mount mp1 (/mnt/data)", "bind mount mp1 (/)", "bind mount mp1 ()",
	"bind mount mp1234", "bind mount mp", "bind mount mp1 (/mnt data)", "bind mount mp1 (/mnt)x", "bind mount mp1 (/a))",
	"bind mount mp1 (/" + strings.Repeat("a", 200) + ")", "bind mount mp1 (/" + strings.Repeat("a", 201) + ")", "bind  mount mp1", "loop mount mp1",
	"raw volume on dir storage local", "subvol volume mp3 on zfspool storage local-zfs", "qcow2 volume mp on dir storage local",
	"vmdk volume mp1000 on dir storage local", "raw volume mp1 on Dir storage local", "raw volume on dir storage 1local",
	"raw volume on dir storage ", "raw volume on  storage local", "raw volume on dir storage local ", "raw volume  on dir storage local",
	"raw volume mp1on dir storage local", "raw volume on dir storage local\n", "ext4 volume on dir storage local",
	"naïve", "caf\xe9", "\xff", "a\x00b", "ÿ",
}

func TestShapesMatchTheirRegularExpressions(t *testing.T) {
	t.Parallel()
	for _, sh := range shapes {
		re := regexp.MustCompile(sh.re)
		matched := 0
		for _, s := range shapeInputs {
			want := re.MatchString(s)
			if got := sh.match(s); got != want {
				t.Errorf("%s: match(%q) = %v, the regular expression says %v", sh.name, s, got, want)
			}
			if want {
				matched++
			}
		}
		// Each shape must be tried on words it takes and words it refuses.
		if matched == 0 || matched == len(shapeInputs) {
			t.Errorf("%s: %d of %d inputs match: the table does not try both sides", sh.name, matched, len(shapeInputs))
		}
	}
}

func FuzzShapesMatchTheirRegularExpressions(f *testing.F) {
	for _, s := range shapeInputs {
		f.Add(s)
	}
	res := make([]*regexp.Regexp, len(shapes))
	for i, sh := range shapes {
		res[i] = regexp.MustCompile(sh.re)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for i, sh := range shapes {
			if got, want := sh.match(s), res[i].MatchString(s); got != want {
				t.Errorf("%s: match(%q) = %v, the regular expression says %v", sh.name, s, got, want)
			}
		}
	})
}

func TestCharsOfReadsAClass(t *testing.T) {
	t.Parallel()
	c := charsOf("a-c_+.-")
	for b := range 256 {
		want := strings.IndexByte("abc_+.-", byte(b)) >= 0
		if got := c.has(byte(b)); got != want {
			t.Errorf("charsOf(%q).has(%q) = %v, want %v", "a-c_+.-", byte(b), got, want)
		}
	}
}
