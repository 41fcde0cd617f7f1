// Package fleetgen generates a large fleet for benchmarks: Proxmox hosts,
// their containers, the services inside them and the checks on all of
// them, as a seed. labsim serves the same seed (internal/devstack turns a
// seed into labsim's hosts), so a benchmark runs the prober, the tools and
// the status page against a fleet of a size no demo has.
package fleetgen

import (
	"cmp"
	"fmt"

	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/policy"
)

// Config sizes a generated fleet. Zero fields take the defaults, which
// are the figures docs/operations.md quotes: 10 hosts, 1,000 containers,
// 3,000 services and 5,000 checks.
type Config struct {
	// Hosts is the number of Proxmox hosts. Default 10.
	Hosts int
	// Containers is the number of LXCs, spread evenly over the hosts.
	// Default 1,000.
	Containers int
	// ServicesPerContainer is the number of services in each container,
	// at most 3. Default 3.
	ServicesPerContainer int
	// ChecksPerContainer is the number of checks on each container and
	// its services, at most 5: an HTTP check on its first service, a
	// systemd check on its second, a TCP check on its third, its pct
	// status and its disk. Default 5.
	ChecksPerContainer int
	// Addr is host i's SSH address. Default: none, which labsim serves on
	// a free loopback port (testenv.StartFleet puts the port in the seed).
	Addr func(i int) string
}

// Intervals are the check intervals, in seconds, that the checks take in
// turn: the spread of the demo's.
var Intervals = []int{30, 60, 120, 300}

// Cluster is the Proxmox cluster every generated node belongs to.
const Cluster = "gen"

// Seed returns the fleet cfg describes. Names and addresses follow from
// the place of each thing: host node00, container 1001 (ct1001, with
// services app1001-web, app1001-worker and app1001-db), and so on.
func Seed(cfg Config) *fleetseed.Seed {
	cfg.Hosts = cmp.Or(cfg.Hosts, 10)
	cfg.Containers = cmp.Or(cfg.Containers, 1000)
	cfg.ServicesPerContainer = min(cmp.Or(cfg.ServicesPerContainer, 3), 3)
	cfg.ChecksPerContainer = min(cmp.Or(cfg.ChecksPerContainer, 5), 5)
	seed := &fleetseed.Seed{}
	vmid, check := 1000, 0
	interval := func() int {
		check++
		return Intervals[check%len(Intervals)]
	}
	for h := range cfg.Hosts {
		// One Proxmox cluster, as a fleet of ten nodes would be: vmids are
		// unique across it.
		host := fleetseed.Host{Name: fmt.Sprintf("node%02d", h), Cluster: Cluster, Cores: 64, MemoryMB: 262144, Storage: "local-zfs"}
		if cfg.Addr != nil {
			host.SSH = cfg.Addr(h)
		}
		n := cfg.Containers / cfg.Hosts
		if h < cfg.Containers%cfg.Hosts {
			n++
		}
		for i := range n {
			vmid++
			ct := fleetseed.Container{
				VMID: vmid, Hostname: fmt.Sprintf("ct%d", vmid),
				IP: fmt.Sprintf("10.%d.%d.%d/16", 50+h, i/250, 1+i%250), Gateway: fmt.Sprintf("10.%d.0.1", 50+h),
				Cores: 1, MemoryMB: 512, DiskGB: 8, Status: "running",
			}
			services := []fleetseed.Service{
				{Name: fmt.Sprintf("app%d-web", vmid), Unit: "web.service", Port: 8080, HealthPath: "/health"},
				{Name: fmt.Sprintf("app%d-worker", vmid), Unit: "worker.service"},
				{Name: fmt.Sprintf("app%d-db", vmid), Unit: "db.service", Port: 5432},
			}
			ct.Services = services[:cfg.ServicesPerContainer]
			lxc := policy.ContainerSlug(Cluster, vmid)
			checks := []fleetseed.Check{
				{Slug: services[0].Name + "-http", Target: "service:" + services[0].Name, Kind: "http",
					Spec: map[string]any{"path": "/health", "expect_status": 200}},
				{Slug: services[1].Name + "-unit", Target: "service:" + services[1].Name, Kind: "systemd"},
				{Slug: services[2].Name + "-tcp", Target: "service:" + services[2].Name, Kind: "tcp", Spec: map[string]any{"port": 5432}},
				{Slug: fmt.Sprintf("ct%d-status", vmid), Target: lxc, Kind: "pct_status"},
				{Slug: fmt.Sprintf("ct%d-disk", vmid), Target: lxc, Kind: "disk",
					Spec: map[string]any{"mount": "/", "warn_percent": 85, "critical_percent": 95}},
			}
			for j, c := range checks[:cfg.ChecksPerContainer] {
				// No check on a service the container does not run.
				if j < 3 && j >= cfg.ServicesPerContainer {
					continue
				}
				c.Interval = interval()
				seed.Checks = append(seed.Checks, c)
			}
			host.Containers = append(host.Containers, ct)
		}
		seed.Hosts = append(seed.Hosts, host)
	}
	return seed
}
