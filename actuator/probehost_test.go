package actuator

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// withHungPeer restarts labsim with a second node, pve2, whose one
// container, 201, runs.
func withHungPeer() option {
	return func(t *testing.T, b *bundle) {
		if err := b.sim.Close(); err != nil {
			t.Fatal(err)
		}
		b.simCfg.Hosts = append(fleet(), labsim.Host{Name: "pve2", Containers: []labsim.Container{
			{VMID: 201, Hostname: "hung", IP: "10.0.0.31/24", Gateway: "10.0.0.1", Status: "running"},
		}})
		b.startSim(t)
	}
}

// TestHungHostCannotStarveProbes: two nodes share the actuator's 8 probe
// workers, and pve2 hangs the way a wedged Proxmox node does (labsim's
// ssh_hang: the connection already open takes commands that never return,
// a new one is accepted and never greeted). pve2 holds no more than its
// share of the workers, so every probe of pve1 is answered, healthy, while
// pve2's still hang; pve2's own probes end with a clear error, those past
// its share without being sent; and no probe is sent or reported twice.
func TestHungHostCannotStarveProbes(t *testing.T) {
	t.Parallel()
	b := setup(t, withHungPeer())
	share := b.act.cfg.ProbeHostShare
	diff(t, "the default share is half the probe workers", b.act.cfg.ProbeConcurrency/2, share)
	healthyCT := b.lxc(101, "jellyfin")
	hungCT := tasks.Target{ID: "ct-201", Slug: "lxc:201", Type: "lxc", Host: "pve2", HostAddr: b.sim.Addr("pve2"), VMID: 201, Hostname: "hung"}

	// pve2 answers once, so the actuator holds a connection to it, and
	// then hangs.
	b.probe(t, tasks.CheckRun{CheckID: "check-pve2-before", TargetID: hungCT.ID, Kind: "pct_status", Target: hungCT})
	diff(t, "pve2 before it hangs", healthy, b.results.check(t, "check-pve2-before").Health)
	if err := b.sim.Inject(labsim.Fault{Kind: labsim.FaultSSHHang, Target: "pve2"}); err != nil {
		t.Fatal(err)
	}

	const n = 12 // per host, more than all the workers together
	for i := range n {
		b.probe(t, tasks.CheckRun{CheckID: fmt.Sprintf("check-hung-%d", i), TargetID: hungCT.ID, Kind: "pct_status", Target: hungCT})
	}
	hung := func() int {
		k := 0
		for _, c := range b.sim.Running() {
			if c == "pct status 201" {
				k++
			}
		}
		return k
	}
	deadline := time.Now().Add(waitTimeout)
	for hung() < share {
		if time.Now().After(deadline) {
			t.Fatalf("pve2 never took its share of the workers: running %v", b.sim.Running())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := range n {
		b.probe(t, tasks.CheckRun{CheckID: fmt.Sprintf("check-ok-%d", i), TargetID: healthyCT.ID, Kind: "pct_status", Target: healthyCT})
	}
	for i := range n {
		got := b.results.check(t, fmt.Sprintf("check-ok-%d", i))
		diff(t, fmt.Sprintf("pve1 probe %d", i), healthy, got.Health)
		contains(t, "pve1 detail", got.Detail, "container 101 is running")
	}
	// The outcome that matters: pve1 was answered in full while pve2
	// still held its share, not after pve2's probes gave up.
	diff(t, "pve2's probes still hanging when pve1's were all answered", share, hung())

	var sent, shed int
	for i := range n {
		got := b.results.check(t, fmt.Sprintf("check-hung-%d", i))
		diff(t, fmt.Sprintf("pve2 probe %d", i), unhealthy, got.Health)
		switch {
		case strings.Contains(got.Detail, "the host "+hungCT.HostAddr+" is not answering") && strings.Contains(got.Detail, "this probe was not sent"):
			shed++
		case strings.Contains(got.Detail, "timed out"):
			sent++
		default:
			t.Errorf("pve2 probe %d: detail %q says neither that the host is not answering nor that the probe timed out", i, got.Detail)
		}
	}
	diff(t, "pve2 probes sent: its share, no more", share, sent)
	diff(t, "pve2 probes answered without being sent", n-share, shed)
	diff(t, "probes answered as not answering, by the metric", float64(shed), testutil.ToFloat64(b.act.metrics.heldBack.WithLabelValues(heldHostNotAnswering)))
	if busy := testutil.ToFloat64(b.act.metrics.heldBack.WithLabelValues(heldHostBusy)); busy < float64(n-share) {
		t.Errorf("probes put back while pve2 was busy: %v, want at least the %d past its share", busy, n-share)
	}

	// Each probe is reported once and sent at most once.
	reported := map[string]int{}
	for _, m := range b.results.wait(t, "every result", func([]message) bool { return true }) {
		if m.Type == tasks.TypeCheckResult {
			reported[m.Check.CheckID]++
		}
	}
	for id, k := range reported {
		if k != 1 {
			t.Errorf("%s reported %d times", id, k)
		}
	}
	// A killed command is logged once its session ends, which may be
	// after its result arrived.
	count := func() (toPve1, toPve2 int) {
		for _, e := range b.commands(t) {
			switch {
			case e.Host == "pve1" && e.Command == "pct status 101":
				toPve1++
			case e.Host == "pve2" && e.Command == "pct status 201":
				toPve2++
			}
		}
		return toPve1, toPve2
	}
	toPve1, toPve2 := count()
	for deadline := time.Now().Add(waitTimeout); toPve2 < 1+share && time.Now().Before(deadline); toPve1, toPve2 = count() {
		time.Sleep(50 * time.Millisecond)
	}
	diff(t, "commands pve1 ran", n, toPve1)
	diff(t, "commands sent to pve2: the one before it hung and its share", 1+share, toPve2)
}

// TestHungHostHoldsOnlyItsShareForInventoriesAndPreviews: inventories and
// previews run on the probe workers too, and a node that hangs (labsim's
// ssh_hang, as in TestHungHostCannotStarveProbes) would hold one worker per
// inventory for up to inventoryTimeout (two minutes). They take a slot of
// the host's share as probes do: pve2 holds no more reads than its share,
// the rest wait on the queue, and pve1's probes and inventory are answered
// in full meanwhile.
func TestHungHostHoldsOnlyItsShareForInventoriesAndPreviews(t *testing.T) {
	t.Parallel()
	b := setup(t, withHungPeer())
	share := b.act.cfg.ProbeHostShare
	hungCT := tasks.Target{ID: "ct-201", Slug: "lxc:201", Type: "lxc", Host: "pve2", HostAddr: b.sim.Addr("pve2"), VMID: 201, Hostname: "hung"}
	b.probe(t, tasks.CheckRun{CheckID: "check-pve2-before", TargetID: hungCT.ID, Kind: "pct_status", Target: hungCT})
	diff(t, "pve2 before it hangs", healthy, b.results.check(t, "check-pve2-before").Health)
	if err := b.sim.Inject(labsim.Fault{Kind: labsim.FaultSSHHang, Target: "pve2"}); err != nil {
		t.Fatal(err)
	}

	const n = 6 // inventories, and as many previews: more than all the workers together
	for i := range n {
		b.inventoryRun(t, tasks.InventoryRun{RunID: fmt.Sprintf("inv-pve2-%d", i), HostID: "host-pve2", Host: "pve2", Node: "pve2", HostAddr: b.sim.Addr("pve2")})
		now := time.Now()
		task, err := tasks.NewPreviewRunTask(b.signKey, tasks.PreviewRun{ExecutionID: fmt.Sprintf("preview-pve2-%d", i), Actuator: tasks.DefaultActuator,
			Action: string(policy.ActionPctRollback), Target: hungCT, IssuedAt: now, ExpiresAt: now.Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.queue.Enqueue(task); err != nil {
			t.Fatal(err)
		}
	}
	onPve2 := func() int {
		k := 0
		for _, c := range b.sim.Running() {
			if strings.HasPrefix(c, "pvesh get /cluster/resources") || strings.HasPrefix(c, "pct listsnapshot 201") {
				k++
			}
		}
		return k
	}
	for deadline := time.Now().Add(waitTimeout); onPve2() < share; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pve2 never took its share of the workers: running %v", b.sim.Running())
		}
	}

	healthyCT := b.lxc(101, "jellyfin")
	for i := range n {
		b.probe(t, tasks.CheckRun{CheckID: fmt.Sprintf("check-ok-%d", i), TargetID: healthyCT.ID, Kind: "pct_status", Target: healthyCT})
	}
	b.inventoryRun(t, tasks.InventoryRun{RunID: "inv-pve1"})
	for i := range n {
		diff(t, fmt.Sprintf("pve1 probe %d", i), healthy, b.results.check(t, fmt.Sprintf("check-ok-%d", i)).Health)
	}
	inv := b.results.inventory(t, "inv-pve1")
	diff(t, "pve1's inventory error", "", inv.Error)
	if len(inv.Containers) == 0 {
		t.Error("pve1's inventory lists no containers")
	}
	// Answered while pve2 still held its share and no more.
	diff(t, "reads hanging on pve2 when pve1 was answered", share, onPve2())
	if busy := testutil.ToFloat64(b.act.metrics.heldBack.WithLabelValues(heldHostBusy)); busy < 1 {
		t.Error("no read of pve2 was put back on the queue while it held its share")
	}
}

// TestProbeOfHostThatNeverGreets: a node that accepts the TCP connection
// and never sends its SSH version (labsim's ssh_hang on a host with no
// connection open yet) gives a probe result that says the handshake timed
// out, within the probe's shorter connect bound rather than the probe
// timeout, and nothing reaches the host.
func TestProbeOfHostThatNeverGreets(t *testing.T) {
	t.Parallel()
	b := setup(t, withHungPeer())
	if err := b.sim.Inject(labsim.Fault{Kind: labsim.FaultSSHHang, Target: "pve2"}); err != nil {
		t.Fatal(err)
	}
	hungCT := tasks.Target{ID: "ct-201", Slug: "lxc:201", Type: "lxc", Host: "pve2", HostAddr: b.sim.Addr("pve2"), VMID: 201, Hostname: "hung"}
	b.probe(t, tasks.CheckRun{CheckID: "check-silent", TargetID: hungCT.ID, Kind: "pct_status", Target: hungCT})
	got := b.results.check(t, "check-silent")
	diff(t, "health", unhealthy, got.Health)
	contains(t, "detail", got.Detail, "command was not sent", "handshake: timed out: no answer within "+probeDialTimeout.String())
	for _, e := range b.commands(t) {
		if e.Host == "pve2" {
			t.Errorf("pve2 ran %q", e.Command)
		}
	}
}

// TestProbeHostShare: a host holds at most its share of probe slots; past
// it a probe waits (errHostBusy) while the host answers, and is refused
// as not answering once the host's oldest probe has run probeStallAfter.
// Other hosts are not affected, and a released slot is free again.
func TestProbeHostShare(t *testing.T) {
	t.Parallel()
	p := newProbeHosts(2)
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	take := func(addr string, at time.Time) func() {
		t.Helper()
		release, err := p.acquire(addr, kindProbe, at)
		if err != nil {
			t.Fatalf("acquire %s: %v", addr, err)
		}
		return release
	}
	first := take("a:22", t0)
	take("a:22", t0.Add(time.Second))
	if _, err := p.acquire("a:22", kindProbe, t0.Add(probeStallAfter)); !errors.Is(err, errHostBusy) {
		t.Fatalf("a host at its share, answering: got %v, want errHostBusy", err)
	}
	take("b:22", t0)
	_, err := p.acquire("a:22", kindInventory, t0.Add(probeStallAfter+2*time.Second))
	var stalled *hostStalledError
	if !errors.As(err, &stalled) {
		t.Fatalf("a host at its share whose oldest probe has run %s: got %v, want hostStalledError", probeStallAfter+2*time.Second, err)
	}
	diff(t, "message", "the host a:22 is not answering: 2 reads from it have been waiting, the oldest for 22s; this inventory was not sent", err.Error())
	first()
	take("a:22", t0.Add(probeStallAfter+3*time.Second))
}

// TestProbeDeferral: a probe put back gets the next copy's task id, the
// same for the same request and position, so a copy put back twice is one
// task; its wait doubles from probeDeferDelay up to maxProbeDeferDelay.
func TestProbeDeferral(t *testing.T) {
	t.Parallel()
	payload := []byte("signed probe request")
	id1, wait1 := deferral(payload, "bot-chosen-id")
	again, _ := deferral(payload, "another-id-for-the-same-request")
	diff(t, "first copy, whatever the original's id", id1, again)
	diff(t, "first wait", probeDeferDelay, wait1)
	id2, wait2 := deferral(payload, id1)
	if id2 == id1 {
		t.Fatalf("the second copy reuses the first's id %s", id1)
	}
	diff(t, "second wait", 2*probeDeferDelay, wait2)
	other, _ := deferral([]byte("another request"), "bot-chosen-id")
	if other == id1 {
		t.Errorf("two requests share the copy id %s", other)
	}
	id := id2
	var wait time.Duration
	for range 40 {
		id, wait = deferral(payload, id)
	}
	diff(t, "wait after many", maxProbeDeferDelay, wait)
}
