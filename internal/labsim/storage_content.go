package labsim

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Which storage holds container templates (pvesm status --content,
// pveam list), and what a running container's interfaces are (pvesh get
// /nodes/N/lxc/V/interfaces), as pve-storage, pve-manager and
// pve-container print them.

// storageCfgPath is the cluster's storage configuration. A host without
// one has what a fresh install writes, with labsim's local-zfs.
const storageCfgPath = "/etc/pve/storage.cfg"

const defaultStorageCfg = `dir: local
	path /var/lib/vz
	content iso,vztmpl,backup

lvmthin: local-lvm
	thinpool data
	vgname pve
	content rootdir,images

zfspool: local-zfs
	pool rpool/data
	sparse 1
	content images,rootdir
`

// storageDef is one section of storage.cfg.
type storageDef struct {
	id, typ  string
	content  []string
	disabled bool
}

// storageConfig reads the host's storage.cfg: "type: id" lines opening
// sections of indented "key value" lines.
func storageConfig(hs *hostState) []storageDef {
	text, ok := hs.Files[storageCfgPath]
	if !ok {
		text = defaultStorageCfg
	}
	var out []storageDef
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if line[0] != ' ' && line[0] != '\t' {
			typ, id, ok := strings.Cut(line, ":")
			if ok {
				out = append(out, storageDef{id: strings.TrimSpace(id), typ: strings.TrimSpace(typ)})
			}
			continue
		}
		if len(out) == 0 {
			continue
		}
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch st := &out[len(out)-1]; k {
		case "content":
			st.content = strings.Split(strings.TrimSpace(v), ",")
		case "disable":
			st.disabled = strings.TrimSpace(v) != "0"
		}
	}
	return out
}

func storageByID(hs *hostState, id string) (storageDef, bool) {
	i := slices.IndexFunc(storageConfig(hs), func(s storageDef) bool { return s.id == id })
	if i < 0 {
		return storageDef{}, false
	}
	return storageConfig(hs)[i], true
}

// storageSizes are a storage's total and used KiB, by type.
var storageSizes = map[string][2]int64{
	"dir":     {98497780, 11328896},
	"lvmthin": {374538240, 28135219},
	"zfspool": {449967104, 2136352},
	"nfs":     {1921724416, 1052344320},
	"cifs":    {1921724416, 1052344320},
	"cephfs":  {3840000000, 912000000},
}

// storageContents are the content types pve-storage knows.
var storageContents = []string{"images", "rootdir", "vztmpl", "iso", "backup", "snippets", "import"}

func pvesmCmd(c *call) int {
	if len(c.args) == 0 {
		c.errf("ERROR: no command specified\nUSAGE: pvesm <COMMAND> [ARGS] [OPTIONS]\n")
		return 255
	}
	if c.args[0] == "list" {
		return pvesmList(c)
	}
	if c.args[0] != "status" {
		c.errf("ERROR: unknown command 'pvesm %s'\n", c.args[0])
		return 255
	}
	var content, only string
	for i := 1; i < len(c.args); i++ {
		name, val, ok := strings.Cut(strings.TrimLeft(c.args[i], "-"), "=")
		if name != "content" && name != "storage" || !strings.HasPrefix(c.args[i], "-") {
			c.errf("Unknown option: %s\n400 unable to parse option\npvesm status  [OPTIONS]\n", strings.TrimLeft(c.args[i], "-"))
			return 255
		}
		if !ok {
			if i+1 == len(c.args) {
				c.errf("Option %s requires an argument\n400 unable to parse option\npvesm status  [OPTIONS]\n", name)
				return 255
			}
			i++
			val = c.args[i]
		}
		if name == "content" {
			content = val
		} else {
			only = val
		}
	}
	if content != "" && !slices.Contains(storageContents, content) {
		c.errf("400 Parameter verification failed.\ncontent: invalid format - invalid content type '%s'\npvesm status  [OPTIONS]\n", content)
		return 255
	}
	var list []storageDef
	for _, st := range storageConfig(c.hs) {
		if (content == "" || slices.Contains(st.content, content)) && (only == "" || st.id == only) {
			list = append(list, st)
		}
	}
	if only != "" && len(list) == 0 {
		c.errf("storage '%s' does not exist\n", only)
		return 255
	}
	// pve-storage's $print_status: names padded to the longest plus one,
	// sorted, sizes in KiB.
	width := 0
	for _, st := range list {
		width = max(width, len(st.id))
	}
	width++
	c.outf("%-*s %10s %10s %15s %15s %15s %8s\n", width, "Name", "Type", "Status", "Total (KiB)", "Used (KiB)", "Available (KiB)", "%")
	slices.SortFunc(list, func(a, b storageDef) int { return strings.Compare(a.id, b.id) })
	for _, st := range list {
		size := storageSizes[st.typ]
		if st.disabled {
			c.outf("%-*s %10s %10s %15d %15d %15d % 8s\n", width, st.id, st.typ, "disabled", 0, 0, 0, "N/A")
			continue
		}
		c.outf("%-*s %10s %10s %15d %15d %15d % 7.2f%%\n", width, st.id, st.typ, "active", size[0], size[1], size[0]-size[1], float64(size[1])*100/float64(size[0]))
	}
	return 0
}

// pveamList is pveam list STORAGE: the templates of a storage that holds
// them, or pve-manager's refusal.
func pveamList(c *call) int {
	if len(c.args) < 2 {
		c.errf("400 not enough arguments\npveam list <storage> [OPTIONS]\n")
		return 255
	}
	st, ok := storageByID(c.hs, c.args[1])
	switch {
	case !ok:
		c.errf("storage '%s' does not exist\n", c.args[1])
		return 255
	case st.disabled:
		c.errf("storage '%s' is disabled\n", st.id)
		return 255
	case !slices.Contains(st.content, "vztmpl"):
		c.errf("Storage does not support templates!\n")
		return 255
	}
	c.outf("%-60s %-6s\n", "NAME", "SIZE")
	for _, n := range slices.Sorted(maps.Keys(templates)) {
		mb := float64(templates[n].sizeMB) + float64(hashString(n)%100)/100
		c.outf("%-60s %-4.2fMB\n", st.id+":vztmpl/"+strings.TrimPrefix(n, "local:vztmpl/"), mb)
	}
	return 0
}

// templateVolume maps a template volume on any storage that holds
// templates to labsim's catalogue, where every template is listed under
// local. A volume on a storage without templates is left as given, and
// so does not exist.
func (c *call) templateVolume(volid string) string {
	id, name, ok := strings.Cut(volid, ":vztmpl/")
	if !ok {
		return volid
	}
	st, ok := storageByID(c.hs, id)
	if !ok || st.disabled || !slices.Contains(st.content, "vztmpl") {
		return volid
	}
	return "local:vztmpl/" + name
}

// iface is one entry of pve-container's interfaces answer.
type iface struct {
	HardwareAddress string   `json:"hardware-address"`
	HWAddr          string   `json:"hwaddr"`
	Inet            string   `json:"inet,omitempty"`
	Inet6           string   `json:"inet6,omitempty"`
	IPAddresses     []ipAddr `json:"ip-addresses"`
	Name            string   `json:"name"`
}

type ipAddr struct {
	IPAddress     string `json:"ip-address"`
	IPAddressType string `json:"ip-address-type"`
	Prefix        int    `json:"prefix"`
}

// pveshInterfaces answers pvesh get /nodes/NODE/lxc/VMID/interfaces: what
// `ip --json a` shows inside a running container. pve-container returns
// nothing for a container that does not run (or does not exist), which
// pvesh prints as null.
func pveshInterfaces(c *call, p, format string) int {
	parts := strings.Split(p, "/")
	if len(parts) != 6 || parts[1] != "nodes" || parts[3] != "lxc" {
		c.errf("No 'get' handler defined for '%s'\n", p)
		return 255
	}
	node := parts[2]
	hs, ok := c.st.Hosts[node]
	if !ok {
		c.errf("hostname lookup '%s' failed - failed to get address info for: %s: Name or service not known\n", node, node)
		return 255
	}
	vmid, err := strconv.Atoi(parts[4])
	if err != nil || vmid < minVMID || vmid > maxVMID {
		c.errf("400 Parameter verification failed.\nvmid: invalid format - value does not look like a valid VM ID\n")
		return 255
	}
	var out []iface
	if ct := hs.Containers[vmid]; ct != nil && ct.running() {
		out = append(out, iface{Name: "lo", HWAddr: "00:00:00:00:00:00", HardwareAddress: "00:00:00:00:00:00", Inet: "127.0.0.1/8", Inet6: "::1/128",
			IPAddresses: []ipAddr{{"127.0.0.1", "inet", 8}, {"::1", "inet6", 128}}})
		if ct.Conf.IP != "" {
			mac := strings.ToLower(ct.Conf.HWAddr)
			eth := iface{Name: "eth0", HWAddr: mac, HardwareAddress: mac}
			if a := ct.addr(); a != "" {
				bits := 24
				if pfx, err := netip.ParsePrefix(ct.Conf.IP); err == nil {
					bits = pfx.Bits()
				}
				eth.Inet = fmt.Sprintf("%s/%d", a, bits)
				eth.IPAddresses = append(eth.IPAddresses, ipAddr{a, "inet", bits})
			}
			if ll := linkLocal(mac); ll != "" {
				eth.Inet6 = ll + "/64"
				eth.IPAddresses = append(eth.IPAddresses, ipAddr{ll, "inet6", 64})
			}
			out = append(out, eth)
		}
	}
	if !strings.HasPrefix(format, "json") {
		if out == nil {
			return 0
		}
		for _, i := range out {
			c.outf("%-6s %-17s %-18s %s\n", i.Name, i.HWAddr, i.Inet, i.Inet6)
		}
		return 0
	}
	data, _ := json.Marshal(out) // nil marshals as null
	c.outf("%s\n", data)
	return 0
}

// linkLocal is the EUI-64 link-local address of a MAC address.
func linkLocal(mac string) string {
	var b [6]byte
	if _, err := fmt.Sscanf(mac, "%02x:%02x:%02x:%02x:%02x:%02x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]); err != nil {
		return ""
	}
	a := [16]byte{0: 0xfe, 1: 0x80, 8: b[0] ^ 2, 9: b[1], 10: b[2], 11: 0xff, 12: 0xfe, 13: b[3], 14: b[4], 15: b[5]}
	return netip.AddrFrom16(a).String()
}
