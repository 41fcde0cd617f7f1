package devstack

import (
	"log/slog"

	"github.com/nomoshq/nomos/labsim"
	"github.com/nomoshq/nomos/store"
)

// LabsimConfig describes the seeded fleet to labsim: every host on its
// seeded ssh address (127.0.0.1:0 when unset), every container with its
// services active when it runs and enabled.
func LabsimConfig(seed *store.Seed, stateDir, authorizedKeys, logPath string, logger *slog.Logger) labsim.Config {
	lc := labsim.Config{StateDir: stateDir, AuthorizedKeysFile: authorizedKeys, LogPath: logPath, Logger: logger}
	for _, h := range seed.Hosts {
		// A host without a cluster is standalone in the seeds and in labsim.
		host := labsim.Host{Name: h.Name, Cluster: h.Cluster, Addr: h.SSH}
		if host.Addr == "" {
			host.Addr = "127.0.0.1:0"
		}
		for _, c := range h.Containers {
			ct := labsim.Container{
				VMID: c.VMID, Hostname: c.Hostname, IP: c.IP, Gateway: c.Gateway,
				Cores: c.Cores, MemoryMB: c.MemoryMB, DiskGB: c.DiskGB, Status: c.Status,
				// What runs in a homelab is set to start with its node.
				Onboot: c.Status != "stopped",
			}
			if ct.IP != "dhcp" && ct.Gateway != "" {
				// The demo fleet's resolver works; a dead one is a fault the
				// tests and the demo inject on purpose.
				ct.Nameserver = "1.1.1.1"
			}
			for _, s := range c.Services {
				ct.Services = append(ct.Services, labsim.Service{
					Name: s.Name, Unit: s.Unit, Port: s.Port, HealthPath: s.HealthPath,
					Active: c.Status != "stopped", Enabled: true,
				})
			}
			host.Containers = append(host.Containers, ct)
		}
		for _, v := range h.VMs {
			vm := labsim.VM{
				VMID: v.VMID, Name: v.Name, Cores: v.Cores, MemoryMB: v.MemoryMB, DiskGB: v.DiskGB,
				Status: v.Status, Agent: v.Agent, IP: v.IP, Storage: h.Storage,
			}
			for _, s := range v.Services {
				vm.Services = append(vm.Services, labsim.Service{Name: s.Name, Port: s.Port, HealthPath: s.HealthPath})
			}
			host.VMs = append(host.VMs, vm)
		}
		lc.Hosts = append(lc.Hosts, host)
	}
	return lc
}
