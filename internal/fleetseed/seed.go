package fleetseed

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/nomoshq/nomos/policy"
)

// Seed is the validated content of a seed directory: the fleet, its checks,
// policy overrides, knowledge and runbooks. Every reference in it resolves.
type Seed struct {
	Hosts         []Host
	Relationships []Relationship
	Checks        []Check
	Policy        []Policy
	Knowledge     []Doc
	Runbooks      []Runbook
}

// Host is a Proxmox node and the containers it runs.
type Host struct {
	Name string `yaml:"name"`
	SSH  string `yaml:"ssh"`
	Node string `yaml:"node"`
	// Cluster is the Proxmox cluster the node belongs to, which its
	// containers' vmids are unique in. Nodes of one cluster name the same
	// cluster; a node left without one is standalone, a cluster of one
	// named after the host, since two standalone nodes both count their
	// vmids from 100.
	Cluster string `yaml:"cluster"`
	// Site is the site whose actuator reaches this host; default
	// "default". A site named here for the first time is created.
	Site       string      `yaml:"site"`
	Cores      int         `yaml:"cores"`
	MemoryMB   int         `yaml:"memory_mb"`
	Storage    string      `yaml:"storage"`
	Containers []Container `yaml:"containers"`
	// VMs are the node's QEMU virtual machines. Their vmids share the
	// cluster's space with the containers'.
	VMs  []VM   `yaml:"vms"`
	Line int    `yaml:"-"`
	File string `yaml:"-"`
}

// ClusterName is the host's cluster: Cluster, else the host's own name.
func (h Host) ClusterName() string { return cmp.Or(h.Cluster, h.Name) }

// Container is an LXC on a host.
type Container struct {
	VMID     int       `yaml:"vmid"`
	Hostname string    `yaml:"hostname"`
	IP       string    `yaml:"ip"`
	Gateway  string    `yaml:"gateway"`
	Cores    int       `yaml:"cores"`
	MemoryMB int       `yaml:"memory_mb"`
	DiskGB   int       `yaml:"disk_gb"`
	Status   string    `yaml:"status"`
	Services []Service `yaml:"services"`
	Line     int       `yaml:"-"`
}

// VM is a QEMU virtual machine on a host: vm:<cluster>/<vmid>.
type VM struct {
	VMID int    `yaml:"vmid"`
	Name string `yaml:"name"`
	// IP is where its services answer, for network checks; Nomos never
	// runs commands inside a VM except through its guest agent.
	IP       string `yaml:"ip"`
	Cores    int    `yaml:"cores"`
	MemoryMB int    `yaml:"memory_mb"`
	DiskGB   int    `yaml:"disk_gb"`
	Status   string `yaml:"status"`
	// Agent says the QEMU guest agent is enabled (agent: 1).
	Agent bool `yaml:"agent"`
	// Services answer on IP. They are not entities: Nomos cannot enter a
	// VM to restart one, so it only probes them over the network, through
	// checks on the VM itself (kind http with spec.port).
	Services []Service `yaml:"services"`
	Line     int       `yaml:"-"`
}

// Service is a systemd service inside a container.
type Service struct {
	Name       string `yaml:"name"`
	Unit       string `yaml:"unit"`
	Port       int    `yaml:"port"`
	HealthPath string `yaml:"health_path"`
	Line       int    `yaml:"-"`
}

// Relationship is an edge between two entities named by slug.
type Relationship struct {
	From string `yaml:"from"`
	To   string `yaml:"to"`
	Type string `yaml:"type"`
	Line int    `yaml:"-"`
	File string `yaml:"-"`
}

// Check is a probe definition. Target is the entity observed; results
// belong to it, never to the check's own bookkeeping entity.
type Check struct {
	Slug     string         `yaml:"slug"`
	Target   string         `yaml:"target"`
	Kind     string         `yaml:"kind"`
	Interval int            `yaml:"interval_seconds"`
	Spec     map[string]any `yaml:"spec"`
	Enabled  *bool          `yaml:"enabled"`
	Line     int            `yaml:"-"`
	File     string         `yaml:"-"`
}

// Policy overrides the risk class of an action on one entity.
type Policy struct {
	Target    string `yaml:"target"`
	Action    string `yaml:"action"`
	RiskClass string `yaml:"risk_class"`
	Reason    string `yaml:"reason"`
	Line      int    `yaml:"-"`
	File      string `yaml:"-"`
}

// Doc is a knowledge document linked to entities.
type Doc struct {
	Slug     string   `yaml:"slug"`
	Title    string   `yaml:"title"`
	Kind     string   `yaml:"kind"`
	Tags     []string `yaml:"tags"`
	Entities []string `yaml:"entities"`
	Body     string   `yaml:"body"`
	Line     int      `yaml:"-"`
	File     string   `yaml:"-"`
}

// Runbook is a named plan with the phrases that trigger it, one type from
// the seed file through the database to the bot's command parser. A
// trigger holds "{target}" where the entity's name goes.
type Runbook struct {
	Slug        string   `yaml:"slug"`
	Title       string   `yaml:"title"`
	Description string   `yaml:"description"`
	Triggers    []string `yaml:"triggers"`
	// TargetType is host, lxc or service; a trigger's target of another
	// type does not match.
	TargetType string        `yaml:"target_type"`
	Steps      []RunbookStep `yaml:"steps"`
	// Line and File locate the runbook in its seed file; they are zero for
	// one read from the database.
	Line int    `yaml:"-"`
	File string `yaml:"-"`
}

// RunbookStep is one gated action of a runbook, stored as JSON. String
// params may name the runbook's target as "{{target}}".
type RunbookStep struct {
	Action string         `yaml:"action" json:"action"`
	Params map[string]any `yaml:"params" json:"params,omitempty"`
}

// Error locates a problem in a seed file.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// seedFile is the union of the top-level sections a seed file may hold.
// A section may appear in any file; files are read in name order.
type seedFile struct {
	Hosts         []yaml.Node `yaml:"hosts"`
	Relationships []yaml.Node `yaml:"relationships"`
	Checks        []yaml.Node `yaml:"checks"`
	Policy        []yaml.Node `yaml:"policy"`
	Knowledge     []yaml.Node `yaml:"knowledge"`
	Runbooks      []yaml.Node `yaml:"runbooks"`
}

var (
	slugPattern   = regexp.MustCompile(`^[a-z][a-z0-9_]*:[A-Za-z0-9][A-Za-z0-9._/-]*$`)
	docSlug       = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	relTypes      = []string{"hosts", "runs", "depends_on", "routes_to"}
	riskClasses   = []string{"read_only", "reversible_low", "config_mutation", "destructive"}
	docKinds      = []string{"doc", "investigation", "howto", "decision"}
	targetTypes   = []string{"host", "lxc", "service"}
	containerStat = []string{"running", "stopped"}
)

// Load reads every *.yaml file at the top of fsys, in name order, and
// validates the result. Each problem is a *Error that names the file
// and line; a file that does not parse stops the load, and otherwise every
// problem in the seed is returned at once (errors.Join), so errors.As finds
// the first.
func Load(fsys fs.FS) (*Seed, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, fmt.Errorf("load seed: %w", err)
	}
	if len(names) == 0 {
		return nil, errors.New("load seed: no *.yaml files")
	}
	sort.Strings(names)
	var s Seed
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("load seed: %w", err)
		}
		if err := s.parseFile(name, data); err != nil {
			return nil, err
		}
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

func (s *Seed) parseFile(name string, data []byte) error {
	// A strict typed decode reports unknown keys and wrong types with the
	// file's own line numbers; a second decode into nodes records the line
	// of every item for the semantic checks that follow.
	var typed struct {
		Hosts         []Host         `yaml:"hosts"`
		Relationships []Relationship `yaml:"relationships"`
		Checks        []Check        `yaml:"checks"`
		Policy        []Policy       `yaml:"policy"`
		Knowledge     []Doc          `yaml:"knowledge"`
		Runbooks      []Runbook      `yaml:"runbooks"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&typed); err != nil && !errors.Is(err, io.EOF) {
		return yamlError(name, err)
	}
	var nodes seedFile
	if err := yaml.Unmarshal(data, &nodes); err != nil {
		return yamlError(name, err)
	}
	for i := range typed.Hosts {
		h := &typed.Hosts[i]
		n := &nodes.Hosts[i]
		h.Line, h.File = n.Line, name
		cs := mappingValue(n, "containers")
		for ci := range h.Containers {
			cn := cs.Content[ci]
			h.Containers[ci].Line = cn.Line
			ss := mappingValue(cn, "services")
			for si := range h.Containers[ci].Services {
				h.Containers[ci].Services[si].Line = ss.Content[si].Line
			}
		}
		vs := mappingValue(n, "vms")
		for vi := range h.VMs {
			h.VMs[vi].Line = vs.Content[vi].Line
		}
	}
	for i := range typed.Relationships {
		typed.Relationships[i].Line, typed.Relationships[i].File = nodes.Relationships[i].Line, name
	}
	for i := range typed.Checks {
		typed.Checks[i].Line, typed.Checks[i].File = nodes.Checks[i].Line, name
	}
	for i := range typed.Policy {
		typed.Policy[i].Line, typed.Policy[i].File = nodes.Policy[i].Line, name
	}
	for i := range typed.Knowledge {
		typed.Knowledge[i].Line, typed.Knowledge[i].File = nodes.Knowledge[i].Line, name
	}
	for i := range typed.Runbooks {
		typed.Runbooks[i].Line, typed.Runbooks[i].File = nodes.Runbooks[i].Line, name
	}
	s.Hosts = append(s.Hosts, typed.Hosts...)
	s.Relationships = append(s.Relationships, typed.Relationships...)
	s.Checks = append(s.Checks, typed.Checks...)
	s.Policy = append(s.Policy, typed.Policy...)
	s.Knowledge = append(s.Knowledge, typed.Knowledge...)
	s.Runbooks = append(s.Runbooks, typed.Runbooks...)
	return nil
}

// mappingValue returns the value node under key in a mapping node.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// yamlError turns a YAML decoder error into a Error with the line it names.
func yamlError(file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n  ")
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = strings.TrimPrefix(msg[strings.Index(msg, m[0])+len(m[0]):], ": ")
	}
	return &Error{File: file, Line: line, Msg: msg}
}

func (s *Seed) validate() error {
	v := &seedValidator{slugs: map[string]bool{}, vmids: map[int][]string{}}
	for _, h := range s.Hosts {
		v.host(h)
	}
	for i := range s.Relationships {
		v.relationship(&s.Relationships[i])
	}
	v.checks(s.Checks)
	for i := range s.Policy {
		p := &s.Policy[i]
		v.ref(p.File, p.Line, "policy target", &p.Target)
		if !slices.Contains(riskClasses, p.RiskClass) {
			v.bad(p.File, p.Line, "policy risk_class %q: want one of %s", p.RiskClass, strings.Join(riskClasses, ", "))
		}
	}
	v.knowledge(s.Knowledge)
	v.runbooks(s.Runbooks)
	return errors.Join(v.errs...)
}

// seedValidator collects every problem in a seed, so its author sees all
// of them at once.
type seedValidator struct {
	slugs map[string]bool // entity slugs defined so far
	// vmids lists each vmid's guest slugs, for the short forms lxc:N and
	// vm:N.
	vmids map[int][]string
	errs  []error
}

func (v *seedValidator) bad(file string, line int, format string, args ...any) {
	v.errs = append(v.errs, &Error{File: file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// add defines an entity slug, once.
func (v *seedValidator) add(file string, line int, slug string) {
	if v.slugs[slug] {
		v.bad(file, line, "duplicate entity %s", slug)
	}
	v.slugs[slug] = true
}

// ref checks a reference to an entity the seed defines, and writes a
// container's short form, lxc:N, as the container's slug where the vmid is
// unique in the seed; where it is not, the reference must say which
// cluster. References are checked after every host, so their order in the
// files does not matter.
func (v *seedValidator) ref(file string, line int, what string, slug *string) {
	kind, name, _ := strings.Cut(*slug, ":")
	if policy.IsGuest(policy.TargetType(kind)) {
		if cluster, vmid, err := policy.ParseContainerName(name); err == nil && cluster == "" {
			these := slices.DeleteFunc(slices.Clone(v.vmids[vmid]), func(s string) bool { return !strings.HasPrefix(s, kind+":") })
			switch len(these) {
			case 1:
				*slug = these[0]
			case 0:
			default:
				v.bad(file, line, "%s %s: the vmid is on more than one cluster; write one of %s", what, *slug, strings.Join(these, ", "))
				return
			}
		}
	}
	switch {
	case !slugPattern.MatchString(*slug):
		v.bad(file, line, "%s %q: want a slug such as service:jellyfin", what, *slug)
	case !v.slugs[*slug]:
		v.bad(file, line, "%s %s: no such entity in the seed", what, *slug)
	}
}

func (v *seedValidator) host(h Host) {
	if policy.ValidateHostname(h.Name) != nil {
		v.bad(h.File, h.Line, "host name %q: want a DNS label (a-z, 0-9, -)", h.Name)
	}
	if h.Site != "" && policy.ValidateSiteName(h.Site) != nil {
		v.bad(h.File, h.Line, "host %s: site %q: want a DNS label of at most 32 characters", h.Name, h.Site)
	}
	if h.SSH != "" {
		if _, err := netip.ParseAddrPort(h.SSH); err != nil {
			v.bad(h.File, h.Line, "host %s: ssh %q: want ip:port", h.Name, h.SSH)
		}
	}
	if h.Cluster != "" && policy.ValidateClusterName(h.Cluster) != nil {
		v.bad(h.File, h.Line, "host %s: cluster %q: want a DNS label (a-z, 0-9, -)", h.Name, h.Cluster)
	}
	v.add(h.File, h.Line, "host:"+h.Name)
	for _, c := range h.Containers {
		v.container(h.File, h.ClusterName(), c)
		for _, svc := range c.Services {
			v.service(h.File, svc)
		}
	}
	for _, vm := range h.VMs {
		v.vm(h.File, h.ClusterName(), vm)
	}
}

func (v *seedValidator) vm(file, cluster string, vm VM) {
	if policy.ValidateVMID(vm.VMID) != nil {
		v.bad(file, vm.Line, "vm vmid %d: want %d..%d", vm.VMID, policy.MinVMID, policy.MaxVMID)
	}
	if policy.ValidateHostname(vm.Name) != nil {
		v.bad(file, vm.Line, "vm %d name %q: want a DNS label", vm.VMID, vm.Name)
	}
	if vm.IP != "" {
		if _, err := netip.ParseAddr(vm.IP); err != nil {
			v.bad(file, vm.Line, "vm %d ip %q: want an IP address", vm.VMID, vm.IP)
		}
	}
	if vm.Status != "" && !slices.Contains(containerStat, vm.Status) {
		v.bad(file, vm.Line, "vm %d status %q: want running or stopped", vm.VMID, vm.Status)
	}
	if vm.Cores < 0 || vm.MemoryMB < 0 || vm.DiskGB < 0 {
		v.bad(file, vm.Line, "vm %d: cores, memory_mb and disk_gb must not be negative", vm.VMID)
	}
	slug := policy.GuestSlug(policy.TargetVM, cluster, vm.VMID)
	if v.slugs[slug] || v.slugs[policy.ContainerSlug(cluster, vm.VMID)] {
		v.bad(file, vm.Line, "vm %d: cluster %s has it already (vmids are unique within a cluster, containers and VMs together)", vm.VMID, cluster)
		return
	}
	v.add(file, vm.Line, slug)
	v.vmids[vm.VMID] = append(v.vmids[vm.VMID], slug)
}

func (v *seedValidator) container(file, cluster string, c Container) {
	if policy.ValidateVMID(c.VMID) != nil {
		v.bad(file, c.Line, "container vmid %d: want %d..%d", c.VMID, policy.MinVMID, policy.MaxVMID)
	}
	if policy.ValidateHostname(c.Hostname) != nil {
		v.bad(file, c.Line, "container %d hostname %q: want a DNS label", c.VMID, c.Hostname)
	}
	if c.IP != "dhcp" {
		if _, err := netip.ParsePrefix(c.IP); err != nil {
			v.bad(file, c.Line, "container %d ip %q: want CIDR such as 10.0.0.5/24, or dhcp", c.VMID, c.IP)
		}
	}
	if c.Gateway != "" {
		if _, err := netip.ParseAddr(c.Gateway); err != nil {
			v.bad(file, c.Line, "container %d gateway %q: want an IP address", c.VMID, c.Gateway)
		}
	}
	if c.Status != "" && !slices.Contains(containerStat, c.Status) {
		v.bad(file, c.Line, "container %d status %q: want running or stopped", c.VMID, c.Status)
	}
	if c.Cores < 0 || c.MemoryMB < 0 || c.DiskGB < 0 {
		v.bad(file, c.Line, "container %d: cores, memory_mb and disk_gb must not be negative", c.VMID)
	}
	slug := policy.ContainerSlug(cluster, c.VMID)
	if v.slugs[slug] || v.slugs[policy.GuestSlug(policy.TargetVM, cluster, c.VMID)] {
		v.bad(file, c.Line, "container %d: cluster %s has it already (vmids are unique within a cluster)", c.VMID, cluster)
		return
	}
	v.add(file, c.Line, slug)
	v.vmids[c.VMID] = append(v.vmids[c.VMID], slug)
}

func (v *seedValidator) service(file string, svc Service) {
	if policy.ValidateHostname(svc.Name) != nil {
		v.bad(file, svc.Line, "service name %q: want a DNS label", svc.Name)
	}
	if svc.Unit != "" && policy.ValidateUnit(svc.Unit) != nil {
		v.bad(file, svc.Line, "service %s unit %q: want a systemd unit name such as %s.service", svc.Name, svc.Unit, svc.Name)
	}
	if svc.Port < 0 || svc.Port > 65535 {
		v.bad(file, svc.Line, "service %s port %d: want 0..65535", svc.Name, svc.Port)
	}
	if svc.HealthPath != "" && !strings.HasPrefix(svc.HealthPath, "/") {
		v.bad(file, svc.Line, "service %s health_path %q: want a path starting with /", svc.Name, svc.HealthPath)
	}
	v.add(file, svc.Line, "service:"+svc.Name)
}

func (v *seedValidator) relationship(r *Relationship) {
	v.ref(r.File, r.Line, "relationship from", &r.From)
	v.ref(r.File, r.Line, "relationship to", &r.To)
	if !slices.Contains(relTypes, r.Type) {
		v.bad(r.File, r.Line, "relationship type %q: want one of %s", r.Type, strings.Join(relTypes, ", "))
	}
	if r.From == r.To {
		v.bad(r.File, r.Line, "relationship from and to are the same entity")
	}
}

func (v *seedValidator) checks(checks []Check) {
	slugs := map[string]bool{}
	for i := range checks {
		c := &checks[i]
		if !docSlug.MatchString(c.Slug) {
			v.bad(c.File, c.Line, "check slug %q: want lowercase words joined by -", c.Slug)
		}
		if slugs[c.Slug] {
			v.bad(c.File, c.Line, "duplicate check %s", c.Slug)
		}
		slugs[c.Slug] = true
		v.ref(c.File, c.Line, "check target", &c.Target)
		if !policy.IsCheckKind(c.Kind) {
			v.bad(c.File, c.Line, "check kind %q: want one of %s", c.Kind, strings.Join(policy.CheckKinds(), ", "))
		}
		if c.Interval != 0 && c.Interval < 5 {
			v.bad(c.File, c.Line, "check %s interval_seconds %d: want at least 5", c.Slug, c.Interval)
		}
	}
}

func (v *seedValidator) knowledge(docs []Doc) {
	slugs := map[string]bool{}
	for _, d := range docs {
		if !docSlug.MatchString(d.Slug) || slugs[d.Slug] {
			v.bad(d.File, d.Line, "knowledge slug %q: want a unique lowercase slug", d.Slug)
		}
		slugs[d.Slug] = true
		if strings.TrimSpace(d.Title) == "" || strings.TrimSpace(d.Body) == "" {
			v.bad(d.File, d.Line, "knowledge %s: title and body are required", d.Slug)
		}
		if d.Kind != "" && !slices.Contains(docKinds, d.Kind) {
			v.bad(d.File, d.Line, "knowledge %s kind %q: want one of %s", d.Slug, d.Kind, strings.Join(docKinds, ", "))
		}
		for i := range d.Entities {
			v.ref(d.File, d.Line, "knowledge entity", &d.Entities[i])
		}
	}
}

func (v *seedValidator) runbooks(runbooks []Runbook) {
	slugs := map[string]bool{}
	for _, r := range runbooks {
		if !docSlug.MatchString(r.Slug) || slugs[r.Slug] {
			v.bad(r.File, r.Line, "runbook slug %q: want a unique lowercase slug", r.Slug)
		}
		slugs[r.Slug] = true
		if !slices.Contains(targetTypes, r.TargetType) {
			v.bad(r.File, r.Line, "runbook %s target_type %q: want one of %s", r.Slug, r.TargetType, strings.Join(targetTypes, ", "))
		}
		if len(r.Triggers) == 0 || len(r.Steps) == 0 {
			v.bad(r.File, r.Line, "runbook %s: needs at least one trigger and one step", r.Slug)
		}
		if slices.ContainsFunc(r.Steps, func(st RunbookStep) bool { return st.Action == "" }) {
			v.bad(r.File, r.Line, "runbook %s: every step needs an action", r.Slug)
		}
	}
}

// Slugs lists every entity slug the seed defines, in seed order.
func (s *Seed) Slugs() []string {
	var out []string
	for _, h := range s.Hosts {
		out = append(out, "host:"+h.Name)
		for _, c := range h.Containers {
			out = append(out, policy.ContainerSlug(h.ClusterName(), c.VMID))
			for _, svc := range c.Services {
				out = append(out, "service:"+svc.Name)
			}
		}
		for _, vm := range h.VMs {
			out = append(out, policy.GuestSlug(policy.TargetVM, h.ClusterName(), vm.VMID))
		}
	}
	return out
}
