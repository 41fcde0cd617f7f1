package policy

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Params is the validated parameter set of one action. The concrete types are
// the *Params structs of this package, as values; a type switch tells them
// apart. Obtain one from ParseParams or ValidateParams so it is normalised
// and checked.
type Params interface {
	// Action names the catalogue action these parameters belong to.
	Action() Action
	// check returns a normalised copy (defaults filled in) and every problem.
	check() (Params, []*ParamError)
}

// Limits on free-form shell, in bytes.
const (
	MaxCommandLen     = 16 << 10
	MaxPostInstallLen = 64 << 10
)

// Defaults a pct_create leaves out.
const (
	DefaultCores   = 1
	DefaultMemory  = 512 // MB
	DefaultDiskGB  = 8
	DefaultIP      = "dhcp"
	DefaultStorage = "local-lvm"
	DefaultBridge  = "vmbr0"
)

// SystemctlVerb is a verb the systemctl action may run.
type SystemctlVerb string

// The systemctl verbs.
const (
	VerbEnable  SystemctlVerb = "enable"
	VerbDisable SystemctlVerb = "disable"
	VerbReload  SystemctlVerb = "reload"
	VerbStart   SystemctlVerb = "start"
	VerbStop    SystemctlVerb = "stop"
	VerbRestart SystemctlVerb = "restart"
)

// AptMode says whether apt_upgrade only lists upgrades or installs them.
type AptMode string

// The apt_upgrade modes.
const (
	AptAudit   AptMode = "audit"
	AptUpgrade AptMode = "upgrade"
)

// RestartParams are the parameters of restart: none. The unit comes from
// the service target.
type RestartParams struct{}

// SystemctlParams are the parameters of systemctl.
type SystemctlParams struct {
	// Verb is one of enable, disable, reload, start, stop, restart.
	Verb SystemctlVerb `json:"verb"`
	// Unit is the systemd unit. Required for an lxc target; for a service
	// target it may be omitted, and if given must be the service's unit.
	// A bare name gains ".service".
	Unit string `json:"unit,omitempty"`
}

// PctExecParams are the parameters of pct_exec.
type PctExecParams struct {
	// Command is a shell script run by sh -c inside the container.
	Command string `json:"command"`
}

// AptUpgradeParams are the parameters of apt_upgrade.
type AptUpgradeParams struct {
	// Mode is audit (the default: refresh lists and show what would
	// change) or upgrade.
	Mode AptMode `json:"mode,omitempty"`
}

// PctCreateParams are the parameters of pct_create. Zero values mean the
// documented defaults, which ValidateParams fills in so the plan shows them.
type PctCreateParams struct {
	// VMID is the new container's id; 0 means the next free id, chosen at
	// run time.
	VMID int `json:"vmid,omitempty"`
	// Hostname is the container's hostname, a DNS label. Required.
	Hostname string `json:"hostname"`
	// Cores is the number of CPU cores, 1 to 128 (default 1).
	Cores int `json:"cores,omitempty"`
	// Memory is the memory in MB, 16 to 1048576 (default 512).
	Memory int `json:"memory,omitempty"`
	// DiskGB is the root disk size in GB, 1 to 65536 (default 8).
	DiskGB int `json:"disk_gb,omitempty"`
	// IP is "dhcp" (the default) or an IPv4 CIDR such as 192.168.8.50/24.
	IP string `json:"ip,omitempty"`
	// GW is the IPv4 gateway; required with a static IP, inside its prefix;
	// refused with dhcp.
	GW string `json:"gw,omitempty"`
	// Storage is the Proxmox storage for the root disk (default local-lvm).
	Storage string `json:"storage,omitempty"`
	// Bridge is the bridge for eth0 (default vmbr0).
	Bridge string `json:"bridge,omitempty"`
	// Template is a template volume id, or a template family such as
	// debian-13 or ubuntu-24.04 (ValidateTemplateName) whose newest
	// template on the host is chosen at run time; empty means the newest
	// Debian template there.
	Template string `json:"template,omitempty"`
	// Nameserver is an IPv4 resolver for the container; empty means the
	// host's or DHCP's.
	Nameserver string `json:"nameserver,omitempty"`
	// Services are Debian packages to install, such as docker.io.
	Services []string `json:"services,omitempty"`
	// PostInstall is a shell script run by sh -c inside the container after
	// the packages; it should end with a health check.
	PostInstall string `json:"post_install,omitempty"`
	// Privileged makes a privileged container; the default is unprivileged.
	Privileged bool `json:"privileged,omitempty"`
	// Nesting enables the nesting feature (features: nesting=1). It is on
	// by default for an unprivileged container, as the Proxmox web
	// interface sets it: without it systemd 252 and later (Debian 12 and
	// 13) warn at start and sandboxed units misbehave. Docker needs it too.
	// Off by default for a privileged container, where the web interface
	// does not offer it. ValidateParams fills it in.
	Nesting *bool `json:"nesting,omitempty"`
	// Onboot starts the container when its node boots (default true).
	// ValidateParams fills it in.
	Onboot *bool `json:"onboot,omitempty"`
	// Description is the container's notes in Proxmox: who asked for it,
	// through which execution and why (see CreateDescription). Nomos
	// writes it when it makes the plan; one line, see ValidateDescription.
	Description string `json:"description,omitempty"`
}

// PctStatusParams are the parameters of pct_status: none.
type PctStatusParams struct{}

// PctStartParams are the parameters of pct_start: none.
type PctStartParams struct{}

// PctStopParams are the parameters of pct_stop: none.
type PctStopParams struct{}

// PctRebootParams are the parameters of pct_reboot: none.
type PctRebootParams struct{}

// GuestShutdownParams are the parameters of guest_shutdown.
type GuestShutdownParams struct {
	// Timeout is how long, in seconds, qm or pct shutdown waits for the
	// guest to go before it fails; 0 means DefaultShutdownTimeout.
	Timeout int `json:"timeout,omitempty"`
}

// DefaultShutdownTimeout is guest_shutdown's wait, qm shutdown's own default.
const DefaultShutdownTimeout = 60

// MaxShutdownTimeout bounds guest_shutdown's wait, below the actuator's
// command timeout.
const MaxShutdownTimeout = 600

// PctSnapshotParams are the parameters of pct_snapshot.
type PctSnapshotParams struct {
	// Name is the snapshot name. It may be empty when parsed; the caller
	// fills it (see SnapshotName) before rendering.
	Name string `json:"name,omitempty"`
	// VMState also saves a running VM's RAM, so a rollback resumes it
	// running; the snapshot then needs the VM's memory size in storage.
	// VMs only.
	VMState bool `json:"vmstate,omitempty"`
}

// PctRollbackParams are the parameters of pct_rollback.
type PctRollbackParams struct {
	// Name is the snapshot to roll back to. Required.
	Name string `json:"name"`
	// Discard are the snapshots newer than Name that are deleted first,
	// newest first: ZFS rolls back only to the newest snapshot. The
	// planner fills it from the container's storage and snapshots, so
	// the card names what the rollback destroys.
	Discard []string `json:"discard,omitempty"`
}

// MaxDiscard bounds the snapshots one rollback may delete first.
const MaxDiscard = 32

// PctDestroyParams are the parameters of pct_destroy.
type PctDestroyParams struct {
	// Purge also removes the container from backup jobs, replication and
	// HA configuration.
	Purge bool `json:"purge,omitempty"`
}

// Lines of a journal tail_log reads.
const (
	DefaultLogLines = 50
	// MaxLogLines is as many lines as an execution's result keeps.
	MaxLogLines = 100
)

// TailLogParams are the parameters of tail_log.
type TailLogParams struct {
	// Lines is how many of the journal's last lines to read, 1 to
	// MaxLogLines (default DefaultLogLines).
	Lines int `json:"lines,omitempty"`
}

// NodeRebootParams are the parameters of node_reboot: none.
type NodeRebootParams struct{}

// RunParams are the parameters of run.
type RunParams struct {
	// Command is a shell script run by sh -c on the host.
	Command string `json:"command"`
}

// Action returns ActionRestart.
func (RestartParams) Action() Action { return ActionRestart }

// Action returns ActionSystemctl.
func (SystemctlParams) Action() Action { return ActionSystemctl }

// Action returns ActionPctExec.
func (PctExecParams) Action() Action { return ActionPctExec }

// Action returns ActionAptUpgrade.
func (AptUpgradeParams) Action() Action { return ActionAptUpgrade }

// Action returns ActionPctCreate.
func (PctCreateParams) Action() Action { return ActionPctCreate }

// Action returns ActionPctStatus.
func (PctStatusParams) Action() Action { return ActionPctStatus }

// Action returns ActionPctStart.
func (PctStartParams) Action() Action { return ActionPctStart }

// Action returns ActionPctStop.
func (PctStopParams) Action() Action { return ActionPctStop }

// Action returns ActionPctReboot.
func (PctRebootParams) Action() Action { return ActionPctReboot }

// Action returns ActionGuestShutdown.
func (GuestShutdownParams) Action() Action { return ActionGuestShutdown }

// Action returns ActionPctSnapshot.
func (PctSnapshotParams) Action() Action { return ActionPctSnapshot }

// Action returns ActionPctRollback.
func (PctRollbackParams) Action() Action { return ActionPctRollback }

// Action returns ActionPctDestroy.
func (PctDestroyParams) Action() Action { return ActionPctDestroy }

// Action returns ActionRun.
func (RunParams) Action() Action { return ActionRun }

// Action returns ActionTailLog.
func (TailLogParams) Action() Action { return ActionTailLog }

// Action returns ActionNodeReboot.
func (NodeRebootParams) Action() Action { return ActionNodeReboot }

func (p NodeRebootParams) check() (Params, []*ParamError) { return p, nil }

func (p TailLogParams) check() (Params, []*ParamError) {
	p.Lines = cmp.Or(p.Lines, DefaultLogLines)
	if p.Lines < 1 || p.Lines > MaxLogLines {
		return p, []*ParamError{paramErr("lines", "must be from 1 to %d, got %d", MaxLogLines, p.Lines)}
	}
	return p, nil
}

func (p RestartParams) check() (Params, []*ParamError)   { return p, nil }
func (p PctStatusParams) check() (Params, []*ParamError) { return p, nil }
func (p PctStartParams) check() (Params, []*ParamError)  { return p, nil }
func (p PctStopParams) check() (Params, []*ParamError)   { return p, nil }
func (p PctRebootParams) check() (Params, []*ParamError) { return p, nil }
func (p GuestShutdownParams) check() (Params, []*ParamError) {
	if p.Timeout < 0 || p.Timeout > MaxShutdownTimeout {
		return p, []*ParamError{paramErr("timeout", "must be 1 to %d seconds, or 0 for %d, got %d", MaxShutdownTimeout, DefaultShutdownTimeout, p.Timeout)}
	}
	if p.Timeout == 0 {
		p.Timeout = DefaultShutdownTimeout
	}
	return p, nil
}
func (p PctDestroyParams) check() (Params, []*ParamError) {
	return p, nil
}

func (p SystemctlParams) check() (Params, []*ParamError) {
	var errs []*ParamError
	switch p.Verb {
	case VerbEnable, VerbDisable, VerbReload, VerbStart, VerbStop, VerbRestart:
	default:
		errs = append(errs, paramErr("verb", "must be one of enable, disable, reload, start, stop, restart, got %s", quoted(string(p.Verb))))
	}
	if p.Unit != "" {
		if err := ValidateUnit(p.Unit); err != nil {
			errs = append(errs, paramErr("unit", "%v", err))
		} else {
			p.Unit = NormalizeUnit(p.Unit)
		}
	}
	return p, errs
}

func (p PctExecParams) check() (Params, []*ParamError) {
	var errs []*ParamError
	if e := checkShell("command", p.Command, MaxCommandLen, true); e != nil {
		errs = append(errs, e)
	}
	return p, errs
}

func (p RunParams) check() (Params, []*ParamError) {
	var errs []*ParamError
	if e := checkShell("command", p.Command, MaxCommandLen, true); e != nil {
		errs = append(errs, e)
	}
	return p, errs
}

func (p AptUpgradeParams) check() (Params, []*ParamError) {
	if p.Mode == "" {
		p.Mode = AptAudit
	}
	if p.Mode != AptAudit && p.Mode != AptUpgrade {
		return p, []*ParamError{paramErr("mode", "must be audit or upgrade, got %s", quoted(string(p.Mode)))}
	}
	return p, nil
}

func (p PctSnapshotParams) check() (Params, []*ParamError) {
	if p.Name == "" {
		return p, nil
	}
	if err := ValidateSnapshotName(p.Name); err != nil {
		return p, []*ParamError{paramErr("name", "%v", err)}
	}
	return p, nil
}

func (p PctRollbackParams) check() (Params, []*ParamError) {
	if p.Name == "" {
		return p, []*ParamError{paramErr("name", "is required: the snapshot to roll back to")}
	}
	if err := ValidateSnapshotName(p.Name); err != nil {
		return p, []*ParamError{paramErr("name", "%v", err)}
	}
	if len(p.Discard) > MaxDiscard {
		return p, []*ParamError{paramErr("discard", "lists %d snapshots, at most %d", len(p.Discard), MaxDiscard)}
	}
	seen := map[string]bool{p.Name: true}
	for _, s := range p.Discard {
		if err := ValidateSnapshotName(s); err != nil {
			return p, []*ParamError{paramErr("discard", "%v", err)}
		}
		if seen[s] {
			return p, []*ParamError{paramErr("discard", "names %s twice, or the snapshot rolled back to", quoted(s))}
		}
		seen[s] = true
	}
	if len(p.Discard) == 0 {
		p.Discard = nil
	}
	return p, nil
}

func (p PctCreateParams) check() (Params, []*ParamError) {
	var errs []*ParamError
	add := func(field string, err error) {
		if err != nil {
			errs = append(errs, paramErr(field, "%v", err))
		}
	}
	if p.VMID != 0 {
		add("vmid", ValidateVMID(p.VMID))
	}
	add("hostname", ValidateHostname(p.Hostname))
	p.Cores = cmp.Or(p.Cores, DefaultCores)
	p.Memory = cmp.Or(p.Memory, DefaultMemory)
	p.DiskGB = cmp.Or(p.DiskGB, DefaultDiskGB)
	if p.Cores < 1 || p.Cores > 128 {
		errs = append(errs, paramErr("cores", "must be from 1 to 128, got %d", p.Cores))
	}
	if p.Memory < 16 || p.Memory > 1<<20 {
		errs = append(errs, paramErr("memory", "must be from 16 to 1048576 (MB), got %d", p.Memory))
	}
	if p.DiskGB < 1 || p.DiskGB > 65536 {
		errs = append(errs, paramErr("disk_gb", "must be from 1 to 65536 (GB), got %d", p.DiskGB))
	}
	if p.IP == "" {
		p.IP = DefaultIP
	}
	if p.IP == DefaultIP {
		if p.GW != "" {
			errs = append(errs, paramErr("gw", `must be empty with ip "dhcp" (DHCP supplies the gateway), got %s`, quoted(p.GW)))
		}
	} else if prefix, err := ParseCIDR(p.IP); err != nil {
		errs = append(errs, paramErr("ip", `must be "dhcp" or %s`, strings.TrimPrefix(err.Error(), "must be ")))
	} else if p.GW == "" {
		errs = append(errs, paramErr("gw", "is required with a static ip; give the gateway of %s, or use ip \"dhcp\"", prefix.Masked()))
	} else if gw, err := ParseIPv4(p.GW); err != nil {
		add("gw", err)
	} else if !usableUnicast(gw) || !prefix.Contains(gw) || gw == prefix.Addr() {
		errs = append(errs, paramErr("gw", "must be another host address inside %s, got %s", prefix.Masked(), quoted(p.GW)))
	}
	p.Storage = cmp.Or(p.Storage, DefaultStorage)
	add("storage", ValidateStorage(p.Storage))
	p.Bridge = cmp.Or(p.Bridge, DefaultBridge)
	add("bridge", ValidateBridge(p.Bridge))
	if p.Template != "" && ValidateTemplateName(p.Template) != nil {
		if err := ValidateTemplate(p.Template); err != nil {
			add("template", fmt.Errorf("%v; or a template family such as debian-13", err))
		}
	}
	if p.Nameserver != "" {
		if ns, err := ParseIPv4(p.Nameserver); err != nil {
			add("nameserver", err)
		} else if !usableUnicast(ns) {
			errs = append(errs, paramErr("nameserver", "must be a reachable unicast resolver such as 1.1.1.1, got %s", quoted(p.Nameserver)))
		}
	}
	if len(p.Services) > 64 {
		errs = append(errs, paramErr("services", "must list at most 64 packages, got %d", len(p.Services)))
	}
	seen := make(map[string]bool, len(p.Services))
	for i, s := range p.Services {
		field := fmt.Sprintf("services[%d]", i)
		if err := ValidatePackage(s); err != nil {
			add(field, err)
		} else if seen[s] {
			errs = append(errs, paramErr(field, "lists %s twice", quoted(s)))
		}
		seen[s] = true
	}
	if len(p.Services) == 0 {
		p.Services = nil
	} else {
		p.Services = slices.Clone(p.Services)
	}
	if p.PostInstall != "" {
		if e := checkShell("post_install", p.PostInstall, MaxPostInstallLen, false); e != nil {
			errs = append(errs, e)
		}
	}
	// Fresh pointers, so normalised parameters share nothing with the
	// caller's.
	if p.Nesting == nil {
		p.Nesting = new(!p.Privileged)
	} else {
		p.Nesting = new(*p.Nesting)
	}
	p.Onboot = new(p.Onboot == nil || *p.Onboot)
	if p.Description != "" {
		add("description", ValidateDescription(p.Description))
	}
	return p, errs
}

// checkShell validates free-form shell: valid UTF-8, within max bytes, and
// free of anything that would make the plan card differ from what runs: NUL,
// control characters other than tab and newline, invisible characters (see
// invisible), characters that look like a space and are not one, and look-
// alikes of the shell's syntax (see lookalike). A refusal names the
// character: "U+FE00 VARIATION SELECTOR-1 is invisible".
func checkShell(field, s string, maxLen int, required bool) *ParamError {
	switch {
	case strings.TrimSpace(s) == "":
		if required {
			return paramErr(field, "is required: a shell command")
		}
		return nil
	case len(s) > maxLen:
		return paramErr(field, "must be at most %d bytes, got %d", maxLen, len(s))
	case !utf8.ValidString(s):
		return paramErr(field, "must be valid UTF-8")
	case s[0] == '-' || s[0] == '+':
		return paramErr(field, "must not start with %q, which sh -c would read as an option", s[:1])
	}
	for i, r := range s {
		switch {
		case r == 0:
			return paramErr(field, "must not contain NUL bytes (at byte %d)", i)
		case r == '\r':
			return paramErr(field, "must not contain carriage returns (at byte %d); use \\n line endings", i)
		case (r < 0x20 && r != '\t' && r != '\n') || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return paramErr(field, "must not contain control character %U (at byte %d)", r, i)
		case invisible(r):
			return paramErr(field, "%s is invisible (at byte %d): the plan card must show what runs; remove it", runeLabel(r), i)
		case blank(r):
			return paramErr(field, "%s looks like a space or a line break but is not one to the shell (at byte %d): "+
				"the plan card must show what runs; use a plain space", runeLabel(r), i)
		}
		if looks, ok := lookalike(r); ok {
			return paramErr(field, "%s looks like %s but is not (at byte %d): the plan card must show what runs; type %s",
				runeLabel(r), looks, i, looks)
		}
	}
	return nil
}

// blank reports whether r renders as white space but is a word character
// to sh and bash, which split words only on ASCII blanks: with "x=1<NBSP>#;
// reboot" the card seems to show a comment, and the shell reboots. That
// is every Unicode space but the ASCII one, the line and paragraph
// separators, and the letters that render blank.
func blank(r rune) bool {
	switch r {
	case 0x115f, 0x1160, 0x3164, 0xffa0, // Hangul fillers
		0x2800: // Braille pattern blank
		return true
	}
	return r != ' ' && unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp)
}

// ValidateParams checks p and returns its normalised form: defaults filled
// in, unit names completed with their type. Errors are *ParamError values
// (joined when there are several) matching ErrInvalidParams.
func ValidateParams(p Params) (Params, error) {
	if p == nil {
		return nil, paramErr("", "missing")
	}
	if _, err := Lookup(p.Action()); err != nil {
		return nil, err
	}
	out, errs := p.check()
	if err := joinParamErrs(errs); err != nil {
		return nil, err
	}
	return out, nil
}

// paramKind ties an action to its parameter type.
type paramKind struct {
	typ    reflect.Type
	fields []string
	decode func([]byte) (Params, error)
}

func kind[T Params]() paramKind {
	var zero T
	return paramKind{
		typ:    reflect.TypeOf(zero),
		fields: jsonFields(reflect.TypeOf(zero)),
		decode: func(b []byte) (Params, error) {
			var v T
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&v); err != nil {
				return nil, err
			}
			return v, nil
		},
	}
}

func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}

var kinds = map[Action]paramKind{
	ActionRestart:       kind[RestartParams](),
	ActionSystemctl:     kind[SystemctlParams](),
	ActionPctExec:       kind[PctExecParams](),
	ActionAptUpgrade:    kind[AptUpgradeParams](),
	ActionPctCreate:     kind[PctCreateParams](),
	ActionPctStatus:     kind[PctStatusParams](),
	ActionPctStart:      kind[PctStartParams](),
	ActionPctStop:       kind[PctStopParams](),
	ActionPctReboot:     kind[PctRebootParams](),
	ActionGuestShutdown: kind[GuestShutdownParams](),
	ActionPctSnapshot:   kind[PctSnapshotParams](),
	ActionPctRollback:   kind[PctRollbackParams](),
	ActionPctDestroy:    kind[PctDestroyParams](),
	ActionRun:           kind[RunParams](),
	ActionTailLog:       kind[TailLogParams](),
	ActionNodeReboot:    kind[NodeRebootParams](),
}

// ParamsType returns the struct type ParseParams decodes action a's
// parameters into, so a caller can describe them (the MCP server derives
// its JSON Schema from it); false for an action outside the catalogue.
func ParamsType(a Action) (reflect.Type, bool) {
	k, ok := kinds[a]
	return k.typ, ok
}

// ParseParams decodes and validates the JSON parameters of action a. Empty
// input and null mean {}. Unknown and repeated fields are refused. Errors
// name the parameter and say what is expected, e.g.
// `params.hostname: must be a DNS label (a-z, 0-9, -), got "foo;rm"`.
func ParseParams(a Action, raw json.RawMessage) (Params, error) {
	k, ok := kinds[a]
	if !ok {
		_, err := Lookup(a)
		return nil, err
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if !utf8.Valid(raw) {
		return nil, paramErr("", "must be valid UTF-8 JSON")
	}
	if err := checkKeys(a, raw, k.fields); err != nil {
		return nil, err
	}
	p, err := k.decode(raw)
	if err != nil {
		return nil, decodeErr(err)
	}
	return ValidateParams(p)
}

// checkKeys walks the top level of a JSON object and refuses anything that is
// not an object, unknown keys and repeated keys. Repeated keys are refused
// because parsers disagree on which one wins, and the plan card must show
// what runs.
func checkKeys(a Action, raw []byte, known []string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return paramErr("", "not valid JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return paramErr("", "must be a JSON object, got %s", jsonKind(tok))
	}
	seen := map[string]bool{}
	var errs []*ParamError
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return paramErr("", "not valid JSON: %v", err)
		}
		key := tok.(string)
		switch {
		case seen[key]:
			errs = append(errs, paramErr(key, "is given more than once"))
		case !slices.Contains(known, key):
			if len(known) == 0 {
				errs = append(errs, paramErr(key, "is not a parameter of %s, which takes none", a))
			} else {
				errs = append(errs, paramErr(key, "is not a parameter of %s (known: %s)", a, strings.Join(known, ", ")))
			}
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return paramErr(key, "not valid JSON: %v", err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return paramErr("", "not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return paramErr("", "must be a single JSON object, found more after it")
	}
	return joinParamErrs(errs)
}

func jsonKind(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "a list"
		}
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "something else"
}

// decodeErr turns a decoding error into a ParamError naming the field.
func decodeErr(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "?"
		}
		return paramErr(field, "must be %s, got %s", goKind(te.Type), te.Value)
	}
	return paramErr("", "not valid JSON: %v", err)
}

func goKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "a list of " + strings.TrimPrefix(goKind(t.Elem()), "a ") + "s"
	case reflect.Struct:
		return "a JSON object"
	}
	return t.String()
}

// MarshalParams encodes validated parameters as canonical JSON: object keys
// sorted, no insignificant whitespace, no HTML escaping. ParseParams of the
// result yields the same parameters.
func MarshalParams(p Params) (json.RawMessage, error) {
	p, err := ValidateParams(p)
	if err != nil {
		return nil, err
	}
	return canonicalJSON(p)
}

// canonicalJSON re-encodes v so that equal values always produce equal
// bytes: encoding/json sorts map keys, and decoding with UseNumber keeps
// numbers exactly as written.
func canonicalJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(generic); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
