package labsim

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// Locks, as Proxmox keeps them: a "lock: backup" line in the container's
// config while a vzdump runs (snapshot, rollback, migrate, … for their
// own operations). Every pct verb that guards with check_lock fails while
// it is there with "CT is locked (backup)" (pve-guest-common
// src/PVE/AbstractConfig.pm check_lock): start, shutdown and stop (of a
// container HA does not manage), snapshot, rollback, delsnapshot, destroy
// and set (pve-container src/PVE/API2/LXC/Status.pm, LXC.pm, Config.pm).
// pct status, config, listsnapshot, exec and reboot are not guarded.
//
// labsim sets and clears a lock with its control command, as a vzdump
// would:
//
//	labsim lock <vmid> <backup|…> [seconds]
//	labsim unlock <vmid>

var lockNameRE = regexp.MustCompile(`^(backup|create|destroyed|disk|fstrim|migrate|mounted|rollback|snapshot|snapshot-delete)$`)

// lockError is check_lock's refusal, or "" when the container is free.
func (ct *ctState) lockError() string {
	if ct.Lock == "" {
		return ""
	}
	return fmt.Sprintf("CT is locked (%s)\n", ct.Lock)
}

// SetLock puts lock on container or VM vmid of host's cluster for d (0: until
// cleared), or clears its lock when lock is "". It is what `labsim lock`
// does on host.
func (s *Sim) SetLock(host string, vmid int, lock string, d time.Duration) error {
	if lock != "" && !lockNameRE.MatchString(lock) {
		return fmt.Errorf("lock %q is not one Proxmox sets", lock)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ct := s.state.findInCluster(host, vmid)
	if ct == nil {
		// A VM's lock holds until cleared.
		if node := s.state.vmidOwner(host, vmid); node != "" && s.state.Hosts[node].VMs[vmid] != nil {
			s.state.Hosts[node].VMs[vmid].Lock = lock
			s.saveLocked()
			s.log.Info("lock set", "vmid", vmid, "lock", lock)
			return nil
		}
		return fmt.Errorf("no container or VM %d", vmid)
	}
	ct.Lock, ct.LockUntil = lock, time.Time{}
	if lock != "" && d > 0 {
		ct.LockUntil = s.clock().Add(d)
	}
	s.saveLocked()
	s.log.Info("lock set", "vmid", vmid, "lock", lock, "for", d)
	return nil
}

// lockCommand is `labsim lock <vmid> <lock> [seconds]` and `labsim unlock
// <vmid>`.
func lockCommand(c *call) int {
	const usage = "usage: labsim lock <vmid> <backup|snapshot|…> [seconds]\n" +
		"       labsim unlock <vmid>\n"
	a := c.args
	if (a[0] == "lock" && len(a) != 3 && len(a) != 4) || (a[0] == "unlock" && len(a) != 2) {
		c.errf("%s", usage)
		return 2
	}
	vmid, err := strconv.Atoi(a[1])
	if err != nil {
		c.errf("labsim: %q is not a vmid\n", a[1])
		return 2
	}
	lock, d := "", time.Duration(0)
	if a[0] == "lock" {
		lock = a[2]
		if len(a) == 4 {
			n, err := strconv.Atoi(a[3])
			if err != nil || n < 1 {
				c.errf("labsim: %q is not a number of seconds\n", a[3])
				return 2
			}
			d = time.Duration(n) * time.Second
		}
	}
	if err := c.env.sim.SetLock(c.env.host, vmid, lock, d); err != nil {
		c.errf("labsim: %v\n", err)
		return 2
	}
	if lock == "" {
		c.outf("unlocked %d\n", vmid)
	} else {
		c.outf("locked %d (%s)\n", vmid, lock)
	}
	return 0
}

// pctGuard runs, before a pct verb on an existing container, the checks
// Proxmox makes that labsim's pct.go does not: templates, locks, HA and
// the storage's snapshot rules, in Proxmox's order. It reports done when
// it has answered the command itself; otherwise pct.go carries on.
func pctGuard(c *call, verb string, ct *ctState, pos []string, opts map[string]string) (int, bool) {
	refuse := func(msg string) (int, bool) {
		c.errf("%s", msg)
		return 255, true
	}
	switch verb {
	case "start", "stop", "shutdown":
		// pct's own "already running" and "not running" come first.
		if (verb == "start") == ct.running() {
			return 0, false
		}
		if ct.haManaged() {
			return haRequest(c, ct, verb), true
		}
		if verb == "start" && ct.Conf.IsTemplate {
			return refuse("you can't start a CT if it's a template\n")
		}
		if e := ct.lockError(); e != "" {
			return refuse(e)
		}
	case "set":
		if e := ct.lockError(); e != "" {
			return refuse(e)
		}
	case "snapshot":
		// pve-guest-common __snapshot_prepare: template, lock, name, feature.
		if ct.Conf.IsTemplate {
			return refuse("you can't take a snapshot if it's a template\n")
		}
		if e := ct.lockError(); e != "" {
			return refuse(e)
		}
		if ct.hasSnapshot(pos[1]) || !snapNameRE.MatchString(pos[1]) {
			return 0, false
		}
		if ct.snapshotBlocker() != "" {
			return refuse("snapshot feature is not available\n")
		}
	case "rollback":
		// snapshot_rollback: template, existence, the storage, then the lock.
		if ct.Conf.IsTemplate {
			return refuse("you can't rollback if vm is a template\n")
		}
		if !ct.hasSnapshot(pos[1]) {
			return 0, false
		}
		if e := ct.rollbackBlocker(pos[1]); e != "" {
			return refuse(e)
		}
		if e := ct.lockError(); e != "" {
			return refuse(e)
		}
	case "delsnapshot":
		if !ct.hasSnapshot(pos[1]) {
			return 0, false
		}
		if e := ct.lockError(); e != "" {
			return refuse(e)
		}
		if ct.replicationSyncing() && opts["force"] != "1" {
			return refuse("Failed to obtain guest migration lock - replication running?\n")
		}
		if ct.Conf.IsTemplate {
			return refuse("you can't delete a snapshot if vm is a template\n")
		}
	case "destroy":
		// destroy_vm's early checks: lock, then HA without --purge.
		if e := ct.lockError(); e != "" {
			return refuse(e)
		}
		if ct.HA != nil && opts["purge"] != "1" {
			return refuse(fmt.Sprintf("unable to remove CT %d - used in HA resources and purge parameter not set.\n", ct.VMID))
		}
		if e := ct.replicationRefusal(); e != "" && opts["purge"] != "1" {
			return refuse(e)
		}
		if ct.HA != nil || len(ct.Replication) > 0 {
			code := pctDestroy(c, ct, opts["force"] == "1")
			if code == 0 {
				purgeRelated(c, ct)
			}
			return code, true
		}
	}
	return 0, false
}
