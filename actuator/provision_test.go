package actuator

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

const debian12 = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"

// TestPctCreateHealsDeadDNS is the seed's failure: a static-IP container
// whose assigned resolver cannot resolve. The gate must notice, switch to
// public resolvers and say so, and the install must then succeed.
func TestPctCreateHealsDeadDNS(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// vmid 100 is the first free one, so it is what the actuator allocates.
	if err := b.sim.Inject(labsim.Fault{Kind: labsim.FaultDNSDead, Target: "100"}); err != nil {
		t.Fatal(err)
	}
	o := b.order(t, "x-create", policy.PctCreateParams{
		Hostname: "books", IP: "192.168.8.50/24", GW: "192.168.8.1",
		Services:    []string{"nginx"},
		PostInstall: "systemctl is-active nginx\ncurl -fsS http://localhost/ >/dev/null",
	}, b.node())
	res := b.run(t, o)
	if res.Status != tasks.StatusSucceeded {
		t.Fatalf("status %s at %s: %s\n%s", res.Status, res.FailedPhase, res.Error, res.Output)
	}
	diff(t, "phases", []tasks.Phase{
		{Name: "allocate", Status: tasks.StatusSucceeded, Note: "vmid 100"},
		{Name: "template", Status: tasks.StatusSucceeded, Note: debian12},
		{Name: "create", Status: tasks.StatusSucceeded, Note: "container 100 from " + debian12},
		{Name: "start", Status: tasks.StatusSucceeded},
		{Name: "network", Status: tasks.StatusSucceeded, Note: "resolver 192.168.8.1 was dead; now 1.1.1.1 and 9.9.9.9"},
		{Name: "apt_update", Status: tasks.StatusSucceeded},
		{Name: "apt_install", Status: tasks.StatusSucceeded},
		{Name: "post_install", Status: tasks.StatusSucceeded},
	}, res.Phases, ignoreElapsed)
	notes := strings.Join(res.Notes, "\n")
	contains(t, "notes", notes, "Created container 100 (books)", "resolver (192.168.8.1) did not answer", "/etc/resolv.conf", "1.1.1.1 and 9.9.9.9")
	contains(t, "resolv.conf in the container", b.ssh(t, "pct exec 100 -- cat /etc/resolv.conf"), "nameserver 1.1.1.1\nnameserver 9.9.9.9\n")
	contains(t, "nginx runs", b.ssh(t, "pct exec 100 -- systemctl is-active nginx"), "active")

	// The create command is the approved summary step with the vmid and
	// template filled in, and the gate ran before apt.
	cmds := commandLines(b.commands(t))
	create := strings.NewReplacer(policy.VMIDPlaceholder, "100", policy.TemplatePlaceholder, debian12).Replace(o.Steps[0])
	contains(t, "the create step", create, "--net0 name=eth0,bridge=vmbr0,ip=192.168.8.50/24,gw=192.168.8.1")
	order := []string{
		"pvesh get /cluster/nextid",
		"pvesm status --content vztmpl",
		"pveam list local",
		create,
		"pct start 100",
		"pct exec 100 -- getent hosts deb.debian.org",
		"pct exec 100 -- apt-get -q -o Acquire::Retries=3 update",
		"pct exec 100 -- env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Acquire::Retries=3 install nginx",
		"pct exec 100 -- sh -e -c 'systemctl is-active nginx\ncurl -fsS http://localhost/ >/dev/null'",
	}
	last := -1
	for _, want := range order {
		i := slices.Index(cmds, want)
		if i <= last {
			t.Fatalf("want %q after the commands before it; labsim ran:\n%s", want, strings.Join(cmds, "\n"))
		}
		last = i
	}
}

func TestPctCreateAptFailureNamesThePhase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.sim.Inject(labsim.Fault{Kind: labsim.FaultAptFail, Target: "100"}); err != nil {
		t.Fatal(err)
	}
	res := b.run(t, b.order(t, "x-create-apt", policy.PctCreateParams{
		Hostname: "cache", Services: []string{"redis-server"}, PostInstall: "redis-cli ping",
	}, b.node()))
	diff(t, "status", tasks.StatusFailed, res.Status)
	diff(t, "failed phase", "apt_install", res.FailedPhase)
	diff(t, "exit code", 100, res.ExitCode)
	diff(t, "phases", []tasks.Phase{
		{Name: "allocate", Status: tasks.StatusSucceeded, Note: "vmid 100"},
		{Name: "template", Status: tasks.StatusSucceeded, Note: debian12},
		{Name: "create", Status: tasks.StatusSucceeded, Note: "container 100 from " + debian12},
		{Name: "start", Status: tasks.StatusSucceeded},
		{Name: "network", Status: tasks.StatusSucceeded, Note: "deb.debian.org resolves inside the container"},
		{Name: "address", Status: tasks.StatusSucceeded, Note: res.Created.Address},
		{Name: "apt_update", Status: tasks.StatusSucceeded},
		{Name: "apt_install", Status: tasks.StatusFailed, ExitCode: 100, Note: "3 attempts"},
	}, res.Phases, ignoreElapsed)
	if res.Created == nil || res.Created.Address == "" {
		t.Errorf("created %+v, want the dhcp lease read", res.Created)
	}
	contains(t, "error", res.Error, "apt_install failed", "status 100", "dpkg returned an error code", "after 3 attempts")
	contains(t, "notes", strings.Join(res.Notes, "\n"), "left as it is for inspection", "pct_destroy on lxc:100")
	contains(t, "output", res.Output, "Errors were encountered while processing")
	for _, c := range commandLines(b.commands(t)) {
		if strings.Contains(c, "redis-cli") {
			t.Errorf("post_install ran after apt failed: %s", c)
		}
	}
}

func TestPctCreateWithoutNetworkStopsAtTheGate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.sim.Inject(labsim.Fault{Kind: labsim.FaultNetDown, Target: "100"}); err != nil {
		t.Fatal(err)
	}
	res := b.run(t, b.order(t, "x-create-offline", policy.PctCreateParams{Hostname: "offline", Services: []string{"nginx"}}, b.node()))
	diff(t, "status", tasks.StatusFailed, res.Status)
	diff(t, "failed phase", "network", res.FailedPhase)
	contains(t, "error", res.Error, "does not resolve inside container 100", "1.1.1.1 and 9.9.9.9", "check its address, gateway and bridge")
	for _, c := range commandLines(b.commands(t)) {
		if strings.Contains(c, "apt-get") {
			t.Errorf("apt ran without a network: %s", c)
		}
	}
}

func TestPctCreateGivenVMIDAndTemplate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.run(t, b.order(t, "x-create-fixed", policy.PctCreateParams{VMID: 150, Hostname: "fixed", Template: debian12}, b.node()))
	if res.Status != tasks.StatusSucceeded {
		t.Fatalf("status %s at %s: %s\n%s", res.Status, res.FailedPhase, res.Error, res.Output)
	}
	diff(t, "phases", []string{"create", "start", "network", "address"}, phaseNames(res))
	contains(t, "notes", strings.Join(res.Notes, "\n"), "No health check ran", "Container 150 was leased "+res.Created.Address)
	contains(t, "the container", b.ssh(t, "pct status 150"), "running")

	// The address is what the node says of eth0, read after start.
	if !regexp.MustCompile(`^10\.0\.0\.\d+/24$`).MatchString(res.Created.Address) {
		t.Errorf("created address %q, want the lease", res.Created.Address)
	}
	diff(t, "the requested ip stays", "dhcp", res.Created.IP)
	contains(t, "the lease", b.ssh(t, "pvesh get /nodes/pve1/lxc/150/interfaces --output-format json"), `"inet":"`+res.Created.Address+`"`)
	cmds := commandLines(b.commands(t))
	if i, j := slices.Index(cmds, "pct start 150"), slices.Index(cmds, "pvesh get /nodes/pve1/lxc/150/interfaces --output-format json"); i < 0 || j < i {
		t.Errorf("the interfaces were not read after start:\n%s", strings.Join(cmds, "\n"))
	}
}

// TestPctCreateStaticAddressReadsNoLease: a static container's address is
// what the order gave; nothing asks the node.
func TestPctCreateStaticAddressReadsNoLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.run(t, b.order(t, "x-create-static", policy.PctCreateParams{VMID: 150, Hostname: "static", IP: "10.0.0.150/24", GW: "10.0.0.1", Template: debian12}, b.node()))
	if res.Status != tasks.StatusSucceeded {
		t.Fatalf("status %s at %s: %s\n%s", res.Status, res.FailedPhase, res.Error, res.Output)
	}
	diff(t, "phases", []string{"create", "start", "network"}, phaseNames(res))
	diff(t, "created", tasks.CreatedContainer{VMID: 150, Host: "pve1", Hostname: "static", IP: "10.0.0.150/24"}, *res.Created)
}

// TestPctCreateFindsTheTemplateStorage: the template comes from the first
// active storage that holds templates, wherever that is, and a node with
// none says what to do.
func TestPctCreateFindsTheTemplateStorage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.ssh(t, `printf 'dir: local\n\tpath /var/lib/vz\n\tcontent iso,backup\n\n`+
		`dir: archive\n\tpath /srv/archive\n\tcontent vztmpl\n\tdisable\n\n`+
		`nfs: nas-templates\n\tpath /mnt/pve/nas-templates\n\tserver 10.0.0.5\n\texport /srv/templates\n\tcontent vztmpl,iso\n\n`+
		`lvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n\tcontent rootdir,images\n' > /etc/pve/storage.cfg`)
	o := b.order(t, "x-create-nfs", policy.PctCreateParams{Hostname: "nfs"}, b.node())
	res := b.run(t, o)
	if res.Status != tasks.StatusSucceeded {
		t.Fatalf("status %s at %s: %s\n%s", res.Status, res.FailedPhase, res.Error, res.Output)
	}
	const nfs = "nas-templates:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"
	diff(t, "template phase", tasks.Phase{Name: "template", Status: tasks.StatusSucceeded, Note: nfs}, res.Phases[1], ignoreElapsed)
	cmds := commandLines(b.commands(t))
	for _, want := range []string{"pvesm status --content vztmpl", "pveam list nas-templates", strings.Replace(strings.Replace(o.Steps[0], policy.VMIDPlaceholder, "100", 1), policy.TemplatePlaceholder, nfs, 1)} {
		if !slices.Contains(cmds, want) {
			t.Errorf("want %q among:\n%s", want, strings.Join(cmds, "\n"))
		}
	}
	for _, c := range cmds {
		if c == "pveam list local" || c == "pveam list archive" {
			t.Errorf("%q: local holds no templates and archive is disabled", c)
		}
	}

	b.ssh(t, `printf 'lvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n\tcontent rootdir,images\n' > /etc/pve/storage.cfg`)
	res = b.run(t, b.order(t, "x-create-none", policy.PctCreateParams{Hostname: "none"}, b.node()))
	diff(t, "status", tasks.StatusFailed, res.Status)
	diff(t, "failed phase", "template", res.FailedPhase)
	contains(t, "error", res.Error, "no active storage on pve1 holds container templates", "Storage does not support templates!", "Container template", "pveam download")
	if res.Created != nil {
		t.Errorf("a container was created without a template: %+v", res.Created)
	}
}

// TestPctCreateFromATemplateFamily: a template named by family
// (ubuntu-24.04) is the newest of that family the node's template storage
// lists (pveam list, as pve-manager's PVE/CLI/pveam.pm prints it); a
// family the node lacks fails before anything is created and names the
// templates the storage has.
func TestPctCreateFromATemplateFamily(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.run(t, b.order(t, "x-create-ubuntu", policy.PctCreateParams{VMID: 150, Hostname: "noble", Template: "ubuntu-24.04"}, b.node()))
	if res.Status != tasks.StatusSucceeded {
		t.Fatalf("status %s at %s: %s\n%s", res.Status, res.FailedPhase, res.Error, res.Output)
	}
	const ubuntu = "local:vztmpl/ubuntu-24.04-standard_24.04-2_amd64.tar.zst"
	diff(t, "template phase", tasks.Phase{Name: "template", Status: tasks.StatusSucceeded, Note: ubuntu}, res.Phases[0], ignoreElapsed)
	contains(t, "the container's config", b.ssh(t, "pct config 150"), "ostype: ubuntu")

	res = b.run(t, b.order(t, "x-create-trixie", policy.PctCreateParams{VMID: 151, Hostname: "trixie", Template: "debian-13"}, b.node()))
	diff(t, "status", tasks.StatusFailed, res.Status)
	diff(t, "failed phase", "template", res.FailedPhase)
	contains(t, "error", res.Error, "has no debian-13 template", "debian-12-standard_12.7-1_amd64.tar.zst", "ubuntu-24.04-standard_24.04-2_amd64.tar.zst", "pveam download local")
	if res.Created != nil {
		t.Errorf("a container was created without its template: %+v", res.Created)
	}
	if slices.ContainsFunc(commandLines(b.commands(t)), func(c string) bool { return strings.HasPrefix(c, "pct create 151") }) {
		t.Error("pct create ran for a family the node lacks")
	}
}

func TestFillAndTemplateChoice(t *testing.T) {
	diff(t, "fill", "pct create 100 local:vztmpl/x.tar.zst --hostname a",
		fill("pct create $VMID $TEMPLATE --hostname a", 100, "local:vztmpl/x.tar.zst"))
	diff(t, "version order", true, slicesCompare(versionKey("12.12.7.1"), versionKey("12.12.10.1")) < 0)
	diff(t, "major first", true, slicesCompare(versionKey("13.13.0.1"), versionKey("12.12.10.1")) > 0)
	diff(t, "nameservers", []string{"10.0.0.1", "9.9.9.9"}, nameservers("# --- BEGIN PVE ---\nsearch lan\nnameserver 10.0.0.1\nnameserver  9.9.9.9\n"))
}

func slicesCompare(a, b []int) int { return slices.Compare(a, b) }

// TestConcurrentPctCreates sends two creates at once. Both may be handed
// the same free vmid; the one whose create then finds it taken allocates
// again, and both succeed on distinct containers.
func TestConcurrentPctCreates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.order(t, "x-create-1", policy.PctCreateParams{Hostname: "one"}, b.node())
	second := b.order(t, "x-create-2", policy.PctCreateParams{Hostname: "two"}, b.node())
	b.send(t, first)
	b.send(t, second)
	created := map[string]bool{}
	for _, id := range []string{first.ExecutionID, second.ExecutionID} {
		res := b.results.result(t, id)
		if res.Status != tasks.StatusSucceeded {
			t.Fatalf("%s: status %s at %s: %s", id, res.Status, res.FailedPhase, res.Error)
		}
		for _, p := range res.Phases {
			if p.Name == "create" && p.Status == tasks.StatusSucceeded {
				created[p.Note] = true
			}
		}
	}
	if len(created) != 2 {
		t.Errorf("want two distinct containers, got %v", created)
	}
}
