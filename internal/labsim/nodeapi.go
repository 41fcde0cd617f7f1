package labsim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// statsInterval is pvestatd's cycle: every 10 s it reads each guest's
// status and broadcasts it to the cluster, and /cluster/resources shows
// what it broadcast (pve-manager PVE/Service/pvestatd.pm $updatetime).
// Cycles are counted from the Unix epoch, so they are the same on every
// node and under a test's clock.
const statsInterval = 10 * time.Second

// FaultStaleStats makes /cluster/resources show a guest as pmxcfs does
// once its stats are more than 5 minutes old (pve-cluster pmxcfs status.c
// rrdentry_expire): status "unknown", without name, uptime or sizes.
const FaultStaleStats FaultKind = "stale_stats"

// shownStats is what pvestatd last broadcast of a container, kept while a
// change has not reached a cycle yet. A zero Status means it broadcast
// nothing yet: the container is newer than its last cycle.
type shownStats struct {
	Status    string    `json:"status,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"`
}

func statsCycle(t time.Time) int64 {
	return int64(math.Floor(float64(t.UnixNano()) / float64(statsInterval)))
}

// noteStatus is called before the container's status changes at t. It
// keeps what pvestatd broadcast, unless that was already kept in this cycle.
func (c *ctState) noteStatus(t time.Time) {
	if c.StatusAt.IsZero() || statsCycle(c.StatusAt) < statsCycle(t) {
		c.Shown = &shownStats{Status: c.Status, StartedAt: c.StartedAt}
	}
	c.StatusAt = t
}

// settled marks the container's state as broadcast long ago, as for the
// containers a node starts with.
func (c *ctState) settled() {
	c.StatusAt, c.Shown = time.Time{}, nil
}

// broadcast is the status and start time pvestatd last broadcast, and
// whether it broadcast any.
func (c *ctState) broadcast(now time.Time) (string, time.Time, bool) {
	if c.StatusAt.IsZero() || statsCycle(c.StatusAt) < statsCycle(now) {
		return c.Status, c.StartedAt, true
	}
	if c.Shown == nil || c.Shown.Status == "" {
		return "", time.Time{}, false
	}
	return c.Shown.Status, c.Shown.StartedAt, true
}

// memUsedMB is the memory a container's processes use.
func (c *ctState) memUsedMB() int {
	if !c.running() {
		return 0
	}
	used := 24
	for _, s := range c.Guest.Services {
		if s.Active {
			used += 18 + int(hashString(s.Unit)%90)
		}
	}
	return min(used, c.Conf.MemoryMB)
}

// diskUsedMB is what the container's root file system holds.
func (c *ctState) diskUsedMB() int {
	used := 0
	if tpl, ok := templates[c.Conf.Template]; ok {
		used = tpl.sizeMB * 4
	}
	for name := range c.Guest.Packages {
		used += packages[name].SizeKB * 3 / 1024
	}
	return min(used, c.Conf.DiskGB*1024)
}

// vmstatus is a container's entry in /nodes/<node>/lxc, live, with the
// fields pve-container PVE::LXC::vmstatus gives it on PVE 8: lock, tags and
// template only where set, pid only while running.
func (c *ctState) vmstatus(now time.Time) map[string]any {
	conf := c.Conf
	d := map[string]any{
		"vmid": c.VMID, "type": "lxc", "status": c.Status,
		"name":   strings.Join(strings.Fields(cmp.Or(conf.Hostname, fmt.Sprintf("CT%d", c.VMID))), ""),
		"cpus":   conf.Cores,
		"maxmem": int64(conf.MemoryMB) << 20, "maxswap": int64(conf.SwapMB) << 20,
		"maxdisk": int64(conf.DiskGB) << 30,
		"mem":     0, "swap": 0, "disk": 0, "uptime": 0, "cpu": 0,
		"netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0,
	}
	if conf.Tags != "" {
		d["tags"] = conf.Tags
	}
	if conf.IsTemplate {
		d["template"] = 1
	}
	if c.Lock != "" {
		d["lock"] = c.Lock
	}
	if c.running() {
		up := int64(now.Sub(c.StartedAt).Seconds())
		h := int64(hashString(conf.Hostname))
		d["pid"] = 1000 + int(h%30000)
		d["uptime"] = up
		d["mem"] = int64(c.memUsedMB()) << 20
		d["disk"] = int64(c.diskUsedMB()) << 20
		d["netin"] = up * (900 + h%400)
		d["netout"] = up * (300 + h%200)
		d["diskread"] = int64(c.diskUsedMB()) << 18
		d["diskwrite"] = up * 4096
	}
	return d
}

// vmstatusColumns are the columns pvesh prints for /nodes/<node>/lxc:
// required properties sorted, then optional ones sorted (pve-common
// PVE::CLIFormatter extract_properties_to_print), with their renderers.
var vmstatusColumns = []tableCol{
	{"status", ""}, {"vmid", "integer"},
	{"cpu", "number"}, {"cpus", "number"}, {"disk", "bytes"}, {"diskread", "bytes"}, {"diskwrite", "bytes"},
	{"lock", ""}, {"maxdisk", "bytes"}, {"maxmem", "bytes"}, {"maxswap", "bytes"}, {"mem", "bytes"},
	{"name", ""}, {"netin", "bytes"}, {"netout", "bytes"}, {"tags", ""}, {"template", "boolean"},
	{"uptime", "duration"},
}

var (
	nodeLXCPathRE  = regexp.MustCompile(`^/nodes/([^/]+)/lxc$`)
	nodeQemuPathRE = regexp.MustCompile(`^/nodes/([^/]+)/qemu$`)
	// nodeReplicationPathRE is the node's replication status (replication.go).
	nodeReplicationPathRE = regexp.MustCompile(`^/nodes/([^/]+)/replication$`)
)

// qemuStatusColumns are the columns pvesh prints for /nodes/<node>/qemu
// (src/PVE/API2/Qemu.pm vmlist's schema: status and vmid required).
var qemuStatusColumns = []tableCol{
	{"status", ""}, {"vmid", "integer"},
	{"cpus", "number"}, {"lock", ""}, {"maxdisk", "bytes"}, {"maxmem", "bytes"},
	{"name", ""}, {"pid", "integer"}, {"tags", ""}, {"uptime", "duration"},
}

// pveshNodeQemu answers `pvesh get /nodes/<node>/qemu`: the node's VMs,
// live (src/PVE/API2/Qemu.pm vmlist).
func pveshNodeQemu(c *call, node, format string, tf tableFormat) int {
	if !slices.Contains(c.st.clusterNodes(c.env.host), node) {
		c.errf("hostname lookup '%s' failed - failed to get address info for: %s: Name or service not known\n", node, node)
		return 255
	}
	hs := c.st.Hosts[node]
	list := []map[string]any{}
	for _, vmid := range slices.Sorted(maps.Keys(hs.VMs)) {
		list = append(list, hs.VMs[vmid].vmstatus(c.now))
	}
	if strings.HasPrefix(format, "json") {
		data, _ := json.Marshal(list)
		c.outf("%s\n", data)
		return 0
	}
	if len(list) == 0 {
		return 0
	}
	slices.SortStableFunc(list, func(a, b map[string]any) int {
		return strings.Compare(a["status"].(string), b["status"].(string))
	})
	c.outf("%s", renderTable(qemuStatusColumns, list, tf))
	return 0
}

// pveshNodeLXC answers `pvesh get /nodes/<node>/lxc`: the node's own
// containers, read live as pct does (pve-container PVE/API2/LXC.pm vmlist).
// Another node of the cluster answers through it, as pvesh proxies there.
func pveshNodeLXC(c *call, node, format string, tf tableFormat) int {
	if !slices.Contains(c.st.clusterNodes(c.env.host), node) {
		c.errf("hostname lookup '%s' failed - failed to get address info for: %s: Name or service not known\n", node, node)
		return 255
	}
	hs := c.st.Hosts[node]
	var list []map[string]any
	for _, vmid := range slices.Sorted(maps.Keys(hs.Containers)) {
		list = append(list, hs.Containers[vmid].vmstatus(c.now))
	}
	if strings.HasPrefix(format, "json") {
		if list == nil {
			list = []map[string]any{}
		}
		data, _ := json.Marshal(list)
		c.outf("%s\n", data)
		return 0
	}
	if len(list) == 0 {
		return 0 // print_api_result prints nothing for an empty list
	}
	// Sorted by the first column, status; labsim breaks ties by vmid where
	// Perl's hash order is random.
	slices.SortStableFunc(list, func(a, b map[string]any) int {
		return strings.Compare(a["status"].(string), b["status"].(string))
	})
	c.outf("%s", renderTable(vmstatusColumns, list, tf))
	return 0
}

// pveshResources answers `pvesh get /cluster/resources` from the node's
// cluster, in the order pve-manager PVE/API2/Cluster.pm resources gives:
// guests (sorted by vmid as strings), nodes, storages. A guest's status,
// name, uptime and sizes are what pvestatd last broadcast (see
// statsInterval); its lock and tags are read from its config, live.
func pveshResources(c *call, typ, format string) int {
	switch typ {
	case "", "vm", "node", "storage", "sdn":
	default:
		c.errf("400 Parameter verification failed.\ntype: value '%s' does not have a value in the enumeration 'vm, storage, node, sdn'\n", typ)
		return 255
	}
	nodes := c.st.clusterNodes(c.env.host)
	var out []map[string]any
	if typ == "" || typ == "vm" {
		type entry struct {
			vmid int
			r    map[string]any
		}
		var guests []entry
		for _, name := range nodes {
			for _, ct := range c.st.Hosts[name].Containers {
				guests = append(guests, entry{ct.VMID, c.guestResource(name, ct)})
			}
			for _, vm := range c.st.Hosts[name].VMs {
				guests = append(guests, entry{vm.VMID, vm.resource(name, c.now)})
			}
		}
		slices.SortFunc(guests, func(a, b entry) int {
			return strings.Compare(strconv.Itoa(a.vmid), strconv.Itoa(b.vmid))
		})
		for _, g := range guests {
			out = append(out, g.r)
		}
	}
	if typ == "" || typ == "node" {
		for _, name := range nodes {
			out = append(out, map[string]any{"id": "node/" + name, "type": "node", "node": name, "status": "online",
				"uptime": int64(c.now.Sub(c.st.Hosts[name].Booted).Seconds()), "level": "",
				"maxcpu": 16, "cpu": 0.0123, "maxmem": int64(65536) << 20, "mem": int64(3100) << 20,
				"maxdisk": int64(100) << 30, "disk": int64(12) << 30})
		}
	}
	if typ == "" || typ == "storage" {
		for _, name := range nodes {
			for _, st := range slices.Sorted(maps.Keys(storages)) {
				out = append(out, map[string]any{"id": "storage/" + name + "/" + st, "type": "storage", "node": name,
					"status": "available", "storage": st, "plugintype": storagePlugins[st], "shared": 0})
			}
		}
	}
	if strings.HasPrefix(format, "json") {
		if out == nil {
			out = []map[string]any{}
		}
		data, _ := json.Marshal(out)
		c.outf("%s\n", data)
		return 0
	}
	c.outf("%-24s %-8s %-10s %-10s %s\n", "id", "type", "node", "status", "name")
	for _, r := range out {
		name, _ := r["name"].(string)
		storage, _ := r["storage"].(string)
		c.outf("%-24s %-8s %-10s %-10s %s\n", r["id"], r["type"], r["node"], r["status"], cmp.Or(name, storage))
	}
	return 0
}

// guestResource is a container's /cluster/resources entry (pve-manager
// PVE/API2Tools.pm extract_vm_stats): without broadcast stats, only its
// id, node, type and status "unknown", plus lock and tags.
func (c *call) guestResource(node string, ct *ctState) map[string]any {
	r := map[string]any{"id": fmt.Sprintf("lxc/%d", ct.VMID), "vmid": ct.VMID, "node": node, "type": "lxc", "status": "unknown"}
	status, started, ok := ct.broadcast(c.now)
	if ok && !c.env.faults.inContainer(FaultStaleStats, ct.VMID) {
		d := ct.vmstatus(c.now)
		tick := time.Unix(0, statsCycle(c.now)*int64(statsInterval))
		var uptime int64
		if status == statusRunning && !started.IsZero() {
			uptime = max(0, int64(tick.Sub(started).Seconds()))
		}
		r["status"], r["name"], r["uptime"] = status, d["name"], uptime
		r["template"] = 0
		if ct.Conf.IsTemplate {
			r["template"] = 1
		}
		r["maxcpu"], r["cpu"] = d["cpus"], 0
		r["maxmem"], r["maxdisk"] = d["maxmem"], d["maxdisk"]
		r["mem"], r["disk"], r["netin"], r["netout"], r["diskread"], r["diskwrite"] = 0, 0, 0, 0, 0, 0
		if status == statusRunning {
			r["mem"], r["disk"] = int64(ct.memUsedMB())<<20, int64(ct.diskUsedMB())<<20
		}
	}
	if ct.Lock != "" {
		r["lock"] = ct.Lock
	}
	if ct.Conf.Tags != "" {
		r["tags"] = ct.Conf.Tags
	}
	if ct.HA != nil {
		// From the HA manager's status, not pvestatd's broadcast
		// (pve-manager PVE/API2/Cluster.pm resources).
		r["hastate"] = ct.HA.State
	}
	return r
}

// tableCol is a column pvesh prints; kind is its JSON schema type or
// renderer: "" for a string, integer, number, boolean, bytes, duration.
type tableCol struct {
	name, kind string
}

// tableFormat holds pvesh's --noborder and --noheader.
type tableFormat struct {
	noBorder, noHeader bool
}

// renderTable prints rows as pve-common PVE::CLIFormatter print_text_table
// does for a UTF-8 locale (labsim's LANG is C.UTF-8).
func renderTable(cols []tableCol, rows []map[string]any, tf tableFormat) string {
	cells := make([][]string, len(rows))
	widths := make([]int, len(cols))
	for i, col := range cols {
		widths[i] = utf8.RuneCountInString(col.name)
	}
	for r, row := range rows {
		cells[r] = make([]string, len(cols))
		for i, col := range cols {
			v, ok := row[col.name]
			text := ""
			if ok {
				text = renderValue(col.kind, v)
			}
			cells[r][i] = text
			widths[i] = max(widths[i], utf8.RuneCountInString(text))
		}
	}
	pad := func(s string, w int, right bool) string {
		n := w - utf8.RuneCountInString(s)
		if n <= 0 {
			return s
		}
		if right {
			return strings.Repeat(" ", n) + s
		}
		return s + strings.Repeat(" ", n)
	}
	numeric := func(kind string) bool { return kind == "integer" || kind == "number" }
	line := func(vals []string) string {
		var b strings.Builder
		for i, v := range vals {
			if tf.noBorder {
				if i == len(vals)-1 {
					b.WriteString(v)
				} else {
					b.WriteString(pad(v, widths[i], numeric(cols[i].kind)) + " ")
				}
				continue
			}
			b.WriteString("│ " + pad(v, widths[i], numeric(cols[i].kind)) + " ")
		}
		if !tf.noBorder {
			b.WriteString("│")
		}
		return b.String() + "\n"
	}
	rule := func(left, mid, right, fill string) string {
		var b strings.Builder
		for i, w := range widths {
			if i == 0 {
				b.WriteString(left)
			} else {
				b.WriteString(mid)
			}
			b.WriteString(strings.Repeat(fill, w+2))
		}
		return b.String() + right + "\n"
	}
	var b strings.Builder
	if !tf.noBorder {
		b.WriteString(rule("┌", "┬", "┐", "─"))
	}
	sep := rule("├", "┼", "┤", "─")
	if !tf.noHeader {
		titles := make([]string, len(cols))
		for i, col := range cols {
			titles[i] = col.name
		}
		b.WriteString(line(titles))
		sep = rule("╞", "╪", "╡", "═")
	}
	for r := range rows {
		if !tf.noBorder && (r != 0 || !tf.noHeader) {
			b.WriteString(sep)
			sep = rule("├", "┼", "┤", "─")
		}
		b.WriteString(line(cells[r]))
	}
	if !tf.noBorder {
		b.WriteString(rule("└", "┴", "┘", "─"))
	}
	return b.String()
}

// renderValue is pve-common PVE::CLIFormatter data_to_text with
// --human-readable, the default.
func renderValue(kind string, v any) string {
	switch kind {
	case "boolean":
		if n, ok := v.(int); ok && n == 0 {
			return "0"
		}
		return "1"
	case "bytes":
		return renderBytes(toFloat(v))
	case "duration":
		return renderDuration(int64(toFloat(v)))
	}
	return fmt.Sprint(v)
}

func toFloat(v any) float64 {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int64:
		return float64(n)
	case float64:
		return n
	}
	return 0
}

// renderBytes is pve-common PVE::Format render_bytes.
func renderBytes(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	u := 0
	if v > 1023 {
		u = min(int(math.Log(v)/math.Log(1024)), len(units)-1)
		v /= math.Pow(1024, float64(u))
	}
	return fmt.Sprintf("%.2f %s", v, units[u])
}

// renderDuration is pve-common PVE::Format render_duration.
func renderDuration(secs int64) string {
	if secs == 0 {
		return "0s"
	}
	var parts []string
	for _, u := range []struct {
		unit string
		len  int64
	}{{"w", 7 * 86400}, {"d", 86400}, {"h", 3600}, {"m", 60}, {"s", 1}} {
		if v := secs / u.len; v > 0 {
			parts = append(parts, fmt.Sprintf("%d%s", v, u.unit))
			secs -= v * u.len
		}
	}
	return strings.Join(parts, " ")
}
