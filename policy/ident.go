package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// The validators below accept only strings that are safe to place on a
// command line as one word without quoting (systemd unit escapes aside, which
// rendering quotes): no blank, quote, $, `, ;, |, &, <, >, (, ), newline or
// leading '-'. Each returns an error that says what is expected and what was
// given, without a field name; ParseParams adds the field.

// VMID bounds, as Proxmox enforces them.
const (
	MinVMID = 100
	MaxVMID = 999999999
)

func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlnum(c byte) bool { return isLower(c) || isUpper(c) || isDigit(c) }

func allBytes(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

// ValidateHostname accepts a DNS label: 1 to 63 of a-z, 0-9 and '-', not
// starting or ending with '-'. It is used for container hostnames and
// Proxmox node names.
func ValidateHostname(s string) error {
	const want = "must be a DNS label (a-z, 0-9, -)"
	switch {
	case s == "":
		return errors.New(want + ", got an empty string")
	case len(s) > 63:
		return fmt.Errorf("%s of at most 63 characters, got %d", want, len(s))
	case s[0] == '-' || s[len(s)-1] == '-':
		return fmt.Errorf("%s that does not start or end with '-', got %s", want, quoted(s))
	case !allBytes(s, func(c byte) bool { return isLower(c) || isDigit(c) || c == '-' }):
		return fmt.Errorf("%s, got %s", want, quoted(s))
	}
	return nil
}

// ValidateServiceName accepts the name part of a service slug: 1 to 63 of
// a-z, 0-9, '.', '_' and '-', starting with a letter or digit.
func ValidateServiceName(s string) error {
	const want = "must be a service name (a-z, 0-9, ., _, -; starting with a letter or digit)"
	switch {
	case s == "":
		return errors.New(want + ", got an empty string")
	case len(s) > 63:
		return fmt.Errorf("%s of at most 63 characters, got %d", want, len(s))
	case !(isLower(s[0]) || isDigit(s[0])) ||
		!allBytes(s, func(c byte) bool { return isLower(c) || isDigit(c) || c == '.' || c == '_' || c == '-' }):
		return fmt.Errorf("%s, got %s", want, quoted(s))
	}
	return nil
}

// unitTypes are the systemd unit suffixes a unit name may carry.
var unitTypes = []string{
	"service", "socket", "target", "timer", "mount", "automount",
	"swap", "path", "slice", "scope", "device",
}

// ValidateUnit accepts a systemd unit name, with or without its type suffix
// (a bare name means .service): [A-Za-z0-9:_.-] with at most one '@'
// (a template instance, which must not be empty), systemd's \xHH escapes,
// starting with a letter, digit or '_', at most 255 bytes.
func ValidateUnit(s string) error {
	const want = "must be a systemd unit name such as jellyfin.service ([A-Za-z0-9:_.@-], starting with a letter, digit or _)"
	if s == "" {
		return errors.New(want + ", got an empty string")
	}
	if len(NormalizeUnit(s)) > 255 {
		return fmt.Errorf("%s of at most 255 characters, got %d", want, len(s))
	}
	if !(isAlnum(s[0]) || s[0] == '_') {
		return fmt.Errorf("%s, got %s", want, quoted(s))
	}
	ats := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isAlnum(c) || c == ':' || c == '_' || c == '.' || c == '-':
		case c == '@':
			ats++
		case c == '\\':
			// Only systemd's own escape, \xHH, is allowed.
			if i+3 >= len(s) || s[i+1] != 'x' || !isHex(s[i+2]) || !isHex(s[i+3]) {
				return fmt.Errorf("%s; a backslash may only start a \\xHH escape, got %s", want, quoted(s))
			}
			i += 3
		default:
			return fmt.Errorf("%s, got %s", want, quoted(s))
		}
	}
	if ats > 1 {
		return fmt.Errorf("%s with at most one '@', got %s", want, quoted(s))
	}
	name := NormalizeUnit(s)
	if at := strings.IndexByte(name, '@'); at >= 0 {
		inst := name[at+1 : strings.LastIndexByte(name, '.')]
		if inst == "" {
			return fmt.Errorf("must name a template instance such as getty@tty1.service, got the template %s", quoted(s))
		}
	}
	if strings.HasPrefix(name, ".") || strings.Contains(name, "..") {
		return fmt.Errorf("%s, got %s", want, quoted(s))
	}
	return nil
}

func isHex(c byte) bool { return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') }

// NormalizeUnit appends ".service" to a unit name without a known type
// suffix, so plans and the fleet always show the full unit.
func NormalizeUnit(s string) string {
	if dot := strings.LastIndexByte(s, '.'); dot >= 0 {
		for _, t := range unitTypes {
			if s[dot+1:] == t {
				return s
			}
		}
	}
	return s + ".service"
}

// notInDebian maps package names that agents reach for but Debian does not
// ship to a hint about what to do instead.
var notInDebian = map[string]string{
	"docker-compose-plugin": "is not in Debian's archive: put docker.io in services, and install compose v2 in post_install with Docker's script (curl -fsSL https://get.docker.com | sh)",
	"docker-ce":             "is Docker's own package, not Debian's: put docker.io in services, or install Docker's packages in post_install with their script (curl -fsSL https://get.docker.com | sh)",
	"docker-ce-cli":         "is Docker's own package, not Debian's: put docker.io in services",
	"containerd.io":         "is Docker's own package, not Debian's: put docker.io in services (it pulls in containerd)",
	"docker-buildx-plugin":  "is not in Debian's archive: install it in post_install with Docker's script (curl -fsSL https://get.docker.com | sh)",
}

// ValidatePackage accepts a Debian binary package name: 2 to 128 of a-z,
// 0-9, '+', '-' and '.', starting with a letter or digit. It refuses, with a
// hint, names that are not in Debian's archive such as docker-compose-plugin.
func ValidatePackage(s string) error {
	const want = "must be a Debian package name (a-z, 0-9, +, -, .; starting with a letter or digit)"
	switch {
	case len(s) < 2:
		return fmt.Errorf("%s of at least 2 characters, got %s", want, quoted(s))
	case len(s) > 128:
		return fmt.Errorf("%s of at most 128 characters, got %d", want, len(s))
	case !(isLower(s[0]) || isDigit(s[0])) ||
		!allBytes(s, func(c byte) bool { return isLower(c) || isDigit(c) || c == '+' || c == '-' || c == '.' }):
		return fmt.Errorf("%s, got %s", want, quoted(s))
	}
	if hint, ok := notInDebian[s]; ok {
		return fmt.Errorf("%s %s", quoted(s), hint)
	}
	return nil
}

// ValidateStorage accepts a Proxmox storage id: 2 to 64 of letters, digits,
// '.', '_' and '-', starting with a letter and ending with a letter or digit.
func ValidateStorage(s string) error {
	const want = "must be a Proxmox storage id such as local-lvm (letters, digits, ., _, -; starting with a letter)"
	switch {
	case len(s) < 2:
		return fmt.Errorf("%s of at least 2 characters, got %s", want, quoted(s))
	case len(s) > 64:
		return fmt.Errorf("%s of at most 64 characters, got %d", want, len(s))
	case !(isLower(s[0]) || isUpper(s[0])) || !isAlnum(s[len(s)-1]) ||
		!allBytes(s, func(c byte) bool { return isAlnum(c) || c == '.' || c == '_' || c == '-' }):
		return fmt.Errorf("%s, got %s", want, quoted(s))
	}
	return nil
}

// ValidateTemplate accepts a Proxmox container template volume id such as
// local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst.
func ValidateTemplate(s string) error {
	const want = "must be a template volume id such as local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"
	storage, file, ok := strings.Cut(s, ":vztmpl/")
	if !ok || len(s) > 255 || ValidateStorage(storage) != nil || file == "" {
		return fmt.Errorf("%s, got %s", want, quoted(s))
	}
	if !isAlnum(file[0]) || !allBytes(file, func(c byte) bool { return isAlnum(c) || c == '.' || c == '_' || c == '-' || c == '+' }) {
		return fmt.Errorf("%s, got %s", want, quoted(s))
	}
	for _, ext := range []string{".tar", ".tar.gz", ".tar.xz", ".tar.zst", ".tar.bz2", ".tgz"} {
		if strings.HasSuffix(file, ext) && len(file) > len(ext) {
			return nil
		}
	}
	return fmt.Errorf("%s (a .tar, .tar.gz, .tar.xz, .tar.zst or .tgz file), got %s", want, quoted(s))
}

// templateNameRE is a template family as pveam names its templates: a
// distribution and its release, such as debian-13, ubuntu-24.04 or
// alpine-3.20 (debian-13-standard_13.1-1_amd64.tar.zst,
// alpine-3.20-default_20240908_amd64.tar.xz).
var templateNameRE = regexp.MustCompile(`^[a-z]{2,20}-[0-9]{1,4}(\.[0-9]{1,4})?$`)

// ValidateTemplateName accepts a template family, such as debian-13 or
// ubuntu-24.04: the actuator resolves it on the node to the newest
// template of that family its template storage holds.
func ValidateTemplateName(s string) error {
	if !templateNameRE.MatchString(s) {
		return fmt.Errorf("must be a template family such as debian-13 or ubuntu-24.04, got %s", quoted(s))
	}
	return nil
}

// ValidateBridge accepts a Linux network interface name for a container's
// bridge, such as vmbr0: 1 to 15 of letters, digits, '.', '_' and '-',
// starting with a letter or digit.
func ValidateBridge(s string) error {
	const want = "must be a bridge name such as vmbr0 (1 to 15 of letters, digits, ., _, -)"
	if s == "" || len(s) > 15 || !isAlnum(s[0]) ||
		!allBytes(s, func(c byte) bool { return isAlnum(c) || c == '.' || c == '_' || c == '-' }) {
		return fmt.Errorf("%s, got %s", want, quoted(s))
	}
	return nil
}

// ValidateVMID accepts a Proxmox guest id in [MinVMID, MaxVMID].
func ValidateVMID(id int) error {
	if id < MinVMID || id > MaxVMID {
		return fmt.Errorf("must be a container id from %d to %d, got %d", MinVMID, MaxVMID, id)
	}
	return nil
}

// ValidateSnapshotName accepts a Proxmox snapshot name: 2 to 40 of letters,
// digits, '_' and '-', starting with a letter; "current" is reserved.
func ValidateSnapshotName(s string) error {
	const want = "must be a snapshot name (2 to 40 of A-Z, a-z, 0-9, _, -; starting with a letter)"
	switch {
	case len(s) < 2 || len(s) > 40 || !(isLower(s[0]) || isUpper(s[0])) ||
		!allBytes(s, func(c byte) bool { return isAlnum(c) || c == '_' || c == '-' }):
		return fmt.Errorf("%s, got %s", want, quoted(s))
	case s == "current":
		return errors.New(`must not be "current", which Proxmox reserves`)
	}
	return nil
}

// ParseIPv4 parses a dotted-quad IPv4 address in canonical form (no leading
// zeros, no zone, not IPv4-mapped IPv6).
func ParseIPv4(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Errorf("must be an IPv4 address such as 192.168.8.1, got %s", quoted(s))
	}
	return a, nil
}

// ParseCIDR parses an IPv4 host address with its prefix length, such as
// 192.168.8.50/24. The address must be a usable unicast host address: not
// the network or broadcast address of its prefix, not loopback, multicast or
// unspecified.
func ParseCIDR(s string) (netip.Prefix, error) {
	const want = "must be an IPv4 address with prefix length such as 192.168.8.50/24"
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() || p.Bits() < 1 {
		return netip.Prefix{}, fmt.Errorf("%s, got %s", want, quoted(s))
	}
	a := p.Addr()
	if !usableUnicast(a) {
		return netip.Prefix{}, fmt.Errorf("%s and a usable host address, got %s", want, quoted(s))
	}
	if p.Bits() <= 30 {
		if a == p.Masked().Addr() {
			return netip.Prefix{}, fmt.Errorf("%s; %s is the network address of its prefix", want, a)
		}
		if a == broadcast(p) {
			return netip.Prefix{}, fmt.Errorf("%s; %s is the broadcast address of its prefix", want, a)
		}
	}
	return p, nil
}

func usableUnicast(a netip.Addr) bool {
	return a.Is4() && !a.IsUnspecified() && !a.IsLoopback() && !a.IsMulticast() &&
		a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

func broadcast(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// ParseSlug splits a target slug such as "host:strong", "lxc:strong/101" or
// "service:jellyfin" into its type and name, checking the name against that
// type's grammar. An lxc name is a container's cluster and vmid; the bare
// vmid ("lxc:101") parses too, as the short form a person types, which
// names a container only where its vmid is unique (see ParseContainerName).
// Only the three target types parse; slugs of other entity types are
// refused.
func ParseSlug(s string) (TargetType, string, error) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok {
		return "", "", fmt.Errorf("must be a slug such as lxc:strong/101, host:strong or service:jellyfin, got %s", quoted(s))
	}
	switch TargetType(typ) {
	case TargetHost:
		if err := ValidateHostname(name); err != nil {
			return "", "", fmt.Errorf("host name %w", err)
		}
	case TargetLXC, TargetVM:
		if _, _, err := ParseContainerName(name); err != nil {
			return "", "", fmt.Errorf("%s slug %w", typ, err)
		}
	case TargetService:
		if err := ValidateServiceName(name); err != nil {
			return "", "", fmt.Errorf("service name %w", err)
		}
	default:
		return "", "", fmt.Errorf("must be a slug of type host, lxc, vm or service, got %s", quoted(s))
	}
	return TargetType(typ), name, nil
}

// A Proxmox vmid is unique within a cluster, not across a homelab: two
// standalone nodes both count from 100. So a container is named by its
// cluster and vmid, "strong/101", and its slug is "lxc:strong/101". A host
// alone is a cluster of one, named after the host.

// ContainerSlug is the slug of the container vmid in cluster.
func ContainerSlug(cluster string, vmid int) string {
	return GuestSlug(TargetLXC, cluster, vmid)
}

// GuestSlug is the slug of the guest vmid in cluster: a container (lxc)
// or a VM (vm), named the same way, "vm:strong/200".
func GuestSlug(kind TargetType, cluster string, vmid int) string {
	return string(kind) + ":" + cluster + "/" + strconv.Itoa(vmid)
}

// IsGuest reports whether t is a Proxmox guest: a container or a VM.
func IsGuest(t TargetType) bool { return t == TargetLXC || t == TargetVM }

// ParseContainerName splits an lxc slug's name, "cluster/vmid" or a bare
// "vmid", into its cluster ("" for the bare form) and vmid.
func ParseContainerName(name string) (cluster string, vmid int, err error) {
	cluster, id, qualified := strings.Cut(name, "/")
	if !qualified {
		id, cluster = name, ""
	} else if err := ValidateClusterName(cluster); err != nil {
		return "", 0, err
	}
	vmid, err = parseVMID(id)
	if err != nil {
		return "", 0, err
	}
	return cluster, vmid, nil
}

// ValidateClusterName accepts the name Nomos gives a Proxmox cluster: a DNS
// label, as Proxmox's own cluster names and node names are.
func ValidateClusterName(s string) error {
	if err := ValidateHostname(s); err != nil {
		return fmt.Errorf("cluster name %w", err)
	}
	return nil
}

// parseVMID parses a decimal vmid without sign or leading zeros.
func parseVMID(s string) (int, error) {
	if s == "" || s[0] == '0' || len(s) > 9 || !allBytes(s, isDigit) {
		return 0, fmt.Errorf("must be a container id from %d to %d, got %s", MinVMID, MaxVMID, quoted(s))
	}
	id, _ := strconv.Atoi(s)
	if err := ValidateVMID(id); err != nil {
		return 0, err
	}
	return id, nil
}

// ValidateMatrixUserID accepts a Matrix user id as the spec writes new
// ones: @localpart:server, the localpart of a-z, 0-9 and ._=/+-, the server
// a host name or IPv4 address with an optional port. The config's
// matrix.user_id, operators and readers, and the approval rules, all
// check ids here.
func ValidateMatrixUserID(s string) error {
	if len(s) > 255 || !matrixUserID.MatchString(s) {
		return fmt.Errorf("must be a Matrix user id such as @alice:example.org, got %s", quoted(s))
	}
	return nil
}

var matrixUserID = regexp.MustCompile(`^@[a-z0-9._=/+-]+:[A-Za-z0-9.-]+(:[0-9]{1,5})?$`)

// validEntityID accepts a resolved entity id: 1 to 128 of letters, digits,
// '.', '_', ':' and '-' (a UUID fits).
func validEntityID(s string) bool {
	return s != "" && len(s) <= 128 &&
		allBytes(s, func(c byte) bool { return isAlnum(c) || c == '.' || c == '_' || c == ':' || c == '-' })
}

// ValidateSiteName accepts a site's name: a DNS label of at most 32
// characters, since it is part of queue names. It is the sites table's
// check constraint too.
func ValidateSiteName(site string) error {
	if len(site) > 32 || ValidateHostname(site) != nil {
		return fmt.Errorf("site name %s: want a DNS label (a-z, 0-9, -) of at most 32 characters", quoted(site))
	}
	return nil
}
