package labsim

import (
	"encoding/json"
	"testing"
	"time"
)

// resource is the part of a /cluster/resources entry the tests read.
type resource struct {
	ID       string  `json:"id"`
	Type     string  `json:"type"`
	Node     string  `json:"node"`
	Status   string  `json:"status"`
	VMID     int     `json:"vmid,omitempty"`
	Name     string  `json:"name,omitempty"`
	Template *int    `json:"template,omitempty"`
	MaxCPU   float64 `json:"maxcpu,omitempty"`
	MaxMem   int64   `json:"maxmem,omitempty"`
	MaxDisk  int64   `json:"maxdisk,omitempty"`
	Uptime   *int64  `json:"uptime,omitempty"`
	Lock     string  `json:"lock,omitempty"`
	Tags     string  `json:"tags,omitempty"`
}

func (b *bundle) jsonList(t *testing.T, host, cmd string) []map[string]any {
	t.Helper()
	var out []map[string]any
	if err := json.Unmarshal([]byte(b.must(t, host, cmd)), &out); err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return out
}

// vmEntry finds vmid's entry in a listing.
func vmEntry(t *testing.T, list []map[string]any, vmid int) map[string]any {
	t.Helper()
	for _, e := range list {
		if e["vmid"] == float64(vmid) {
			return e
		}
	}
	t.Fatalf("no entry for %d in %v", vmid, list)
	return nil
}

// TestNodeLXCListing: `pvesh get /nodes/<node>/lxc` is the node's own
// containers, live, with the fields of pve-container PVE::LXC::vmstatus:
// vmid an integer, lock, tags and template only where set, pid only while
// running.
func TestNodeLXCListing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.clock.Advance(90 * time.Second)
	const cmd = "pvesh get /nodes/pve1/lxc --output-format json"
	list := b.jsonList(t, "pve1", cmd)
	diff(t, "entries", 2, len(list))
	diff(t, "stopped pihole", map[string]any{
		"vmid": float64(102), "type": "lxc", "status": "stopped", "name": "pihole", "cpus": float64(1),
		"maxmem": float64(512 << 20), "maxswap": float64(512 << 20), "maxdisk": float64(8 << 30),
		"mem": float64(0), "swap": float64(0), "disk": float64(0), "uptime": float64(0), "cpu": float64(0),
		"netin": float64(0), "netout": float64(0), "diskread": float64(0), "diskwrite": float64(0),
	}, vmEntry(t, list, 102))
	jf := vmEntry(t, list, 101)
	if jf["status"] != "running" || jf["uptime"] != float64(90) || jf["pid"] == nil || jf["mem"] == float64(0) || jf["cpus"] != float64(4) {
		t.Errorf("running jellyfin = %v", jf)
	}
	for _, k := range []string{"lock", "tags", "template"} {
		if _, ok := jf[k]; ok {
			t.Errorf("jellyfin has %s without it being set: %v", k, jf)
		}
	}

	b.must(t, "pve1", "pct set 101 --tags 'Media;infra,media' --protection 1")
	b.must(t, "pve1", "pct template 102")
	list = b.jsonList(t, "pve1", cmd)
	diff(t, "tags, as get_unique_tags stores them", "infra;media", vmEntry(t, list, 101)["tags"])
	diff(t, "template", float64(1), vmEntry(t, list, 102)["template"])

	// Live: a stop shows at once.
	b.must(t, "pve1", "pct stop 101")
	diff(t, "status right after stop", "stopped", vmEntry(t, b.jsonList(t, "pve1", cmd), 101)["status"])

	// Another node of the cluster answers through pve1; a stranger does not.
	diff(t, "pve2's containers from pve1", float64(201), b.jsonList(t, "pve1", "pvesh get /nodes/pve2/lxc --output-format json")[0]["vmid"])
	diff(t, "unknown node", result{Stderr: "hostname lookup 'nope' failed - failed to get address info for: nope: Name or service not known\n", Exit: 255},
		b.run(t, "pve1", "pvesh get /nodes/nope/lxc"))
	diff(t, "a node without containers", result{Stdout: "[]\n"}, b.run(t, "pve2", "pct destroy 201 --force 1 >/dev/null && pvesh get /nodes/pve2/lxc --output-format json"))
	diff(t, "a node without containers, as text", result{}, b.run(t, "pve2", "pvesh get /nodes/pve2/lxc"))
}

// TestNodeLXCText: without --output-format, pvesh prints the listing as
// pve-common PVE::CLIFormatter print_text_table does: every column of the
// return schema, required ones first, bytes and durations rendered.
func TestNodeLXCText(t *testing.T) {
	t.Parallel()
	b := setupFleet(t, []Host{{Name: "pve1", Containers: []Container{{VMID: 102, Hostname: "pihole", IP: "10.0.0.22/24", Status: "stopped"}}}})
	diff(t, "text", result{Stdout: "" +
		"┌─────────┬──────┬─────┬──────┬────────┬──────────┬───────────┬──────┬──────────┬────────────┬────────────┬────────┬────────┬────────┬────────┬──────┬──────────┬────────┐\n" +
		"│ status  │ vmid │ cpu │ cpus │ disk   │ diskread │ diskwrite │ lock │ maxdisk  │ maxmem     │ maxswap    │ mem    │ name   │ netin  │ netout │ tags │ template │ uptime │\n" +
		"╞═════════╪══════╪═════╪══════╪════════╪══════════╪═══════════╪══════╪══════════╪════════════╪════════════╪════════╪════════╪════════╪════════╪══════╪══════════╪════════╡\n" +
		"│ stopped │  102 │   0 │    1 │ 0.00 B │ 0.00 B   │ 0.00 B    │      │ 8.00 GiB │ 512.00 MiB │ 512.00 MiB │ 0.00 B │ pihole │ 0.00 B │ 0.00 B │      │          │ 0s     │\n" +
		"└─────────┴──────┴─────┴──────┴────────┴──────────┴───────────┴──────┴──────────┴────────────┴────────────┴────────┴────────┴────────┴────────┴──────┴──────────┴────────┘\n"},
		b.run(t, "pve1", "pvesh get /nodes/pve1/lxc"))
	diff(t, "noborder noheader", result{Stdout: "stopped  102   0    1 0.00 B 0.00 B   0.00 B         8.00 GiB 512.00 MiB 512.00 MiB 0.00 B pihole 0.00 B 0.00 B               0s\n"},
		b.run(t, "pve1", "pvesh get /nodes/pve1/lxc --noborder --noheader"))
}

// TestClusterResourcesLag: /cluster/resources shows what pvestatd last
// broadcast, every 10 s (pve-manager PVE/Service/pvestatd.pm), so a start
// or stop shows only after the next cycle, and a new guest has no stats
// yet: status "unknown", no name (pve-manager PVE/API2Tools.pm
// extract_vm_stats). Lock and tags are read live from the config.
func TestClusterResourcesLag(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const cmd = "pvesh get /cluster/resources --type vm --output-format json"
	b.clock.Advance(3 * time.Second) // 10:00:03, in the cycle that began at 10:00:00

	b.must(t, "pve1", "pct stop 101")
	b.must(t, "pve1", "pct start 102 && pct stop 102 && pct start 102")
	b.must(t, "pve2", "pct create 150 "+debian+" --hostname fresh")
	b.must(t, "pve1", "pct set 101 --tags media")
	list := b.jsonList(t, "pve1", cmd)
	diff(t, "stopped jellyfin still running", "running", vmEntry(t, list, 101)["status"])
	diff(t, "its uptime at the last cycle", float64(0), vmEntry(t, list, 101)["uptime"])
	diff(t, "its tags at once", "media", vmEntry(t, list, 101)["tags"])
	diff(t, "started pihole still stopped", "stopped", vmEntry(t, list, 102)["status"])
	diff(t, "a CT pvestatd has not seen yet", map[string]any{"id": "lxc/150", "vmid": float64(150), "node": "pve2", "type": "lxc", "status": "unknown"}, vmEntry(t, list, 150))
	diff(t, "the node's own listing is live", "stopped", vmEntry(t, b.jsonList(t, "pve1", "pvesh get /nodes/pve1/lxc --output-format json"), 101)["status"])

	b.clock.Advance(7 * time.Second) // 10:00:10, the next cycle
	list = b.jsonList(t, "pve1", cmd)
	diff(t, "jellyfin after the cycle", "stopped", vmEntry(t, list, 101)["status"])
	diff(t, "pihole after the cycle", "running", vmEntry(t, list, 102)["status"])
	diff(t, "new CT after the cycle", "fresh", vmEntry(t, list, 150)["name"])

	// Stats that went stale (pvestatd stuck) read as unknown, without name.
	diff(t, "inject", result{Stdout: "injected stale_stats 102\n"}, b.run(t, "pve1", "labsim fault stale_stats 102"))
	list = b.jsonList(t, "pve2", cmd)
	diff(t, "stale pihole", map[string]any{"id": "lxc/102", "vmid": float64(102), "node": "pve1", "type": "lxc", "status": "unknown"}, vmEntry(t, list, 102))
	diff(t, "others keep theirs", "web", vmEntry(t, list, 201)["name"])
	b.must(t, "pve1", "labsim fault clear stale_stats")
	diff(t, "pihole after clear", "pihole", vmEntry(t, b.jsonList(t, "pve2", cmd), 102)["name"])
}
