package labsim

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"github.com/nomoshq/nomos/hostgate"
)

// Config describes the simulated fleet and where labsim keeps its files.
type Config struct {
	// Hosts are the simulated Proxmox nodes; each listens on its own
	// address with its own host key. A VMID is unique within a cluster (see
	// Host.Cluster), so standalone nodes may each have a CT 100.
	Hosts []Host
	// StateDir holds the host keys (hostkey_<name>), the container state
	// (state.json) and the fault control file (faults.json). Required.
	StateDir string
	// AuthorizedKeysFile lists, in OpenSSH authorized_keys format, the only
	// public keys that may log in. It is read again at every login, so keys
	// can be added without a restart. Required.
	AuthorizedKeysFile string
	// LogPath is the JSONL command log, appended to. Default
	// StateDir/commands.jsonl.
	LogPath string
	// Logger receives labsim's own logs. Default: discarded.
	Logger *slog.Logger
	// Clock stamps log entries, uptimes, service start times and snapshots.
	// Default time.Now.
	Clock func() time.Time
	// Gate, when set, makes every host enforce nomos gate with these
	// rules, as a real node whose authorized_keys forces it: a command
	// the gate refuses gets its one-line refusal and exit 126 and is
	// logged as refused, and an allowed one reaches the simulated host
	// as the argv the gate parsed, never as the raw string. labsim's own
	// control commands (labsim fault …) are not host commands and pass.
	Gate *hostgate.Rules
	// HADelay is how long Proxmox HA takes to carry out a request (ha.go):
	// pct start, shutdown or stop of an HA-managed container only queue
	// it. Default 10s, one round of the CRM's and LRM's loops.
	HADelay time.Duration
}

// Host is one simulated Proxmox node.
type Host struct {
	// Name is the node name, as in nodes/<name>/lxc; letters, digits, - and _.
	Name string
	// Cluster is the Proxmox cluster the node belongs to; nodes with the
	// same Cluster see each other's guests in /cluster/resources and share
	// one VMID space. Empty means a standalone node: a cluster of one.
	Cluster string
	// Addr is the TCP listen address; "127.0.0.1:0" picks a free port.
	// Default "127.0.0.1:0".
	Addr string
	// Containers are the LXCs the node starts with. Containers already in
	// the state file keep their saved state instead.
	Containers []Container
	// VMs are its QEMU virtual machines; their vmids share the cluster's
	// space with the containers'.
	VMs []VM
	// Storage is where the node's containers keep their root disks unless
	// they say otherwise: local-lvm (lvmthin, the default), local-zfs
	// (zfspool) or local (dir). See storage.go for what each allows.
	Storage string
	// BackupJobs are vzdump jobs of the node's cluster (backup.go): every
	// node of the cluster lists them.
	BackupJobs []BackupJob
}

// Container is an LXC as it exists before anyone touches it.
type Container struct {
	VMID     int
	Hostname string
	// IP is "dhcp" or an address with prefix length, such as "10.0.0.5/24".
	IP string
	// Gateway is the default route; for a static IP it is also the resolver
	// unless Nameserver is set.
	Gateway string
	// Nameserver is the resolver written to /etc/resolv.conf. Optional.
	Nameserver string
	Cores      int // default 1
	MemoryMB   int // default 512
	DiskGB     int // default 8
	// Status is "running" or "stopped". Default "running".
	Status string
	// Onboot starts the container when its node boots (onboot: 1).
	Onboot   bool
	Services []Service
	// Storage holds the root disk; default the host's Storage.
	Storage string
	// BindMounts are host directories mounted into the container (mp0,
	// mp1, …); any of them makes pct snapshot fail.
	BindMounts []BindMount
	// HA, when set, puts the container under Proxmox HA with this
	// requested state: started or stopped.
	HA string
	// HANode, with HA, is the node HA starts the container on when it
	// next starts it, as its group's priorities or a failover may decide;
	// empty: where it is.
	HANode string
	// Replication are its storage replication jobs to other nodes of
	// its cluster, jobnum 0 onwards (replication.go).
	Replication []Replication
	// Template makes the container a template: it cannot be started or
	// snapshotted.
	Template bool
	// Outdated gives it the packages of an older point release, so that
	// apt has updates for it: libc6 and libc-bin from stable,
	// openssh-server and curl from stable-security.
	Outdated bool
	// Backups are vzdump archives of it already on a storage, from before
	// labsim started; the storage's backup jobs are the host's
	// BackupJobs.
	Backups []Backup
}

// Backup is a vzdump archive of a container on a storage.
type Backup struct {
	// Storage holds it; default local.
	Storage string
	// Taken is when vzdump started, which its name records.
	Taken time.Time
}

// BindMount is a host directory mounted into a container.
type BindMount struct {
	// Source is the directory on the node, such as /mnt/media.
	Source string
	// Path is where the container sees it, such as /media.
	Path string
}

// Service is a systemd unit inside a container.
type Service struct {
	Name string
	// Unit is the systemd unit; default Name + ".service".
	Unit string
	// Port is the TCP port the service answers HTTP on while active; 0 for none.
	Port       int
	HealthPath string
	Active     bool
	Enabled    bool
}

var (
	nodeNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)
	hostnameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)
)

const (
	minVMID = 100
	maxVMID = 999999999
)

// validate checks cfg and fills in defaults.
func (cfg *Config) validate() error {
	var errs []error
	if cfg.StateDir == "" {
		errs = append(errs, errors.New("state dir is required"))
	}
	if cfg.AuthorizedKeysFile == "" {
		errs = append(errs, errors.New("authorized keys file is required"))
	}
	if len(cfg.Hosts) == 0 {
		errs = append(errs, errors.New("at least one host is required"))
	}
	names := map[string]bool{}
	vmids := map[string]map[int]string{} // by cluster key
	for i := range cfg.Hosts {
		h := &cfg.Hosts[i]
		if !nodeNameRE.MatchString(h.Name) {
			errs = append(errs, fmt.Errorf("host %d: name %q must be letters, digits, - or _", i, h.Name))
		} else if names[h.Name] {
			errs = append(errs, fmt.Errorf("host %s: name used twice", h.Name))
		}
		names[h.Name] = true
		if h.Cluster != "" && !nodeNameRE.MatchString(h.Cluster) {
			errs = append(errs, fmt.Errorf("host %s: cluster %q must be letters, digits, - or _", h.Name, h.Cluster))
		}
		h.Addr = cmp.Or(h.Addr, "127.0.0.1:0")
		key := clusterKey(h.Name, h.Cluster)
		if vmids[key] == nil {
			vmids[key] = map[int]string{}
		}
		for j := range h.Containers {
			c := &h.Containers[j]
			c.Storage = cmp.Or(c.Storage, h.Storage, defaultStorage)
			if err := c.validate(); err != nil {
				errs = append(errs, fmt.Errorf("host %s: container %d: %w", h.Name, c.VMID, err))
				continue
			}
			if other, ok := vmids[key][c.VMID]; ok {
				errs = append(errs, fmt.Errorf("host %s: container %d: vmid already used on host %s of cluster %s", h.Name, c.VMID, other, h.Cluster))
			}
			vmids[key][c.VMID] = h.Name
		}
		for j := range h.VMs {
			v := &h.VMs[j]
			if err := v.validate(); err != nil {
				errs = append(errs, fmt.Errorf("host %s: VM %d: %w", h.Name, v.VMID, err))
				continue
			}
			if other, ok := vmids[key][v.VMID]; ok {
				errs = append(errs, fmt.Errorf("host %s: VM %d: vmid already used on host %s of cluster %s", h.Name, v.VMID, other, h.Cluster))
			}
			vmids[key][v.VMID] = h.Name
		}
	}
	return errors.Join(errs...)
}

func (c *Container) validate() error {
	var errs []error
	if c.VMID < minVMID || c.VMID > maxVMID {
		errs = append(errs, fmt.Errorf("vmid must be between %d and %d", minVMID, maxVMID))
	}
	c.Hostname = cmp.Or(c.Hostname, fmt.Sprintf("CT%d", c.VMID))
	if !hostnameRE.MatchString(c.Hostname) {
		errs = append(errs, fmt.Errorf("hostname %q is not a valid DNS name", c.Hostname))
	}
	c.IP = cmp.Or(c.IP, "dhcp")
	if c.IP != "dhcp" {
		if _, err := netip.ParsePrefix(c.IP); err != nil {
			errs = append(errs, fmt.Errorf("ip %q: want dhcp or an address with prefix length, such as 10.0.0.5/24", c.IP))
		}
	}
	for _, a := range []struct{ name, v string }{{"gateway", c.Gateway}, {"nameserver", c.Nameserver}} {
		if a.v == "" {
			continue
		}
		if _, err := netip.ParseAddr(a.v); err != nil {
			errs = append(errs, fmt.Errorf("%s %q is not an IP address", a.name, a.v))
		}
	}
	c.Cores = cmp.Or(c.Cores, 1)
	c.MemoryMB = cmp.Or(c.MemoryMB, 512)
	c.DiskGB = cmp.Or(c.DiskGB, 8)
	if c.Cores < 0 || c.MemoryMB < 0 || c.DiskGB < 0 {
		errs = append(errs, errors.New("cores, memory and disk must not be negative"))
	}
	errs = append(errs, c.validateStorage()...)
	c.Status = cmp.Or(c.Status, statusRunning)
	if c.Status != statusRunning && c.Status != statusStopped {
		errs = append(errs, fmt.Errorf("status %q: want running or stopped", c.Status))
	}
	units := map[string]bool{}
	ports := map[int]bool{}
	for k := range c.Services {
		s := &c.Services[k]
		if s.Name == "" && s.Unit == "" {
			errs = append(errs, fmt.Errorf("service %d: name or unit is required", k))
			continue
		}
		s.Unit = unitName(cmp.Or(s.Unit, s.Name))
		s.Name = cmp.Or(s.Name, strings.TrimSuffix(s.Unit, ".service"))
		if units[s.Unit] {
			errs = append(errs, fmt.Errorf("service %s: unit listed twice", s.Unit))
		}
		units[s.Unit] = true
		if s.Port < 0 || s.Port > 65535 {
			errs = append(errs, fmt.Errorf("service %s: port %d out of range", s.Unit, s.Port))
		} else if s.Port != 0 && ports[s.Port] {
			errs = append(errs, fmt.Errorf("service %s: port %d used by another service", s.Unit, s.Port))
		}
		ports[s.Port] = true
		if s.HealthPath != "" && !strings.HasPrefix(s.HealthPath, "/") {
			s.HealthPath = "/" + s.HealthPath
		}
	}
	return errors.Join(errs...)
}

// unitName adds .service to a bare unit name, as systemctl does.
func unitName(s string) string {
	if strings.Contains(s, ".") {
		return s
	}
	return s + ".service"
}
