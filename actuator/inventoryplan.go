package actuator

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/nomoshq/nomos/internal/pveout"
	"github.com/nomoshq/nomos/tasks"
)

// InventoryPlan is what the listings say of one node: the guests to
// read, the vmids the cluster has elsewhere and the cluster's nodes.
type InventoryPlan struct {
	// Local are the node's containers, by vmid, templates included.
	Local []pveout.Guest
	// Elsewhere are the vmids of the containers and VMs on other nodes.
	Elsewhere []int
	// Nodes are the cluster's nodes, sorted; from the resources' node
	// entries, else (a --type vm listing) the nodes its guests name.
	Nodes []string
	// Skipped are the guests left out, and why.
	Skipped []SkippedGuest
}

// SkippedGuest is a guest the plan left out.
type SkippedGuest struct {
	VMID int
	Why  string
}

// clusterNodes are the node entries of the cluster's resources.
func clusterNodes(resources []pveout.Guest) []string {
	set := map[string]bool{}
	for _, g := range resources {
		if g.Type == "node" && g.Node != "" {
			set[g.Node] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// checkNode fails unless the resources' node entries name node: a wrong
// node name must fail the run, not make every container look gone.
func checkNode(resources []pveout.Guest, node string) error {
	nodes := clusterNodes(resources)
	if !slices.Contains(nodes, node) {
		return fmt.Errorf("the cluster has no node named %q (it lists %s): set the host's node name in the fleet data",
			node, cmp.Or(strings.Join(nodes, ", "), "none"))
	}
	return nil
}

var statusWordRE = regexp.MustCompile(`^[a-z]{1,16}$`)

// PlanInventory reads the cluster's resources and, when the node could
// list them, the node's own containers (live nil when it could not), for
// node. The node's listing is the truth for the node: its containers and
// their status, lock, tags and template flag, even where the cluster's
// resources, a status cycle behind, say "unknown" or have not caught up.
// Without it the resources' entries for the node stand in. HA states
// come from the resources, which alone have them. With requireNode, node
// must be among the resources' node entries.
func PlanInventory(resources, live []pveout.Guest, node string, requireNode bool) (InventoryPlan, error) {
	var p InventoryPlan
	if requireNode {
		if err := checkNode(resources, node); err != nil {
			return p, err
		}
	}
	p.Nodes = clusterNodes(resources)
	if len(p.Nodes) == 0 {
		set := map[string]bool{}
		for _, g := range resources {
			if (g.Type == "lxc" || g.Type == "qemu") && g.Node != "" {
				set[g.Node] = true
			}
		}
		p.Nodes = slices.Sorted(maps.Keys(set))
	}
	byVMID := map[int]pveout.Guest{}
	for _, g := range resources {
		if g.Type == "lxc" || g.Type == "qemu" {
			byVMID[g.VMID] = g
		}
	}
	local := live
	if live == nil {
		for _, g := range resources {
			if g.Type == "lxc" && g.Node == node {
				local = append(local, g)
			}
		}
	}
	seen := map[int]bool{}
	for _, g := range local {
		switch {
		case g.Type != "lxc":
			continue
		case (tasks.InventoryContainer{VMID: g.VMID, Status: "x"}).Validate() != nil:
			p.Skipped = append(p.Skipped, SkippedGuest{g.VMID, "not a container id"})
			continue
		case seen[g.VMID]:
			p.Skipped = append(p.Skipped, SkippedGuest{g.VMID, "listed twice"})
			continue
		}
		seen[g.VMID] = true
		if r, ok := byVMID[g.VMID]; ok && live != nil {
			g.HAState = r.HAState
			g.Name = cmp.Or(g.Name, r.Name)
		}
		if !statusWordRE.MatchString(g.Status) {
			g.Status = "unknown"
		}
		g.Node = node
		p.Local = append(p.Local, g)
	}
	for _, g := range resources {
		if (g.Type != "lxc" && g.Type != "qemu") || g.Node == node || seen[g.VMID] {
			continue
		}
		if (tasks.InventoryContainer{VMID: g.VMID, Status: "x"}).Validate() != nil {
			p.Skipped = append(p.Skipped, SkippedGuest{g.VMID, "not a container id"})
			continue
		}
		seen[g.VMID] = true
		p.Elsewhere = append(p.Elsewhere, g.VMID)
	}
	if len(p.Local) > tasks.MaxInventoryContainers || len(p.Elsewhere) > tasks.MaxInventoryContainers {
		return InventoryPlan{}, fmt.Errorf("the cluster lists more than %d containers", tasks.MaxInventoryContainers)
	}
	slices.SortFunc(p.Local, func(x, y pveout.Guest) int { return x.VMID - y.VMID })
	slices.Sort(p.Elsewhere)
	return p, nil
}

// BuildContainer is what the inventory reports of one of the node's
// containers: g as the listings give it, with its configuration (nil
// when it could not be read: the entry is then partial), its snapshot
// names (nil when unknown: a raw configuration's sections stand in) and
// the node's storage types (nil when unknown). Each value Proxmox would
// not allow is left out on its own, and named in dropped.
func BuildContainer(g pveout.Guest, conf *pveout.Config, snapshots []string, storageTypes map[string]string) (c tasks.InventoryContainer, dropped []string) {
	c = tasks.InventoryContainer{
		VMID: g.VMID, Status: g.Status, Hostname: g.Name, Lock: g.Lock, Tags: g.Tags, HAState: g.HAState,
		Template: g.Template != nil && *g.Template, Snapshots: snapshots,
	}
	if conf == nil {
		c.Partial = true
		return keepValid(c)
	}
	// The configuration was read after the listing: where both say, it
	// is the newer word.
	c.Hostname = cmp.Or(conf.Hostname, c.Hostname)
	c.Lock, c.Tags = conf.Lock, conf.Tags
	c.Template = c.Template || conf.Template
	if c.Snapshots == nil {
		c.Snapshots = conf.Snapshots
	}
	c.IP, c.Gateway = conf.Net0()
	c.Cores, c.MemoryMB = conf.Cores, conf.MemoryMB
	c.Onboot, c.Protection = conf.Onboot, conf.Protection
	c.Addresses = conf.Addresses()
	if r := conf.RootFS; r != nil {
		c.DiskGB = r.SizeGB
		if r.Kind == "volume" {
			c.RootStorage = r.Storage
			c.StorageType = storageTypes[r.Storage]
		}
	}
	c.SnapshotBlocker = pveout.SnapshotBlocker(*conf, storageTypes)
	return keepValid(c)
}
