// Package inventory holds the rules by which a host's inventory (the
// containers and VMs its node lists) changes the fleet: which attributes a
// discovered container gets, which are the node's live facts on every
// container, and which changes are audited. It is pure; store applies the
// rules inside one transaction.
//
// What an inventory may change:
//
//   - A container the fleet does not have becomes lxc:<cluster>/<vmid>, active,
//     with attrs.discovered = true, its host, vmid, hostname, ip,
//     gateway, cores, memory_mb and disk_gb as the host has them, and the
//     host's hosts edge.
//   - A discovered container is updated in place when the host's values
//     change (a move within the cluster re-points its hosts edge).
//   - A container from the seeds, or one Nomos created, keeps its name and
//     attributes as they are: seeded facts win. Only its run state, and
//     whether it exists, come from the inventory.
//   - A live container whose host lists it no more, and that the cluster
//     does not place on another node, is marked destroyed (gone), never
//     deleted; one that comes back is active again.
//   - Every listed container, seeded or discovered, gets the node's live
//     facts as attrs (LiveAttrs): onboot, lock, tags, hastate, template,
//     protection, addresses, snapshots, root_storage, storage_type,
//     snapshot_blocker, backup and replication (its pvesr job ids). A change of lock, hastate, protection or onboot
//     is audited, not announced.
//   - A template the fleet does not have is no workload, and is not added.
//   - Every container's run state is recorded, and its health rolls up.
//   - VMs follow the same rules as vm:<cluster>/<vmid>: added when new,
//     their live facts kept (VMLiveAttrs), and, when the actuator says it
//     listed them all, marked gone when missing.
//
// Containers an in-flight pct_create or pct_destroy is making or removing
// are left to that execution's result.
package inventory
