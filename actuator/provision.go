package actuator

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// Provisioning knobs. Attempts are separated by Config.RetryDelay.
const (
	// allocateAttempts bounds re-allocating a vmid that another create
	// took between pvesh and pct create.
	allocateAttempts = 3
	// dnsAttempts is how often the DNS gate tries the container's own
	// resolver, which may need a moment after start, before replacing it.
	dnsAttempts = 4
	// healedAttempts is how often it tries again with public resolvers.
	healedAttempts = 3
	// aptAttempts is how often apt-get update and install are tried.
	aptAttempts = 3
	// addressAttempts is how often a dhcp container's interfaces are
	// read before its lease is given up on.
	addressAttempts = 3
)

// publicResolvers replace a container's resolver that does not answer.
var publicResolvers = []string{"1.1.1.1", "9.9.9.9"}

// provision carries out pct_create in named phases: allocate, template,
// create, start, network, address (for a dhcp container), apt_update,
// apt_install and post_install. The
// commands follow the plan's summary steps, with the vmid and template
// filled in, a DNS gate before apt, retries, and post_install under set -e.
func (x *execution) provision(ctx context.Context, p policy.PctCreateParams) {
	d := x.a.cfg.ProvisionTimeout
	ctx, cancel := context.WithTimeoutCause(ctx, d, fmt.Errorf("%w: provisioning ran past its %s limit", ErrTimedOut, d))
	defer cancel()

	steps := x.plan.Steps
	if !provisionShaped(steps, p) {
		x.fail(tasks.StatusFailed, "create", -1, x.a.now(), "", "The pct_create plan does not have the shape this actuator knows, so nothing ran; the actuator and the bot may run different versions.")
		return
	}

	vmid, tmpl, ok := x.create(ctx, p, steps[0])
	if !ok {
		return
	}
	defer func() {
		if x.res.Status != "" {
			x.note("Container %d was created and is left as it is for inspection; request pct_destroy on lxc:%d if you do not want it.", vmid, vmid)
		}
	}()
	x.res.Created = &tasks.CreatedContainer{VMID: vmid, Host: x.order.Target.Host, Hostname: p.Hostname, IP: p.IP}
	x.note("Created container %d (%s) on %s from %s, with address %s.", vmid, p.Hostname, x.order.Target.Host, tmpl, p.IP)

	if !x.phase(ctx, "start", fill(steps[1], vmid, tmpl)) {
		return
	}
	if !x.networkGate(ctx, vmid, tmpl) {
		return
	}
	if p.IP == policy.DefaultIP {
		if !x.leasedAddress(ctx, vmid) {
			return
		}
	}
	if len(p.Services) > 0 {
		if !x.retried(ctx, "apt_update", fill(steps[2], vmid, tmpl), aptAttempts) {
			return
		}
		if !x.retried(ctx, "apt_install", fill(steps[3], vmid, tmpl), aptAttempts) {
			return
		}
	}
	if p.PostInstall == "" {
		x.note("No health check ran: post_install was empty, so nothing confirmed that the service answers. End post_install with a check such as curl -fsS http://localhost/.")
		return
	}
	// set -e, so a failing command anywhere in the script fails the phase
	// instead of being hidden by a later one.
	cmd := "pct exec " + strconv.Itoa(vmid) + " -- sh -e -c " + policy.ShellQuote(p.PostInstall)
	x.phase(ctx, "post_install", cmd)
}

// provisionShaped reports whether steps are the summary a pct_create plan
// of p has: create, start, then the pct exec phases p asks for.
func provisionShaped(steps []string, p policy.PctCreateParams) bool {
	want := 2
	if len(p.Services) > 0 {
		want += 2
	}
	if p.PostInstall != "" {
		want++
	}
	shaped := len(steps) == want && strings.HasPrefix(steps[0], "pct create ") && strings.HasPrefix(steps[1], "pct start ")
	for _, s := range steps[min(2, len(steps)):] {
		shaped = shaped && strings.HasPrefix(s, "pct exec ")
	}
	return shaped
}

// create runs the create step, allocating a vmid and picking a template
// when p names none, and allocating again when another vmid was taken
// meanwhile. ok is false when it failed, the failure recorded.
func (x *execution) create(ctx context.Context, p policy.PctCreateParams, step string) (vmid int, tmpl string, ok bool) {
	tmpl = p.Template
	for try := 1; ; try++ {
		vmid = p.VMID
		if vmid == 0 {
			if vmid, ok = x.allocate(ctx); !ok {
				return 0, "", false
			}
		}
		if tmpl == "" || policy.ValidateTemplateName(tmpl) == nil {
			if tmpl, ok = x.pickTemplate(ctx, p.Template); !ok {
				return 0, "", false
			}
		}
		start := x.a.now()
		code, err := x.attempt(ctx, "create", fill(step, vmid, tmpl), nil)
		if err == nil && code != 0 && p.VMID == 0 && try < allocateAttempts && strings.Contains(x.why(), "already exists") {
			x.addPhase("create", tasks.StatusFailed, code, start, fmt.Sprintf("vmid %d was taken meanwhile; allocating another", vmid))
			continue
		}
		return vmid, tmpl, x.record("create", start, code, err, fmt.Sprintf("container %d from %s", vmid, tmpl))
	}
}

// fill puts the vmid and template the actuator picked into a summary step.
// The placeholders only stand where a vmid or template goes, never inside
// the quoted post_install, which fill is not used for.
func fill(step string, vmid int, tmpl string) string {
	step = strings.Replace(step, policy.VMIDPlaceholder, strconv.Itoa(vmid), 1)
	return strings.Replace(step, policy.TemplatePlaceholder, tmpl, 1)
}

// allocate asks the cluster for the next free vmid.
func (x *execution) allocate(ctx context.Context) (int, bool) {
	start := x.a.now()
	var out bytes.Buffer
	code, err := x.attempt(ctx, "allocate", "pvesh get /cluster/nextid", &out)
	if err != nil || code != 0 {
		return 0, x.record("allocate", start, code, err, "")
	}
	s := strings.Trim(strings.TrimSpace(out.String()), `"`)
	vmid, err := strconv.Atoi(s)
	if err == nil {
		err = policy.ValidateVMID(vmid)
	}
	if err != nil {
		x.fail(tasks.StatusFailed, "allocate", code, start, "", fmt.Sprintf("allocate failed: pvesh returned %q, which is not a free vmid", s))
		return 0, false
	}
	x.addPhase("allocate", tasks.StatusSucceeded, code, start, "vmid "+strconv.Itoa(vmid))
	return vmid, true
}

// templateRE matches the volume id of a template of family (debian-13,
// say), or of any Debian standard template when family is empty, and
// captures its version and build, as pveam names them:
// debian-12-standard_12.7-1_amd64.tar.zst,
// alpine-3.20-default_20240908_amd64.tar.xz.
func templateRE(family string) *regexp.Regexp {
	name := `debian-\d+`
	if family != "" {
		name = regexp.QuoteMeta(family)
	}
	return regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._-]*:vztmpl/` + name + `-[a-z]+_(\d+(?:\.\d+)*)(?:-(\d+))?_amd64\.tar\.(?:zst|gz|xz)$`)
}

// pickTemplate chooses the newest template of family (a policy template
// name such as debian-13; empty for Debian's standard templates) on the
// first active storage that holds templates, as pvesm lists them. When
// there is none, the failure lists the templates the storage has.
func (x *execution) pickTemplate(ctx context.Context, family string) (string, bool) {
	start := x.a.now()
	var out bytes.Buffer
	code, err := x.attempt(ctx, "template", "pvesm status --content vztmpl", &out)
	if err != nil || code != 0 {
		return "", x.record("template", start, code, err, "")
	}
	templateStorage, ok := firstActiveStorage(out.String())
	if !ok {
		x.fail(tasks.StatusFailed, "template", code, start, "", fmt.Sprintf(
			"template failed: no active storage on %s holds container templates (pvesm status --content vztmpl lists none), so there is no template to create from; "+
				"pveam says \"Storage does not support templates!\" of the others. Add the content type Container template to a storage (Datacenter, Storage, Edit, Content), "+
				"download one there (pveam update, then pveam download STORAGE debian-12-standard_<version>_amd64.tar.zst), or name one in the template parameter.",
			x.order.Target.Host))
		return "", false
	}
	out.Reset()
	code, err = x.attempt(ctx, "template", "pveam list "+templateStorage, &out)
	if err != nil || code != 0 {
		return "", x.record("template", start, code, err, "")
	}
	re := templateRE(family)
	var known []string
	best, bestKey := "", []int(nil)
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || policy.ValidateTemplate(f[0]) != nil {
			continue
		}
		_, file, _ := strings.Cut(f[0], ":vztmpl/")
		known = append(known, file)
		m := re.FindStringSubmatch(f[0])
		if m == nil {
			continue
		}
		key := versionKey(m[1] + "." + cmp.Or(m[2], "0"))
		if best == "" || slices.Compare(key, bestKey) > 0 {
			best, bestKey = f[0], key
		}
	}
	if best == "" {
		what := "Debian standard"
		if family != "" {
			what = family
		}
		has := "none"
		if len(known) > 0 {
			has = strings.Join(known, ", ")
		}
		x.fail(tasks.StatusFailed, "template", code, start, "", fmt.Sprintf(
			"template failed: storage %s on %s has no %s template (it has: %s). Download one on the host (pveam update, then pveam available, then pveam download %s <template>), or name one it has.",
			templateStorage, x.order.Target.Host, what, has, templateStorage))
		return "", false
	}
	x.addPhase("template", tasks.StatusSucceeded, code, start, best)
	return best, true
}

// firstActiveStorage reads pvesm status (pve-storage's $print_status: a
// header, then one storage a line, sorted by name: name, type, status,
// sizes) and returns the first storage whose status is active.
func firstActiveStorage(status string) (string, bool) {
	for i, line := range strings.Split(status, "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 3 {
			continue
		}
		if f[2] == "active" && policy.ValidateStorage(f[0]) == nil {
			return f[0], true
		}
	}
	return "", false
}

// leasedAddress reads the address a dhcp container was leased from its
// node (pve-container's interfaces: what `ip a` shows inside it), so
// probes reach it without the node resolving its name. The lease may
// need a moment after start; without one, the container is kept and the
// note says so.
func (x *execution) leasedAddress(ctx context.Context, vmid int) bool {
	const phase = "address"
	start := x.a.now()
	node := cmp.Or(x.order.Target.Node, x.order.Target.Host)
	cmd := fmt.Sprintf("pvesh get /nodes/%s/lxc/%d/interfaces --output-format json", node, vmid)
	for i := 1; ; i++ {
		var out bytes.Buffer
		code, err := x.attempt(ctx, phase, cmd, &out)
		if err != nil {
			return x.record(phase, start, code, err, "")
		}
		if addr, ok := leased(out.Bytes()); code == 0 && ok {
			x.res.Created.Address = addr
			x.addPhase(phase, tasks.StatusSucceeded, 0, start, addr)
			x.note("Container %d was leased %s; probes reach it there.", vmid, addr)
			return true
		}
		if i == addressAttempts {
			x.addPhase(phase, tasks.StatusSucceeded, code, start, "no address seen")
			x.note("Container %d showed no IPv4 address on eth0 after %d tries, so probes reach it by its host name, which the node must resolve. Give it a static ip, or a DHCP reservation and then its address in the seed.", vmid, i)
			return true
		}
		if err := x.sleep(ctx); err != nil {
			return x.record(phase, start, code, err, "")
		}
	}
}

// leased reads eth0's IPv4 address, with its prefix, from the JSON of
// pvesh get /nodes/N/lxc/V/interfaces: a list of {name, hwaddr, inet,
// inet6}, or null when the container does not run.
func leased(data []byte) (string, bool) {
	var ifaces []struct {
		Name string `json:"name"`
		Inet string `json:"inet"`
	}
	if json.Unmarshal(data, &ifaces) != nil {
		return "", false
	}
	for _, i := range ifaces {
		if i.Name != "eth0" {
			continue
		}
		p, err := netip.ParsePrefix(i.Inet)
		if err != nil || !p.Addr().Is4() || p.Addr().IsLoopback() || p.Addr().IsLinkLocalUnicast() || p.Addr().IsUnspecified() {
			return "", false
		}
		return p.String(), true
	}
	return "", false
}

// versionKey reads a dotted version as numbers for comparison.
func versionKey(v string) []int {
	var key []int
	for _, part := range strings.Split(v, ".") {
		n, _ := strconv.Atoi(part)
		key = append(key, n)
	}
	return key
}

// networkGate waits until names resolve inside the container, which also
// shows that it reaches its resolver. If its resolver never answers, the
// gate points it at public resolvers and says so; if even they do not
// answer, the container has no usable network and provisioning stops here,
// before apt fails in a less helpful way.
func (x *execution) networkGate(ctx context.Context, vmid int, tmpl string) bool {
	const phase = "network"
	start := x.a.now()
	name := "deb.debian.org"
	if strings.Contains(tmpl, "ubuntu") {
		name = "archive.ubuntu.com"
	}
	check := fmt.Sprintf("pct exec %d -- getent hosts %s", vmid, name)
	ok, code, err := x.resolves(ctx, name, check, dnsAttempts)
	if err != nil {
		return x.record(phase, start, code, err, "")
	}
	if ok {
		x.addPhase(phase, tasks.StatusSucceeded, 0, start, name+" resolves inside the container")
		return true
	}

	var resolv bytes.Buffer
	code, err = x.attempt(ctx, phase, fmt.Sprintf("pct exec %d -- cat /etc/resolv.conf", vmid), &resolv)
	if err != nil {
		return x.record(phase, start, code, err, "")
	}
	old := cmp.Or(strings.Join(nameservers(resolv.String()), ", "), "none configured")
	public := strings.Join(publicResolvers, " and ")
	x.out.WriteString(fmt.Sprintf("== network: the resolver (%s) does not answer; switching to %s\n", old, public))
	var conf strings.Builder
	for _, ns := range publicResolvers {
		conf.WriteString(`nameserver ` + ns + `\n`)
	}
	// Proxmox rewrites a container's resolv.conf at start unless told not to.
	script := "printf '" + conf.String() + "' > /etc/resolv.conf && touch /etc/.pve-ignore.resolv.conf"
	code, err = x.attempt(ctx, phase, fmt.Sprintf("pct exec %d -- sh -c %s", vmid, policy.ShellQuote(script)), nil)
	if err != nil || code != 0 {
		return x.record(phase, start, code, err, "could not rewrite /etc/resolv.conf")
	}
	ok, code, err = x.resolves(ctx, name, check, healedAttempts)
	if err != nil {
		return x.record(phase, start, code, err, "")
	}
	if !ok {
		x.fail(tasks.StatusFailed, phase, code, start, "no DNS, even through public resolvers", fmt.Sprintf(
			"network failed: %s does not resolve inside container %d, neither through its resolver (%s) nor through %s, so apt could not work. The container probably has no usable network: check its address, gateway and bridge.",
			name, vmid, old, public))
		return false
	}
	x.note("The container's resolver (%s) did not answer, so the actuator rewrote /etc/resolv.conf to use %s, and created /etc/.pve-ignore.resolv.conf so Proxmox keeps it. Fix that resolver, or set the container's nameserver, if it should use a local one.", old, public)
	x.addPhase(phase, tasks.StatusSucceeded, 0, start, "resolver "+old+" was dead; now "+public)
	return true
}

// resolves runs a DNS check up to attempts times, RetryDelay apart.
func (x *execution) resolves(ctx context.Context, name, check string, attempts int) (bool, int, error) {
	var code int
	for i := 1; i <= attempts; i++ {
		var err error
		code, err = x.attempt(ctx, "network", check, nil)
		if err != nil {
			return false, code, err
		}
		if code == 0 {
			return true, 0, nil
		}
		x.out.WriteString(fmt.Sprintf("== network: %s does not resolve (attempt %d of %d, exit status %d)\n", name, i, attempts, code))
		if i < attempts {
			if err := x.sleep(ctx); err != nil {
				return false, code, err
			}
		}
	}
	return false, code, nil
}

// retried runs a command as a phase, trying again after a failure up to
// attempts times in all.
func (x *execution) retried(ctx context.Context, name, cmd string, attempts int) bool {
	start := x.a.now()
	var code, n int
	var err error
	for n = 1; ; n++ {
		code, err = x.attempt(ctx, name, cmd, nil)
		if err != nil || code == 0 || n == attempts {
			break
		}
		x.out.WriteString(fmt.Sprintf("== %s: attempt %d of %d exited with status %d; trying again\n", name, n, attempts, code))
		if err = x.sleep(ctx); err != nil {
			break
		}
	}
	note := ""
	if n > 1 {
		note = fmt.Sprintf("%d attempts", n)
	}
	ok := x.record(name, start, code, err, note)
	if !ok && err == nil && n > 1 {
		x.res.Error += fmt.Sprintf(" (after %d attempts)", n)
	}
	return ok
}

// sleep waits RetryDelay. If ctx ends first, the next attempt was never
// sent, and the error says so.
func (x *execution) sleep(ctx context.Context) error {
	t := time.NewTimer(x.a.cfg.RetryDelay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNotSent, context.Cause(ctx))
	}
}

// nameservers lists the resolvers in a resolv.conf.
func nameservers(resolv string) []string {
	var out []string
	for _, line := range strings.Split(resolv, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "nameserver" {
			out = append(out, f[1])
		}
	}
	return out
}
