package labsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
)

// FaultKind names a failure labsim can simulate.
type FaultKind string

const (
	// FaultDNSDead kills the container's own resolver: lookups and apt fail
	// until /etc/resolv.conf names a public resolver.
	FaultDNSDead FaultKind = "dns_dead"
	// FaultAptFail makes apt-get install fail in dpkg.
	FaultAptFail FaultKind = "apt_fail"
	// FaultNetDown cuts the container off entirely; no resolver helps.
	FaultNetDown FaultKind = "net_down"
	// FaultHang makes commands containing Match never finish.
	FaultHang FaultKind = "hang"
	// FaultDrop makes a host close sessions without an exit status.
	FaultDrop FaultKind = "drop"
	// FaultSSHHang makes a host hang as a wedged node does: it accepts a
	// new TCP connection and never sends its SSH version, and a command
	// on a connection already open never finishes. Its target is a host
	// name or "*".
	FaultSSHHang FaultKind = "ssh_hang"
)

var faultKinds = []FaultKind{FaultDNSDead, FaultAptFail, FaultNetDown, FaultHang, FaultDrop, FaultSSHHang, FaultStaleStats, FaultAgentHung, FaultIgnoreACPI}

// Fault is one injected failure. It lives in StateDir/faults.json, which is
// read at every command, so editing the file by hand works too.
type Fault struct {
	Kind FaultKind `json:"kind"`
	// Target is a VMID or "*" for every kind but drop and ssh_hang,
	// whose target is a host name or "*".
	Target string `json:"target"`
	// Match is, for hang only, a substring of the raw SSH command.
	Match string `json:"match,omitempty"`
}

func (f Fault) String() string {
	s := string(f.Kind) + " " + f.Target
	if f.Match != "" {
		s += " " + quote(f.Match)
	}
	return s
}

// faultFile is the format of StateDir/faults.json.
type faultFile struct {
	Faults []Fault `json:"faults"`
}

func (s *Sim) validateFault(f Fault) error {
	if !slices.Contains(faultKinds, f.Kind) {
		return fmt.Errorf("unknown fault kind %q (want one of %s)", f.Kind, kindList())
	}
	if f.Kind == FaultDrop || f.Kind == FaultSSHHang {
		if f.Target != "*" && s.host(f.Target) == nil {
			return fmt.Errorf("%s: unknown host %q", f.Kind, f.Target)
		}
	} else if f.Target != "*" {
		if n, err := strconv.Atoi(f.Target); err != nil || n < minVMID || n > maxVMID {
			return fmt.Errorf("%s: target %q is not a vmid or *", f.Kind, f.Target)
		}
	}
	if f.Kind == FaultHang && f.Match == "" {
		return errors.New("hang: a command substring is required")
	}
	if f.Kind != FaultHang && f.Match != "" {
		return fmt.Errorf("%s: takes no command substring", f.Kind)
	}
	return nil
}

func kindList() string {
	var b strings.Builder
	for i, k := range faultKinds {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(k))
	}
	return b.String()
}

// Inject adds f to the control file; it is idempotent. Injecting drop also
// cuts the sessions already open on that host.
func (s *Sim) Inject(f Fault) error {
	return s.inject(f, nil)
}

func (s *Sim) inject(f Fault, self *activeSession) error {
	if err := s.validateFault(f); err != nil {
		return err
	}
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	faults, err := s.readFaultFile()
	if err != nil {
		return err
	}
	if !slices.Contains(faults, f) {
		faults = append(faults, f)
		if err := s.writeFaultFile(faults); err != nil {
			return err
		}
	}
	s.log.Info("fault injected", "fault", f.String())
	if f.Kind == FaultDrop {
		s.dropSessions(f.Target, self)
	}
	return nil
}

// Clear removes the faults of kind aimed at target and reports how many
// went. An empty kind or target matches every one.
func (s *Sim) Clear(kind FaultKind, target string) (int, error) {
	if kind != "" && !slices.Contains(faultKinds, kind) {
		return 0, fmt.Errorf("unknown fault kind %q (want one of %s)", kind, kindList())
	}
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	faults, err := s.readFaultFile()
	if err != nil {
		return 0, err
	}
	kept := slices.DeleteFunc(slices.Clone(faults), func(f Fault) bool {
		return (kind == "" || f.Kind == kind) && (target == "" || f.Target == target)
	})
	n := len(faults) - len(kept)
	if n == 0 {
		return 0, nil
	}
	if err := s.writeFaultFile(kept); err != nil {
		return 0, err
	}
	s.log.Info("faults cleared", "kind", string(kind), "target", target, "count", n)
	return n, nil
}

// Faults returns the faults now in force.
func (s *Sim) Faults() ([]Fault, error) {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	return s.readFaultFile()
}

// currentFaults is what a new command runs under. A control file that does
// not parse is logged and treated as the last one that did.
func (s *Sim) currentFaults() faultSet {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	faults, err := s.readFaultFile()
	if err != nil {
		s.log.Error("read fault control file", "path", s.faultsPath, "err", err)
		return s.lastFaults
	}
	s.lastFaults = faults
	return faults
}

func (s *Sim) readFaultFile() ([]Fault, error) {
	data, err := os.ReadFile(s.faultsPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read faults: %w", err)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, nil
	}
	var ff faultFile
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ff); err != nil {
		return nil, fmt.Errorf("parse %s: %w", s.faultsPath, err)
	}
	for i, f := range ff.Faults {
		if err := s.validateFault(f); err != nil {
			return nil, fmt.Errorf("parse %s: fault %d: %w", s.faultsPath, i, err)
		}
	}
	return ff.Faults, nil
}

func (s *Sim) writeFaultFile(faults []Fault) error {
	data, err := json.MarshalIndent(faultFile{Faults: append([]Fault{}, faults...)}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode faults: %w", err)
	}
	return writeFileAtomic(s.faultsPath, append(data, '\n'), 0o644)
}

type faultSet []Fault

// inContainer reports whether a fault of kind applies to vmid.
func (set faultSet) inContainer(kind FaultKind, vmid int) bool {
	id := strconv.Itoa(vmid)
	return slices.ContainsFunc(set, func(f Fault) bool {
		return f.Kind == kind && (f.Target == "*" || f.Target == id)
	})
}

func (set faultSet) drops(host string) bool {
	return set.onHost(FaultDrop, host)
}

// onHost reports whether a fault of kind, aimed at hosts, applies to host.
func (set faultSet) onHost(kind FaultKind, host string) bool {
	return slices.ContainsFunc(set, func(f Fault) bool {
		return f.Kind == kind && (f.Target == "*" || f.Target == host)
	})
}

// hangs reports whether the raw command should never finish. A fault aimed
// at a vmid needs a command that targets it (pct <verb> <vmid>).
func (set faultSet) hangs(raw string, vmid int) bool {
	id := strconv.Itoa(vmid)
	return slices.ContainsFunc(set, func(f Fault) bool {
		return f.Kind == FaultHang && strings.Contains(raw, f.Match) &&
			(f.Target == "*" || vmid != 0 && f.Target == id)
	})
}

// labsimCommand is the control command, run on the node:
//
//	labsim fault <dns_dead|apt_fail|net_down|stale_stats> <vmid|*>
//	labsim fault hang <vmid|*> <substring...>
//	labsim fault drop <host|*>
//	labsim fault ssh_hang <host|*>
//	labsim fault clear [kind [target]]
//	labsim fault list
func labsimCommand(c *call) int {
	const usage = "usage: labsim fault <dns_dead|apt_fail|net_down|stale_stats> <vmid|*>\n" +
		"       labsim fault hang <vmid|*> <command substring>\n" +
		"       labsim fault drop <host|*>\n" +
		"       labsim fault ssh_hang <host|*>\n" +
		"       labsim fault clear [kind [target]]\n" +
		"       labsim fault list\n"
	a := c.args
	if len(a) > 0 && (a[0] == "lock" || a[0] == "unlock") {
		return lockCommand(c)
	}
	if len(a) < 2 || a[0] != "fault" {
		c.errf("%s", usage)
		return 2
	}
	s := c.env.sim
	switch verb := a[1]; verb {
	case "list":
		faults, err := s.Faults()
		if err != nil {
			c.errf("labsim: %v\n", err)
			return 1
		}
		for _, f := range faults {
			c.outf("%s\n", f)
		}
		return 0
	case "clear":
		if len(a) > 4 {
			c.errf("%s", usage)
			return 2
		}
		var kind FaultKind
		var target string
		if len(a) > 2 {
			kind = FaultKind(a[2])
		}
		if len(a) > 3 {
			target = a[3]
		}
		n, err := s.Clear(kind, target)
		if err != nil {
			c.errf("labsim: %v\n", err)
			return 2
		}
		c.outf("cleared %d fault(s)\n", n)
		return 0
	default:
		if len(a) < 3 {
			c.errf("%s", usage)
			return 2
		}
		f := Fault{Kind: FaultKind(verb), Target: a[2]}
		if f.Kind == FaultHang {
			f.Match = strings.Join(a[3:], " ")
		} else if len(a) > 3 {
			c.errf("%s", usage)
			return 2
		}
		if err := s.inject(f, c.env.session); err != nil {
			c.errf("labsim: %v\n", err)
			return 2
		}
		c.outf("injected %s\n", f)
		return 0
	}
}
