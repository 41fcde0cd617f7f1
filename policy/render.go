package policy

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Placeholders in pct_create's summary steps for values the actuator picks
// at run time: the next free vmid, and the newest template on the host of
// the family the parameters name (see ValidateTemplateName), Debian's
// when they name none.
const (
	VMIDPlaceholder     = "$VMID"
	TemplatePlaceholder = "$TEMPLATE"
)

// CreateTag is the Proxmox tag pct_create gives every container it makes,
// so the web interface shows which ones Nomos made.
const CreateTag = "nomos"

// Render returns the command lines that run on the Proxmox host for these
// parameters and target, in order, exactly as the plan card shows them and
// the plan hash covers them. Every identifier in them has passed its grammar
// and free-form shell appears only as one ShellQuote'd argument of sh -c.
//
// For every action but pct_create these are the commands the actuator runs.
// pct_create renders a summary: the actuator's provisioning script carries
// out these steps with a DNS gate before apt, retries and phase reporting,
// substituting VMIDPlaceholder and TemplatePlaceholder when the parameters
// leave them to it.
func Render(p Params, t Target) ([]string, error) {
	p, err := ValidateParams(p)
	if err != nil {
		return nil, err
	}
	if err := checkPair(p, t); err != nil {
		return nil, err
	}
	vmid := strconv.Itoa(t.VMID)
	// A guest's tool: pct for a container, qm for a VM; the verbs the
	// catalogue uses are the same in both.
	tool := "pct "
	if t.Type == TargetVM {
		tool = "qm "
	}
	switch p := p.(type) {
	case RestartParams:
		return []string{inGuest(t, "systemctl", "restart", NormalizeUnit(t.Unit))}, nil
	case SystemctlParams:
		return []string{inGuest(t, "systemctl", string(p.Verb), unitFor(p, t))}, nil
	case PctExecParams:
		if t.Type == TargetVM {
			// Through the guest agent; qm refuses where none answers.
			return []string{"qm guest exec " + vmid + " -- sh -c " + ShellQuote(p.Command)}, nil
		}
		return []string{inGuest(t, "sh", "-c", ShellQuote(p.Command))}, nil
	case AptUpgradeParams:
		update := inGuest(t, "apt-get", "-q", "-o", "Acquire::Retries=3", "update")
		if p.Mode == AptAudit {
			return []string{update, inGuest(t, "apt", "list", "--upgradable")}, nil
		}
		// A Proxmox node is upgraded with dist-upgrade, never upgrade:
		// its packages' new dependencies must come in with them.
		verb := "upgrade"
		if t.Type == TargetHost {
			verb = "dist-upgrade"
		}
		return []string{update, inGuest(t, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-q", "-y",
			"-o", "Acquire::Retries=3", "-o", "Dpkg::Options::=--force-confold", verb)}, nil
	case TailLogParams:
		if t.Type == TargetService {
			return []string{inGuest(t, "journalctl", "-u", NormalizeUnit(t.Unit), "-n", strconv.Itoa(p.Lines), "--no-pager")}, nil
		}
		return []string{inGuest(t, "journalctl", "-n", strconv.Itoa(p.Lines), "--no-pager")}, nil
	case NodeRebootParams:
		// In a minute, so the command returns and its result is reported
		// before the node goes down.
		return []string{"shutdown -r +1"}, nil
	case PctCreateParams:
		return renderCreate(p), nil
	case PctStatusParams:
		return []string{tool + "status " + vmid}, nil
	case PctStartParams:
		return []string{tool + "start " + vmid}, nil
	case PctStopParams:
		if t.Type == TargetVM {
			return []string{"qm stop " + vmid}, nil
		}
		return []string{"pct shutdown " + vmid + " --timeout 60 --forceStop 1"}, nil
	case GuestShutdownParams:
		// Never --forceStop: a guest that ignores the request fails the
		// step rather than being powered off unasked.
		return []string{tool + "shutdown " + vmid + " --timeout " + strconv.Itoa(p.Timeout)}, nil
	case PctRebootParams:
		return []string{tool + "reboot " + vmid}, nil
	case PctSnapshotParams:
		if p.Name == "" {
			return nil, paramErr("name", "is required before rendering; generate one with SnapshotName")
		}
		if p.VMState {
			if t.Type != TargetVM {
				return nil, paramErr("vmstate", "applies to a VM only: a container snapshot holds no RAM")
			}
			return []string{"qm snapshot " + vmid + " " + shellWord(p.Name) + " --vmstate 1"}, nil
		}
		return []string{tool + "snapshot " + vmid + " " + shellWord(p.Name)}, nil
	case PctRollbackParams:
		var steps []string
		for _, s := range p.Discard {
			steps = append(steps, tool+"delsnapshot "+vmid+" "+shellWord(s))
		}
		return append(steps, tool+"rollback "+vmid+" "+shellWord(p.Name)), nil
	case PctDestroyParams:
		if p.Purge || t.Type == TargetVM {
			// A VM always goes with --purge: out of backup jobs,
			// replication and HA with it.
			return []string{tool + "destroy " + vmid + " --purge 1"}, nil
		}
		return []string{"pct destroy " + vmid}, nil
	case RunParams:
		return []string{"sh -c " + ShellQuote(p.Command)}, nil
	}
	return nil, fmt.Errorf("%w %s", ErrUnknownAction, quoted(string(p.Action())))
}

// checkPair checks the target and the parts of the parameters that depend
// on it.
func checkPair(p Params, t Target) error {
	if err := checkTarget(p.Action(), t); err != nil {
		return err
	}
	if s, ok := p.(SystemctlParams); ok {
		switch {
		case t.Type == TargetLXC && s.Unit == "":
			return paramErr("unit", "is required for an lxc target: which unit to %s", s.Verb)
		case t.Type == TargetService && s.Unit != "" && s.Unit != NormalizeUnit(t.Unit):
			return paramErr("unit", "must be empty or %s for target %s, got %s", NormalizeUnit(t.Unit), t.Slug, quoted(s.Unit))
		}
	}
	return nil
}

func unitFor(p SystemctlParams, t Target) string {
	if p.Unit != "" {
		return p.Unit
	}
	return NormalizeUnit(t.Unit)
}

// inGuest renders argv to run where the target lives: inside its container
// through pct exec, or on the host itself for a service with no container.
// Words are validated identifiers or already-quoted shell.
func inGuest(t Target, argv ...string) string {
	for i, w := range argv {
		if !strings.HasPrefix(w, "'") {
			argv[i] = shellWord(w)
		}
	}
	cmd := strings.Join(argv, " ")
	if t.VMID == 0 {
		return cmd
	}
	return "pct exec " + strconv.Itoa(t.VMID) + " -- " + cmd
}

func renderCreate(p PctCreateParams) []string {
	vmid := VMIDPlaceholder
	if p.VMID != 0 {
		vmid = strconv.Itoa(p.VMID)
	}
	tmpl := TemplatePlaceholder
	if p.Template != "" && ValidateTemplateName(p.Template) != nil {
		tmpl = shellWord(p.Template)
	}
	net := "name=eth0,bridge=" + p.Bridge + ",ip=" + p.IP
	if p.GW != "" {
		net += ",gw=" + p.GW
	}
	create := []string{
		"pct create", vmid, tmpl,
		"--hostname", p.Hostname,
		"--cores", strconv.Itoa(p.Cores),
		"--memory", strconv.Itoa(p.Memory),
		"--rootfs", p.Storage + ":" + strconv.Itoa(p.DiskGB),
		"--net0", shellWord(net),
	}
	if p.Privileged {
		create = append(create, "--unprivileged 0")
	} else {
		create = append(create, "--unprivileged 1")
	}
	if *p.Nesting {
		create = append(create, "--features nesting=1")
	}
	if *p.Onboot {
		create = append(create, "--onboot 1")
	} else {
		create = append(create, "--onboot 0")
	}
	create = append(create, "--tags", CreateTag)
	if p.Nameserver != "" {
		create = append(create, "--nameserver", p.Nameserver)
	}
	if p.Description != "" {
		create = append(create, "--description", ShellQuote(p.Description))
	}
	steps := []string{strings.Join(create, " "), "pct start " + vmid}
	exec := "pct exec " + vmid + " -- "
	if len(p.Services) > 0 {
		pkgs := make([]string, len(p.Services))
		for i, s := range p.Services {
			pkgs[i] = shellWord(s)
		}
		steps = append(steps,
			exec+"apt-get -q -o Acquire::Retries=3 update",
			exec+"env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Acquire::Retries=3 install "+strings.Join(pkgs, " "))
	}
	if p.PostInstall != "" {
		steps = append(steps, exec+"sh -c "+ShellQuote(p.PostInstall))
	}
	return steps
}

// SnapshotName returns a snapshot name for a snapshot taken at t, such as
// nomos-20260706-101500 (UTC), valid for ValidateSnapshotName.
func SnapshotName(t time.Time) string {
	return "nomos-" + t.UTC().Format("20060102-150405")
}

// nomosSnapshotRE matches the names SnapshotName makes, with the suffix
// the actuator adds to a second snapshot in the same second.
var nomosSnapshotRE = regexp.MustCompile(`^nomos-\d{8}-\d{6}(-\d{1,2})?$`)

// IsNomosSnapshot reports whether name is one Nomos gives the snapshots it
// takes before a change. Nomos deletes only those, never one it did not
// make.
func IsNomosSnapshot(name string) bool { return nomosSnapshotRE.MatchString(name) }

// SnapshotsToPrune returns the snapshots of Nomos's own to delete so that
// at most keep of them remain, oldest first, given a container's
// snapshots oldest first. A snapshot of anyone else is never among them.
// keep below 1 prunes nothing.
func SnapshotsToPrune(snapshots []string, keep int) []string {
	if keep < 1 {
		return nil
	}
	var ours []string
	for _, s := range snapshots {
		if IsNomosSnapshot(s) {
			ours = append(ours, s)
		}
	}
	if len(ours) <= keep {
		return nil
	}
	return ours[:len(ours)-keep]
}

// MaxSnapshotBlocker bounds the text of Target.SnapshotBlocker.
const MaxSnapshotBlocker = 120

// ValidateSnapshotBlocker accepts the reason a container cannot be
// snapshotted as a card may show it: one line of printable text, at most
// MaxSnapshotBlocker bytes; empty means none.
func ValidateSnapshotBlocker(s string) error {
	if len(s) > MaxSnapshotBlocker {
		return fmt.Errorf("is %d bytes, at most %d", len(s), MaxSnapshotBlocker)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("must be one line of printable text, got %s", quoted(s))
		}
	}
	return nil
}
