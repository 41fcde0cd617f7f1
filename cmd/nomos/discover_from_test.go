package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// pveSamples are internal/pveout's samples: real or source-derived
// outputs, each with its source on line 1.
const pveSamples = "../../internal/pveout/testdata"

// collect lays out a -from directory: files maps host/name to a sample
// (copied without its source line) or, for a name starting "inline:",
// to the text after it.
func collect(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for dst, src := range files {
		var text string
		if inline, ok := strings.CutPrefix(src, "inline:"); ok {
			text = inline
		} else {
			raw, err := os.ReadFile(filepath.Join(pveSamples, src))
			if err != nil {
				t.Fatal(err)
			}
			first, rest, _ := strings.Cut(string(raw), "\n")
			if !strings.HasPrefix(first, "# source") {
				t.Fatalf("%s: line 1 is not its source", src)
			}
			text = rest
		}
		path := filepath.Join(dir, dst)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// discoverFromJSON runs `nomos discover -from dir` as an operator would,
// with no config, and decodes what it prints.
func discoverFromJSON(t *testing.T, dir string) []map[string]any {
	t.Helper()
	var out, errOut strings.Builder
	if code := run([]string{"discover", "-from", dir}, nil, &out, &errOut); code != 0 {
		t.Fatalf("discover -from exited %d: %s", code, errOut.String())
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
		t.Fatalf("discover -from printed no JSON array: %v\n%s", err, out.String())
	}
	return got
}

// guest is one expected object: every key, null where nothing says.
func guest(host, node string, vmid float64, typ string, fields map[string]any) map[string]any {
	g := map[string]any{"host": host, "node": node, "vmid": vmid, "type": typ}
	for _, k := range []string{"name", "status", "template", "lock", "tags", "hastate", "onboot", "protection", "addresses", "cores", "memory_mb", "snapshots"} {
		g[k] = nil
	}
	for k, v := range fields {
		if _, ok := g[k]; !ok {
			panic("no such key " + k)
		}
		g[k] = v
	}
	return g
}

func list(s ...string) []any {
	out := []any{}
	for _, x := range s {
		out = append(out, x)
	}
	return out
}

// TestDiscoverFromReplaysWhatHostsPrinted replays every sample that
// applies, and more of the same kinds from the Proxmox sources: the
// node's own listing over the cluster's lagging resources, templates as
// "1", true and 1, numbers as strings, a raw config with snapshot and
// pending sections, a multi-NIC CT, a bind mount, a CT with a lock and
// tags, a CT the resources call unknown without a name, and a qemu guest.
func TestDiscoverFromReplaysWhatHostsPrinted(t *testing.T) {
	t.Parallel()
	dir := collect(t, map[string]string{
		"pve1/cluster-resources.json": "cluster-resources.pve1-cluster.source-derived.json",
		"pve1/nodes-pve1-lxc.json":    "nodes-pve1-lxc.source-derived.json",
		"pve1/pct-config-101.txt":     "conf.pending-and-snapshots.source-derived.conf",
		"pve1/pct-config-102.txt":     "pct-config.described-locked-tagged.source-derived.txt",
		"pve1/pct-config-104.txt":     "pct-config.bind-mount.source-derived.txt",
		"pve1/pct-config-9001.txt":    "pct-config.template.source-derived.txt",
		"pve1/pct-config-110.txt":     "pct-config.multinic.pve-container-test.txt", // on pve2: not this host's
		"edge/cluster-resources.json": `inline:[{"type":"node","node":"n1","status":"online"},
			{"type":"lxc","node":"n1","vmid":"120","name":"alpine","status":"running","template":"0"},
			{"type":"lxc","node":"n1","vmid":121,"status":"unknown"},
			{"type":"lxc","node":"n1","vmid":122,"name":"test","status":"stopped","template":1}]`,
		"edge/pct-config-120.txt": "pct-config.multinic.pve-container-test.txt",
		"edge/pct-config-122.txt": "conf.rollback-101.pve-container-test.conf",
		"README.txt":              "inline:collected on 2026-12-01",
	})
	want := []map[string]any{
		guest("edge", "n1", 120, "lxc", map[string]any{"name": "test9", "status": "running", "template": false, "onboot": false, "protection": false,
			"addresses": list("10.0.0.100/32", "fc00::1/64", "192.168.0.1/24")}),
		guest("edge", "n1", 121, "lxc", map[string]any{"status": "unknown"}),
		guest("edge", "n1", 122, "lxc", map[string]any{"name": "test", "status": "stopped", "template": true, "onboot": false, "protection": false,
			"addresses": list("dhcp"), "memory_mb": 2048.0, "snapshots": list("test")}),
		guest("pve1", "pve1", 101, "lxc", map[string]any{"name": "jellyfin", "status": "running", "template": false, "lock": "snapshot",
			"tags": list("media"), "onboot": true, "protection": true, "addresses": list("10.0.0.21/24"), "cores": 2.0, "memory_mb": 2048.0,
			"snapshots": list("nomos-20261201-101500", "nomos-20261202-093000")}),
		guest("pve1", "pve1", 102, "lxc", map[string]any{"name": "pihole", "status": "running", "template": false, "lock": "backup",
			"tags": list("dns", "infra"), "hastate": "started", "onboot": true, "protection": true, "addresses": list("192.168.1.53/24"),
			"cores": 2.0, "memory_mb": 512.0}),
		guest("pve1", "pve1", 103, "lxc", map[string]any{"name": "CT103", "status": "running"}),
		guest("pve1", "pve1", 104, "lxc", map[string]any{"name": "nas", "status": "stopped", "template": false, "tags": list("storage", "media"),
			"onboot": false, "protection": false, "addresses": list("192.168.1.40/24"), "cores": 2.0, "memory_mb": 1024.0}),
		guest("pve1", "pve1", 200, "qemu", map[string]any{"name": "homeassistant", "status": "running", "template": false, "hastate": "started"}),
		guest("pve1", "pve1", 9001, "lxc", map[string]any{"name": "debian-tpl", "status": "stopped", "template": true, "onboot": false,
			"protection": false, "addresses": list("dhcp"), "cores": 1.0, "memory_mb": 512.0}),
		guest("pve1", "pve1", 9002, "lxc", map[string]any{"name": "alpine-tpl", "status": "stopped", "template": true}),
	}
	if d := gocmp.Diff(want, discoverFromJSON(t, dir)); d != "" {
		t.Errorf("discover -from (-want +got):\n%s", d)
	}

	// A real PVE 8 excerpt: --type vm, so no node entries; the host's
	// directory names its node.
	excerpt := collect(t, map[string]string{
		"pve1/cluster-resources.json": "cluster-resources.pve8-excerpt.json",
		"pve1/pct-config-100.txt":     "pct-config.dhcp-no-size.pve-container-test.txt",
	})
	want = []map[string]any{
		guest("pve1", "pve1", 100, "lxc", map[string]any{"name": "test", "status": "stopped", "template": false, "onboot": false,
			"protection": false, "addresses": list("dhcp"), "memory_mb": 2048.0}),
		guest("pve1", "pve1", 101, "qemu", map[string]any{"name": "win-srv", "status": "running", "template": false}),
	}
	if d := gocmp.Diff(want, discoverFromJSON(t, excerpt)); d != "" {
		t.Errorf("discover -from the PVE 8 excerpt (-want +got):\n%s", d)
	}
}

// TestDiscoverFromNamesWhatItCannotRead: malformed input fails with the
// file named, and nothing is printed.
func TestDiscoverFromNamesWhatItCannotRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"resources that are not JSON", map[string]string{"pve1/cluster-resources.json": "inline:Configuration file 'nodes/pve1/lxc/105.conf' does not exist\n"},
			"pve1/cluster-resources.json: not a JSON array"},
		{"no resources", map[string]string{"pve1/pct-config-101.txt": "pct-config.multinic.pve-container-test.txt"},
			"host pve1: open"},
		{"a config that is not one", map[string]string{
			"pve1/cluster-resources.json": "cluster-resources.pve8-excerpt.json",
			"pve1/pct-config-100.txt":     "inline:{\"vmid\": 100}\n"}, "pve1/pct-config-100.txt: not a container configuration: line 1"},
		{"a listing that is not JSON", map[string]string{
			"pve1/cluster-resources.json": "cluster-resources.pve8-excerpt.json",
			"pve1/nodes-pve1-lxc.json":    "inline:VMID Status\n"}, "pve1/nodes-pve1-lxc.json: not a JSON array"},
		{"a config named without a vmid", map[string]string{
			"pve1/cluster-resources.json": "cluster-resources.pve8-excerpt.json",
			"pve1/pct-config-dns.txt":     "pct-config.multinic.pve-container-test.txt"}, "pve1/pct-config-dns.txt: the name must be pct-config-<vmid>.txt"},
		{"a node it cannot tell", map[string]string{"lab/cluster-resources.json": "cluster-resources.pve8-excerpt.json"},
			"host lab: which node is it? The cluster has pve1, pve2"},
		{"no host directories", map[string]string{"cluster-resources.json": "cluster-resources.pve8-excerpt.json"}, "has no host directories"},
	} {
		dir := collect(t, tc.files)
		var out, errOut strings.Builder
		code := run([]string{"discover", "-from", dir}, nil, &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), tc.want) || out.Len() != 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want a failure saying %q", tc.name, code, out.String(), errOut.String(), tc.want)
		}
	}
}
