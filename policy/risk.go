package policy

import (
	"fmt"
	"strings"
)

// Override adjusts the class of actions on one entity, as the seeds'
// policy section says, e.g. {target: service:postgres, min_class: config_mutation}.
type Override struct {
	// Target is the entity's slug: service:postgres, lxc:105, host:strong.
	// A raise on a service also covers its container (Target.Services).
	Target string `json:"target" yaml:"target"`
	// Action limits the override to one action; empty means every action.
	Action Action `json:"action,omitempty" yaml:"action,omitempty"`
	// MinClass raises the class to at least this; zero means no floor.
	MinClass Class `json:"min_class,omitempty" yaml:"min_class,omitempty"`
	// MaxClass lowers the class to at most this; zero means no cap. It
	// applies only when the entity is the target itself, and never lowers
	// a destructive class or a state change below reversible_low.
	MaxClass Class `json:"max_class,omitempty" yaml:"max_class,omitempty"`
}

// Validate checks the override on its own.
func (o Override) Validate() error {
	if _, _, err := ParseSlug(o.Target); err != nil {
		return configErr("override target: %v", err)
	}
	if o.Action != "" {
		if _, err := Lookup(o.Action); err != nil {
			return configErr("override for %s: %v", o.Target, err)
		}
	}
	switch {
	case o.MinClass == 0 && o.MaxClass == 0:
		return configErr("override for %s sets neither min_class nor max_class", o.Target)
	case o.MinClass != 0 && !o.MinClass.Valid():
		return configErr("override for %s: min_class %s is not a class", o.Target, o.MinClass)
	case o.MaxClass != 0 && !o.MaxClass.Valid():
		return configErr("override for %s: max_class %s is not a class", o.Target, o.MaxClass)
	case o.MinClass != 0 && o.MaxClass != 0 && o.MinClass > o.MaxClass:
		return configErr("override for %s: min_class %s is above max_class %s", o.Target, o.MinClass, o.MaxClass)
	}
	return nil
}

// Classify returns the risk class of running these parameters against this
// target, after overrides.
//
// Base classes:
//
//	restart                                  reversible_low
//	systemctl start, stop, restart, reload   reversible_low
//	systemctl enable, disable                config_mutation
//	pct_exec                                 ClassifyCommand(command, in a container)
//	apt_upgrade audit                        read_only
//	apt_upgrade upgrade                      config_mutation (dist-upgrade on a node)
//	pct_create                               config_mutation; for a privileged
//	                                         container, at least the class of its
//	                                         post_install
//	pct_status                               read_only
//	pct_start, pct_stop, pct_reboot          reversible_low
//	pct_snapshot                             reversible_low
//	pct_rollback, pct_destroy                destructive
//	run                                      ClassifyCommand(command, on the host)
//	tail_log                                 read_only
//	node_reboot                              destructive
//
// Overrides then apply: every matching MinClass raises the class (for the
// target itself, its host, or any service in Target.Services), read_only
// included, so an operator can make every step on a sensitive host wait for
// a person; the highest matching MaxClass of the target itself lowers it.
// Probes (pct_status) are left as they are: they read what the checks read
// on their own. A
// read_only class is never lowered further, a destructive class is never
// lowered, and nothing that changes state is lowered below reversible_low.
func Classify(p Params, t Target, overrides []Override) (Risk, error) {
	p, err := ValidateParams(p)
	if err != nil {
		return Risk{}, err
	}
	if err := checkPair(p, t); err != nil {
		return Risk{}, err
	}
	for i, o := range overrides {
		if err := o.Validate(); err != nil {
			return Risk{}, fmt.Errorf("override %d: %w", i, err)
		}
	}
	var b riskBuilder
	switch p := p.(type) {
	case RestartParams:
		b.raise(ReversibleLow, "restarts "+NormalizeUnit(t.Unit))
	case SystemctlParams:
		switch p.Verb {
		case VerbEnable, VerbDisable:
			b.raise(ConfigMutation, fmt.Sprintf("%ss %s at boot", p.Verb, unitFor(p, t)))
		default:
			b.raise(ReversibleLow, fmt.Sprintf("%ss %s", p.Verb, unitFor(p, t)))
		}
	case PctExecParams:
		b.merge(ClassifyCommand(p.Command, TargetLXC))
		if t.Type == TargetVM {
			b.raise(ReversibleLow, "runs through the QEMU guest agent, which must be enabled and answering")
		}
	case AptUpgradeParams:
		switch {
		case p.Mode == AptAudit:
			b.raise(ReadOnly, "lists pending upgrades")
		case t.Type == TargetHost:
			b.raise(ConfigMutation, "installs package upgrades on node "+t.Host+" (dist-upgrade); a new kernel needs a reboot of the node")
		default:
			b.raise(ConfigMutation, "installs package upgrades")
		}
	case TailLogParams:
		b.raise(ReadOnly, fmt.Sprintf("reads the last %d lines of %s's journal", p.Lines, t.Slug))
	case NodeRebootParams:
		b.raise(Destructive, "reboots node "+t.Host+": every container on it stops, and only those set to start at boot come back")
	case PctCreateParams:
		b.raise(ConfigMutation, "creates a container on "+t.Host)
		if p.Privileged && p.PostInstall != "" {
			r := ClassifyCommand(p.PostInstall, TargetLXC)
			if r.Class == Destructive {
				b.merge(Risk{Class: Destructive, Reasons: prefix("privileged post_install: ", r.Reasons)})
			}
		}
	case PctStatusParams:
		b.raise(ReadOnly, "reads whether "+t.Slug+" is running")
	case PctStartParams:
		b.raise(ReversibleLow, "starts "+t.Slug)
	case PctStopParams:
		if t.Type == TargetVM {
			b.raise(Destructive, "powers "+t.Slug+" off at once, like pulling the plug: the guest gets no chance to shut down, and unsaved data is lost")
		} else {
			b.raise(ReversibleLow, "stops "+t.Slug)
		}
	case GuestShutdownParams:
		b.raise(ReversibleLow, fmt.Sprintf("asks %s to shut down and waits up to %d s; a VM that ignores it stays up and the step fails", t.Slug, p.Timeout))
	case PctRebootParams:
		b.raise(ReversibleLow, "reboots "+t.Slug)
	case PctSnapshotParams:
		b.raise(ReversibleLow, "takes a snapshot of "+t.Slug)
		if p.VMState {
			b.raise(ReversibleLow, "saves the VM's RAM with it (vmstate): the snapshot takes as much storage again as the VM's memory")
		}
	case PctRollbackParams:
		b.raise(Destructive, "discards every change to "+t.Slug+" since snapshot "+p.Name)
		if len(p.Discard) > 0 {
			b.raise(Destructive, "deletes the newer snapshots "+strings.Join(p.Discard, ", ")+" first: ZFS rolls back only to the newest")
		}
	case PctDestroyParams:
		b.raise(Destructive, "destroys "+t.Slug+" and its disks")
	case RunParams:
		b.merge(ClassifyCommand(p.Command, TargetHost))
	}
	return applyOverrides(b, p.Action(), t, overrides), nil
}

func prefix(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}

func applyOverrides(b riskBuilder, a Action, t Target, overrides []Override) Risk {
	base := max(b.class, ReadOnly)
	if spec, err := Lookup(a); err == nil && spec.Probe {
		// A probe reads what the prober's checks read without asking
		// anyone; a floor would only hide the state from the agent.
		return b.risk()
	}
	target := t.Slug
	touched := func(slug string) bool {
		if slug == target || (t.Host != "" && slug == "host:"+t.Host) {
			return true
		}
		for _, x := range t.Services {
			if "service:"+x == slug {
				return true
			}
		}
		return false
	}
	var floor, cap Class
	var floorBy, capBy string
	for _, o := range overrides {
		if o.Action != "" && o.Action != a {
			continue
		}
		if o.MinClass != 0 && touched(o.Target) && o.MinClass > floor {
			floor, floorBy = o.MinClass, o.Target
		}
		if o.MaxClass != 0 && o.Target == target && target != "" && o.MaxClass > cap {
			cap, capBy = o.MaxClass, o.Target
		}
	}
	c := base
	if cap != 0 && base > ReadOnly && base < Destructive && cap < c {
		c = max(cap, ReversibleLow)
	}
	if floor > c {
		c = floor
	}
	r := b.risk()
	switch {
	case c > base:
		r.Reasons = append([]string{fmt.Sprintf("raised to %s by policy for %s", c, floorBy)}, r.Reasons...)
	case c < base:
		r.Reasons = append([]string{fmt.Sprintf("lowered to %s by policy for %s", c, capBy)}, r.Reasons...)
	}
	r.Class = c
	return r
}

// NeedsSnapshot reports whether the actuator should take a pct snapshot of
// the target's container before running a step of class c: for
// config_mutation and destructive steps inside a container, except those
// that create, destroy, snapshot or roll back the container themselves.
func NeedsSnapshot(p Params, t Target, c Class) bool {
	if c < ConfigMutation || p == nil {
		return false
	}
	switch p.Action() {
	case ActionPctCreate, ActionPctDestroy, ActionPctSnapshot, ActionPctRollback, ActionRun:
		return false
	}
	return (IsGuest(t.Type) || t.Type == TargetService) && t.VMID != 0
}
