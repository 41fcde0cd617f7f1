package store_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/inventory"
	"github.com/nomoshq/nomos/seeds"
	"github.com/nomoshq/nomos/store"
)

// discoveryEnv is a seeded store with a clock of its own and a
// connection for reading what the store does not expose.
type discoveryEnv struct {
	s   *store.Store
	ctx context.Context
	url string
	now time.Time
}

func discoverySetup(t *testing.T) *discoveryEnv {
	t.Helper()
	e := &discoveryEnv{ctx: testenv.Context(t), url: testenv.DatabaseURL(t), now: time.Now().UTC().Truncate(time.Second)}
	s, err := store.Open(e.ctx, store.Config{URL: e.url, MaxConns: 4, Clock: func() time.Time { return e.now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	seed, err := fleetseed.Load(seeds.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplySeed(e.ctx, seed); err != nil {
		t.Fatal(err)
	}
	e.s = s
	return e
}

// strong is what the host strong lists in the demo: its seven seeded
// containers, running, as the seeds have them.
func strong() []inventory.Container {
	out := []inventory.Container{{VMID: 100, Status: "running", Hostname: "unbound", IP: "10.40.0.100/24", Cores: 1}}
	for vmid := 101; vmid <= 107; vmid++ {
		out = append(out, inventory.Container{VMID: vmid, Status: "running", Hostname: "ct" + strconv.Itoa(vmid), IP: "10.40.0." + strconv.Itoa(vmid) + "/24", Cores: 2,
			Onboot: new(true)})
	}
	return out
}

// run claims a run for host (scheduling every host due) and returns it.
func (e *discoveryEnv) run(t *testing.T, host string) store.InventoryRun {
	t.Helper()
	e.now = e.now.Add(time.Minute)
	runs, err := e.s.ClaimInventoryRuns(e.ctx, e.now, time.Minute, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.Host == host {
			return r
		}
	}
	t.Fatalf("no run claimed for %s among %+v", host, runs)
	return store.InventoryRun{}
}

func (e *discoveryEnv) apply(t *testing.T, r store.InventoryRun, cs []inventory.Container, elsewhere ...int) store.InventoryChanges {
	t.Helper()
	ch, err := e.s.ApplyInventory(e.ctx, store.InventoryObservation{RunID: r.ID, HostID: r.HostID, At: e.now, Containers: cs,
		Elsewhere: elsewhere, Horizon: 3 * time.Minute})
	if err != nil {
		t.Fatalf("apply inventory of %s: %v", r.Host, err)
	}
	return ch
}

// audit lists the discovery.* audit rows as "action vmid", oldest first.
func (e *discoveryEnv) audit(t *testing.T) []string {
	t.Helper()
	conn, err := pgx.Connect(e.ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(e.ctx)
	rows, err := conn.Query(e.ctx, `SELECT action || ' ' || (detail->>'vmid') FROM audit_log WHERE action LIKE 'discovery.%' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fleet is the fleet without the status that observations refresh.
type fleetView struct {
	Entities []store.Entity
	Edges    []store.Relationship
}

func (e *discoveryEnv) fleet(t *testing.T) fleetView {
	t.Helper()
	es, err := e.s.ListEntities(e.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range es {
		es[i].Health, es[i].Detail, es[i].LastCheckAt, es[i].RunStateAt = "", "", nil, nil
	}
	rels, err := e.s.Relationships(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return fleetView{es, rels}
}

func TestInventoryDiscoversUpdatesAndMarksGone(t *testing.T) {
	t.Parallel()
	e := discoverySetup(t)
	seededJellyfin := entityID(t, e.s, "lxc:strong/101")

	// First run: the seeded containers, and one an admin made.
	first := strong()
	first = append(first, inventory.Container{VMID: 150, Status: "running", Hostname: "newbox", IP: "10.40.0.150/24", Gateway: "10.40.0.1", Cores: 2, MemoryMB: 1024, DiskGB: 12,
		Onboot: new(true), Addresses: []string{"10.40.0.150/24"}, RootStorage: "local-lvm", StorageType: "lvmthin"})
	ch := e.apply(t, e.run(t, "strong"), first)
	want := store.InventoryChanges{Host: "strong", Seen: 9, New: []store.ContainerRef{{VMID: 150, Name: "newbox"}}}
	if d := gocmp.Diff(want, ch); d != "" {
		t.Errorf("first run (-want +got):\n%s", d)
	}
	box := entityID(t, e.s, "lxc:strong/150")
	wantAttrs := map[string]any{"discovered": true, "vmid": 150.0, "host": "strong", "hostname": "newbox", "ip": "10.40.0.150/24",
		"gateway": "10.40.0.1", "cores": 2.0, "memory_mb": 1024.0, "disk_gb": 12.0,
		"onboot": true, "lock": "", "tags": []any{}, "hastate": "", "template": false, "protection": false, "addresses": []any{"10.40.0.150/24"},
		"snapshots": []any{}, "root_storage": "local-lvm", "storage_type": "lvmthin", "snapshot_blocker": "", "replication": []any{},
		// Not read in this inventory: no backup facts, so the brief judges none.
		"backup": nil}
	if d := gocmp.Diff(wantAttrs, box.Attrs); d != "" || box.Name != "newbox" || box.Lifecycle != "active" {
		t.Errorf("discovered %s %s, attrs (-want +got):\n%s", box.Name, box.Lifecycle, d)
	}
	if box.RunState != "running" || box.Health != "healthy" || box.Detail != "container 150 is running" {
		t.Errorf("the new container is %s/%s (%q), want running and healthy", box.RunState, box.Health, box.Detail)
	}
	rels, err := e.s.Relationships(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rels, store.Relationship{From: "host:strong", To: "lxc:strong/150", Type: "hosts"}) {
		t.Errorf("no hosts edge from strong to the new container")
	}
	// Seeded facts win: the host's different name, address and cores for
	// 101 change nothing of the seed's.
	if got := entityID(t, e.s, "lxc:strong/101"); !gocmp.Equal(seededJellyfin.Attrs, inventory.WithoutLive(got.Attrs)) || got.Name != "jellyfin" || got.RunState != "running" {
		t.Errorf("seeded lxc:strong/101 became %s %v (%s), want the seed's attributes and its run state", got.Name, got.Attrs, got.RunState)
	}
	if d := gocmp.Diff([]string{"discovery.found 150"}, e.audit(t)); d != "" {
		t.Errorf("audit after the first run (-want +got):\n%s", d)
	}

	// The same inventory again: nothing to say, nothing changed.
	before := e.fleet(t)
	if ch := e.apply(t, e.run(t, "strong"), first); ch.Announced() || len(ch.RunStates) != 0 {
		t.Errorf("an unchanged run reported %+v", ch)
	}
	if d := gocmp.Diff(before, e.fleet(t)); d != "" {
		t.Errorf("an unchanged run changed the fleet (-before +after):\n%s", d)
	}
	if n := len(e.audit(t)); n != 1 {
		t.Errorf("an unchanged run audited something: %v", e.audit(t))
	}

	// Then newbox gets more memory, 107 stops, 106 is gone and 105 moved
	// to another node of the cluster.
	third := slices.DeleteFunc(strong(), func(c inventory.Container) bool { return c.VMID == 105 || c.VMID == 106 })
	third[len(third)-1].Status = "stopped" // 107
	third = append(third, inventory.Container{VMID: 150, Status: "running", Hostname: "newbox", IP: "10.40.0.150/24", Gateway: "10.40.0.1", Cores: 2, MemoryMB: 2048, DiskGB: 12,
		Onboot: new(true), Addresses: []string{"10.40.0.150/24"}, RootStorage: "local-lvm", StorageType: "lvmthin"})
	ch = e.apply(t, e.run(t, "strong"), third, 105)
	want = store.InventoryChanges{Host: "strong", Seen: 7,
		Changed:   []store.ContainerChange{{ContainerRef: store.ContainerRef{VMID: 150, Name: "newbox"}, Keys: []string{"memory_mb"}}},
		Gone:      []store.ContainerRef{{VMID: 106, Name: "paperless"}},
		RunStates: []store.RunStateChange{{ContainerRef: store.ContainerRef{VMID: 107, Name: "immich"}, From: "running", To: "stopped"}},
	}
	if d := gocmp.Diff(want, ch); d != "" {
		t.Errorf("third run (-want +got):\n%s", d)
	}
	if got := entityID(t, e.s, "lxc:strong/106"); got.Lifecycle != "destroyed" {
		t.Errorf("the vanished lxc:strong/106 is %s, want destroyed (gone, not deleted)", got.Lifecycle)
	}
	if got := entityID(t, e.s, "lxc:strong/105"); got.Lifecycle != "active" {
		t.Errorf("lxc:strong/105, on another node of the cluster, is %s, want active", got.Lifecycle)
	}
	if got := entityID(t, e.s, "lxc:strong/107"); got.Health != "unhealthy" || got.Detail != "container 107 is stopped" {
		t.Errorf("the stopped lxc:strong/107 is %s (%q), want unhealthy", got.Health, got.Detail)
	}
	if got := entityID(t, e.s, "lxc:strong/150"); got.Attrs["memory_mb"] != 2048.0 {
		t.Errorf("newbox's memory is %v after the host changed it", got.Attrs["memory_mb"])
	}
	// 106 comes back.
	ch = e.apply(t, e.run(t, "strong"), append(third, inventory.Container{VMID: 106, Status: "running", Hostname: "paperless", Onboot: new(true)}), 105)
	if d := gocmp.Diff([]store.ContainerRef{{VMID: 106, Name: "paperless"}}, ch.Back); d != "" || !ch.Announced() {
		t.Errorf("106 back (-want +got):\n%s", d)
	}
	wantAudit := []string{"discovery.found 150", "discovery.run_state 107", "discovery.changed 150", "discovery.gone 106", "discovery.back 106"}
	if d := gocmp.Diff(wantAudit, e.audit(t)); d != "" {
		t.Errorf("audit (-want +got):\n%s", d)
	}
}

func TestInventoryRefusesWhatWasNotAsked(t *testing.T) {
	t.Parallel()
	e := discoverySetup(t)
	r := e.run(t, "strong")
	hubris := e.run(t, "hubris")
	obs := store.InventoryObservation{RunID: r.ID, HostID: r.HostID, At: e.now, Containers: strong(), Horizon: time.Minute}
	wrongHost := obs
	wrongHost.HostID = hubris.HostID
	never := obs
	never.RunID = uuid.Must(uuid.NewV7())
	for name, tc := range map[string]struct {
		o    store.InventoryObservation
		want error
	}{
		"a run for another host": {wrongHost, store.ErrInventoryNotSent},
		"a run never sent":       {never, store.ErrNotFound},
	} {
		if _, err := e.s.ApplyInventory(e.ctx, tc.o); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	requested, err := e.s.RequestInventory(e.ctx, "@operator:localhost")
	if err != nil || len(requested) != 2 {
		t.Fatalf("request inventory = %d runs, %v", len(requested), err)
	}
	unsent := obs
	unsent.RunID, unsent.HostID = requested[1].ID, requested[1].HostID
	if _, err := e.s.ApplyInventory(e.ctx, unsent); !errors.Is(err, store.ErrInventoryNotSent) {
		t.Errorf("a requested run not yet sent: %v, want ErrInventoryNotSent", err)
	}
	if _, err := e.s.ApplyInventory(e.ctx, obs); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.ApplyInventory(e.ctx, obs); !errors.Is(err, store.ErrInventoryApplied) {
		t.Errorf("the same run twice: %v, want ErrInventoryApplied", err)
	}
	// An older inventory than the one applied changes nothing.
	later := e.run(t, "strong")
	old := obs
	old.RunID, old.At = later.ID, obs.At.Add(-time.Second)
	old.Containers = nil
	ch, err := e.s.ApplyInventory(e.ctx, old)
	if err != nil || !ch.Superseded || ch.Announced() {
		t.Errorf("an older inventory = %+v, %v; want superseded", ch, err)
	}
	if got := entityID(t, e.s, "lxc:strong/101"); got.Lifecycle != "active" {
		t.Errorf("an older, empty inventory marked lxc:strong/101 %s", got.Lifecycle)
	}
	if err := e.s.FailInventoryRun(e.ctx, later.ID, "host down"); !errors.Is(err, store.ErrInventoryApplied) {
		t.Errorf("failing an applied run: %v, want ErrInventoryApplied", err)
	}
}

// TestInventoryLeavesInFlightExecutionsAlone: a container a pct_create is
// making, or one a pct_destroy is removing, waits for that execution's
// result.
func TestInventoryLeavesInFlightExecutionsAlone(t *testing.T) {
	t.Parallel()
	e := discoverySetup(t)
	for _, x := range []store.NewExecution{
		{Request: store.Request{Action: "pct_create", TargetSlug: "host:strong", Params: []byte(`{"hostname":"scratch"}`)}},
		{Request: store.Request{Action: "pct_destroy", TargetSlug: "lxc:strong/106"}},
	} {
		x.ID, x.RiskClass, x.PlanHash, x.PlanCode, x.State = uuid.Must(uuid.NewV7()), "config_mutation", "h", "c", store.StateApproved
		x.RequestedBy, x.RequestedVia, x.ExpiresAt = "@op:test", "chat", e.now.Add(time.Hour)
		if _, err := e.s.CreateExecution(e.ctx, x, nil); err != nil {
			t.Fatal(err)
		}
	}
	cs := slices.DeleteFunc(strong(), func(c inventory.Container) bool { return c.VMID == 106 })
	cs = append(cs, inventory.Container{VMID: 151, Status: "stopped", Hostname: "scratch"})
	ch := e.apply(t, e.run(t, "strong"), cs)
	if ch.Announced() || !slices.Equal(ch.Skipped, []store.ContainerRef{{VMID: 151, Name: "scratch"}}) {
		t.Errorf("changes %+v, want scratch skipped and nothing else", ch)
	}
	if _, err := e.s.EntityBySlug(e.ctx, "lxc:strong/151"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the container being created was added: %v", err)
	}
	if got := entityID(t, e.s, "lxc:strong/106"); got.Lifecycle != "active" {
		t.Errorf("the container being destroyed is %s", got.Lifecycle)
	}
}

func TestInventoryNoticesAreClaimedOnce(t *testing.T) {
	t.Parallel()
	e := discoverySetup(t)
	e.apply(t, e.run(t, "strong"), strong())
	e.apply(t, e.run(t, "hubris"), nil) // every container on hubris is gone
	notices, err := e.s.InventoryNotices(e.ctx)
	if err != nil || len(notices) != 1 || notices[0].Changes.Host != "hubris" || len(notices[0].Changes.Gone) != 7 {
		t.Fatalf("notices = %+v, %v; want one, for hubris's seven gone containers", notices, err)
	}
	id := notices[0].RunID
	if ok, err := e.s.ClaimInventoryNotice(e.ctx, id); !ok || err != nil {
		t.Fatalf("first claim = %v, %v", ok, err)
	}
	if ok, _ := e.s.ClaimInventoryNotice(e.ctx, id); ok {
		t.Error("a notice was claimed twice")
	}
	if err := e.s.UnclaimInventoryNotice(e.ctx, id); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.s.InventoryNotices(e.ctx); len(n) != 1 {
		t.Errorf("an unclaimed notice is not listed again: %+v", n)
	}
	if ok, err := e.s.ClaimInventoryNotice(e.ctx, id); err != nil || !ok {
		t.Fatalf("claim the unclaimed notice: %v, %v; want true", ok, err)
	}
	if n, _ := e.s.PruneInventoryRuns(e.ctx, e.now.Add(time.Hour)); n != 4 {
		t.Errorf("pruned %d runs, want all four (two applied, two sent and never answered)", n)
	}
}

// TestContainerHealthRollsUp: a container's health is the worst of its
// run state, its own checks and its services' health.
func TestContainerHealthRollsUp(t *testing.T) {
	t.Parallel()
	e := discoverySetup(t)
	hubris := []inventory.Container{}
	for _, vmid := range []int{100, 110, 111, 112, 113, 114} {
		hubris = append(hubris, inventory.Container{VMID: vmid, Status: "running"})
	}
	hubris = append(hubris, inventory.Container{VMID: 131, Status: "stopped", Onboot: new(true)})
	e.apply(t, e.run(t, "hubris"), hubris)
	checks := claimAll(t, e.s, e.now)
	record := func(slug, health, detail string) {
		t.Helper()
		c := checks[slug]
		if err := e.s.RecordCheck(e.ctx, store.CheckObservation{CheckID: c.ID.String(), TargetID: c.TargetID.String(), Health: health, Detail: detail, At: e.now}); err != nil {
			t.Fatal(err)
		}
	}
	record("vaultwarden-http", "healthy", "GET answered 200")
	record("zigbee2mqtt-http", "unhealthy", "GET failed")
	record("nextcloud-disk", "degraded", "/ is 90% full")
	for slug, want := range map[string]string{
		"lxc:hubris/110": "healthy: container 110 is running",                    // running, its service healthy
		"lxc:hubris/111": "unhealthy: zigbee2mqtt: zigbee2mqtt-http: GET failed", // running, a service failing
		"lxc:hubris/112": "healthy: container 112 is running",                    // running, no check has answered
		"lxc:hubris/114": "degraded: nextcloud-disk: / is 90% full",              // its own check
		"lxc:hubris/131": "unhealthy: container 131 is stopped",                  // stopped
	} {
		if got := entityID(t, e.s, slug); got.Health+": "+got.Detail != want {
			t.Errorf("%s is %s: %s, want %s", slug, got.Health, got.Detail, want)
		}
	}
	// The inventory stops answering: three intervals on, run states are
	// stale, and so is a container whose health came from its run state.
	e.now = e.now.Add(4 * time.Minute)
	if n, err := e.s.ExpireRunStates(e.ctx, e.now); err != nil || n == 0 {
		t.Fatalf("ExpireRunStates = %d, %v; want containers marked stale", n, err)
	}
	if got := entityID(t, e.s, "lxc:hubris/112"); got.Health != "stale" || got.Detail == "" {
		t.Errorf("lxc:hubris/112 without an inventory is %s (%q), want stale", got.Health, got.Detail)
	}
	if got := entityID(t, e.s, "lxc:hubris/111"); got.Health != "unhealthy" {
		t.Errorf("lxc:hubris/111 is %s, want still unhealthy from its failing service", got.Health)
	}
}
