package labsim

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

const (
	statusRunning = "running"
	statusStopped = "stopped"

	stateVersion = 1
	journalCap   = 400
)

// simState is everything labsim must remember across restarts.
type simState struct {
	Version int                   `json:"version"`
	Hosts   map[string]*hostState `json:"hosts"`
}

type hostState struct {
	// Cluster is the node's configured cluster, "" when standalone; set
	// from the config at every start.
	Cluster    string           `json:"cluster,omitempty"`
	Booted     time.Time        `json:"booted"`
	Containers map[int]*ctState `json:"containers"`
	// VMs are the node's QEMU guests (qm.go).
	VMs map[int]*vmState `json:"vms,omitempty"`
	// Destroyed keeps configured containers and VMs that were destroyed from coming
	// back at the next start.
	Destroyed []int             `json:"destroyed,omitempty"`
	Files     map[string]string `json:"files,omitempty"`
	// BackupJobs are the node's configured vzdump jobs, set from the
	// config at every start; Backups the archives on its storages, which
	// outlive their containers (backup.go).
	BackupJobs []BackupJob `json:"backup_jobs,omitempty"`
	Backups    []backupVol `json:"backups,omitempty"`
}

type ctState struct {
	VMID      int       `json:"vmid"`
	Status    string    `json:"status"`
	StartedAt time.Time `json:"started_at,omitzero"`
	// StatusAt is when Status last changed, and Shown what pvestatd had
	// broadcast before; see ctState.broadcast.
	StatusAt time.Time   `json:"status_at,omitzero"`
	Shown    *shownStats `json:"shown,omitempty"`
	Conf     ctConf      `json:"conf"`
	// Pending is the config once its pending changes apply at the next
	// start; nil when there are none.
	Pending *ctConf `json:"pending,omitempty"`
	Guest   guest   `json:"guest"`
	// Parent is the snapshot the current state descends from.
	Parent    string        `json:"parent,omitempty"`
	Snapshots []snapshot    `json:"snapshots,omitempty"`
	Journal   []journalLine `json:"journal,omitempty"`
	NextPID   int           `json:"next_pid"`
	// Lock is the config's lock (backup while a vzdump runs), until
	// LockUntil when that is set (lock.go).
	Lock      string    `json:"lock,omitempty"`
	LockUntil time.Time `json:"lock_until,omitzero"`
	// HA is the container's HA resource, nil when HA does not manage it
	// (ha.go).
	HA *haState `json:"ha,omitempty"`
	// Mounts are its bind mounts, mp0 onwards (storage.go).
	Mounts []BindMount `json:"mounts,omitempty"`
	// Outdated says its packages predate the mirror's point release:
	// apt sees updates of some (updates.go).
	Outdated bool `json:"outdated,omitempty"`
	// Replication are its storage replication jobs (replication.go).
	Replication []replJob `json:"replication,omitempty"`
}

// ctConf is what pct config shows.
type ctConf struct {
	Hostname     string `json:"hostname"`
	Template     string `json:"template"`
	IP           string `json:"ip"`              // CIDR or "dhcp"
	Lease        string `json:"lease,omitempty"` // the address DHCP handed out
	Gateway      string `json:"gateway,omitempty"`
	Nameserver   string `json:"nameserver,omitempty"`
	Cores        int    `json:"cores"`
	MemoryMB     int    `json:"memory_mb"`
	SwapMB       int    `json:"swap_mb"`
	DiskGB       int    `json:"disk_gb"`
	Storage      string `json:"storage"`
	HWAddr       string `json:"hwaddr"`
	Onboot       bool   `json:"onboot,omitempty"`
	Unprivileged bool   `json:"unprivileged"`
	Description  string `json:"description,omitempty"`
	// Tags is the config's tags, ";"-separated, as Proxmox stores them.
	Tags       string `json:"tags,omitempty"`
	Protection bool   `json:"protection,omitempty"`
	// IsTemplate is set by pct template (Template is the ostemplate).
	IsTemplate bool `json:"is_template,omitempty"`
	// NoNesting is a container made without features: nesting=1; the
	// zero value keeps nesting, which every configured container has.
	NoNesting bool `json:"no_nesting,omitempty"`
}

// guest is the inside of a container: what a snapshot captures besides the
// config.
type guest struct {
	Services map[string]svcState `json:"services"` // by unit
	Packages map[string]string   `json:"packages"` // name to version
	Files    map[string]string   `json:"files"`
}

type svcState struct {
	Unit        string    `json:"unit"`
	Name        string    `json:"name"`
	Description string    `json:"description,omitempty"`
	Port        int       `json:"port,omitempty"`
	HealthPath  string    `json:"health_path,omitempty"`
	Active      bool      `json:"active"`
	Enabled     bool      `json:"enabled"`
	Since       time.Time `json:"since,omitzero"`
	PID         int       `json:"pid,omitempty"`
}

type snapshot struct {
	Name        string    `json:"name"`
	Parent      string    `json:"parent,omitempty"`
	Taken       time.Time `json:"taken"`
	Description string    `json:"description,omitempty"`
	Conf        ctConf    `json:"conf"`
	Guest       guest     `json:"guest"`
}

type journalLine struct {
	Time  time.Time `json:"time"`
	Unit  string    `json:"unit"`
	Ident string    `json:"ident"` // systemd[1], nginx[412]
	Msg   string    `json:"msg"`
}

func (g guest) clone() guest {
	return guest{
		Services: maps.Clone(g.Services),
		Packages: maps.Clone(g.Packages),
		Files:    maps.Clone(g.Files),
	}
}

// addr is the container's IPv4 address without prefix, or "" if it has none.
func (c *ctState) addr() string {
	if c.Conf.IP == "dhcp" {
		return c.Conf.Lease
	}
	p, err := netip.ParsePrefix(c.Conf.IP)
	if err != nil {
		return ""
	}
	return p.Addr().String()
}

func (c *ctState) running() bool { return c.Status == statusRunning }

func (c *ctState) journal(t time.Time, unit, ident, msg string) {
	c.Journal = append(c.Journal, journalLine{Time: t, Unit: unit, Ident: ident, Msg: msg})
	if n := len(c.Journal) - journalCap; n > 0 {
		c.Journal = slices.Delete(c.Journal, 0, n)
	}
}

func (c *ctState) pid() int {
	if c.NextPID < 100 {
		c.NextPID = 100 + int(hashString(c.Conf.Hostname)%200)
	}
	c.NextPID += 1 + int(hashString(fmt.Sprint(c.NextPID))%40)
	return c.NextPID
}

// startService marks a unit active with a new PID and journals it, as
// systemd would.
func (c *ctState) startService(t time.Time, unit string) {
	s := c.Guest.Services[unit]
	s.Active, s.Since, s.PID = true, t, c.pid()
	c.Guest.Services[unit] = s
	desc := unitDescription(s)
	c.journal(t, unit, "systemd[1]", fmt.Sprintf("Starting %s - %s...", unit, desc))
	if s.Port > 0 {
		c.journal(t, unit, fmt.Sprintf("%s[%d]", s.Name, s.PID), fmt.Sprintf("Listening on 0.0.0.0:%d", s.Port))
	}
	c.journal(t, unit, "systemd[1]", fmt.Sprintf("Started %s - %s.", unit, desc))
}

func (c *ctState) stopService(t time.Time, unit string) {
	s := c.Guest.Services[unit]
	s.Active, s.Since, s.PID = false, t, 0
	c.Guest.Services[unit] = s
	desc := unitDescription(s)
	c.journal(t, unit, "systemd[1]", fmt.Sprintf("Stopping %s - %s...", unit, desc))
	c.journal(t, unit, "systemd[1]", fmt.Sprintf("%s: Deactivated successfully.", unit))
	c.journal(t, unit, "systemd[1]", fmt.Sprintf("Stopped %s - %s.", unit, desc))
}

// boot starts the container and every enabled unit in it.
func (c *ctState) boot(t time.Time) {
	c.noteStatus(t)
	c.Status, c.StartedAt = statusRunning, t
	for _, u := range slices.Sorted(maps.Keys(c.Guest.Services)) {
		if c.Guest.Services[u].Enabled {
			c.startService(t, u)
		} else {
			s := c.Guest.Services[u]
			s.Active, s.PID = false, 0
			c.Guest.Services[u] = s
		}
	}
}

// halt stops the container; units keep whether they are enabled.
func (c *ctState) halt(t time.Time) {
	c.noteStatus(t)
	c.Status, c.StartedAt = statusStopped, time.Time{}
	for u, s := range c.Guest.Services {
		if s.Active {
			s.Since = t
		}
		s.Active, s.PID = false, 0
		c.Guest.Services[u] = s
	}
}

func unitDescription(s svcState) string {
	return cmp.Or(s.Description, s.Name)
}

func hashString(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

func loadState(path string) (*simState, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &simState{Version: stateVersion, Hosts: map[string]*hostState{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	var st simState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("parse state %s (remove it to start afresh): %w", path, err)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("state %s has version %d, want %d (remove it to start afresh)", path, st.Version, stateVersion)
	}
	if st.Hosts == nil {
		st.Hosts = map[string]*hostState{}
	}
	for _, hs := range st.Hosts {
		if hs.Containers == nil {
			hs.Containers = map[int]*ctState{}
		}
		if hs.VMs == nil {
			hs.VMs = map[int]*vmState{}
		}
		for _, c := range hs.Containers {
			if c.Guest.Services == nil {
				c.Guest.Services = map[string]svcState{}
			}
			if c.Guest.Packages == nil {
				c.Guest.Packages = map[string]string{}
			}
			if c.Guest.Files == nil {
				c.Guest.Files = map[string]string{}
			}
		}
	}
	return &st, nil
}

func saveState(path string, st *simState) error {
	// Compact: the whole fleet's state is written after every command
	// that changes it, under the lock every command takes, and indenting
	// 200 containers' state cost more than the command.
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	return writeFileAtomic(path, append(data, '\n'), 0o600)
}

// writeFileAtomic replaces path so that a reader sees the old or the new
// content, never a torn write.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }() // fails harmlessly after the rename
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp, perm); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // best effort: make the rename itself durable
		_ = d.Close()
	}
	return nil
}

// merge adds the configured hosts and containers that the saved state does
// not know yet. Saved containers win, so changes survive a restart. It
// returns the names of saved hosts no longer configured, which are dropped.
func (st *simState) merge(cfg Config, now time.Time) []string {
	configured := map[string]bool{}
	for _, h := range cfg.Hosts {
		configured[h.Name] = true
	}
	var dropped []string
	for name := range st.Hosts {
		if !configured[name] {
			dropped = append(dropped, name)
			delete(st.Hosts, name)
		}
	}
	slices.Sort(dropped)
	for _, h := range cfg.Hosts {
		hs := st.Hosts[h.Name]
		if hs == nil {
			hs = &hostState{Booted: now, Containers: map[int]*ctState{}, VMs: map[int]*vmState{}}
			st.Hosts[h.Name] = hs
		}
		hs.Cluster = h.Cluster
		hs.BackupJobs = h.BackupJobs
	}
	for _, h := range cfg.Hosts {
		hs := st.Hosts[h.Name]
		for _, c := range h.Containers {
			if st.vmidOwner(h.Name, c.VMID) != "" || slices.Contains(hs.Destroyed, c.VMID) {
				continue
			}
			hs.Containers[c.VMID] = st.fromConfig(h.Name, c, now)
			for _, b := range c.Backups {
				hs.Backups = append(hs.Backups, backupVol{Storage: cmp.Or(b.Storage, "local"), VMID: c.VMID, Taken: b.Taken.UTC().Truncate(time.Second)})
			}
		}
		for _, v := range h.VMs {
			if node := st.vmidOwner(h.Name, v.VMID); node != "" || slices.Contains(hs.Destroyed, v.VMID) {
				continue
			}
			hs.VMs[v.VMID] = newVM(h.Name, v, h.Storage, now)
		}
	}
	return dropped
}

func (st *simState) all() []*ctState {
	var out []*ctState
	for _, name := range slices.Sorted(maps.Keys(st.Hosts)) {
		for _, c := range st.Hosts[name].Containers {
			out = append(out, c)
		}
	}
	// Stable, so standalone nodes' CTs with one VMID keep the nodes' order.
	slices.SortStableFunc(out, func(a, b *ctState) int { return a.VMID - b.VMID })
	return out
}

func (st *simState) fromConfig(host string, c Container, now time.Time) *ctState {
	ct := st.newContainer(host, c.VMID, ctConf{
		Hostname:   c.Hostname,
		Template:   defaultTemplate,
		IP:         c.IP,
		Gateway:    c.Gateway,
		Nameserver: c.Nameserver,
		Cores:      c.Cores,
		MemoryMB:   c.MemoryMB,
		SwapMB:     512,
		DiskGB:     c.DiskGB,
		Storage:    c.Storage,
		Onboot:     c.Onboot,
	}, now)
	ct.configure(c)
	ct.Outdated = c.Outdated
	for _, s := range c.Services {
		ct.Guest.Services[s.Unit] = svcState{
			Unit:       s.Unit,
			Name:       s.Name,
			Port:       s.Port,
			HealthPath: s.HealthPath,
			Enabled:    s.Enabled,
		}
		if p, ok := packages[s.Name]; ok && p.Unit == s.Unit {
			ct.Guest.Packages[s.Name] = p.Version
			sv := ct.Guest.Services[s.Unit]
			sv.Description = p.Description
			ct.Guest.Services[s.Unit] = sv
		}
	}
	if c.Status == statusRunning {
		// Base units start as at boot; configured ones as configured.
		ct.boot(now)
		for _, s := range c.Services {
			if s.Active != ct.Guest.Services[s.Unit].Active {
				if s.Active {
					ct.startService(now, s.Unit)
				} else {
					ct.stopService(now, s.Unit)
				}
			}
		}
	}
	ct.settled()
	return ct
}

// newContainer builds a stopped container as pct create leaves it: the base
// packages and units of its template, and resolv.conf from its network.
func (st *simState) newContainer(host string, vmid int, conf ctConf, now time.Time) *ctState {
	// The node is in the hash: standalone nodes' CT 100s share a LAN.
	h := hashString(host + "/" + fmt.Sprint(vmid))
	if conf.HWAddr == "" {
		conf.HWAddr = fmt.Sprintf("BC:24:11:%02X:%02X:%02X", byte(h>>16), byte(h>>8), byte(h))
	}
	conf.Unprivileged = true
	if conf.IP == "dhcp" {
		conf.Lease, conf.Gateway = st.lease(host, conf.Gateway)
	}
	resolver := conf.Nameserver
	if resolver == "" {
		resolver = conf.Gateway
	}
	tpl := templates[conf.Template]
	ct := &ctState{
		VMID:   vmid,
		Status: statusStopped,
		// pvestatd has no stats of it until its next cycle.
		StatusAt: now,
		Shown:    &shownStats{},
		Conf:     conf,
		Guest: guest{
			Services: map[string]svcState{},
			Packages: map[string]string{},
			Files: map[string]string{
				"/etc/hostname":   conf.Hostname + "\n",
				"/etc/hosts":      fmt.Sprintf("127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t%s\n", conf.Hostname),
				"/etc/os-release": tpl.osRelease,
				"/etc/resolv.conf": func() string {
					if resolver == "" {
						return "# --- BEGIN PVE ---\n# --- END PVE ---\n"
					}
					return fmt.Sprintf("# --- BEGIN PVE ---\nsearch lan\nnameserver %s\n# --- END PVE ---\n", resolver)
				}(),
			},
		},
	}
	for _, name := range basePackages {
		p := packages[name]
		ct.Guest.Packages[name] = p.Version
		if p.Unit != "" {
			ct.Guest.Services[p.Unit] = svcState{Unit: p.Unit, Name: strings.TrimSuffix(p.Unit, ".service"), Description: p.Description, Port: p.Port, Enabled: true}
		}
	}
	return ct
}

// lease picks an address for a DHCP container on host, in the network the
// host's other DHCP containers use, else its static ones, else any.
func (st *simState) lease(host, gateway string) (addr, gw string) {
	prefix := netip.MustParsePrefix("10.0.0.0/24")
	gw = "10.0.0.1"
	used := map[string]bool{}
	rank := 4 // lower is a better source for the network
	for _, c := range st.all() {
		used[c.addr()] = true
		r := 2
		if st.Hosts[host].Containers[c.VMID] != c {
			r = 3
		} else if c.Conf.IP == "dhcp" {
			r = 0
		}
		if r >= rank || c.Conf.Gateway == "" {
			continue
		}
		var p netip.Prefix
		var err error
		if c.Conf.IP == "dhcp" {
			p, err = netip.ParsePrefix(c.Conf.Lease + "/24")
		} else {
			p, err = netip.ParsePrefix(c.Conf.IP)
		}
		if err == nil {
			prefix, gw, rank = p.Masked(), c.Conf.Gateway, r
		}
	}
	if gateway != "" {
		gw = gateway
	}
	used[gw] = true
	// Hand out from .100 like a home router, or from the bottom in a
	// network too small for that.
	for _, skip := range []int{100, 2} {
		a := prefix.Addr()
		for range skip {
			a = a.Next()
		}
		for ; a.IsValid() && prefix.Contains(a); a = a.Next() {
			if !used[a.String()] {
				return a.String(), gw
			}
		}
	}
	return "", gw
}
