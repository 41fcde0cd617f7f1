package actuator

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A host that hangs (it accepts TCP but never answers SSH, or a session
// that never returns) would otherwise hold one of the actuator's shared
// probe workers per read for up to its timeout (a probe's probeTimeout,
// an inventory's inventoryTimeout), and take them all in seconds.
// probeHosts bounds what one host may hold. Every read on the probe queue
// takes a slot of its host's share: probes, inventories and previews.
const (
	// probeStallAfter is how long a host's oldest probe may run before
	// the host counts as not answering. It is above the slowest probe a
	// healthy host answers (connecting, probeDialTimeout, then curl's 10 s
	// limit).
	probeStallAfter = 20 * time.Second
	// probeDialTimeout bounds connecting to a host for a probe, the SSH
	// handshake and opening a session: well below probeTimeout, so a host
	// that accepts TCP and says nothing is known for what it is quickly.
	probeDialTimeout = 5 * time.Second
	// probeDeferDelay is how long a probe that found its host holding its
	// share first waits, back on the queue, before it is tried again.
	probeDeferDelay = 250 * time.Millisecond
)

// errHostBusy means the host already holds its share of the probe
// workers and is still answering: the probe waits on the queue, not in a
// worker.
var errHostBusy = errors.New("the host holds its share of the probe workers")

// hostStalledError means the host holds its share of the probe workers
// and its oldest probe has had no answer for longer than probeStallAfter:
// the probe is answered at once without being sent.
type hostStalledError struct {
	addr    string
	what    string // the read refused: probe, inventory or preview
	running int
	oldest  time.Duration
}

func (e *hostStalledError) Error() string {
	return fmt.Sprintf("the host %s is not answering: %d reads from it have been waiting, the oldest for %s; this %s was not sent",
		e.addr, e.running, e.oldest.Round(time.Second), e.what)
}

// probeHosts counts the probes running on each host.
type probeHosts struct {
	share int
	mu    sync.Mutex
	hosts map[string]*probeHost
}

// probeHost is one host's running probes, by start time.
type probeHost struct {
	started map[*int]time.Time
}

func newProbeHosts(share int) *probeHosts {
	return &probeHosts{share: share, hosts: map[string]*probeHost{}}
}

// acquire takes one of addr's probe slots for a read of kind what and
// returns its release. A host at its share gives errHostBusy, or a
// *hostStalledError once its oldest read has run for probeStallAfter.
func (p *probeHosts) acquire(addr, what string, now time.Time) (func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.hosts[addr]
	if h == nil {
		h = &probeHost{started: map[*int]time.Time{}}
		p.hosts[addr] = h
	}
	if n := len(h.started); n >= p.share {
		oldest := now
		for _, t := range h.started {
			if t.Before(oldest) {
				oldest = t
			}
		}
		if age := now.Sub(oldest); age > probeStallAfter {
			return nil, &hostStalledError{addr: addr, what: what, running: n, oldest: age}
		}
		return nil, errHostBusy
	}
	token := new(int)
	h.started[token] = now
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(h.started, token)
		if len(h.started) == 0 {
			delete(p.hosts, addr)
		}
	}, nil
}

const deferredPrefix = "probe-deferred-"

// maxProbeDeferDelay caps the wait of a probe put back again and again:
// the waits double from probeDeferDelay, so the probes of a host that
// hangs do not churn through the queue several times a second each while
// it is judged.
const maxProbeDeferDelay = 2 * time.Second

// deferral names the copy of a probe put back once more than the task id
// it runs under (taskID) says, and says how long it waits. The same
// request put back twice (its handler died after putting it back, and
// asynq ran it again) is one task, so it runs once.
func deferral(payload []byte, taskID string) (id string, wait time.Duration) {
	sum := sha256.Sum256(payload)
	base := deferredPrefix + hex.EncodeToString(sum[:16]) + "-"
	n := 0
	if rest, ok := strings.CutPrefix(taskID, base); ok {
		n, _ = strconv.Atoi(rest)
	}
	wait = probeDeferDelay << min(n, 8)
	return base + strconv.Itoa(n+1), min(wait, maxProbeDeferDelay)
}
