package inventory

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"time"
)

// Container is one container as an inventory listed it.
type Container struct {
	VMID     int
	Status   string
	Hostname string
	IP       string
	Gateway  string
	Cores    int
	MemoryMB int
	DiskGB   float64
	// Partial: the configuration was not read; only VMID, Status,
	// Hostname and what the listings give (Lock, Tags, HAState, Template,
	// Snapshots) are known.
	Partial bool

	// The node's live facts, kept as attrs on every container (see
	// LiveAttrs).
	Onboot          *bool
	Lock            string
	Tags            []string
	HAState         string
	Template        bool
	Protection      bool
	Addresses       []string
	Snapshots       []string
	RootStorage     string
	StorageType     string
	SnapshotBlocker string
	Backup          *Backup
	// Replication are the ids of its storage replication jobs; a destroy
	// of a guest with any goes with --purge.
	Replication []string
}

// Backup is what backs a guest up, as an inventory read it from the
// cluster's backup jobs and their storages' backup lists. It is kept as
// the guest's "backup" attr; nil (null) when the jobs were not read.
type Backup struct {
	// Jobs are the enabled jobs that select the guest; none means no
	// job backs it up.
	Jobs []string `json:"jobs"`
	// ByPool are jobs that select guests by pool, which may back it up:
	// /cluster/backup does not list a pool's members.
	ByPool []string `json:"by_pool,omitempty"`
	// Unread are storages of its jobs whose backups could not be listed.
	Unread []string `json:"unread,omitempty"`
	// Last is when its newest backup was taken (the node's clock, from
	// vzdump's archive name); zero when none was found.
	Last time.Time `json:"last,omitzero"`
}

// VM is one VM as an inventory listed it.
type VM struct {
	VMID     int
	Status   string
	Name     string
	Agent    bool
	Lock     string
	Template bool
	// The node's live facts, kept as attrs (VMLiveAttrs).
	HAState        string
	MemoryMB       int
	Snapshots      []string
	StorageType    string
	VMStateStorage string
	VMStateFreeMB  *int64
	Backup         *Backup
	Replication    []string
}

// VMLiveAttrs are a VM's live facts as the inventory gives them:
// snapshots oldest first; vmstate_free_mb only when known (the store
// removes an old one), memory_mb only when the configuration gave it.
func VMLiveAttrs(v VM) map[string]any {
	a := map[string]any{
		"agent": v.Agent, "lock": v.Lock, "template": v.Template, "hastate": v.HAState,
		"snapshots": append([]string{}, v.Snapshots...), "storage_type": v.StorageType,
		"vmstate_storage": v.VMStateStorage, "backup": v.Backup, "replication": append([]string{}, v.Replication...),
	}
	if v.VMStateFreeMB != nil {
		a["vmstate_free_mb"] = *v.VMStateFreeMB
	}
	if v.MemoryMB > 0 {
		a["memory_mb"] = v.MemoryMB // else the seeds' word stands
	}
	return a
}

// ContainerName is what a discovered container is called: its host name,
// else ct<vmid>.
func ContainerName(c Container) string {
	return cmp.Or(c.Hostname, "ct"+strconv.Itoa(c.VMID))
}

// DiscoveredAttrs are a discovered container's attributes: old's, with
// what the inventory knows over them.
func DiscoveredAttrs(host string, c Container, old map[string]any) map[string]any {
	a := map[string]any{}
	for _, k := range append([]string{"ip", "gateway", "cores", "memory_mb", "disk_gb", "hostname"}, LiveKeys...) {
		if v, ok := old[k]; ok {
			a[k] = v // the live facts are LiveAttrs'
		}
	}
	a["discovered"], a["vmid"], a["host"] = true, c.VMID, host
	if c.Hostname != "" {
		a["hostname"] = c.Hostname
	}
	if !c.Partial {
		for k, v := range map[string]any{"ip": c.IP, "gateway": c.Gateway, "cores": c.Cores, "memory_mb": c.MemoryMB, "disk_gb": c.DiskGB} {
			if v == "" || v == 0 || v == 0.0 {
				delete(a, k)
			} else {
				a[k] = v
			}
		}
	}
	return normalize(a)
}

// normalize gives attrs the form they have once read back from jsonb, so
// they compare equal to what is stored.
func normalize(attrs map[string]any) map[string]any {
	raw, _ := json.Marshal(attrs)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}

// LiveKeys are the attrs that always come from the node, on every
// container, seeded or discovered: seeded facts do not cover them.
var LiveKeys = []string{"onboot", "lock", "tags", "hastate", "template", "protection", "addresses", "snapshots",
	"root_storage", "storage_type", "snapshot_blocker", "backup", "replication"}

// WithoutLive is attrs without the node's live facts (LiveKeys): what the
// seeds or an earlier discovery said of the container.
func WithoutLive(attrs map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range attrs {
		if !slices.Contains(LiveKeys, k) {
			out[k] = v
		}
	}
	return out
}

// AuditedLiveKeys are the live facts whose change is audited
// (discovery.changed), though never announced: a backup's lock, an HA
// state, protection, and whether a stop is on purpose.
var AuditedLiveKeys = []string{"lock", "hastate", "protection", "onboot"}

// configKeys are the live facts read from the configuration, which a
// partial entry does not know: old values stand.
var configKeys = []string{"onboot", "protection", "addresses", "root_storage", "storage_type", "snapshot_blocker"}

// LiveAttrs are a container's live facts as the inventory gives them,
// with every key present: onboot false when unset (Proxmox's default),
// lists empty rather than missing, snapshots oldest first. A partial
// entry keeps old's values of what the configuration says.
func LiveAttrs(c Container, old map[string]any) map[string]any {
	list := func(l []string) []string { return append([]string{}, l...) }
	a := map[string]any{"lock": c.Lock, "tags": list(c.Tags), "hastate": c.HAState, "template": c.Template, "snapshots": list(c.Snapshots),
		"backup": c.Backup, "replication": list(c.Replication)}
	if c.Partial {
		for _, k := range configKeys {
			if v, ok := old[k]; ok {
				a[k] = v
			}
		}
		return normalize(a)
	}
	a["onboot"] = c.Onboot != nil && *c.Onboot
	a["protection"] = c.Protection
	a["addresses"] = list(c.Addresses)
	a["root_storage"], a["storage_type"], a["snapshot_blocker"] = c.RootStorage, c.StorageType, c.SnapshotBlocker
	return normalize(a)
}
