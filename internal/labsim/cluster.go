package labsim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// clusterKey names the VMID space a node belongs to: its cluster, or for a
// standalone node the node itself. The prefixes keep a cluster named like
// a node apart from that node standing alone.
func clusterKey(node, cluster string) string {
	if cluster == "" {
		return "node/" + node
	}
	return "cluster/" + cluster
}

// clusterNodes lists, sorted, the nodes in host's cluster, host included.
func (st *simState) clusterNodes(host string) []string {
	hs := st.Hosts[host]
	if hs == nil {
		return nil
	}
	key := clusterKey(host, hs.Cluster)
	var out []string
	for name, other := range st.Hosts {
		if clusterKey(name, other.Cluster) == key {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// findInCluster returns the node of host's cluster that has vmid, and the
// container there, or "" and nil.
func (st *simState) findInCluster(host string, vmid int) (string, *ctState) {
	for _, name := range st.clusterNodes(host) {
		if ct, ok := st.Hosts[name].Containers[vmid]; ok {
			return name, ct
		}
	}
	return "", nil
}

// vmidOwner is the node of host's cluster that has a container or a VM
// with vmid, or "": the two kinds share one VMID space.
func (st *simState) vmidOwner(host string, vmid int) string {
	for _, name := range st.clusterNodes(host) {
		if _, ok := st.Hosts[name].Containers[vmid]; ok {
			return name
		}
		if _, ok := st.Hosts[name].VMs[vmid]; ok {
			return name
		}
	}
	return ""
}

// hostOf is the node that has the container ct, or "".
func (st *simState) hostOf(ct *ctState) string {
	for name, hs := range st.Hosts {
		if hs.Containers[ct.VMID] == ct {
			return name
		}
	}
	return ""
}

// nextIDIn is the lowest free VMID of host's cluster, as
// /cluster/nextid gives it, or 0 when every one is taken.
func (st *simState) nextIDIn(host string) int {
	for id := minVMID; id < maxNextID; id++ {
		if st.vmidOwner(host, id) == "" {
			return id
		}
	}
	return 0
}

// maxNextID is the default upper bound of datacenter.cfg next-id, below
// the schema's maximum VMID (pve-manager PVE/API2/Cluster.pm nextid).
const maxNextID = 1000 * 1000

// checkClusters refuses a saved state in which two nodes now configured in
// one cluster hold the same VMID: pvecm refuses to join a node with guests,
// so no real cluster can be in that state.
func (st *simState) checkClusters() error {
	var errs []string
	seen := map[string]map[int]string{}
	for _, name := range slices.Sorted(maps.Keys(st.Hosts)) {
		hs := st.Hosts[name]
		key := clusterKey(name, hs.Cluster)
		if seen[key] == nil {
			seen[key] = map[int]string{}
		}
		for _, vmid := range slices.Sorted(maps.Keys(hs.Containers)) {
			if other, ok := seen[key][vmid]; ok {
				errs = append(errs, fmt.Sprintf("CT %d is on both %s and %s of cluster %s", vmid, other, name, hs.Cluster))
			}
			seen[key][vmid] = name
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("saved state does not fit the configured clusters (remove it to start afresh): %s", strings.Join(errs, "; "))
	}
	return nil
}
