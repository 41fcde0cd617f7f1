package pveout

import (
	"cmp"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Config is what the inventory reads of a guest's configuration: a
// container's, as `pct config <vmid> --current 1` prints it or as its raw
// .conf file holds it, or a VM's, as `qm config <vmid> --current 1`
// prints it. The two share the format and most keys.
type Config struct {
	// Hostname is a container's; Name is a VM's.
	Hostname string
	Name     string
	// Agent is a VM's agent: the QEMU guest agent is enabled (agent: 1 or
	// agent: enabled=1,...).
	Agent bool
	// VMStateStorage is a VM's vmstatestorage: where a snapshot with its
	// RAM is written; empty when unset.
	VMStateStorage string
	// Disks are a VM's disks (scsiN, virtioN, sataN, ideN, efidisk0,
	// tpmstate0), by key; CD-ROM drives are left out.
	Disks []Volume
	// Cores and MemoryMB are 0 when the config has no line for them
	// (Proxmox then gives every host core, and 512 MB).
	Cores    int
	MemoryMB int
	// Onboot is nil when unset: Proxmox's default, off.
	Onboot     *bool
	Protection bool
	Template   bool
	Lock       string
	Tags       []string
	// NICs are the netN lines, by N.
	NICs []NIC
	// RootFS is nil without a rootfs line; Mounts are the mpN lines, by N.
	RootFS *Volume
	Mounts []Volume
	// Snapshots are the names of a raw config's [name] sections, oldest
	// first by their snaptime; nil when it has none (`pct config` never
	// prints them).
	Snapshots []string
	// Odd names the keys whose value could not be read.
	Odd []string
}

// NIC is one netN line's addressing.
type NIC struct {
	Index int
	// IP is an IPv4 address with its prefix, dhcp or manual; IP6 an IPv6
	// address with its prefix, dhcp, auto or manual.
	IP, IP6, GW, GW6 string
}

// Volume is the rootfs or one mount point.
type Volume struct {
	// Key is rootfs or mpN.
	Key string
	// Source is STORAGE:VOLNAME, or a host path for a bind or device
	// mount.
	Source string
	// Kind is volume, bind (a host directory) or device (/dev/...), as
	// Proxmox classifies mount points.
	Kind string
	// Storage and Volname split a volume's source.
	Storage, Volname string
	// SizeGB is its size= in GiB; 0 when unset.
	SizeGB float64
	// Path is where it is mounted in the container (mp=).
	Path string
}

var (
	sectionRE = regexp.MustCompile(`^\[([A-Za-z][A-Za-z0-9_-]+)\]\s*$`)
	pendingRE = regexp.MustCompile(`(?i)^\[pve:pending\]\s*$`)
	keyRE     = regexp.MustCompile(`^([a-z][a-z_]*\d*):\s*(.*?)\s*$`)
	lxcKeyRE  = regexp.MustCompile(`^lxc\.[a-z0-9_.-]+\s*[:=]`)
	netKeyRE  = regexp.MustCompile(`^net(\d+)$`)
	diskKeyRE = regexp.MustCompile(`^(scsi|virtio|sata|ide|efidisk|tpmstate)\d+$`)
	mpKeyRE   = regexp.MustCompile(`^mp(\d+)$`)
)

// ParseConfig reads a container's configuration. It reads the current
// section only (never a snapshot's or the pending changes), and a raw
// file's snapshot names. Comments (the description) are skipped. A line
// that is none of a key, a comment, a section or a raw lxc key makes it
// fail, naming the line; what it read before is still returned.
func ParseConfig(text string) (Config, error) {
	var c Config
	type snap struct {
		name string
		time int64
		at   int
	}
	var snaps []snap
	section := "" // "" is the current config
	var bad []string
	n := 0
	for line := range strings.Lines(text) {
		n++
		line = strings.TrimRight(line, "\r\n")
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "", strings.HasPrefix(trimmed, "#"):
			continue
		case pendingRE.MatchString(trimmed):
			section = "pve:pending"
			continue
		case sectionRE.MatchString(trimmed):
			section = sectionRE.FindStringSubmatch(trimmed)[1]
			snaps = append(snaps, snap{name: section, at: len(snaps)})
			continue
		case lxcKeyRE.MatchString(trimmed):
			continue
		}
		m := keyRE.FindStringSubmatch(trimmed)
		if m == nil {
			bad = append(bad, fmt.Sprintf("line %d (%.40q)", n, trimmed))
			continue
		}
		key, val := m[1], m[2]
		switch {
		case section == "pve:pending":
			continue
		case section != "":
			if key == "snaptime" {
				snaps[len(snaps)-1].time, _ = strconv.ParseInt(val, 10, 64)
			}
			continue
		}
		c.set(key, val)
	}
	slices.SortStableFunc(snaps, func(a, b snap) int { return cmp.Or(cmp.Compare(a.time, b.time), cmp.Compare(a.at, b.at)) })
	for _, s := range snaps {
		c.Snapshots = append(c.Snapshots, s.name)
	}
	slices.SortFunc(c.NICs, func(a, b NIC) int { return a.Index - b.Index })
	slices.SortFunc(c.Mounts, func(a, b Volume) int { return mpIndex(a.Key) - mpIndex(b.Key) })
	slices.SortFunc(c.Disks, func(a, b Volume) int { return strings.Compare(a.Key, b.Key) })
	if len(bad) > 0 {
		return c, fmt.Errorf("not a container configuration: %s", strings.Join(bad, ", ")) // nor a VM's
	}
	return c, nil
}

func mpIndex(key string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(key, "mp"))
	return n
}

// set records one key of the current section.
func (c *Config) set(key, val string) {
	flag := func(dst *bool) {
		b, ok := ParseBool(val)
		if !ok {
			c.Odd = append(c.Odd, key)
			return
		}
		*dst = b
	}
	number := func(dst *int) {
		n, err := strconv.Atoi(val)
		if err != nil {
			c.Odd = append(c.Odd, key)
			return
		}
		*dst = n
	}
	switch key {
	case "hostname":
		c.Hostname = val
	case "name":
		c.Name = val
	case "agent":
		// qemu-server src/PVE/QemuServer/Agent.pm: the default key is
		// enabled, so "1" and "enabled=1,fstrim_cloned_disks=1" both
		// enable it.
		first, _, _ := strings.Cut(val, ",")
		on, ok := ParseBool(strings.TrimPrefix(first, "enabled="))
		if !ok {
			c.Odd = append(c.Odd, key)
		}
		c.Agent = on
	case "cores":
		number(&c.Cores)
	case "memory":
		number(&c.MemoryMB)
	case "onboot":
		var b bool
		flag(&b)
		if _, ok := ParseBool(val); ok {
			c.Onboot = &b
		}
	case "protection":
		flag(&c.Protection)
	case "template":
		flag(&c.Template)
	case "lock":
		c.Lock = val
	case "vmstatestorage":
		c.VMStateStorage = val
	case "tags":
		c.Tags = SplitTags(val)
	case "rootfs":
		v := parseVolume(key, val)
		c.RootFS = &v
	default:
		if diskKeyRE.MatchString(key) {
			if val != "none" && !strings.Contains(val, "media=cdrom") {
				c.Disks = append(c.Disks, parseVolume(key, val))
			}
			return
		}
		if m := netKeyRE.FindStringSubmatch(key); m != nil {
			nic := NIC{}
			nic.Index, _ = strconv.Atoi(m[1])
			for kv := range strings.SplitSeq(val, ",") {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "ip":
					nic.IP = v
				case "ip6":
					nic.IP6 = v
				case "gw":
					nic.GW = v
				case "gw6":
					nic.GW6 = v
				}
			}
			c.NICs = append(c.NICs, nic)
		} else if mpKeyRE.MatchString(key) {
			c.Mounts = append(c.Mounts, parseVolume(key, val))
		}
	}
}

// parseVolume reads a rootfs or mpN value: the volume (first, or
// volume=), then options.
func parseVolume(key, val string) Volume {
	v := Volume{Key: key}
	for i, kv := range strings.Split(val, ",") {
		k, x, hasEq := strings.Cut(kv, "=")
		switch {
		case i == 0 && !hasEq:
			v.Source = kv
		case k == "volume":
			v.Source = x
		case k == "size":
			v.SizeGB = DiskGB(x)
		case k == "mp":
			v.Path = x
		}
	}
	switch {
	case strings.HasPrefix(v.Source, "/dev/"):
		v.Kind = "device"
	case strings.HasPrefix(v.Source, "/"):
		v.Kind = "bind"
	default:
		v.Kind = "volume"
		v.Storage, v.Volname, _ = strings.Cut(v.Source, ":")
	}
	return v
}

// DiskGB reads a Proxmox disk size (20G, 512M, 1T, or bytes) in GiB; 0
// when it is not one.
func DiskGB(s string) float64 {
	unit := 1.0 / (1 << 30)
	switch {
	case strings.HasSuffix(s, "T"):
		unit, s = 1024, strings.TrimSuffix(s, "T")
	case strings.HasSuffix(s, "G"):
		unit, s = 1, strings.TrimSuffix(s, "G")
	case strings.HasSuffix(s, "M"):
		unit, s = 1.0/1024, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "K"):
		unit, s = 1.0/(1<<20), strings.TrimSuffix(s, "K")
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n * unit
}

// Addresses are every NIC's static addresses with their prefix, IPv4
// then IPv6, by NIC; a NIC that gets its address by DHCP (or SLAAC) and
// has no static one adds "dhcp", once.
func (c Config) Addresses() []string {
	var out []string
	dhcp := false
	for _, n := range c.NICs {
		static := false
		for _, a := range []string{n.IP, n.IP6} {
			if _, err := netip.ParsePrefix(a); err == nil {
				out = append(out, a)
				static = true
			}
		}
		if !static && (n.IP == "dhcp" || n.IP6 == "dhcp" || n.IP6 == "auto") && !dhcp {
			out = append(out, "dhcp")
			dhcp = true
		}
	}
	return out
}

// Net0 is net0's IPv4 address (a CIDR or dhcp; empty when manual or
// unset) and gateway, what the fleet's ip and gateway have always been.
func (c Config) Net0() (ip, gw string) {
	for _, n := range c.NICs {
		if n.Index == 0 {
			if n.IP != "manual" {
				ip = n.IP
			}
			return ip, n.GW
		}
	}
	return "", ""
}
