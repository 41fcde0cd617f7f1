package policy

import (
	"fmt"
	"slices"
	"strings"
)

// Action names one entry of the catalogue.
type Action string

// The catalogue.
const (
	// ActionRestart restarts a service's unit inside its container.
	ActionRestart Action = "restart"
	// ActionSystemctl runs one systemctl verb on a unit.
	ActionSystemctl Action = "systemctl"
	// ActionPctExec runs a shell command inside an existing container.
	ActionPctExec Action = "pct_exec"
	// ActionAptUpgrade audits or applies package upgrades in a container.
	ActionAptUpgrade Action = "apt_upgrade"
	// ActionPctCreate provisions a new container and installs its service.
	ActionPctCreate Action = "pct_create"
	// ActionPctStatus reads whether a container is running, from its host.
	ActionPctStatus Action = "pct_status"
	// ActionPctStart starts a container.
	ActionPctStart Action = "pct_start"
	// ActionPctStop shuts a container down.
	ActionPctStop Action = "pct_stop"
	// ActionPctReboot reboots a container.
	ActionPctReboot Action = "pct_reboot"
	// ActionPctSnapshot takes a snapshot of a container.
	ActionPctSnapshot Action = "pct_snapshot"
	// ActionPctRollback rolls a container back to a snapshot.
	ActionPctRollback Action = "pct_rollback"
	// ActionPctDestroy destroys a container and its disks.
	ActionPctDestroy Action = "pct_destroy"
	// ActionGuestShutdown asks a VM (over ACPI or its guest agent) or a
	// container to shut down, and waits, bounded, until it is off; unlike
	// pct_stop it never forces.
	ActionGuestShutdown Action = "guest_shutdown"
	// ActionRun runs any shell command on a Proxmox host.
	ActionRun Action = "run"
	// ActionTailLog reads the last lines of a service's or a container's
	// journal.
	ActionTailLog Action = "tail_log"
	// ActionNodeReboot reboots a Proxmox node.
	ActionNodeReboot Action = "node_reboot"
)

// TargetType is the kind of entity an action acts on; it is also the prefix
// of the entity's slug.
type TargetType string

// The target types.
const (
	TargetHost    TargetType = "host"
	TargetLXC     TargetType = "lxc"
	TargetVM      TargetType = "vm"
	TargetService TargetType = "service"
)

// Spec describes one action of the catalogue.
type Spec struct {
	// Action is the catalogue name.
	Action Action
	// Verb is the first word of the action's confirmation phrase.
	Verb string
	// Targets lists the target types the action takes, the usual one first.
	Targets []TargetType
	// Summary says in one line what the action does.
	Summary string
	// FreeForm marks actions that carry operator- or model-written shell.
	// They never approve themselves, whatever the classifier says: the
	// classifier is a guide for people, not a gate.
	FreeForm bool
	// Probe marks actions that only read and take nothing but a target
	// (and at most a bounded number), so no text can steer what they run.
	// They approve themselves even when the agent asks.
	Probe bool
}

// Takes reports whether the action accepts a target of type t.
func (s Spec) Takes(t TargetType) bool { return slices.Contains(s.Targets, t) }

var catalogue = []Spec{
	{ActionRestart, "restart", []TargetType{TargetService}, "restart a service's systemd unit inside its container", false, false},
	{ActionSystemctl, "systemctl", []TargetType{TargetService, TargetLXC}, "run systemctl enable, disable, reload, start, stop or restart on a unit", false, false},
	{ActionPctExec, "exec", []TargetType{TargetLXC, TargetVM}, "run a shell command inside an existing container, or in a VM through its guest agent", true, false},
	{ActionAptUpgrade, "upgrade", []TargetType{TargetLXC, TargetHost}, "list (audit) or install (upgrade) pending package upgrades in a container or on a node", false, false},
	{ActionPctCreate, "create", []TargetType{TargetHost}, "provision a new container on a host and install its service in one step", true, false},
	{ActionPctStatus, "status", []TargetType{TargetLXC, TargetVM}, "read whether a container or VM is running, from its host", false, true},
	{ActionPctStart, "start", []TargetType{TargetLXC, TargetVM}, "start a container or VM", false, false},
	{ActionPctStop, "stop", []TargetType{TargetLXC, TargetVM}, "shut a container down cleanly, stopping it hard after 60 s; power a VM off at once, like pulling the plug", false, false},
	{ActionGuestShutdown, "shutdown", []TargetType{TargetVM, TargetLXC}, "ask a VM (ACPI, or its guest agent) or a container to shut down and wait until it is off, failing after the timeout without forcing it", false, false},
	{ActionPctReboot, "reboot", []TargetType{TargetLXC, TargetVM}, "reboot a container or VM", false, false},
	{ActionPctSnapshot, "snapshot", []TargetType{TargetLXC, TargetVM}, "take a snapshot of a container or VM", false, false},
	{ActionPctRollback, "rollback", []TargetType{TargetLXC, TargetVM}, "roll a container or VM back to a snapshot, discarding later changes", false, false},
	{ActionPctDestroy, "destroy", []TargetType{TargetLXC, TargetVM}, "destroy a stopped container or VM and its disks", false, false},
	{ActionRun, "run", []TargetType{TargetHost}, "run any shell command on a Proxmox host", true, false},
	{ActionTailLog, "logs", []TargetType{TargetService, TargetLXC}, "read the last lines of a service's unit journal, or of a container's whole journal", false, true},
	{ActionNodeReboot, "reboot-node", []TargetType{TargetHost}, "reboot a Proxmox node: every container on it stops, and those set to start at boot start again", false, false},
}

// Catalogue returns every action's Spec in a stable order.
func Catalogue() []Spec {
	out := make([]Spec, len(catalogue))
	for i, s := range catalogue {
		s.Targets = slices.Clone(s.Targets)
		out[i] = s
	}
	return out
}

// Lookup returns the Spec of a catalogue action, or an error wrapping
// ErrUnknownAction that lists the known ones.
func Lookup(a Action) (Spec, error) {
	for _, s := range catalogue {
		if s.Action == a {
			s.Targets = slices.Clone(s.Targets)
			return s, nil
		}
	}
	names := make([]string, len(catalogue))
	for i, s := range catalogue {
		names[i] = string(s.Action)
	}
	return Spec{}, fmt.Errorf("%w %s (known: %s)", ErrUnknownAction, quoted(string(a)), strings.Join(names, ", "))
}

// Target is an entity resolved by the caller from the store: exactly one
// entity, never a guess. Every field but Services is covered by the plan
// hash, so a target that moves to another host or container makes a new plan.
type Target struct {
	// Type is the entity type, matching the slug's prefix.
	Type TargetType `json:"type"`
	// ID is the entity's stored id, such as a UUID.
	ID string `json:"id"`
	// Slug names the entity: "host:strong", "lxc:strong/101",
	// "service:jellyfin".
	Slug string `json:"slug"`
	// Host is the Proxmox node that commands run on, such as "strong".
	Host string `json:"host"`
	// VMID is the guest: for an lxc or vm target, the one in its slug; for a
	// service target, the container it runs in, or 0 when it runs on the
	// host itself. Unused for a host target.
	VMID int `json:"vmid,omitempty"`
	// Unit is a service target's systemd unit; a bare name means .service.
	Unit string `json:"unit,omitempty"`
	// Services names the services an action on this target touches besides
	// the target itself, such as those running in an lxc target. Overrides
	// raise the class for them but never lower it. Not hashed.
	Services []string `json:"services,omitempty"`
	// SnapshotBlocker says why the container cannot be snapshotted, such
	// as "bind mount mp0 (/mnt/media)", when a step needs a snapshot
	// first and the card said there would be none. Hashed when set: the
	// approval covers going on without a snapshot for this reason only.
	SnapshotBlocker string `json:"snapshot_blocker,omitempty"`
}

// Name returns the part of the slug after the type, such as "jellyfin".
func (t Target) Name() string {
	_, name, _ := strings.Cut(t.Slug, ":")
	return name
}

// Validate checks the target on its own, whatever the action.
func (t Target) Validate() error {
	typ, name, err := ParseSlug(t.Slug)
	if err != nil {
		return targetErr("target.slug: %v", err)
	}
	if typ != t.Type {
		return targetErr("target.type %s does not match slug %s", quoted(string(t.Type)), quoted(t.Slug))
	}
	if !validEntityID(t.ID) {
		return targetErr("target.id: must be a resolved entity id (letters, digits, ., _, :, -), got %s", quoted(t.ID))
	}
	if err := ValidateHostname(t.Host); err != nil {
		return targetErr("target.host: %v", err)
	}
	switch t.Type {
	case TargetHost:
		if name != t.Host {
			return targetErr("target.host %s does not match slug %s", quoted(t.Host), quoted(t.Slug))
		}
		if t.VMID != 0 || t.Unit != "" {
			return targetErr("host target %s must not carry a vmid or unit", t.Slug)
		}
	case TargetLXC, TargetVM:
		if _, vmid, _ := ParseContainerName(name); vmid != t.VMID {
			return targetErr("target.vmid %d does not match slug %s", t.VMID, quoted(t.Slug))
		}
		if t.Unit != "" {
			return targetErr("%s target %s must not carry a unit", t.Type, t.Slug)
		}
	case TargetService:
		if t.VMID != 0 {
			if err := ValidateVMID(t.VMID); err != nil {
				return targetErr("target.vmid: %v", err)
			}
		}
		if err := ValidateUnit(t.Unit); err != nil {
			return targetErr("target.unit: %v", err)
		}
	}
	for i, s := range t.Services {
		if err := ValidateServiceName(s); err != nil {
			return targetErr("target.services[%d]: %v", i, err)
		}
	}
	if err := ValidateSnapshotBlocker(t.SnapshotBlocker); err != nil {
		return targetErr("target.snapshot_blocker: %v", err)
	}
	return nil
}

// checkTarget validates t and that action a takes it.
func checkTarget(a Action, t Target) error {
	spec, err := Lookup(a)
	if err != nil {
		return err
	}
	if err := t.Validate(); err != nil {
		return err
	}
	if !spec.Takes(t.Type) {
		want := make([]string, len(spec.Targets))
		for i, tt := range spec.Targets {
			want[i] = string(tt)
		}
		return targetErr("%s takes a %s target, got %s", a, strings.Join(want, " or "), t.Slug)
	}
	return nil
}
