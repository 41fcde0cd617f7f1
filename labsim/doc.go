// Package labsim is a simulated Proxmox host served over real SSH. It keeps
// container state, emulates the pct and in-container commands the actuator
// uses, injects faults on request, and logs every command it receives.
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
//	labsim fault dns_dead|apt_fail|net_down <vmid|*>
//	labsim fault hang <vmid|*> <command substring>
//	labsim fault drop <host|*>
//	labsim fault clear [kind [target]]
//	labsim fault list
//
// and the file holds the same faults as JSON:
//
//	{"faults": [{"kind": "hang", "target": "101", "match": "apt-get install"}]}
//
// labsim behaves as Proxmox does where Proxmox is less kind than a plain
// host: a container under HA (Container.HA, or ha-manager add) is started
// and stopped by the HA stack Config.HADelay after pct asks (ha.go); its
// root disk's storage type decides what a snapshot can do, and a bind
// mount or a raw disk on dir storage leaves it none (storage.go); and a
// lock in its config refuses what Proxmox's check_lock refuses (lock.go).
// A lock is set and cleared as a vzdump would, by a control command or
// [Sim.SetLock]:
//
//	labsim lock <vmid> <backup|snapshot|…> [seconds]
//	labsim unlock <vmid>
package labsim
