// Package labsim is a simulated Proxmox host served over real SSH. It keeps
// container and VM state, emulates the pct, qm and in-container commands
// the actuator uses, injects faults on request, and logs every command it
// receives.
//
// It behaves as a Proxmox VE 8 node does, with the real texts and exit
// statuses (testdata/pve-samples, compared by TestSamplesMatchProxmox):
//
//   - A node belongs to a cluster (Host.Cluster; empty is a standalone
//     node). VMIDs are unique per cluster, so standalone nodes may share
//     one. /cluster/resources and /cluster/nextid answer for the node's
//     cluster; pct answers only for the node's own containers.
//   - VMs (qm.go) share the VMID space with containers. qm list, status,
//     start, shutdown, reboot, stop, snapshot (--vmstate keeps RAM),
//     rollback, delsnapshot, destroy, config, guest cmd ping and guest
//     exec answer as qemu-server does; /nodes/<node>/qemu is live. Faults
//     agent_hung and acpi_ignored make a guest agent stop answering and a
//     VM ignore the power button, so qm shutdown times out.
//   - pvesh get /nodes/<node>/lxc is live. /cluster/resources is what
//     pvestatd last broadcast, every 10 s of the injected clock: a status
//     change shows at the next cycle, a new guest is "unknown" until then.
//   - pct set on a running container applies the hot-pluggable options at
//     once and keeps the rest pending until the next start; pct config
//     shows pending values unless --current 1, and pct pending lists both.
//   - pct config prints keys sorted with the description encoded; tags,
//     protection, template and lock show where set; protection refuses
//     destroy and a template refuses start.
//   - A container configured Outdated has updates in the mirror's stable
//     and security archives: apt-get -s upgrade lists them as apt's
//     simulation prints them, and apt-get upgrade installs them
//     (updates.go). A host's BackupJobs are its cluster's vzdump jobs
//     (pvesh get /cluster/backup), and a container's Backups its archives
//     on a storage (pvesm list STORAGE --content backup), which outlive
//     it (backup.go).
//   - A container's Replication are its storage replication jobs:
//     pvesh get /cluster/replication and /nodes/NODE/replication list
//     them, pct destroy refuses it without --purge, and a running sync
//     makes pct delsnapshot fail (replication.go).
//
// A command runs in mvdan.cc/sh's shell interpreter, the parser the policy
// reasons about, so functions, loops, substitutions and here-documents
// work. Every program the shell starts is simulated, every file it opens is
// in the simulated host's state, and its environment and working directory
// are a root login's on that host: nothing reaches the machine labsim runs
// on. Background jobs run in the foreground and process substitution is
// refused, so nothing a session starts outlives it.
//
// Faults can be switched by an SSH command to any host, by [Sim.Inject] and
// [Sim.Clear], or by editing StateDir/faults.json, which is read again for
// every command. The command forms are:
//
//	labsim fault dns_dead|apt_fail|net_down|stale_stats <vmid|*>
//	labsim fault hang <vmid|*> <command substring>
//	labsim fault drop <host|*>
//	labsim fault ssh_hang <host|*>
//	labsim fault clear [kind [target]]
//	labsim fault list
//
// ssh_hang is a wedged node: a new connection is accepted and never
// greeted, so the client waits in the SSH handshake, and a command on a
// connection opened before never finishes. Lift it from another host.
//
// A vmid target hits that vmid on every node, so on standalone nodes that
// share a vmid it hits each of them. stale_stats makes /cluster/resources
// show the guest as pmxcfs does once pvestatd's stats of it are older than
// five minutes: status "unknown", no name, uptime or sizes.
//
// and the file holds the same faults as JSON:
//
//	{"faults": [{"kind": "hang", "target": "101", "match": "apt-get install"}]}
//
// labsim behaves as Proxmox does where Proxmox is less kind than a plain
// host: a container or VM under HA (Container.HA, VM.HA, or ha-manager
// add ct:N / vm:N) is started and stopped by the HA stack Config.HADelay
// after pct or qm asks, and a VM a rollback stopped is started again
// (ha.go); a container's root disk's storage type decides what a
// snapshot can do, and a bind mount or a raw disk on dir storage leaves
// it none (storage.go); and a
// lock in its config refuses what Proxmox's check_lock refuses (lock.go).
// A lock is set and cleared as a vzdump would, by a control command or
// [Sim.SetLock]:
//
//	labsim lock <vmid> <backup|snapshot|…> [seconds]
//	labsim unlock <vmid>
package labsim
