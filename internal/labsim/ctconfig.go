package labsim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// confKeys is a container config as Proxmox keeps it, key by key:
// optional keys only where set, the description unencoded.
func confKeys(ct *ctState, c ctConf) map[string]string {
	ostype := "debian"
	if t, ok := templates[c.Template]; ok {
		ostype = t.distro
	}
	k := map[string]string{
		"arch":     "amd64",
		"cores":    fmt.Sprint(c.Cores),
		"hostname": c.Hostname,
		"memory":   fmt.Sprint(c.MemoryMB),
		"ostype":   ostype,
		"rootfs":   fmt.Sprintf("%s:%s,size=%dG", c.Storage, rootVolume(c, ct.VMID), c.DiskGB),
		"swap":     fmt.Sprint(c.SwapMB),
	}
	set := func(key, v string, ok bool) {
		if ok {
			k[key] = v
		}
	}
	set("description", readBack(c.Description), c.Description != "")
	set("features", "nesting=1", !c.NoNesting)
	set("lock", ct.Lock, ct.Lock != "")
	for i, m := range ct.Mounts {
		k[fmt.Sprintf("mp%d", i)] = m.Source + ",mp=" + m.Path
	}
	set("nameserver", c.Nameserver, c.Nameserver != "")
	if c.IP != "" {
		net := "name=eth0,bridge=vmbr0,firewall=1"
		if c.IP != "dhcp" && c.Gateway != "" {
			net += ",gw=" + c.Gateway
		}
		k["net0"] = net + fmt.Sprintf(",hwaddr=%s,ip=%s,type=veth", c.HWAddr, c.IP)
	}
	set("onboot", "1", c.Onboot)
	set("parent", ct.Parent, ct.Parent != "")
	set("protection", "1", c.Protection)
	set("tags", c.Tags, c.Tags != "")
	set("template", "1", c.IsTemplate)
	set("unprivileged", "1", c.Unprivileged)
	return k
}

// readBack is a description as Proxmox reads it back from the config file,
// where write_pct_config wrote each of its lines (Perl's split drops the
// trailing empty ones) as a comment, and parse_pct_config ends each one it
// reads with a newline: "x" comes back as "x\n".
func readBack(desc string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(desc, "\n"), "\n") {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// encodeText is pve-common PVE::ParseUtils encode_text: every control
// and high-bit byte, '%' and ':' URI-escaped.
func encodeText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch < 0x20 || ch > 0x7e || ch == '%' || ch == ':' {
			fmt.Fprintf(&b, "%%%02X", ch)
		} else {
			b.WriteByte(ch)
		}
	}
	return b.String()
}

// pctConfigText is what pct config prints: every key sorted, the
// description through encode_text (pve-container src/PVE/CLI/pct.pm).
func pctConfigText(ct *ctState, c ctConf) string {
	keys := confKeys(ct, c)
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		v := keys[k]
		if k == "description" {
			v = encodeText(v)
		}
		fmt.Fprintf(&b, "%s: %s\n", k, v)
	}
	return b.String()
}

// rawConf is /etc/pve/lxc/<vmid>.conf: the description as comment lines,
// the other keys sorted, and pending changes in [pve:pending] (pve-container
// PVE::LXC::Config write_pct_config).
func rawConf(ct *ctState) string {
	var b strings.Builder
	writeKeys := func(keys map[string]string) {
		for _, l := range strings.Split(keys["description"], "\n") {
			if l != "" {
				fmt.Fprintf(&b, "#%s\n", encodeText(l))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			if k != "description" {
				fmt.Fprintf(&b, "%s: %s\n", k, keys[k])
			}
		}
	}
	writeKeys(confKeys(ct, ct.Conf))
	if changed := ct.pendingKeys(); len(changed) > 0 {
		b.WriteString("\n[pve:pending]\n")
		writeKeys(changed)
	}
	return b.String()
}

// pendingKeys are the keys whose pending value differs from the live one.
func (ct *ctState) pendingKeys() map[string]string {
	if ct.Pending == nil {
		return nil
	}
	cur, next := confKeys(ct, ct.Conf), confKeys(ct, *ct.Pending)
	out := map[string]string{}
	for k, v := range next {
		if cur[k] != v {
			out[k] = v
		}
	}
	return out
}

// pctPending prints pct pending as pve-guest-common PVE::GuestHelpers
// format_pending does: each live key as "cur", each pending one as "new".
func pctPending(c *call, ct *ctState) int {
	cur := confKeys(ct, ct.Conf)
	pending := ct.pendingKeys()
	keys := maps.Clone(cur)
	maps.Copy(keys, pending)
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		v, hasCur := cur[k]
		p, hasNew := pending[k]
		if k == "description" {
			v, p = encodeText(v), encodeText(p)
		}
		if hasCur {
			c.outf("cur %s: %s\n", k, v)
		}
		if hasNew {
			c.outf("new %s: %s\n", k, p)
		}
	}
	return 0
}

// hotplugged lists the options pct set applies to a running container at
// once; the rest wait in [pve:pending] until it starts again
// (pve-container PVE::LXC::Config vmconfig_hotplug_pending: the
// $LXC_FASTPLUG_OPTIONS, and cpulimit, cpuunits, memory, swap and netN).
var hotplugged = map[string]bool{
	"description": true, "onboot": true, "startup": true, "protection": true, "hostname": true,
	"hookscript": true, "cores": true, "tags": true, "lock": true,
	"cpulimit": true, "cpuunits": true, "memory": true, "swap": true, "net0": true,
}

// applyHot copies the hot-pluggable options in opts from next to live.
func applyHot(live *ctConf, next ctConf, opts map[string]string) {
	for opt := range opts {
		if !hotplugged[opt] {
			continue
		}
		switch opt {
		case "description":
			live.Description = next.Description
		case "onboot":
			live.Onboot = next.Onboot
		case "protection":
			live.Protection = next.Protection
		case "hostname":
			live.Hostname = next.Hostname
		case "cores":
			live.Cores = next.Cores
		case "tags":
			live.Tags = next.Tags
		case "memory":
			live.MemoryMB = next.MemoryMB
		case "swap":
			live.SwapMB = next.SwapMB
		case "net0":
			live.IP, live.Gateway, live.Lease = next.IP, next.Gateway, next.Lease
		}
	}
}

// uniqueTags is pve-guest-common PVE::GuestHelpers get_unique_tags with
// the default tag style: split, lowercased, sorted, without repeats.
func uniqueTags(s string) string {
	f := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return r == ';' || r == ',' || r == ' ' || r == '\t' })
	slices.Sort(f)
	return strings.Join(slices.Compact(f), ";")
}

// applyPending makes the pending values live, as a start does
// (pve-container PVE::LXC vm_start calls vmconfig_apply_pending).
func applyPending(c *call, ct *ctState) {
	if ct.Pending == nil {
		return
	}
	old := ct.Conf
	ct.Conf, ct.Pending = *ct.Pending, nil
	syncGuestFiles(ct, old)
	c.dirty = true
}

// pctTemplate turns a stopped container into a template (pve-container
// PVE/API2/LXC.pm template).
func pctTemplate(c *call, ct *ctState) int {
	switch {
	case len(ct.Snapshots) > 0:
		c.errf("unable to create template, because CT contains snapshots\n")
		return 255
	case ct.Conf.IsTemplate:
		c.errf("you can't convert a template to a template\n")
		return 255
	case ct.running():
		c.errf("you can't convert a CT to template if the CT is running\n")
		return 255
	}
	if ct.Conf.Storage == "local-lvm" {
		c.outf("  Renamed \"vm-%d-disk-0\" to \"base-%d-disk-0\" in volume group \"pve\"\n", ct.VMID, ct.VMID)
		c.outf("  Logical volume pve/base-%d-disk-0 changed.\n", ct.VMID)
	}
	ct.Conf.IsTemplate = true
	if ct.Pending != nil {
		ct.Pending.IsTemplate = true
	}
	c.dirty = true
	return 0
}

// configParamConflict is pct config's refusal of --current with --snapshot.
func configParamConflict() *pveError {
	const msg = "cannot use 'snapshot' parameter with 'current'"
	return &pveError{fmt.Sprintf("400 Parameter verification failed.\ncurrent: %s\nsnapshot: %s\n%s\n", msg, msg, pctUsage["config"]), 255}
}

// rootVolume names a container's root volume as its storage's plugin does:
// a ZFS subvolume, an LVM-thin volume, or a raw file in a directory, with
// base- for a template (pve-storage ZFSPoolPlugin, LvmThinPlugin, Plugin).
func rootVolume(c ctConf, vmid int) string {
	switch storagePlugins[c.Storage] {
	case "zfspool":
		if c.IsTemplate {
			return fmt.Sprintf("basevol-%d-disk-0", vmid)
		}
		return fmt.Sprintf("subvol-%d-disk-0", vmid)
	case "dir":
		if c.IsTemplate {
			return fmt.Sprintf("%d/base-%d-disk-0.raw", vmid, vmid)
		}
		return fmt.Sprintf("%d/vm-%d-disk-0.raw", vmid, vmid)
	}
	if c.IsTemplate {
		return fmt.Sprintf("base-%d-disk-0", vmid)
	}
	return fmt.Sprintf("vm-%d-disk-0", vmid)
}
