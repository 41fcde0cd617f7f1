package actuator

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/internal/logctx"
	"github.com/nomoshq/nomos/internal/pveout"
	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/tasks"
)

// The inventory's fixed, read-only commands. Only a vmid the host itself
// listed, checked to be a number in Proxmox's range, and the node name the
// bot signed, checked by tasks.ValidateNode, are ever added.
const (
	// listResources asks for every resource, not only --type vm: the node
	// entries prove the node name the bot asked about is one the cluster
	// has, so a wrong name fails the run rather than making every
	// container look gone.
	listResources = "pvesh get /cluster/resources --output-format json"
	// listStorage gives each storage's type, once a run.
	listStorage = "pvesm status"
	// pctConfigCmd reads the configuration in force: without --current,
	// pending changes show as if they were live.
	pctConfigCmd = "pct config %d --current 1"
	pctSnapshots = "pct listsnapshot %d"
	// qmConfigCmd reads a VM's configuration in force: its name, memory,
	// disks and whether its guest agent is enabled.
	qmConfigCmd    = "qm config %d --current 1"
	qmSnapshotsCmd = "qm listsnapshot %d"
	// listBackupJobs gives the cluster's vzdump jobs; each storage they
	// write to is then listed once, with listBackups.
	listBackupJobs = "pvesh get /cluster/backup --output-format json"
	listBackups    = "pvesm list %s --content backup"
)

// nodeVMsCmd lists a node's VMs as the node has them now.
func nodeVMsCmd(node string) string {
	return "pvesh get /nodes/" + node + "/qemu --output-format json"
}

// nodeReplicationCmd lists the status of the storage replication jobs of
// a node's guests, disabled ones too.
func nodeReplicationCmd(node string) string {
	return "pvesh get /nodes/" + node + "/replication --output-format json"
}

// nodeGuestsCmd lists a node's containers as the node itself has them
// now, with their lock, tags and template flag; /cluster/resources lags a
// status cycle, and says "unknown", without a name, for a guest with no
// fresh stats.
func nodeGuestsCmd(node string) string {
	return "pvesh get /nodes/" + node + "/lxc --output-format json"
}

// Bounds on what a host may send back.
const (
	inventoryTimeout = 2 * time.Minute
	maxListingBytes  = 8 << 20
	maxConfigBytes   = 64 << 10
)

// handleInventory lists one node's containers and reports them, signed,
// on the results queue. A request that does not verify, is for another
// actuator or has expired runs nothing and is not answered.
func (a *Actuator) handleInventory(taskCtx context.Context, t *asynq.Task) error {
	defer a.enter()()
	r, err := tasks.VerifyInventoryRun(a.orderKeys, t.Payload(), a.now())
	if errors.Is(err, tasks.ErrExpired) {
		a.metrics.refuse(kindInventory, tasks.RefusedExpired)
		a.log.Debug("inventory request expired before it could run; the next one replaces it", "run_id", r.RunID, "expired_at", r.ExpiresAt)
		return nil
	}
	if err != nil {
		a.metrics.refuse(kindInventory, refusalFor(err))
		claims := tasks.Claimed(t.Payload())
		a.log.Warn("inventory request refused: it is not signed by the bot", "run_id", claims.RunID, "host_id", claims.HostID, "err", err)
		return fmt.Errorf("refuse inventory %s: %v: %w", claims.RunID, err, asynq.SkipRetry)
	}
	log := a.log.With("run_id", r.RunID, "host", r.Host, "node", r.Node)
	if err := a.misaddressed(log, kindInventory, r.RunID, r.Actuator, r.Site); err != nil {
		return err
	}
	release, err := a.probeHosts.acquire(r.HostAddr, kindInventory, a.now())
	if errors.Is(err, errHostBusy) {
		return a.deferProbe(taskCtx, log, t)
	}
	a.metrics.verify(kindInventory)
	ctx, cancel := context.WithTimeoutCause(logctx.With(a.workCtx, log), inventoryTimeout, fmt.Errorf("%w after %s", ErrTimedOut, inventoryTimeout))
	defer cancel()
	res := tasks.InventoryResult{RunID: r.RunID, HostID: r.HostID, Actuator: a.cfg.Name, Node: r.Node}
	var node nodeFacts
	if err != nil {
		// The host has not answered the reads it holds: say so now.
		a.metrics.heldBack.WithLabelValues(heldHostNotAnswering).Inc()
	} else {
		res.Containers, res.Elsewhere, res.Nodes, node, err = a.inventory(ctx, r)
	}
	if err == nil {
		res.VMs, res.VMsListed = a.inventoryVMs(ctx, r, node)
		// The cluster's resources lag the node: a VM that has just moved
		// here is here, not elsewhere.
		res.Elsewhere = slices.DeleteFunc(res.Elsewhere, func(id int) bool {
			return slices.ContainsFunc(res.VMs, func(v tasks.InventoryVM) bool { return v.VMID == id })
		})
		a.inventoryReplication(ctx, r, res.Containers, res.VMs)
		a.inventoryBackups(ctx, r, res.Containers, res.VMs)
	}
	if release != nil {
		release()
	}
	if err != nil {
		// Reported, not dropped: the bot learns the host did not answer,
		// and marks nothing gone for it.
		log.Warn("inventory failed", "err", err)
		res.Containers, res.Elsewhere, res.Nodes, res.VMs, res.VMsListed = nil, nil, nil, nil, false
		res.Error = clipString(redact.String(err.Error()), tasks.MaxInventoryError)
	}
	res.At = a.now()
	task, err := tasks.NewInventoryResultTask(a.cfg.ReportSigningKey, res)
	if err != nil {
		return fmt.Errorf("report inventory %s: %w", r.RunID, err)
	}
	if err := a.enqueue(a.reportCtx, task); err != nil {
		log.Warn("could not enqueue an inventory", "err", err)
		return fmt.Errorf("report inventory %s: %w", r.RunID, err)
	}
	log.Debug("inventory done", "containers", len(res.Containers), "elsewhere", len(res.Elsewhere))
	return nil
}

// nodeFacts are what the container inventory read of the node that the
// VM inventory uses too.
type nodeFacts struct {
	resources []pveout.Guest
	// storage is each storage's type, free what each active one has
	// available in KiB; nil when the node could not say.
	storage map[string]string
	free    map[string]int64
}

// inventory lists the containers of r.Node and the vmids the cluster has
// elsewhere, then reads each local container's configuration and
// snapshots. It also returns the cluster's nodes, and what it read of the
// node.
func (a *Actuator) inventory(ctx context.Context, r tasks.InventoryRun) ([]tasks.InventoryContainer, []int, []string, nodeFacts, error) {
	log := logctx.From(ctx)
	var node nodeFacts
	out, errOut, code, err := a.captureBytes(ctx, r.HostAddr, listResources, maxListingBytes)
	if err != nil {
		return nil, nil, nil, node, fmt.Errorf("list the cluster's resources: %w", err)
	}
	if code != 0 {
		return nil, nil, nil, node, fmt.Errorf("%s exited %d: %s", listResources, code, lastLine(errOut))
	}
	resources, err := pveout.ParseResources(out)
	if err != nil {
		return nil, nil, nil, node, fmt.Errorf("%s: %v", listResources, err)
	}
	if err := checkNode(resources, r.Node); err != nil {
		return nil, nil, nil, node, err
	}
	node.resources = resources
	var live []pveout.Guest
	cmd := nodeGuestsCmd(r.Node)
	out, errOut, code, err = a.captureBytes(ctx, r.HostAddr, cmd, maxListingBytes)
	if err == nil && code == 0 {
		live, err = pveout.ParseNodeGuests(out)
	} else if err == nil {
		err = fmt.Errorf("exited %d: %s", code, lastLine(errOut))
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, nil, node, fmt.Errorf("%s: %w", cmd, context.Cause(ctx))
		}
		// Older labs and hosts that cannot answer: the cluster's view,
		// a cycle behind, is still an inventory.
		log.Warn("inventory could not list the node's containers; using the cluster's resources", "err", err)
		live = nil
	}
	plan, err := PlanInventory(resources, live, r.Node, true)
	if err != nil {
		return nil, nil, nil, node, err
	}
	for _, w := range plan.Skipped {
		log.Warn("inventory skipped a guest", "vmid", w.VMID, "why", w.Why)
	}
	node.storage, node.free = a.storageStatus(ctx, r.HostAddr)
	local := make([]tasks.InventoryContainer, 0, len(plan.Local))
	for _, g := range plan.Local {
		conf, snaps, err := a.readContainer(ctx, r.HostAddr, g.VMID)
		if err != nil {
			return nil, nil, nil, node, err
		}
		c, dropped := BuildContainer(g, conf, snaps, node.storage)
		if len(dropped) > 0 {
			log.Warn("inventory left out values the host gave that are not what Proxmox allows", "vmid", g.VMID, "fields", dropped)
		}
		local = append(local, c)
	}
	return local, plan.Elsewhere, plan.Nodes, node, nil
}

// inventoryVMs lists the node's VMs and reads each one's configuration
// and snapshots. A node that cannot list them (or an older one) gives
// none and listed false, which the bot takes as nothing known, never as
// every VM gone.
func (a *Actuator) inventoryVMs(ctx context.Context, r tasks.InventoryRun, node nodeFacts) (vms []tasks.InventoryVM, listed bool) {
	log := logctx.From(ctx)
	cmd := nodeVMsCmd(r.Node)
	out, errOut, code, err := a.captureBytes(ctx, r.HostAddr, cmd, maxListingBytes)
	var list []pveout.Guest
	if err == nil && code == 0 {
		list, err = pveout.ParseNodeVMs(out)
	} else if err == nil {
		err = fmt.Errorf("exited %d: %s", code, lastLine(errOut))
	}
	if err != nil {
		log.Warn("inventory could not list the node's VMs", "err", err)
		return nil, false
	}
	haStates := map[int]string{}
	for _, g := range node.resources {
		if g.Type == "qemu" && g.HAState != "" {
			haStates[g.VMID] = g.HAState
		}
	}
	for _, g := range list {
		v := tasks.InventoryVM{VMID: g.VMID, Status: g.Status, Name: g.Name, Lock: g.Lock, Template: g.Template != nil && *g.Template}
		if !statusWordRE.MatchString(v.Status) {
			v.Status = "unknown"
		}
		if v.Validate() != nil {
			log.Warn("inventory skipped a VM", "vmid", g.VMID)
			continue
		}
		keepVM(&v, func(v *tasks.InventoryVM) { v.HAState = haStates[g.VMID] })
		cmd := fmt.Sprintf(qmConfigCmd, g.VMID)
		out, _, code, err := a.capture(ctx, r.HostAddr, cmd, maxConfigBytes)
		if err == nil && code == 0 {
			conf, perr := pveout.ParseConfig(out)
			if perr != nil {
				log.Warn("inventory read what it could of a VM's configuration", "vmid", g.VMID, "err", perr)
			}
			v.Agent = conf.Agent
			keepVM(&v, func(v *tasks.InventoryVM) { v.Name = cmp.Or(conf.Name, v.Name) })
			keepVM(&v, func(v *tasks.InventoryVM) { v.MemoryMB = conf.MemoryMB })
			stType, stateStorage := vmStorage(conf, node.storage)
			keepVM(&v, func(v *tasks.InventoryVM) { v.StorageType = stType })
			keepVM(&v, func(v *tasks.InventoryVM) {
				v.VMStateStorage = stateStorage
				if kib, ok := node.free[stateStorage]; ok {
					mib := kib >> 10
					v.VMStateFreeMB = &mib
				}
			})
		} else {
			log.Warn("inventory could not read a VM's configuration", "vmid", g.VMID, "exit", code, "err", err)
		}
		cmd = fmt.Sprintf(qmSnapshotsCmd, g.VMID)
		out, _, code, err = a.capture(ctx, r.HostAddr, cmd, maxConfigBytes)
		if err == nil && code == 0 {
			var snaps []string
			if snaps, err = pveout.ParseSnapshotList(out); err == nil {
				keepVM(&v, func(v *tasks.InventoryVM) { v.Snapshots = snaps[:min(len(snaps), tasks.MaxInventoryListed)] })
			}
		} else if err == nil {
			err = fmt.Errorf("exited %d", code)
		}
		if err != nil {
			log.Warn("inventory could not list a VM's snapshots", "vmid", g.VMID, "err", err)
		}
		vms = append(vms, v)
		if len(vms) == tasks.MaxInventoryContainers {
			break
		}
	}
	return vms, true
}

// keepVM applies set to v when what it sets is what Proxmox allows, and
// otherwise leaves v as it was: an odd value from a host costs that value,
// not the VM.
func keepVM(v *tasks.InventoryVM, set func(*tasks.InventoryVM)) {
	next := *v
	set(&next)
	if next.Validate() == nil {
		*v = next
	}
}

// vmStorage is the type of the storage a VM's disks are on (zfspool when
// any is, since a rollback there goes to the newest snapshot only) and the
// storage `qm snapshot --vmstate 1` writes its RAM to, as qemu-server's
// find_vmstate_storage picks it (src/PVE/QemuConfig.pm): vmstatestorage
// when set; else a storage its disks are on, a file-based one first; else
// local. Shared storages, which it prefers over local ones, are not told
// apart here.
func vmStorage(conf pveout.Config, types map[string]string) (storageType, vmstate string) {
	fileBased := map[string]bool{"dir": true, "nfs": true, "cifs": true, "glusterfs": true, "cephfs": true, "btrfs": true}
	for _, d := range conf.Disks {
		if d.Storage == "" {
			continue
		}
		t := types[d.Storage]
		if storageType == "" || t == "zfspool" {
			storageType = t
		}
		if vmstate == "" || (fileBased[t] && !fileBased[types[vmstate]]) {
			vmstate = d.Storage
		}
	}
	vmstate = cmp.Or(conf.VMStateStorage, vmstate, "local")
	return storageType, vmstate
}

// inventoryBackups sets what backs each guest up: the cluster's backup
// jobs that select it and its newest backup on their storages, each
// storage listed once for all guests. When the jobs cannot be read, no
// guest's Backup is set, and the bot judges none.
func (a *Actuator) inventoryBackups(ctx context.Context, r tasks.InventoryRun, cts []tasks.InventoryContainer, vms []tasks.InventoryVM) {
	log := logctx.From(ctx)
	out, errOut, code, err := a.captureBytes(ctx, r.HostAddr, listBackupJobs, maxListingBytes)
	if err == nil && code != 0 {
		err = fmt.Errorf("exited %d: %s", code, lastLine(errOut))
	}
	var jobs []pveout.BackupJob
	if err == nil {
		jobs, err = pveout.ParseBackupJobs(out)
	}
	if err != nil {
		log.Warn("inventory could not read the cluster's backup jobs; backups are not judged", "err", err)
		return
	}
	type listing struct {
		backups []pveout.Backup
		err     error
	}
	listed := map[string]listing{}
	list := func(storage string) ([]pveout.Backup, error) {
		if l, ok := listed[storage]; ok {
			return l.backups, l.err
		}
		out, errOut, code, err := a.capture(ctx, r.HostAddr, fmt.Sprintf(listBackups, storage), maxListingBytes)
		if err == nil && code != 0 {
			err = fmt.Errorf("exited %d: %s", code, lastLine(errOut))
		}
		var l listing
		if l.err = err; err == nil {
			l.backups, l.err = pveout.ParseBackupList(out)
		}
		listed[storage] = l
		return l.backups, l.err
	}
	of := func(vmid int) *tasks.BackupStatus {
		st, err := guestBackup(ctx, jobs, vmid, r.Node, list)
		if err != nil || st.Validate() != nil {
			return nil
		}
		return st
	}
	for i := range cts {
		cts[i].Backup = of(cts[i].VMID)
	}
	for i := range vms {
		vms[i].Backup = of(vms[i].VMID)
	}
}

// inventoryReplication sets each guest's storage replication jobs, read
// once for the node: Proxmox refuses to destroy a guest with one unless
// --purge (pve-container API2/LXC.pm and qemu-server API2/Qemu.pm
// destroy_vm, check_for_existing_jobs), so the planner must know them.
// When the node cannot say, no guest's jobs are set.
func (a *Actuator) inventoryReplication(ctx context.Context, r tasks.InventoryRun, cts []tasks.InventoryContainer, vms []tasks.InventoryVM) {
	log := logctx.From(ctx)
	cmd := nodeReplicationCmd(r.Node)
	out, errOut, code, err := a.captureBytes(ctx, r.HostAddr, cmd, maxListingBytes)
	if err == nil && code != 0 {
		err = fmt.Errorf("exited %d: %s", code, lastLine(errOut))
	}
	var jobs []pveout.ReplicationJob
	if err == nil {
		jobs, err = pveout.ParseReplicationJobs(out)
	}
	if err != nil {
		log.Warn("inventory could not read the node's replication jobs", "err", err)
		return
	}
	of := map[int][]string{}
	for _, j := range jobs {
		of[j.Guest] = append(of[j.Guest], j.ID)
	}
	for i := range cts {
		next := cts[i]
		next.Replication = of[next.VMID]
		if next.Validate() != nil {
			log.Warn("inventory left out replication jobs that are not what Proxmox writes", "vmid", next.VMID)
			continue
		}
		cts[i] = next
	}
	for i := range vms {
		keepVM(&vms[i], func(v *tasks.InventoryVM) { v.Replication = of[v.VMID] })
	}
}

// storageStatus reads each storage's type and what each active one has
// available (KiB), once a run; nil when the node cannot say, and then no
// volume's storage is judged.
func (a *Actuator) storageStatus(ctx context.Context, addr string) (map[string]string, map[string]int64) {
	out, errOut, code, err := a.capture(ctx, addr, listStorage, maxConfigBytes)
	if err == nil && code != 0 {
		err = fmt.Errorf("exited %d: %s", code, lastLine(errOut))
	}
	var types map[string]string
	var free map[string]int64
	if err == nil {
		types, err = pveout.ParseStorageStatus(out)
	}
	if err == nil {
		free, err = pveout.ParseStorageFree(out)
	}
	if err != nil {
		logctx.From(ctx).Warn("inventory could not read the node's storage types; snapshot support is not judged", "err", err)
		return nil, nil
	}
	return types, free
}

// readContainer reads one container's configuration and snapshot names.
// Either is nil when the host did not give it: destroyed since the
// listing, or struggling. Only the end of ctx fails the inventory.
func (a *Actuator) readContainer(ctx context.Context, addr string, vmid int) (*pveout.Config, []string, error) {
	log := logctx.From(ctx)
	var conf *pveout.Config
	cmd := fmt.Sprintf(pctConfigCmd, vmid)
	out, _, code, err := a.capture(ctx, addr, cmd, maxConfigBytes)
	if err == nil && code == 0 {
		c, perr := pveout.ParseConfig(out)
		if perr != nil {
			log.Warn("inventory read what it could of a container's configuration", "vmid", vmid, "err", perr)
		}
		conf = &c
	} else {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("%s: %w", cmd, context.Cause(ctx))
		}
		log.Warn("inventory could not read a container's configuration", "vmid", vmid, "exit", code, "err", err)
	}
	var snaps []string
	cmd = fmt.Sprintf(pctSnapshots, vmid)
	out, _, code, err = a.capture(ctx, addr, cmd, maxConfigBytes)
	if err == nil && code == 0 {
		snaps, err = pveout.ParseSnapshotList(out)
	} else if err == nil {
		err = fmt.Errorf("exited %d", code)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("%s: %w", cmd, context.Cause(ctx))
		}
		log.Warn("inventory could not list a container's snapshots", "vmid", vmid, "err", err)
		snaps = nil
	}
	return conf, snaps, nil
}

// capture runs cmd and returns its output and exit code; stdout past
// limit fails the command, so a host cannot flood the actuator.
func (a *Actuator) capture(ctx context.Context, addr, cmd string, limit int) (stdout, stderr string, code int, err error) {
	out, stderr, code, err := a.captureBytes(ctx, addr, cmd, limit)
	return string(out), stderr, code, err
}

// captureBytes is capture with stdout as the bytes read, for the JSON
// listings, which are parsed from bytes: at 1,000 containers the
// cluster's resources are hundreds of kilobytes, which a string and a
// []byte of it again would copy twice.
func (a *Actuator) captureBytes(ctx context.Context, addr, cmd string, limit int) (stdout []byte, stderr string, code int, err error) {
	out, errOut := &cappedBuffer{limit: limit}, &cappedBuffer{limit: 4 << 10}
	code, err = a.probeRunner.Run(ctx, addr, cmd, out, errOut)
	if err != nil {
		return nil, "", code, err
	}
	if out.over {
		return nil, "", code, fmt.Errorf("%s: more than %d bytes of output", cmd, limit)
	}
	return out.Bytes(), errOut.String(), code, nil
}

// cappedBuffer keeps up to limit bytes and notes that more came.
type cappedBuffer struct {
	bytes.Buffer
	limit int
	over  bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.Len(); len(p) > room {
		b.over = true
		b.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// keepValid keeps each field of c that Proxmox's rules allow, judged on
// its own (each tag, address and snapshot name on its own too), and names
// the ones it left out: an odd value from a host costs that value, not
// the container.
func keepValid(c tasks.InventoryContainer) (tasks.InventoryContainer, []string) {
	out := tasks.InventoryContainer{VMID: c.VMID, Status: c.Status, Partial: c.Partial}
	var dropped []string
	try := func(name string, set func(*tasks.InventoryContainer)) bool {
		alone := tasks.InventoryContainer{VMID: c.VMID, Status: c.Status}
		set(&alone)
		if alone.Validate() != nil {
			dropped = append(dropped, name)
			return false
		}
		set(&out)
		return true
	}
	each := func(name string, list []string, set func(*tasks.InventoryContainer, string)) {
		bad := false
		for _, v := range list[:min(len(list), tasks.MaxInventoryListed)] {
			if !try(name, func(x *tasks.InventoryContainer) { set(x, v) }) {
				bad = true
			}
		}
		if len(list) > tasks.MaxInventoryListed && !bad {
			dropped = append(dropped, name)
		}
		if bad {
			dropped = slices.Compact(dropped)
		}
	}
	try("hostname", func(x *tasks.InventoryContainer) { x.Hostname = c.Hostname })
	try("lock", func(x *tasks.InventoryContainer) { x.Lock = c.Lock })
	try("hastate", func(x *tasks.InventoryContainer) { x.HAState = c.HAState })
	out.Template = c.Template
	each("tags", c.Tags, func(x *tasks.InventoryContainer, v string) { x.Tags = append(x.Tags, v) })
	each("snapshots", c.Snapshots, func(x *tasks.InventoryContainer, v string) { x.Snapshots = append(x.Snapshots, v) })
	if !c.Partial {
		try("ip", func(x *tasks.InventoryContainer) { x.IP = c.IP })
		try("gateway", func(x *tasks.InventoryContainer) { x.Gateway = c.Gateway })
		try("cores", func(x *tasks.InventoryContainer) { x.Cores = c.Cores })
		try("memory", func(x *tasks.InventoryContainer) { x.MemoryMB = c.MemoryMB })
		try("disk", func(x *tasks.InventoryContainer) { x.DiskGB = c.DiskGB })
		out.Onboot, out.Protection = c.Onboot, c.Protection
		each("addresses", c.Addresses, func(x *tasks.InventoryContainer, v string) { x.Addresses = append(x.Addresses, v) })
		try("root_storage", func(x *tasks.InventoryContainer) { x.RootStorage = c.RootStorage })
		try("storage_type", func(x *tasks.InventoryContainer) { x.StorageType = c.StorageType })
		try("snapshot_blocker", func(x *tasks.InventoryContainer) { x.SnapshotBlocker = c.SnapshotBlocker })
	}
	return out, dropped
}

// clipString cuts s to at most n bytes of valid UTF-8.
func clipString(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}
