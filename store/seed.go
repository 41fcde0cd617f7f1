package store

import (
	"bytes"
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

	"gopkg.in/yaml.v3"

	"github.com/nomoshq/nomos/policy"
)

// Seed is the validated content of a seed directory: the fleet, its checks,
// policy overrides, knowledge and runbooks. Every reference in it resolves.
type Seed struct {
	Hosts         []SeedHost
	Relationships []SeedRelationship
	Checks        []SeedCheck
	Policy        []SeedPolicy
	Knowledge     []SeedDoc
	Runbooks      []Runbook
}

// SeedHost is a Proxmox node and the containers it runs.
type SeedHost struct {
	Name       string          `yaml:"name"`
	SSH        string          `yaml:"ssh"`
	Node       string          `yaml:"node"`
	Cores      int             `yaml:"cores"`
	MemoryMB   int             `yaml:"memory_mb"`
	Storage    string          `yaml:"storage"`
	Containers []SeedContainer `yaml:"containers"`
	Line       int             `yaml:"-"`
	File       string          `yaml:"-"`
}

// SeedContainer is an LXC on a host.
type SeedContainer struct {
	VMID     int           `yaml:"vmid"`
	Hostname string        `yaml:"hostname"`
	IP       string        `yaml:"ip"`
	Gateway  string        `yaml:"gateway"`
	Cores    int           `yaml:"cores"`
	MemoryMB int           `yaml:"memory_mb"`
	DiskGB   int           `yaml:"disk_gb"`
	Status   string        `yaml:"status"`
	Services []SeedService `yaml:"services"`
	Line     int           `yaml:"-"`
}

// SeedService is a systemd service inside a container.
type SeedService struct {
	Name       string `yaml:"name"`
	Unit       string `yaml:"unit"`
	Port       int    `yaml:"port"`
	HealthPath string `yaml:"health_path"`
	Line       int    `yaml:"-"`
}

// SeedRelationship is an edge between two entities named by slug.
type SeedRelationship struct {
	From string `yaml:"from"`
	To   string `yaml:"to"`
	Type string `yaml:"type"`
	Line int    `yaml:"-"`
	File string `yaml:"-"`
}

// SeedCheck is a probe definition. Target is the entity observed; results
// belong to it, never to the check's own bookkeeping entity.
type SeedCheck struct {
	Slug     string         `yaml:"slug"`
	Target   string         `yaml:"target"`
	Kind     string         `yaml:"kind"`
	Interval int            `yaml:"interval_seconds"`
	Spec     map[string]any `yaml:"spec"`
	Enabled  *bool          `yaml:"enabled"`
	Line     int            `yaml:"-"`
	File     string         `yaml:"-"`
}

// SeedPolicy overrides the risk class of an action on one entity.
type SeedPolicy struct {
	Target    string `yaml:"target"`
	Action    string `yaml:"action"`
	RiskClass string `yaml:"risk_class"`
	Reason    string `yaml:"reason"`
	Line      int    `yaml:"-"`
	File      string `yaml:"-"`
}

// SeedDoc is a knowledge document linked to entities.
type SeedDoc struct {
	Slug     string   `yaml:"slug"`
	Title    string   `yaml:"title"`
	Kind     string   `yaml:"kind"`
	Tags     []string `yaml:"tags"`
	Entities []string `yaml:"entities"`
	Body     string   `yaml:"body"`
	Line     int      `yaml:"-"`
	File     string   `yaml:"-"`
}

// SeedError locates a problem in a seed file.
type SeedError struct {
	File string
	Line int
	Msg  string
}

func (e *SeedError) Error() string {
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
	dnsLabel      = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	unitName      = regexp.MustCompile(`^[A-Za-z0-9:_.@-]+\.(service|socket|timer|target|mount)$`)
	slugPattern   = regexp.MustCompile(`^[a-z][a-z0-9_]*:[A-Za-z0-9][A-Za-z0-9._-]*$`)
	docSlug       = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	relTypes      = []string{"hosts", "runs", "depends_on", "routes_to"}
	riskClasses   = []string{"read_only", "reversible_low", "config_mutation", "destructive"}
	docKinds      = []string{"doc", "investigation", "howto", "decision"}
	targetTypes   = []string{"host", "lxc", "service"}
	containerStat = []string{"running", "stopped"}
)

// LoadSeed reads every *.yaml file at the top of fsys, in name order, and
// validates the result. The first problem found is returned as a *SeedError
// that names the file and line.
func LoadSeed(fsys fs.FS) (*Seed, error) {
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
		Hosts         []SeedHost         `yaml:"hosts"`
		Relationships []SeedRelationship `yaml:"relationships"`
		Checks        []SeedCheck        `yaml:"checks"`
		Policy        []SeedPolicy       `yaml:"policy"`
		Knowledge     []SeedDoc          `yaml:"knowledge"`
		Runbooks      []Runbook          `yaml:"runbooks"`
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

// yamlError turns a yaml.v3 error into a SeedError with the line it names.
func yamlError(file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n  ")
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = strings.TrimPrefix(msg[strings.Index(msg, m[0])+len(m[0]):], ": ")
	}
	return &SeedError{File: file, Line: line, Msg: msg}
}

func (s *Seed) validate() error {
	slugs := map[string]bool{}
	add := func(file string, line int, slug string) error {
		if slugs[slug] {
			return &SeedError{File: file, Line: line, Msg: fmt.Sprintf("duplicate entity %s", slug)}
		}
		slugs[slug] = true
		return nil
	}
	for _, h := range s.Hosts {
		errf := func(line int, format string, args ...any) error {
			return &SeedError{File: h.File, Line: line, Msg: fmt.Sprintf(format, args...)}
		}
		if !dnsLabel.MatchString(h.Name) {
			return errf(h.Line, "host name %q: want a DNS label (a-z, 0-9, -)", h.Name)
		}
		if h.SSH != "" {
			if _, err := netip.ParseAddrPort(h.SSH); err != nil {
				return errf(h.Line, "host %s: ssh %q: want ip:port", h.Name, h.SSH)
			}
		}
		if err := add(h.File, h.Line, "host:"+h.Name); err != nil {
			return err
		}
		for _, c := range h.Containers {
			if c.VMID < 100 || c.VMID > 999999999 {
				return errf(c.Line, "container vmid %d: want 100..999999999", c.VMID)
			}
			if !dnsLabel.MatchString(c.Hostname) {
				return errf(c.Line, "container %d hostname %q: want a DNS label", c.VMID, c.Hostname)
			}
			if c.IP != "dhcp" {
				if _, err := netip.ParsePrefix(c.IP); err != nil {
					return errf(c.Line, "container %d ip %q: want CIDR such as 10.0.0.5/24, or dhcp", c.VMID, c.IP)
				}
			}
			if c.Gateway != "" {
				if _, err := netip.ParseAddr(c.Gateway); err != nil {
					return errf(c.Line, "container %d gateway %q: want an IP address", c.VMID, c.Gateway)
				}
			}
			if c.Status != "" && !slices.Contains(containerStat, c.Status) {
				return errf(c.Line, "container %d status %q: want running or stopped", c.VMID, c.Status)
			}
			if c.Cores < 0 || c.MemoryMB < 0 || c.DiskGB < 0 {
				return errf(c.Line, "container %d: cores, memory_mb and disk_gb must not be negative", c.VMID)
			}
			if err := add(h.File, c.Line, fmt.Sprintf("lxc:%d", c.VMID)); err != nil {
				return err
			}
			for _, svc := range c.Services {
				if !dnsLabel.MatchString(svc.Name) {
					return errf(svc.Line, "service name %q: want a DNS label", svc.Name)
				}
				if svc.Unit != "" && !unitName.MatchString(svc.Unit) {
					return errf(svc.Line, "service %s unit %q: want a systemd unit name such as %s.service", svc.Name, svc.Unit, svc.Name)
				}
				if svc.Port < 0 || svc.Port > 65535 {
					return errf(svc.Line, "service %s port %d: want 0..65535", svc.Name, svc.Port)
				}
				if svc.HealthPath != "" && !strings.HasPrefix(svc.HealthPath, "/") {
					return errf(svc.Line, "service %s health_path %q: want a path starting with /", svc.Name, svc.HealthPath)
				}
				if err := add(h.File, svc.Line, "service:"+svc.Name); err != nil {
					return err
				}
			}
		}
	}
	ref := func(file string, line int, what, slug string) error {
		if !slugPattern.MatchString(slug) {
			return &SeedError{File: file, Line: line, Msg: fmt.Sprintf("%s %q: want a slug such as service:jellyfin", what, slug)}
		}
		if !slugs[slug] {
			return &SeedError{File: file, Line: line, Msg: fmt.Sprintf("%s %s: no such entity in the seed", what, slug)}
		}
		return nil
	}
	for _, r := range s.Relationships {
		if err := ref(r.File, r.Line, "relationship from", r.From); err != nil {
			return err
		}
		if err := ref(r.File, r.Line, "relationship to", r.To); err != nil {
			return err
		}
		if !slices.Contains(relTypes, r.Type) {
			return &SeedError{File: r.File, Line: r.Line, Msg: fmt.Sprintf("relationship type %q: want one of %s", r.Type, strings.Join(relTypes, ", "))}
		}
		if r.From == r.To {
			return &SeedError{File: r.File, Line: r.Line, Msg: "relationship from and to are the same entity"}
		}
	}
	checkSlugs := map[string]bool{}
	for _, c := range s.Checks {
		if !docSlug.MatchString(c.Slug) {
			return &SeedError{File: c.File, Line: c.Line, Msg: fmt.Sprintf("check slug %q: want lowercase words joined by -", c.Slug)}
		}
		if checkSlugs[c.Slug] {
			return &SeedError{File: c.File, Line: c.Line, Msg: fmt.Sprintf("duplicate check %s", c.Slug)}
		}
		checkSlugs[c.Slug] = true
		if err := ref(c.File, c.Line, "check target", c.Target); err != nil {
			return err
		}
		if !policy.IsCheckKind(c.Kind) {
			return &SeedError{File: c.File, Line: c.Line, Msg: fmt.Sprintf("check kind %q: want one of %s", c.Kind, strings.Join(policy.CheckKinds(), ", "))}
		}
		if c.Interval != 0 && c.Interval < 5 {
			return &SeedError{File: c.File, Line: c.Line, Msg: fmt.Sprintf("check %s interval_seconds %d: want at least 5", c.Slug, c.Interval)}
		}
	}
	for _, p := range s.Policy {
		if err := ref(p.File, p.Line, "policy target", p.Target); err != nil {
			return err
		}
		if !slices.Contains(riskClasses, p.RiskClass) {
			return &SeedError{File: p.File, Line: p.Line, Msg: fmt.Sprintf("policy risk_class %q: want one of %s", p.RiskClass, strings.Join(riskClasses, ", "))}
		}
	}
	docSlugs := map[string]bool{}
	for _, d := range s.Knowledge {
		if !docSlug.MatchString(d.Slug) || docSlugs[d.Slug] {
			return &SeedError{File: d.File, Line: d.Line, Msg: fmt.Sprintf("knowledge slug %q: want a unique lowercase slug", d.Slug)}
		}
		docSlugs[d.Slug] = true
		if strings.TrimSpace(d.Title) == "" || strings.TrimSpace(d.Body) == "" {
			return &SeedError{File: d.File, Line: d.Line, Msg: fmt.Sprintf("knowledge %s: title and body are required", d.Slug)}
		}
		if d.Kind != "" && !slices.Contains(docKinds, d.Kind) {
			return &SeedError{File: d.File, Line: d.Line, Msg: fmt.Sprintf("knowledge %s kind %q: want one of %s", d.Slug, d.Kind, strings.Join(docKinds, ", "))}
		}
		for _, e := range d.Entities {
			if err := ref(d.File, d.Line, "knowledge entity", e); err != nil {
				return err
			}
		}
	}
	rbSlugs := map[string]bool{}
	for _, r := range s.Runbooks {
		if !docSlug.MatchString(r.Slug) || rbSlugs[r.Slug] {
			return &SeedError{File: r.File, Line: r.Line, Msg: fmt.Sprintf("runbook slug %q: want a unique lowercase slug", r.Slug)}
		}
		rbSlugs[r.Slug] = true
		if !slices.Contains(targetTypes, r.TargetType) {
			return &SeedError{File: r.File, Line: r.Line, Msg: fmt.Sprintf("runbook %s target_type %q: want one of %s", r.Slug, r.TargetType, strings.Join(targetTypes, ", "))}
		}
		if len(r.Triggers) == 0 || len(r.Steps) == 0 {
			return &SeedError{File: r.File, Line: r.Line, Msg: fmt.Sprintf("runbook %s: needs at least one trigger and one step", r.Slug)}
		}
		for _, st := range r.Steps {
			if st.Action == "" {
				return &SeedError{File: r.File, Line: r.Line, Msg: fmt.Sprintf("runbook %s: every step needs an action", r.Slug)}
			}
		}
	}
	return nil
}

// Slugs lists every entity slug the seed defines, in seed order.
func (s *Seed) Slugs() []string {
	var out []string
	for _, h := range s.Hosts {
		out = append(out, "host:"+h.Name)
		for _, c := range h.Containers {
			out = append(out, fmt.Sprintf("lxc:%d", c.VMID))
			for _, svc := range c.Services {
				out = append(out, "service:"+svc.Name)
			}
		}
	}
	return out
}
