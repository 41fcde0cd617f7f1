package soak

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nomoshq/nomos/internal/labsim"
)

// actuatorKilled SIGKILLs the actuator at a random point of a
// running order and starts it again. Every order ends succeeded or
// outcome_unknown, its command reached the host at most once, and
// outcome_unknown only for an order whose command did reach the host.
// One killed after it took the order but before it sent anything ends
// failed, saying nothing ran: the actuator's journal knows.
func actuatorKilled(t *testing.T, s *stack) {
	res := result{Case: "actuator SIGKILLed mid-order", Trials: trials(4, 100)}
	from := len(s.log())
	unknown, notSent, inFlight := 0, 0, 0
	for i := range res.Trials {
		p := s.ask(s.operators[0], i)
		// Every other trial holds the command on the host, so the kill
		// lands while it runs; the rest kill at a random moment around
		// its short run.
		hang := i%2 == 0
		if hang {
			s.hang(p.command)
		}
		p.op.approve(p.card.ID)
		if hang {
			s.waitRunning(p.command)
		}
		time.Sleep(between(0, 60*time.Millisecond))
		running := slices.Contains(s.fleet.Sim.Running(), p.command)
		s.actuator.kill()
		if hang {
			s.clearHang()
		}
		restarted := time.Now()
		s.actuator.start()
		x := s.waitEnd(p, 3*time.Minute)
		res.Recover = append(res.Recover, time.Since(restarted))
		n := runs(s.log(), p.logFrom, p.command)
		res.RunsExpected++
		res.RunsSeen += n
		if d := s.decisions(x.ID); d != 1 {
			res.LostDecisions++
			t.Errorf("%s: %d decisions recorded, want 1", p, d)
		}
		switch {
		case x.State == "succeeded" && n != 1:
			t.Errorf("%s: succeeded but its command reached the host %d times", p, n)
		case x.State == "outcome_unknown":
			unknown++
			if n == 0 && !running {
				// The host has no record of it: fair only when the actuator
				// had begun to send it, the exec request in flight when it
				// died.
				inFlight++
				if !s.journalSays("sent " + x.ID + " ") {
					t.Errorf("%s: outcome_unknown, but its command never reached the host nor began to be sent", p)
				}
			}
		case x.State == "failed" && n == 0 && strings.Contains(x.Error, "nothing ran"):
			// Killed after it journaled the start and before it sent
			// anything: the actuator knows nothing ran, and says so.
			notSent++
		case x.State != "succeeded":
			res.LostDecisions++
			t.Errorf("%s ended %s (%s), want succeeded or outcome_unknown", p, x.State, x.Error)
		}
		if n > 1 {
			t.Errorf("%s: its command reached the host %d times", p, n)
		}
	}
	res.Note = noteUnknown(unknown)
	if inFlight > 0 {
		res.Note += fmt.Sprintf(" (%d of them killed with the command in flight, which the host never logged)", inFlight)
	}
	if notSent > 0 {
		res.Note += fmt.Sprintf(", %d failed before anything was sent (nothing ran)", notSent)
	}
	checkNoLateRuns(t, s, from, res.RunsSeen)
	record(t, res)
}

// hang makes command hang on its host until clearHang.
func (s *stack) hang(command string) {
	s.t.Helper()
	vmid, match := hangTarget(command)
	if err := s.fleet.Sim.Inject(labsim.Fault{Kind: labsim.FaultHang, Target: vmid, Match: match}); err != nil {
		s.t.Fatal(err)
	}
}

func (s *stack) clearHang() {
	s.t.Helper()
	if _, err := s.fleet.Sim.Clear(labsim.FaultHang, ""); err != nil {
		s.t.Fatal(err)
	}
}

// hangTarget is the container and the part of a `pct exec VMID -- CMD`
// command a hang fault matches.
func hangTarget(command string) (vmid, match string) {
	rest, _ := strings.CutPrefix(command, "pct exec ")
	vmid, match, _ = strings.Cut(rest, " -- ")
	return vmid, match
}

// waitRunning waits until command is running on its host.
func (s *stack) waitRunning(command string) {
	s.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !slices.Contains(s.fleet.Sim.Running(), command) {
		if time.Now().After(deadline) {
			s.t.Fatalf("%q never started on its host", command)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// journalSays reports whether the actuator's journal has a line starting
// with prefix.
func (s *stack) journalSays(prefix string) bool {
	data, err := os.ReadFile(filepath.Join(s.dir, "journal"))
	if err != nil {
		s.t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}

func noteUnknown(n int) string {
	if n == 0 {
		return "all succeeded"
	}
	return itoa(n) + " ended outcome_unknown"
}

// checkNoLateRuns waits a little and checks that no restart reached a host
// after its trial was counted: a redelivered order run late.
func checkNoLateRuns(t *testing.T, s *stack, from, seen int) {
	t.Helper()
	time.Sleep(2 * time.Second)
	total := 0
	for _, svc := range services {
		total += runs(s.log(), from, svc.command)
	}
	if total != seen {
		t.Errorf("the hosts saw %d restarts in all, but the trials counted %d: something ran late or twice", total, seen)
	}
}
