package policy

import (
	"strings"
	"testing"
)

type identTest struct {
	name  string
	check func(string) error
	ok    []string
	bad   []string
}

var identTests = []identTest{
	{
		name:  "hostname",
		check: ValidateHostname,
		ok:    []string{"a", "jellyfin", "web-01", "strong", "x" + strings.Repeat("y", 62), "101"},
		bad:   []string{"", "Web", "web_01", "-web", "web-", "web.lan", "x" + strings.Repeat("y", 63), "foo;rm"},
	},
	{
		name:  "service name",
		check: ValidateServiceName,
		ok:    []string{"jellyfin", "paperless-ngx", "home_assistant", "nginx.proxy", "0ad"},
		bad:   []string{"", "Jellyfin", ".hidden", "-x", "a/b", "a:b"},
	},
	{
		name:  "unit",
		check: ValidateUnit,
		ok: []string{"jellyfin", "jellyfin.service", "getty@tty1.service", "docker.socket",
			"apt-daily.timer", "mnt-data.mount", `mnt-data\x2dvol.mount`, "systemd-resolved", "user@1000.service", "_x.service"},
		bad: []string{"", "-.mount", ".service", "getty@.service", "a@b@c.service", `a\n.service`, `a\x2.service`,
			"a..service", "a b.service", "a/b.service", strings.Repeat("a", 250) + ".service"},
	},
	{
		name:  "package",
		check: ValidatePackage,
		ok:    []string{"docker.io", "git", "libc6", "g++", "python3-pip", "r-base", "0ad"},
		bad:   []string{"", "a", "Git", "-y", "git=1.2", "libc6:amd64", "docker-compose-plugin", "docker-ce", "containerd.io", ".git"},
	},
	{
		name:  "storage",
		check: ValidateStorage,
		ok:    []string{"local-lvm", "local-zfs", "local", "nas_nfs", "Tank2", "ceph.pool"},
		bad:   []string{"", "l", "1local", "local-", "local lvm", "local:lvm", "-local"},
	},
	{
		name:  "template",
		check: ValidateTemplate,
		ok: []string{"local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst", "nas:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz",
			"local:vztmpl/ubuntu.tar.gz", "local:vztmpl/x.tgz"},
		bad: []string{"", "debian-12", "local:iso/debian.iso", "local:vztmpl/", "local:vztmpl/.tar.zst", "local:vztmpl/a b.tar.zst",
			"local:vztmpl/../x.tar.zst", "-l:vztmpl/x.tar.zst", "local:vztmpl/x.tar.zst;id"},
	},
	{
		name:  "bridge",
		check: ValidateBridge,
		ok:    []string{"vmbr0", "vmbr1.20", "vnet_iot", "br-lan"},
		bad:   []string{"", "vmbr0 ", "this-name-is-too-long", "-vmbr0", "vm/br"},
	},
	{
		name:  "snapshot",
		check: ValidateSnapshotName,
		ok:    []string{"pre-upgrade", "nomos-20260706-101500", "Before_Change", "ab", "a" + strings.Repeat("b", 39)},
		bad:   []string{"", "a", "1abc", "_abc", "current", "pre upgrade", "a" + strings.Repeat("b", 40), "pre.upgrade"},
	},
	{
		name:  "ipv4",
		check: func(s string) error { _, err := ParseIPv4(s); return err },
		ok:    []string{"192.168.8.1", "1.1.1.1", "10.0.0.254"},
		bad:   []string{"", "192.168.8", "192.168.008.1", "::1", "::ffff:1.2.3.4", "1.2.3.4/24", "1.2.3.4%eth0", "example.org"},
	},
	{
		name:  "cidr",
		check: func(s string) error { _, err := ParseCIDR(s); return err },
		ok:    []string{"192.168.8.50/24", "10.0.0.2/8", "172.16.5.1/30", "192.168.8.50/32", "10.0.0.0/31"},
		bad: []string{"", "192.168.8.50", "192.168.8.0/24", "192.168.8.255/24", "127.0.0.5/8", "224.0.0.1/4", "0.0.0.0/0",
			"192.168.8.50/33", "fd00::5/64", "dhcp", "192.168.8.50/24 "},
	},
	{
		name:  "matrix user id",
		check: ValidateMatrixUserID,
		ok:    []string{"@operator:localhost", "@alice:example.org", "@bob:matrix.example.org:8448", "@a.b_c=d/e+f-g:10.0.0.5"},
		bad: []string{"", "alice", "@alice", "@:example.org", "@alice:", "@al ice:example.org", "#room:example.org",
			"@Alice:example.org", "@alice:example.org:port", "@alice:example.org:123456", "@alice:exa_mple.org"},
	},
}

func TestValidators(t *testing.T) {
	t.Parallel()
	for _, tt := range identTests {
		for _, s := range tt.ok {
			if err := tt.check(s); err != nil {
				t.Errorf("%s %q: %v, want ok", tt.name, s, err)
			}
		}
		for _, s := range append(tt.bad, injections...) {
			if err := tt.check(s); err == nil {
				t.Errorf("%s %q: ok, want an error", tt.name, s)
			}
		}
	}
}

func TestValidatorMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want string
	}{
		{ValidateHostname("foo;rm"), `must be a DNS label (a-z, 0-9, -), got "foo;rm"`},
		{ValidatePackage("docker-compose-plugin"), `"docker-compose-plugin" is not in Debian's archive: put docker.io in services, and install compose v2 in post_install with Docker's script (curl -fsSL https://get.docker.com | sh)`},
		{ValidateVMID(42), "must be a container id from 100 to 999999999, got 42"},
		{ValidateSnapshotName("current"), `must not be "current", which Proxmox reserves`},
	}
	for _, tt := range tests {
		if tt.err == nil || tt.err.Error() != tt.want {
			t.Errorf("error %v, want %q", tt.err, tt.want)
		}
	}
}

func TestValidateVMID(t *testing.T) {
	t.Parallel()
	for _, id := range []int{100, 101, 999999999} {
		if err := ValidateVMID(id); err != nil {
			t.Errorf("ValidateVMID(%d) = %v", id, err)
		}
	}
	for _, id := range []int{-1, 0, 99, 1000000000} {
		if err := ValidateVMID(id); err == nil {
			t.Errorf("ValidateVMID(%d) = nil, want an error", id)
		}
	}
}

func TestParseSlug(t *testing.T) {
	t.Parallel()
	tests := []struct {
		slug     string
		typ      TargetType
		name     string
		wantFail bool
	}{
		{slug: "host:strong", typ: TargetHost, name: "strong"},
		{slug: "lxc:101", typ: TargetLXC, name: "101"},
		{slug: "service:jellyfin", typ: TargetService, name: "jellyfin"},
		{slug: "lxc:0101", wantFail: true},
		{slug: "lxc:99", wantFail: true},
		{slug: "lxc:abc", wantFail: true},
		{slug: "vm:200", typ: TargetVM, name: "200"},
		{slug: "vm:lab/200", typ: TargetVM, name: "lab/200"},
		{slug: "vm:lab/x", wantFail: true},
		{slug: "qemu:200", wantFail: true},
		{slug: "strong", wantFail: true},
		{slug: "host:Strong", wantFail: true},
		{slug: "service:jelly fin", wantFail: true},
		{slug: "host:strong;reboot", wantFail: true},
	}
	for _, tt := range tests {
		typ, name, err := ParseSlug(tt.slug)
		if (err != nil) != tt.wantFail {
			t.Errorf("ParseSlug(%q) error = %v, want failure %v", tt.slug, err, tt.wantFail)
			continue
		}
		if typ != tt.typ || name != tt.name {
			t.Errorf("ParseSlug(%q) = %q, %q; want %q, %q", tt.slug, typ, name, tt.typ, tt.name)
		}
	}
}

// FuzzValidators checks that whatever an identifier grammar accepts is one
// safe shell word that cannot be read as an option.
func FuzzValidators(f *testing.F) {
	for _, tt := range identTests {
		for _, s := range append(append(tt.ok, tt.bad...), injections...) {
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tt := range identTests {
			if tt.name == "matrix user id" {
				continue // not a shell word
			}
			if tt.check(s) != nil {
				continue
			}
			if s == "" || s[0] == '-' {
				t.Fatalf("%s accepted %q, which reads as an option", tt.name, s)
			}
			safe := allBytes(s, safeWordByte)
			if tt.name == "unit" {
				safe = allBytes(s, func(c byte) bool { return safeWordByte(c) || c == '\\' })
			}
			if !safe {
				t.Fatalf("%s accepted %q, which is not a plain shell word", tt.name, s)
			}
			checkOneWord(t, s)
		}
		if _, _, err := ParseSlug(s); err == nil && !allBytes(s, safeWordByte) {
			t.Fatalf("ParseSlug accepted %q", s)
		}
	})
}
