package labsim

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// Storage as Proxmox has it: a container's root disk lives on a storage of
// some type, and the type decides what a snapshot can do.
//
//   - lvmthin (local-lvm, the default): snapshots of any age, rollback to
//     any of them.
//   - zfspool (local-zfs): snapshots, but a rollback only to the newest;
//     ZFS refuses one past a newer snapshot (pve-storage
//     src/PVE/Storage/ZFSPoolPlugin.pm volume_rollback_is_possible).
//   - dir (local): a container's raw image has no snapshot feature (pve-storage
//     src/PVE/Storage/Plugin.pm volume_has_feature offers snapshots for
//     qcow2 alone).
//
// A bind mount (mpN: /host/path) is no storage volume at all, so it has no
// snapshot feature either, and pve-container's has_feature
// (src/PVE/LXC/Config.pm) fails the snapshot for any one volume that lacks
// it: "snapshot feature is not available" (pve-guest-common
// src/PVE/AbstractConfig.pm __snapshot_prepare).

const defaultStorage = "local-lvm"

// storageType is the plugin type of a storage id, as /cluster/resources
// names it ("" for a storage the node does not have).
func storageType(id string) string { return storagePlugins[id] }

func (c *Container) validateStorage() []error {
	var errs []error
	if !storages[c.Storage] {
		errs = append(errs, fmt.Errorf("storage %q: want one of local-lvm, local-zfs, local", c.Storage))
	}
	for i, m := range c.BindMounts {
		if !path.IsAbs(m.Source) || !path.IsAbs(m.Path) || strings.ContainsAny(m.Source+m.Path, ", \t\n") {
			errs = append(errs, fmt.Errorf("bind mount %d: source and path must be absolute paths without commas or spaces", i))
		}
	}
	switch c.HA {
	case "", haStarted, haStopped:
	default:
		errs = append(errs, fmt.Errorf("ha %q: want started, stopped or nothing", c.HA))
	}
	return errs
}

// configure gives a container built from the config its bind mounts, HA
// resource and template flag.
func (ct *ctState) configure(c Container) {
	ct.Mounts = slices.Clone(c.BindMounts)
	ct.Conf.IsTemplate = c.Template
	ct.Replication = replicationJobs(c.Replication)
	if c.HA != "" {
		state := haStopped
		if c.Status == statusRunning {
			state = haStarted
		}
		ct.HA = &haState{Request: c.HA, State: state, Node: c.HANode}
	}
}

// rootVolume is the root disk's volume id, as pct config names it.
func (ct *ctState) rootVolume() string {
	return ct.Conf.Storage + ":" + rootVolume(ct.Conf, ct.VMID)
}

// snapshotBlocker is what keeps the container from being snapshotted, or
// "" when nothing does.
func (ct *ctState) snapshotBlocker() string {
	if len(ct.Mounts) > 0 {
		return fmt.Sprintf("bind mount mp0 (%s)", ct.Mounts[0].Source)
	}
	if storageType(ct.Conf.Storage) == "dir" {
		return "raw root disk on dir storage " + ct.Conf.Storage
	}
	return ""
}

// rollbackBlocker is pve-storage's refusal of a rollback to name, or "":
// on ZFS only the newest snapshot can be rolled back to.
func (ct *ctState) rollbackBlocker(name string) string {
	if storageType(ct.Conf.Storage) != "zfspool" || len(ct.Snapshots) == 0 {
		return ""
	}
	if newest := ct.Snapshots[len(ct.Snapshots)-1]; newest.Name != name {
		return fmt.Sprintf("can't rollback, '%s' is not most recent snapshot on '%s'\n", name, ct.rootVolume())
	}
	return ""
}

// hasSnapshot reports whether the container has a snapshot called name.
func (ct *ctState) hasSnapshot(name string) bool {
	return slices.ContainsFunc(ct.Snapshots, func(s snapshot) bool { return s.Name == name })
}

// listSnapshots renders pct listsnapshot as pve-guest-common's
// print_snapshot_tree does (src/PVE/GuestHelpers.pm): each snapshot under
// its parent, siblings oldest first, the current state last under the
// snapshot it descends from; printf "%s %-${len}s %-23s %s" with len = 30
// less the prefix's length, one more leading space per level, times in
// the node's local time (labsim's nodes run on UTC).
func listSnapshots(ct *ctState) string {
	type entry struct {
		name, parent, desc string
		taken              time.Time // zero for current
	}
	var all []entry
	known := map[string]bool{}
	for _, s := range ct.Snapshots {
		known[s.Name] = true
	}
	for _, s := range ct.Snapshots {
		desc := s.Description
		if desc == "" {
			desc = "no-description"
		}
		if i := strings.LastIndex(strings.TrimRight(desc, "\n"), "\n"); i >= 0 {
			desc = desc[i+1:] // Perl's m/(.*)$/m takes the last line
		}
		all = append(all, entry{name: s.Name, parent: s.Parent, desc: strings.TrimRight(desc, "\n"), taken: s.Taken})
	}
	all = append(all, entry{name: "current", parent: ct.Parent, desc: "You are here!"})
	children := func(parent string) []entry {
		var out []entry
		for _, e := range all {
			p := e.parent
			if !known[p] {
				p = ""
			}
			if p == parent {
				out = append(out, e)
			}
		}
		slices.SortStableFunc(out, func(a, b entry) int {
			switch {
			case a.taken.IsZero() && b.taken.IsZero():
				return 0
			case a.taken.IsZero():
				return 1
			case b.taken.IsZero():
				return -1
			}
			return a.taken.Compare(b.taken)
		})
		return out
	}
	var b strings.Builder
	var walk func(prefix string, e entry)
	walk = func(prefix string, e entry) {
		when := ""
		if !e.taken.IsZero() {
			when = e.taken.UTC().Format("2006-01-02 15:04:05")
		}
		fmt.Fprintf(&b, "%s %-*s %-23s %s\n", prefix, max(30-len(prefix), 0), e.name, when, e.desc)
		if e.name == "current" {
			return
		}
		for _, c := range children(e.name) {
			walk(" "+prefix, c)
		}
	}
	for _, root := range children("") {
		walk("`->", root)
	}
	return b.String()
}
