package devstack

import (
	"log/slog"
	"time"

	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/labsim"
)

// LabsimConfig describes the seeded fleet to labsim: every host on its
// seeded ssh address (127.0.0.1:0 when unset), every container with its
// services active when it runs and enabled.
func LabsimConfig(seed *fleetseed.Seed, stateDir, authorizedKeys, logPath string, logger *slog.Logger) labsim.Config {
	lc := labsim.Config{StateDir: stateDir, AuthorizedKeysFile: authorizedKeys, LogPath: logPath, Logger: logger}
	lastRun := lastSunday(time.Now())
	for _, h := range seed.Hosts {
		// A host without a cluster is standalone in the seeds and in labsim.
		host := labsim.Host{Name: h.Name, Cluster: h.Cluster, Addr: h.SSH}
		// A weekly vzdump job of every running container, as a homelab
		// sets one up; a stopped one is left out, and has no backup.
		job := labsim.BackupJob{ID: "backup-weekly-" + h.Name, Schedule: "sun 01:00", Storage: "local", All: true, Node: h.Name}
		if host.Addr == "" {
			host.Addr = "127.0.0.1:0"
		}
		for _, c := range h.Containers {
			ct := labsim.Container{
				VMID: c.VMID, Hostname: c.Hostname, IP: c.IP, Gateway: c.Gateway,
				Cores: c.Cores, MemoryMB: c.MemoryMB, DiskGB: c.DiskGB, Status: c.Status,
				// What runs in a homelab is set to start with its node.
				Onboot: c.Status != "stopped",
				// The demo's containers have pending updates, so an
				// upgrade's card has packages to show.
				Outdated: true,
			}
			if c.Status == "stopped" {
				job.Exclude = append(job.Exclude, c.VMID)
			} else {
				ct.Backups = []labsim.Backup{{Taken: lastRun}}
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
		host.BackupJobs = []labsim.BackupJob{job}
		lc.Hosts = append(lc.Hosts, host)
	}
	return lc
}

// lastSunday is the last Sunday 01:00 UTC before now, when the demo's
// weekly backups ran.
func lastSunday(now time.Time) time.Time {
	now = now.UTC()
	t := time.Date(now.Year(), now.Month(), now.Day(), 1, 0, 3, 0, time.UTC)
	for t.Weekday() != time.Sunday || !t.Before(now) {
		t = t.AddDate(0, 0, -1)
	}
	return t
}
