package tasks

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/nomoshq/nomos/policy"
)

// Fleet discovery: the bot asks for an inventory of one host's containers
// (InventoryRun, signed with the order key, on the probes queue); the
// actuator answers with what the host lists (InventoryResult, signed with
// its report key, on the results queue).
const (
	TypeInventoryRun    = "inventory:run"
	TypeInventoryResult = "inventory:result"
)

// Bounds of an inventory. A result past them is malformed.
const (
	// MaxInventoryContainers bounds the containers one host may list.
	MaxInventoryContainers = 5000
	// MaxInventoryError bounds the error text of a failed inventory.
	MaxInventoryError = 1024
	// MaxInventoryListed bounds each list of a container: its tags,
	// addresses and snapshots.
	MaxInventoryListed = 256
)

// InventoryRun asks the actuator to list the containers of one Proxmox
// node, reached through one host. It runs fixed, read-only commands:
// nothing of the request but the validated address and node name is used.
type InventoryRun struct {
	Version int    `json:"v"`
	RunID   string `json:"run_id"`
	HostID  string `json:"host_id"`
	// Actuator names the actuator the request is for.
	Actuator string `json:"actuator"`
	// Site is the host's site; another site's actuator drops the request.
	Site string `json:"site,omitempty"`
	// Host is the host's name in the fleet; Node is its Proxmox node
	// name, which the cluster lists its containers under.
	Host     string    `json:"host"`
	Node     string    `json:"node"`
	HostAddr string    `json:"host_addr"`
	IssuedAt time.Time `json:"issued_at"`
	// ExpiresAt is when the next run is due; a request still queued then
	// is dropped.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// InventoryResult is what one host listed. With Error set the inventory
// could not be taken and Containers says nothing: no container is gone
// because a host did not answer.
type InventoryResult struct {
	Version  int    `json:"v"`
	RunID    string `json:"run_id"`
	HostID   string `json:"host_id"`
	Actuator string `json:"actuator"`
	Node     string `json:"node"`
	Error    string `json:"error,omitempty"`
	// Containers are the containers on Node.
	Containers []InventoryContainer `json:"containers,omitempty"`
	// VMs are the QEMU VMs on Node; empty from an actuator older than
	// the field.
	VMs []InventoryVM `json:"vms,omitempty"`
	// VMsListed says the node's VMs were listed, so VMs is all of them:
	// one missing is gone. Without it (an older actuator, or a node that
	// could not list them) no VM is gone.
	VMsListed bool `json:"vms_listed,omitempty"`
	// Elsewhere lists the vmids the cluster places on other nodes, so a
	// container that moved is not taken for gone.
	Elsewhere []int `json:"elsewhere,omitempty"`
	// Nodes are the cluster's nodes, Node among them; empty from an
	// actuator older than the field.
	Nodes []string  `json:"nodes,omitempty"`
	At    time.Time `json:"at"`
}

// InventoryVM is one VM as its node lists it (/nodes/<node>/qemu) and
// `qm config --current 1` describes it.
type InventoryVM struct {
	VMID   int    `json:"vmid"`
	Status string `json:"status"`
	Name   string `json:"name,omitempty"`
	// Agent is the config's agent: the QEMU guest agent is enabled.
	Agent    bool   `json:"agent,omitempty"`
	Lock     string `json:"lock,omitempty"`
	Template bool   `json:"template,omitempty"`
	// HAState is the HA manager's state when HA manages the VM.
	HAState string `json:"hastate,omitempty"`
	// MemoryMB is the config's memory; 0 when unknown.
	MemoryMB int `json:"memory_mb,omitempty"`
	// Snapshots are the VM's snapshot names from `qm listsnapshot`,
	// oldest first; nil when they could not be listed.
	Snapshots []string `json:"snapshots,omitempty"`
	// StorageType is the type of the storage its disks are on, zfspool
	// when any of them is (a rollback there goes to the newest snapshot
	// only); empty when unknown.
	StorageType string `json:"storage_type,omitempty"`
	// VMStateStorage is where `qm snapshot --vmstate 1` writes the VM's
	// RAM (qemu-server find_vmstate_storage), and VMStateFreeMB what
	// that storage has free, in MiB; nil when unknown.
	VMStateStorage string `json:"vmstate_storage,omitempty"`
	VMStateFreeMB  *int64 `json:"vmstate_free_mb,omitempty"`
	// Backup is what backs the VM up; nil when the node's backup jobs
	// could not be read (or from an actuator older than the field).
	Backup *BackupStatus `json:"backup,omitempty"`
	// Replication are the ids of the storage replication jobs of the VM
	// (pvesr); empty when it has none or they could not be read.
	Replication []string `json:"replication,omitempty"`
}

// Validate checks one VM entry as it arrives from an actuator.
func (v InventoryVM) Validate() error {
	switch {
	case v.HAState != "" && !haStateWord.match(v.HAState):
		return fmt.Errorf("VM %d: HA state %q is not a word", v.VMID, v.HAState)
	case v.MemoryMB < 0 || v.MemoryMB > maxMemory:
		return fmt.Errorf("VM %d: %d MB of memory", v.VMID, v.MemoryMB)
	case len(v.Snapshots) > MaxInventoryListed:
		return fmt.Errorf("VM %d: more than %d snapshots", v.VMID, MaxInventoryListed)
	case v.StorageType != "" && !storageType.match(v.StorageType):
		return fmt.Errorf("VM %d: storage type %q is not a word", v.VMID, v.StorageType)
	case v.VMStateStorage != "" && policy.ValidateStorage(v.VMStateStorage) != nil:
		return fmt.Errorf("VM %d: %q is not a storage id", v.VMID, v.VMStateStorage)
	case v.VMStateFreeMB != nil && (*v.VMStateFreeMB < 0 || *v.VMStateFreeMB > maxFreeMB):
		return fmt.Errorf("VM %d: %d MiB free", v.VMID, *v.VMStateFreeMB)
	}
	for _, s := range v.Snapshots {
		if policy.ValidateSnapshotName(s) != nil {
			return fmt.Errorf("VM %d: %q is not a snapshot name", v.VMID, s)
		}
	}
	switch {
	case v.VMID < minVMID || v.VMID > maxVMID:
		return fmt.Errorf("vmid %d is out of range", v.VMID)
	case !statusWord.match(v.Status):
		return fmt.Errorf("VM %d: status %q is not a word", v.VMID, v.Status)
	case v.Name != "" && !guestName.match(v.Name):
		return fmt.Errorf("VM %d: %q is not a name", v.VMID, v.Name)
	case v.Lock != "" && !statusWord.match(v.Lock):
		return fmt.Errorf("VM %d: lock %q is not a word", v.VMID, v.Lock)
	}
	if v.Backup != nil {
		if err := v.Backup.Validate(); err != nil {
			return fmt.Errorf("VM %d: backup: %w", v.VMID, err)
		}
	}
	if err := validateReplication(v.VMID, v.Replication); err != nil {
		return fmt.Errorf("VM %d: %w", v.VMID, err)
	}
	return nil
}

// InventoryContainer is one container as its node lists it: its status,
// lock, tags and template flag from the node's own listing (or, when the
// node cannot list, the cluster's resources), its HA state from the
// cluster's resources, its snapshots from `pct listsnapshot`, the rest
// from `pct config --current 1` and `pvesm status`. Every field added
// since the first version is omitted when empty, so an older bot reads a
// newer actuator's inventory, and the other way round.
type InventoryContainer struct {
	VMID int `json:"vmid"`
	// Status is Proxmox's word for its run state: running, stopped, ...
	Status   string `json:"status"`
	Hostname string `json:"hostname,omitempty"`
	// IP is net0's address: a CIDR, "dhcp", or empty.
	IP       string  `json:"ip,omitempty"`
	Gateway  string  `json:"gateway,omitempty"`
	Cores    int     `json:"cores,omitempty"`
	MemoryMB int     `json:"memory_mb,omitempty"`
	DiskGB   float64 `json:"disk_gb,omitempty"`
	// Partial means `pct config` did not answer: only VMID, Status,
	// Hostname and what the listings give (Lock, Tags, Template,
	// HAState, Snapshots) are known.
	Partial bool `json:"partial,omitempty"`

	// Onboot is the onboot flag; nil when unset, which Proxmox takes as
	// off.
	Onboot *bool `json:"onboot,omitempty"`
	// Lock is the config lock (backup, snapshot, migrate, ...).
	Lock string   `json:"lock,omitempty"`
	Tags []string `json:"tags,omitempty"`
	// HAState is the HA manager's state when the container is HA-managed.
	HAState    string `json:"hastate,omitempty"`
	Template   bool   `json:"template,omitempty"`
	Protection bool   `json:"protection,omitempty"`
	// Addresses are every NIC's static addresses with their prefix, and
	// "dhcp" for a NIC that has only that.
	Addresses []string `json:"addresses,omitempty"`
	// Snapshots are the container's snapshot names, oldest first.
	Snapshots []string `json:"snapshots,omitempty"`
	// RootStorage is the rootfs's storage id, StorageType that storage's
	// type (dir, lvmthin, zfspool, ...; empty when unknown).
	RootStorage string `json:"root_storage,omitempty"`
	StorageType string `json:"storage_type,omitempty"`
	// SnapshotBlocker says why `pct snapshot` would fail with "snapshot
	// feature is not available" ("bind mount mp0 (/mnt/media)", "raw
	// volume on dir storage local"); empty when nothing Nomos can see
	// stands in the way.
	SnapshotBlocker string `json:"snapshot_blocker,omitempty"`
	// Backup is what backs the container up: the cluster's backup jobs
	// that select it and its newest backup on their storages; nil when
	// the jobs could not be read.
	Backup *BackupStatus `json:"backup,omitempty"`
	// Replication are the ids of the container's storage replication
	// jobs (pvesr), which Proxmox will not destroy it with unless
	// --purge; empty when it has none or they could not be read.
	Replication []string `json:"replication,omitempty"`
}

func (r InventoryRun) version() int    { return r.Version }
func (r InventoryResult) version() int { return r.Version }

// Proxmox's bounds on what a container may be.
const (
	minVMID   = 100
	maxVMID   = 999999999
	maxCores  = 8192
	maxMemory = 1 << 30 // MB
	maxDiskGB = 1 << 24
	maxFreeMB = 1 << 50
)

// ValidateNode checks a Proxmox node name: a host name label of letters,
// digits and '-'.
func ValidateNode(s string) error {
	if !nodeName.match(s) {
		return fmt.Errorf("node name %q: want letters, digits and '-', at most 63 characters", s)
	}
	return nil
}

// Validate checks every field of a listed container against what Proxmox
// allows, so that nothing but a number, a word, a host name or an address
// reaches the fleet from a host's output.
func (c InventoryContainer) Validate() error {
	switch {
	case c.VMID < minVMID || c.VMID > maxVMID:
		return fmt.Errorf("vmid %d is out of range", c.VMID)
	case !statusWord.match(c.Status):
		return fmt.Errorf("container %d: status %q is not a word", c.VMID, c.Status)
	case c.Hostname != "" && !guestName.match(c.Hostname):
		return fmt.Errorf("container %d: %q is not a host name", c.VMID, c.Hostname)
	case c.Cores < 0 || c.Cores > maxCores:
		return fmt.Errorf("container %d: %d cores", c.VMID, c.Cores)
	case c.MemoryMB < 0 || c.MemoryMB > maxMemory:
		return fmt.Errorf("container %d: %d MB of memory", c.VMID, c.MemoryMB)
	case math.IsNaN(c.DiskGB) || c.DiskGB < 0 || c.DiskGB > maxDiskGB:
		return fmt.Errorf("container %d: a disk of %v GB", c.VMID, c.DiskGB)
	case c.Partial && (c.IP != "" || c.Gateway != "" || c.Cores != 0 || c.MemoryMB != 0 || c.DiskGB != 0):
		return fmt.Errorf("container %d: a partial entry carries configuration", c.VMID)
	}
	if c.IP != "" && c.IP != "dhcp" {
		if _, err := netip.ParsePrefix(c.IP); err != nil {
			return fmt.Errorf("container %d: ip %q is neither dhcp nor an address with its prefix length", c.VMID, c.IP)
		}
	}
	if c.Gateway != "" {
		if _, err := netip.ParseAddr(c.Gateway); err != nil {
			return fmt.Errorf("container %d: gateway %q is not an address", c.VMID, c.Gateway)
		}
	}
	return c.validateLive()
}

// validateLive checks the fields the node's live listings and
// configuration add.
func (c InventoryContainer) validateLive() error {
	switch {
	case c.Lock != "" && !lockWord.match(c.Lock):
		return fmt.Errorf("container %d: lock %q is not a word", c.VMID, c.Lock)
	case c.HAState != "" && !haStateWord.match(c.HAState):
		return fmt.Errorf("container %d: HA state %q is not a word", c.VMID, c.HAState)
	case len(c.Tags) > MaxInventoryListed || len(c.Addresses) > MaxInventoryListed || len(c.Snapshots) > MaxInventoryListed:
		return fmt.Errorf("container %d: more than %d tags, addresses or snapshots", c.VMID, MaxInventoryListed)
	case c.RootStorage != "" && policy.ValidateStorage(c.RootStorage) != nil:
		return fmt.Errorf("container %d: %q is not a storage id", c.VMID, c.RootStorage)
	case c.StorageType != "" && !storageType.match(c.StorageType):
		return fmt.Errorf("container %d: storage type %q is not a word", c.VMID, c.StorageType)
	case c.Partial && (c.Onboot != nil || c.Protection || len(c.Addresses) > 0 || c.RootStorage != "" || c.StorageType != "" || c.SnapshotBlocker != ""):
		return fmt.Errorf("container %d: a partial entry carries configuration", c.VMID)
	}
	for _, t := range c.Tags {
		if !pveTag.match(t) {
			return fmt.Errorf("container %d: tag %q is not a Proxmox tag", c.VMID, t)
		}
	}
	for _, a := range c.Addresses {
		if err := ValidateAddress(a); err != nil {
			return fmt.Errorf("container %d: %w", c.VMID, err)
		}
	}
	if c.Backup != nil {
		if err := c.Backup.Validate(); err != nil {
			return fmt.Errorf("container %d: backup: %w", c.VMID, err)
		}
	}
	if err := validateReplication(c.VMID, c.Replication); err != nil {
		return fmt.Errorf("container %d: %w", c.VMID, err)
	}
	for _, s := range c.Snapshots {
		if policy.ValidateSnapshotName(s) != nil {
			return fmt.Errorf("container %d: %q is not a snapshot name", c.VMID, s)
		}
	}
	if c.SnapshotBlocker != "" {
		for part := range strings.SplitSeq(c.SnapshotBlocker, "; ") {
			if !isBlockerPhrase(part) {
				return fmt.Errorf("container %d: %q is not why a snapshot cannot be taken", c.VMID, part)
			}
		}
	}
	return nil
}

// validateReplication checks a guest's replication job ids: each one is
// GUEST-JOBNUM (pve-guest-common ReplicationConfig), of this guest.
func validateReplication(vmid int, ids []string) error {
	if len(ids) > MaxInventoryListed {
		return fmt.Errorf("more than %d replication jobs", MaxInventoryListed)
	}
	prefix := strconv.Itoa(vmid) + "-"
	for _, id := range ids {
		if !isReplicationID(id) || !strings.HasPrefix(id, prefix) {
			return fmt.Errorf("%q is not one of its replication job ids", id)
		}
	}
	return nil
}

// ValidateAddress checks one of a container's addresses: an address with
// its prefix length, or dhcp.
func ValidateAddress(a string) error {
	if a == "dhcp" {
		return nil
	}
	if _, err := netip.ParsePrefix(a); err != nil {
		return fmt.Errorf("address %q is neither dhcp nor an address with its prefix length", a)
	}
	return nil
}

func (r InventoryRun) validate() error {
	switch {
	case r.RunID == "" || r.HostID == "" || r.Actuator == "" || r.Host == "" || r.IssuedAt.IsZero() || r.ExpiresAt.IsZero():
		return errors.New("run id, host id, actuator, host, issue time and expiry are required")
	case r.HostAddr == "":
		return errors.New("a host address is required")
	}
	if err := policy.ValidateSiteName(siteOf(r.Site)); err != nil {
		return err
	}
	return ValidateNode(r.Node)
}

func (r InventoryResult) validate() error {
	switch {
	case r.RunID == "" || r.HostID == "" || r.Actuator == "" || r.At.IsZero():
		return errors.New("run id, host id, actuator and time are required")
	case len(r.Error) > MaxInventoryError:
		return fmt.Errorf("an error of %d bytes", len(r.Error))
	case r.Error != "" && (len(r.Containers) > 0 || len(r.Elsewhere) > 0):
		return errors.New("a failed inventory lists containers")
	case len(r.Containers) > MaxInventoryContainers || len(r.Elsewhere) > MaxInventoryContainers || len(r.VMs) > MaxInventoryContainers:
		return fmt.Errorf("more than %d containers", MaxInventoryContainers)
	case r.Error != "" && (len(r.VMs) > 0 || r.VMsListed):
		return errors.New("a failed inventory lists VMs")
	}
	if err := ValidateNode(r.Node); err != nil {
		return err
	}
	if len(r.Nodes) > MaxInventoryContainers {
		return fmt.Errorf("more than %d nodes", MaxInventoryContainers)
	}
	for _, n := range r.Nodes {
		if err := ValidateNode(n); err != nil {
			return err
		}
	}
	seen := map[int]bool{}
	for _, c := range r.Containers {
		if err := c.Validate(); err != nil {
			return err
		}
		if seen[c.VMID] {
			return fmt.Errorf("container %d is listed twice", c.VMID)
		}
		seen[c.VMID] = true
	}
	for _, v := range r.VMs {
		if err := v.Validate(); err != nil {
			return err
		}
		if seen[v.VMID] {
			return fmt.Errorf("vmid %d is listed twice", v.VMID)
		}
		seen[v.VMID] = true
	}
	for _, id := range r.Elsewhere {
		if id < minVMID || id > maxVMID {
			return fmt.Errorf("vmid %d elsewhere is out of range", id)
		}
		if seen[id] {
			return fmt.Errorf("container %d is listed on this node and elsewhere", id)
		}
	}
	return nil
}

// SignInventoryRun encodes and signs an inventory request with the bot's
// order key.
func SignInventoryRun(key ed25519.PrivateKey, r InventoryRun) ([]byte, error) {
	r.Version = Version
	r.Site = siteOf(r.Site)
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("sign inventory run: %w: %v", ErrMalformed, err)
	}
	return seal(key, TypeInventoryRun, r)
}

// VerifyInventoryRun checks an inventory request's signature, fields and
// expiry. An expired request is returned with ErrExpired.
func VerifyInventoryRun(keys VerifyKeys, payload []byte, now time.Time) (InventoryRun, error) {
	r, err := open[InventoryRun](keys, TypeInventoryRun, payload)
	if err != nil {
		return InventoryRun{}, err
	}
	if err := r.validate(); err != nil {
		return InventoryRun{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	r.Site = siteOf(r.Site)
	if !now.Before(r.ExpiresAt) {
		return r, fmt.Errorf("the inventory request %w at %s", ErrExpired, r.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return r, nil
}

// NewInventoryRunTask signs an inventory request and wraps it for its
// site's probes queue, whose workers never hold up an order.
func NewInventoryRunTask(key ed25519.PrivateKey, r InventoryRun) (*asynq.Task, error) {
	env, err := SignInventoryRun(key, r)
	if err != nil {
		return nil, err
	}
	return asynq.NewTask(TypeInventoryRun, env, asynq.Queue(ProbeQueue(siteOf(r.Site))), asynq.MaxRetry(0)), nil
}

// SignInventoryResult encodes and signs an inventory with the actuator's
// report key. A result that breaks the bounds is refused here, before it
// is sent.
func SignInventoryResult(key ed25519.PrivateKey, r InventoryResult) ([]byte, error) {
	r.Version = Version
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("sign inventory result: %w: %v", ErrMalformed, err)
	}
	return seal(key, TypeInventoryResult, r)
}

// VerifyInventoryResult checks an inventory's signature and every field,
// so the bot applies only numbers, words, host names and addresses.
func VerifyInventoryResult(keys VerifyKeys, payload []byte) (InventoryResult, error) {
	r, err := open[InventoryResult](keys, TypeInventoryResult, payload)
	if err != nil {
		return InventoryResult{}, err
	}
	if err := r.validate(); err != nil {
		return InventoryResult{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return r, nil
}

// NewInventoryResultTask signs an inventory and wraps it for the results
// queue. Its task id makes a second enqueue of one run's answer a no-op
// while the first is retained.
func NewInventoryResultTask(key ed25519.PrivateKey, r InventoryResult) (*asynq.Task, error) {
	env, err := SignInventoryResult(key, r)
	if err != nil {
		return nil, err
	}
	return asynq.NewTask(TypeInventoryResult, env, asynq.Queue(QueueResults), asynq.MaxRetry(3),
		asynq.TaskID("inventory:"+r.RunID), asynq.Retention(time.Hour)), nil
}
