package labsim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// sample reads a real or source-derived Proxmox output from
// testdata/pve-samples, without its "# source:" line.
func sample(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "pve-samples", name))
	if err != nil {
		t.Fatal(err)
	}
	first, rest, _ := strings.Cut(string(data), "\n")
	if !strings.HasPrefix(first, "# source") { // "# source:" or "# source-derived:"
		t.Fatalf("%s: line 1 is %q, not its source", name, first)
	}
	return rest
}

// TestNestingWarningIsTheSample: a Debian 12 container made without
// nesting warns as pve-container does when it starts (and when it is
// made), and still starts; one made with nesting says nothing.
func TestNestingWarningIsTheSample(t *testing.T) {
	t.Parallel()
	b := setup(t)
	warning := sample(t, "pct-start.systemd-nesting-warning.stderr")

	r := b.run(t, "pve1", "pct create 150 "+debian+" --hostname bare --unprivileged 1")
	if r.Exit != 0 || !strings.HasSuffix(r.Stderr, warning) {
		t.Errorf("create without nesting: exit %d, stderr %q, want it to end with %q", r.Exit, r.Stderr, warning)
	}
	diff(t, "start without nesting", result{Stderr: warning}, b.run(t, "pve1", "pct start 150"))
	diff(t, "status", "status: running\n", b.must(t, "pve1", "pct status 150"))
	if cfg := b.must(t, "pve1", "pct config 150"); strings.Contains(cfg, "features") {
		t.Errorf("pct config of a container made without nesting shows features:\n%s", cfg)
	}

	r = b.run(t, "pve1", "pct create 151 "+debian+" --hostname nested --unprivileged 1 --features nesting=1")
	if r.Exit != 0 || strings.Contains(r.Stderr, "WARN") {
		t.Errorf("create with nesting: %+v", r)
	}
	diff(t, "start with nesting", result{}, b.run(t, "pve1", "pct start 151"))
	contains(t, "config with nesting", b.must(t, "pve1", "pct config 151"), "features: nesting=1\n")

	// The configured containers keep the nesting they always had.
	diff(t, "start of a configured container", result{}, b.run(t, "pve1", "pct start 102"))
}

// TestCreateOptionsInConfig: what pct_create sends is kept and shown as
// pct config shows it, keys sorted, the description encoded.
func TestCreateOptionsInConfig(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.must(t, "pve1", "pct create 150 "+debian+" --hostname wiki --unprivileged 1 --features nesting=1 --onboot 1 --tags nomos "+
		"--description 'Created by Nomos for @alice:example.org, execution 0198. Reason: 50% done'")
	cfg := b.must(t, "pve1", "pct config 150")
	contains(t, "config", cfg,
		"description: Created by Nomos for @alice%3Aexample.org, execution 0198. Reason%3A 50%25 done%0A\n",
		"features: nesting=1\n", "onboot: 1\n", "tags: nomos\n", "unprivileged: 1\n")
	var keys []string
	for _, l := range strings.Split(strings.TrimSuffix(cfg, "\n"), "\n") {
		k, _, _ := strings.Cut(l, ":")
		keys = append(keys, k)
	}
	if !slices.IsSorted(keys) {
		t.Errorf("pct config keys are not sorted: %q", keys)
	}
	contains(t, "the config file keeps the description as comments", b.must(t, "pve1", "cat /etc/pve/lxc/150.conf"),
		"#Created by Nomos for @alice%3Aexample.org, execution 0198. Reason%3A 50%25 done\n")

	r := b.run(t, "pve1", "pct create 152 "+debian+" --hostname bad --features nesting=1,bogus=1")
	if r.Exit != 255 || !strings.Contains(r.Stderr, "features.bogus: property is not defined") {
		t.Errorf("unknown feature: %+v", r)
	}
	r = b.run(t, "pve1", "pct create 152 "+debian+" --hostname bad --tags 'a b!c'")
	if r.Exit != 255 || !strings.Contains(r.Stderr, "invalid characters in tag") {
		t.Errorf("bad tag: %+v", r)
	}

	// The sample's description, as pve-container writes it to the file
	// and pct config prints it.
	raw := "## Pi-hole\n#\n#DNS for the LAN%3A port 53, admin on /admin\n" +
		"arch: amd64\ncores: 2\nfeatures: nesting=1\nhostname: pihole\nlock: backup\nmemory: 512\n" +
		"net0: name=eth0,bridge=vmbr0,firewall=1,gw=192.168.1.1,hwaddr=BC:24:11:5E:11:7C,ip=192.168.1.53/24,type=veth\n" +
		"onboot: 1\nostype: debian\nprotection: 1\nrootfs: local-zfs:subvol-102-disk-0,size=2G\nswap: 512\ntags: dns;infra\nunprivileged: 1\n"
	diff(t, "pct config of the described sample", sample(t, "pct-config.described-locked-tagged.source-derived.txt"), shownConfig(raw))
}

// TestTemplateStorage: pvesm status --content vztmpl and pveam list say
// which storage holds templates, as the samples do, and pct create takes
// a template from any of them.
func TestTemplateStorage(t *testing.T) {
	t.Parallel()
	b := setup(t)

	diff(t, "pveam list on a storage without templates", result{Stderr: sample(t, "pveam-list.no-vztmpl.stderr"), Exit: 255},
		b.run(t, "pve1", "pveam list local-lvm"))
	list := b.must(t, "pve1", "pveam list local")
	header, _, _ := strings.Cut(sample(t, "pveam-list.local.txt"), "\n")
	rows := strings.Split(strings.TrimSuffix(list, "\n"), "\n")
	diff(t, "pveam list header", header, rows[0])
	row := regexp.MustCompile(`^local:vztmpl/\S+\.tar\.(zst|gz|xz) +\d+\.\d\dMB$`)
	for _, r := range rows[1:] {
		if !row.MatchString(r) || len(r) < 61 {
			t.Errorf("pveam list row %q is not printf %%-60s %%-4.2fMB", r)
		}
	}
	contains(t, "pveam list local", list, debian+" ")
	diff(t, "pvesm status --content vztmpl, fresh install",
		"Name         Type     Status     Total (KiB)      Used (KiB) Available (KiB)        %\n"+
			"local         dir     active        98497780        11328896        87168884   11.50%\n",
		b.must(t, "pve1", "pvesm status --content vztmpl"))

	// Templates on an NFS share, the old directory storage disabled.
	b.must(t, "pve1", `printf 'dir: local\n\tpath /var/lib/vz\n\tcontent iso,vztmpl,backup\n\n`+
		`lvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n\tcontent rootdir,images\n\n`+
		`nfs: nas-templates\n\tpath /mnt/pve/nas-templates\n\tserver 10.0.0.5\n\texport /srv/templates\n\tcontent vztmpl\n\n`+
		`dir: old-templates\n\tpath /srv/old\n\tcontent vztmpl\n\tdisable\n' > /etc/pve/storage.cfg`)
	diff(t, "pvesm status --content vztmpl", result{Stdout: sample(t, "pvesm-status.content-vztmpl.source-derived.txt")},
		b.run(t, "pve1", "pvesm status --content vztmpl"))
	contains(t, "pveam list nas-templates", b.must(t, "pve1", "pveam list nas-templates"), "nas-templates:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst ")
	diff(t, "pveam list of a disabled storage", result{Stderr: "storage 'old-templates' is disabled\n", Exit: 255}, b.run(t, "pve1", "pveam list old-templates"))
	diff(t, "pveam list of no storage", result{Stderr: "storage 'nope' does not exist\n", Exit: 255}, b.run(t, "pve1", "pveam list nope"))
	b.must(t, "pve1", "pct create 150 nas-templates:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --hostname nfs --unprivileged 1")
	contains(t, "a container from the NFS template", b.must(t, "pve1", "pct config 150"), "ostype: debian\n")

	// No storage holds templates.
	b.must(t, "pve1", `printf 'lvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n\tcontent rootdir,images\n' > /etc/pve/storage.cfg`)
	diff(t, "pvesm status --content vztmpl without template storage",
		"Name       Type     Status     Total (KiB)      Used (KiB) Available (KiB)        %\n", b.must(t, "pve1", "pvesm status --content vztmpl"))
	r := b.run(t, "pve1", "pvesm status --content pictures")
	if r.Exit != 255 || !strings.Contains(r.Stderr, "content: invalid format") {
		t.Errorf("pvesm status of an unknown content type: %+v", r)
	}
}

// TestInterfaces: pvesh get /nodes/N/lxc/V/interfaces answers as
// pve-container does, with the DHCP lease, only for a running container.
func TestInterfaces(t *testing.T) {
	t.Parallel()
	b := setup(t)
	shape := func(s string) []map[string]any {
		t.Helper()
		var v []map[string]any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		return v
	}
	want := shape(sample(t, "pvesh-lxc-interfaces.running-dhcp.source-derived.json"))
	got := shape(b.must(t, "pve2", "pvesh get /nodes/pve2/lxc/201/interfaces --output-format json"))
	if len(got) != 2 {
		t.Fatalf("interfaces = %v, want lo and eth0", got)
	}
	diff(t, "lo", want[0], got[0])
	for k := range want[1] {
		if _, ok := got[1][k]; !ok {
			t.Errorf("eth0 lacks %q: %v", k, got[1])
		}
	}
	lease := b.sim.state.Hosts["pve2"].Containers[201].Conf.Lease
	diff(t, "eth0's address is the lease", lease+"/24", got[1]["inet"])
	if !regexp.MustCompile(`^fe80::[0-9a-f:]+/64$`).MatchString(got[1]["inet6"].(string)) {
		t.Errorf("eth0 inet6 %v is not link-local", got[1]["inet6"])
	}
	// Asked on another node of the cluster, as pvesh proxies it.
	diff(t, "from another node", b.must(t, "pve2", "pvesh get /nodes/pve2/lxc/201/interfaces --output-format json"),
		b.must(t, "pve1", "pvesh get /nodes/pve2/lxc/201/interfaces --output-format json"))

	static := shape(b.must(t, "pve1", "pvesh get /nodes/pve1/lxc/101/interfaces --output-format json"))
	diff(t, "a static address", "10.0.0.21/24", static[1]["inet"])

	stopped := sample(t, "pvesh-lxc-interfaces.stopped.source-derived.json")
	diff(t, "a stopped container", result{Stdout: stopped}, b.run(t, "pve1", "pvesh get /nodes/pve1/lxc/102/interfaces --output-format json"))
	diff(t, "a container of another node", result{Stdout: stopped}, b.run(t, "pve1", "pvesh get /nodes/pve1/lxc/201/interfaces --output-format json"))
	r := b.run(t, "pve1", "pvesh get /nodes/nope/lxc/101/interfaces --output-format json")
	if r.Exit != 255 || !strings.Contains(r.Stderr, "hostname lookup 'nope' failed") {
		t.Errorf("an unknown node: %+v", r)
	}
}
