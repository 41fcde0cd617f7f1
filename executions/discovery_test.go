package executions_test

import (
	"crypto/ed25519"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/inventory"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

const debian = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"

// query runs one read-only query against the bundle's database and
// collects its one column.
func query[T any](t *testing.T, b *bundle, sql string, args ...any) []T {
	t.Helper()
	conn, err := pgx.Connect(b.ctx, b.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(b.ctx)
	rows, err := conn.Query(b.ctx, sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[T])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// discover runs one discovery pass that must send want runs, and waits
// until every run sent has an outcome.
func (b *bundle) discover(t *testing.T, want int) {
	t.Helper()
	rep, err := b.svc.DiscoverDue(b.ctx)
	if err != nil || rep.Sent != want {
		t.Fatalf("discovery pass = %+v, %v; want %d runs sent", rep, err, want)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		open := query[int64](t, b, `SELECT count(*) FROM inventory_runs WHERE sent_at IS NOT NULL AND applied_at IS NULL`)[0]
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d inventory runs never came back", open)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// notices lists, per host, what the room is to hear, and marks it heard.
func (b *bundle) notices(t *testing.T) []store.InventoryChanges {
	t.Helper()
	ns, err := b.store.InventoryNotices(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.InventoryChanges
	for _, n := range ns {
		if ok, err := b.store.ClaimInventoryNotice(b.ctx, n.RunID); err != nil || !ok {
			t.Fatalf("claim notice %s: %v %v", n.RunID, ok, err)
		}
		out = append(out, n.Changes)
	}
	return out
}

func (b *bundle) discoveryAudit(t *testing.T) []string {
	t.Helper()
	return query[string](t, b, `SELECT action || ' ' || (detail->>'vmid') FROM audit_log WHERE action LIKE 'discovery.%' ORDER BY id`)
}

// fleetFacts is what discovery may change: entities and edges, without
// the status that every observation refreshes.
func (b *bundle) fleetFacts(t *testing.T) ([]store.Entity, []store.Relationship) {
	t.Helper()
	es, err := b.store.ListEntities(b.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range es {
		es[i].Detail, es[i].LastCheckAt, es[i].RunStateAt = "", nil, nil
	}
	rels, err := b.store.Relationships(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return es, rels
}

// TestDiscoveryFollowsWhatAnAdminDoes runs discovery through a real
// actuator against labsim while an admin works on the hosts outside
// Nomos: a container created on a node is added to the fleet; an
// unchanged run says and changes nothing; the seeds' facts win over the
// host's; a destroyed container is marked gone; a host that does not
// answer marks nothing gone.
func TestDiscoveryFollowsWhatAnAdminDoes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fleet := testenv.NewFleet(t)
	if _, err := b.store.ApplySeed(b.ctx, fleet.Seed); err != nil {
		t.Fatal(err)
	}
	refused := b.startWorkers(t, fleet)
	seeded := map[string]store.Entity{}
	for _, slug := range []string{"lxc:strong/101", "lxc:hubris/131"} {
		e, err := b.store.EntityBySlug(b.ctx, slug)
		if err != nil {
			t.Fatal(err)
		}
		seeded[slug] = e
	}

	// An admin makes a container on strong and retunes jellyfin.
	fleet.Admin(t, "strong", "pct create 150 "+debian+" --hostname newbox --cores 2 --memory 1024"+
		" --net0 name=eth0,bridge=vmbr0,ip=10.40.0.150/24,gw=10.40.0.1 --rootfs local-lvm:12 --start 1")
	fleet.Admin(t, "strong", "pct set 101 --hostname jf2 --memory 8192")
	b.discover(t, 2)

	box, err := b.store.EntityBySlug(b.ctx, "lxc:strong/150")
	if err != nil {
		t.Fatalf("the container the admin made is not in the fleet: %v", err)
	}
	// The node's live facts, as labsim gives them: no onboot line, and
	// pvesm status saying local-lvm is lvmthin.
	wantAttrs := map[string]any{"discovered": true, "vmid": 150.0, "host": "strong", "hostname": "newbox", "ip": "10.40.0.150/24",
		"gateway": "10.40.0.1", "cores": 2.0, "memory_mb": 1024.0, "disk_gb": 12.0,
		"onboot": false, "lock": "", "tags": []any{}, "hastate": "", "template": false, "protection": false, "addresses": []any{"10.40.0.150/24"},
		"snapshots": []any{}, "root_storage": "local-lvm", "storage_type": "lvmthin", "snapshot_blocker": "", "replication": []any{},
		// The demo's weekly job selects every guest of strong; newbox is
		// too new to have a backup.
		"backup": map[string]any{"jobs": []any{"backup-weekly-strong"}}}
	if d := gocmp.Diff(wantAttrs, box.Attrs); d != "" || box.Name != "newbox" || box.RunState != "running" || box.Health != "healthy" {
		t.Errorf("lxc:strong/150 is %s, %s, %s; attrs (-want +got):\n%s", box.Name, box.RunState, box.Health, d)
	}
	cs, err := b.store.ListContainers(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Health == "unknown" || c.RunState == "" {
			t.Errorf("%s is %s with run state %q after the inventory, want it known", c.Slug, c.Health, c.RunState)
		}
	}
	// labsim's teddycloud has no onboot: stopped is where it rests.
	if got, _ := b.store.EntityBySlug(b.ctx, "lxc:hubris/131"); got.RunState != "stopped" || got.Health != "stopped" {
		t.Errorf("the stopped teddycloud is %s/%s, want stopped and health stopped", got.RunState, got.Health)
	}
	// The seeds' name and memory for 101 stand; the node's live facts
	// are added beside them.
	if got, _ := b.store.EntityBySlug(b.ctx, "lxc:strong/101"); got.Name != "jellyfin" || !gocmp.Equal(seeded["lxc:strong/101"].Attrs, inventory.WithoutLive(got.Attrs)) {
		t.Errorf("seeded lxc:strong/101 became %s %v; the seed's facts must win", got.Name, got.Attrs)
	}
	notices := b.notices(t)
	if len(notices) != 1 || notices[0].Host != "strong" || !slices.Equal(notices[0].New, []store.ContainerRef{{VMID: 150, Name: "newbox"}}) ||
		len(notices[0].Gone)+len(notices[0].Changed)+len(notices[0].Back) != 0 {
		t.Errorf("notices after the first pass = %+v, want one: strong found 150 newbox", notices)
	}

	// An interval on, nothing has changed on the hosts: nothing to say.
	entities, edges := b.fleetFacts(t)
	audited := b.discoveryAudit(t)
	b.clock.Add(5 * time.Minute)
	b.discover(t, 2)
	if n := b.notices(t); len(n) != 0 {
		t.Errorf("an unchanged pass has notices: %+v", n)
	}
	if e2, r2 := b.fleetFacts(t); !gocmp.Equal(entities, e2) || !gocmp.Equal(edges, r2) {
		t.Errorf("an unchanged pass changed the fleet:\n%s%s", gocmp.Diff(entities, e2), gocmp.Diff(edges, r2))
	}
	if d := gocmp.Diff(audited, b.discoveryAudit(t)); d != "" {
		t.Errorf("an unchanged pass audited (-before +after):\n%s", d)
	}

	// The admin destroys newbox; hubris stops answering.
	fleet.Admin(t, "strong", "pct stop 150")
	fleet.Admin(t, "strong", "pct destroy 150")
	if err := fleet.Sim.Inject(labsim.Fault{Kind: labsim.FaultDrop, Target: "hubris"}); err != nil {
		t.Fatal(err)
	}
	b.clock.Add(5 * time.Minute)
	b.discover(t, 2)
	if got, _ := b.store.EntityBySlug(b.ctx, "lxc:strong/150"); got.Lifecycle != "destroyed" {
		t.Errorf("the destroyed newbox is %s, want destroyed (gone)", got.Lifecycle)
	}
	notices = b.notices(t)
	if len(notices) != 1 || !slices.Equal(notices[0].Gone, []store.ContainerRef{{VMID: 150, Name: "newbox"}}) {
		t.Errorf("notices after the destroy = %+v, want one: 150 newbox gone", notices)
	}
	for _, e := range cs {
		if e.Slug == "lxc:strong/150" {
			continue
		}
		if got, _ := b.store.EntityBySlug(b.ctx, e.Slug); got.Lifecycle != e.Lifecycle {
			t.Errorf("%s went %s → %s while its host did not answer", e.Slug, e.Lifecycle, got.Lifecycle)
		}
	}
	failed := query[string](t, b, `SELECT h.name || ': ' || r.error FROM inventory_runs r JOIN entities h ON h.id = r.host_id WHERE r.error <> '' ORDER BY r.requested_at`)
	if len(failed) != 1 || !strings.HasPrefix(failed[0], "hubris: list the cluster's resources") {
		t.Errorf("failed runs = %q, want hubris's", failed)
	}

	// Only the inventory's read-only commands ran, besides the admin's.
	for _, c := range fleet.Commands(t) {
		if c == "pvesh get /cluster/resources --output-format json" || strings.HasPrefix(c, "pct config ") || strings.HasPrefix(c, "pct listsnapshot ") ||
			c == "pvesm status" || (strings.HasPrefix(c, "pvesh get /nodes/") && strings.HasSuffix(c, "/lxc --output-format json")) ||
			c == "pvesh get /cluster/backup --output-format json" || c == "pvesm list local --content backup" ||
			(strings.HasPrefix(c, "pvesh get /nodes/") && strings.HasSuffix(c, "/qemu --output-format json")) || strings.HasPrefix(c, "qm config ") ||
			(strings.HasPrefix(c, "pvesh get /nodes/") && strings.HasSuffix(c, "/replication --output-format json")) ||
			strings.HasPrefix(c, "qm listsnapshot ") || strings.HasPrefix(c, "pct create 150 ") || c == "pct set 101 --hostname jf2 --memory 8192" || c == "pct stop 150" || c == "pct destroy 150" {
			continue
		}
		t.Errorf("discovery ran %q", c)
	}
	select {
	case r := <-refused:
		t.Errorf("a genuine report was refused: %+v", r)
	default:
	}
}

// TestContainerHealthRollsUpThroughTheStack: with the inventory and the
// checks both answering from labsim, a running container whose services
// are healthy is healthy, one whose service fails is unhealthy, and a
// stopped one is unhealthy.
func TestContainerHealthRollsUpThroughTheStack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fleet := testenv.NewFleet(t)
	if _, err := b.store.ApplySeed(b.ctx, fleet.Seed); err != nil {
		t.Fatal(err)
	}
	if err := fleet.Sim.Inject(labsim.Fault{Kind: labsim.FaultNetDown, Target: "112"}); err != nil {
		t.Fatal(err)
	}
	// teddycloud is meant to run: stopped, it is unhealthy.
	fleet.Admin(t, "hubris", "pct set 131 --onboot 1")
	b.startWorkers(t, fleet)
	b.discover(t, 2)
	if rep, err := b.svc.ProbeDue(b.ctx); err != nil || rep.Sent != 22 {
		t.Fatalf("probe pass = %+v, %v", rep, err)
	}
	// The demo's VMs: Home Assistant's run state, guest agent and web
	// page, read over SSH and the network; OPNsense's run state alone.
	for slug, want := range map[string]string{"vm:hubris/200": "healthy", "vm:hubris/201": "healthy"} {
		if e := b.waitHealth(t, slug, func(h string) bool { return h != "unknown" }); e.Health != want || e.RunState != "running" {
			t.Errorf("%s is %s: %s, run state %q; want %s and running from the inventory", slug, e.Health, e.Detail, e.RunState, want)
		}
	}
	if cmds := fleet.Commands(t); !slices.Contains(cmds, "qm guest cmd 200 ping") || slices.Contains(cmds, "qm guest cmd 201 ping") {
		t.Errorf("the agent is pinged where it is enabled only; labsim saw %q", cmds)
	}
	b.waitHealth(t, "service:adguard", func(h string) bool { return h == "unhealthy" })
	b.waitHealth(t, "service:jellyfin", func(h string) bool { return h == "healthy" })
	for slug, want := range map[string]string{
		"lxc:strong/101": "healthy: container 101 is running",
		"lxc:hubris/112": "unhealthy: adguard: adguard-dns: deb.debian.org does not resolve",
		"lxc:hubris/131": "unhealthy: container 131 is stopped",
	} {
		e := b.waitHealth(t, slug, func(h string) bool { return h != "unknown" })
		if got := e.Health + ": " + e.Detail; got != want {
			t.Errorf("%s is %q, want %q", slug, got, want)
		}
	}
}

// TestForgedInventoriesChangeNothing writes, straight into Redis, every
// inventory a Redis writer could forge or replay. Each is refused for the
// right reason and audited; no container is added, changed or marked
// gone, and the room hears nothing.
func TestForgedInventoriesChangeNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.startResults(t)
	_, strangerKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, orderKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := b.store.RequestInventory(b.ctx, "@operator:localhost")
	if err != nil || len(runs) != 2 {
		t.Fatalf("request inventory = %+v, %v", runs, err)
	}
	if rep, err := b.svc.DiscoverDue(b.ctx); err != nil || rep.Sent != 2 {
		t.Fatalf("discovery pass = %+v, %v", rep, err)
	}
	hubris, strong := runs[0], runs[1]
	// What a forger would like strong to have said: one new container of
	// theirs, and none of the real ones, which would all be gone.
	evil := tasks.InventoryResult{RunID: strong.ID.String(), HostID: strong.HostID.String(), Actuator: tasks.DefaultActuator, Node: "strong",
		Containers: []tasks.InventoryContainer{{VMID: 666, Status: "running", Hostname: "evil"}}, At: b.clock.Now()}
	seal := func(key ed25519.PrivateKey, r tasks.InventoryResult) []byte {
		t.Helper()
		p, err := tasks.SignInventoryResult(key, r)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// hubris's genuine inventory is applied; a copy of it comes later.
	genuine := seal(b.reportKey, tasks.InventoryResult{RunID: hubris.ID.String(), HostID: hubris.HostID.String(), Actuator: tasks.DefaultActuator,
		Node: "hubris", Containers: []tasks.InventoryContainer{
			{VMID: 100, Status: "running"}, {VMID: 110, Status: "running"}, {VMID: 111, Status: "running"}, {VMID: 112, Status: "running"},
			{VMID: 113, Status: "running"}, {VMID: 114, Status: "running"}, {VMID: 131, Status: "stopped"}}, At: b.clock.Now()})
	b.apply(t, tasks.TypeInventoryResult, genuine)
	audited := b.discoveryAudit(t)

	withRun := func(r tasks.InventoryResult, id string) tasks.InventoryResult { r.RunID = id; return r }
	withHost := func(r tasks.InventoryResult, id string) tasks.InventoryResult { r.HostID = id; return r }
	withNode := func(r tasks.InventoryResult, n string) tasks.InventoryResult { r.Node = n; return r }
	withActuator := func(r tasks.InventoryResult, a string) tasks.InventoryResult { r.Actuator = a; return r }
	goodOfStrong := seal(b.reportKey, tasks.InventoryResult{RunID: strong.ID.String(), HostID: strong.HostID.String(), Actuator: tasks.DefaultActuator, Node: "strong", At: b.clock.Now()})
	before := b.world(t)
	for _, tc := range []struct {
		name    string
		typ     string
		payload []byte
		want    executions.ReportRefusal
	}{
		{"unsigned", tasks.TypeInventoryResult, mustJSON(t, evil), executions.RefusedUnsigned},
		{"signed by another key", tasks.TypeInventoryResult, seal(strangerKey, evil), executions.RefusedBadSignature},
		{"signed by the bot's order key", tasks.TypeInventoryResult, seal(orderKey, evil), executions.RefusedBadSignature},
		{"a container slipped into a genuine one", tasks.TypeInventoryResult, tamper(t, goodOfStrong, "containers", []map[string]any{{"vmid": 666, "status": "running"}}), executions.RefusedBadSignature},
		{"a genuine inventory relabelled as a probe result", tasks.TypeCheckResult, genuine, executions.RefusedBadSignature},
		{"a run never sent", tasks.TypeInventoryResult, seal(b.reportKey, withRun(evil, uuid.Must(uuid.NewV7()).String())), executions.RefusedNotDispatched},
		{"strong's run for hubris", tasks.TypeInventoryResult, seal(b.reportKey, withHost(evil, hubris.HostID.String())), executions.RefusedNotDispatched},
		{"another node than the run's", tasks.TypeInventoryResult, seal(b.reportKey, withNode(evil, "hubris")), executions.RefusedNotDispatched},
		{"from another actuator", tasks.TypeInventoryResult, seal(b.reportKey, withActuator(evil, "actuator-west")), executions.RefusedWrongActuator},
		{"a replay of hubris's", tasks.TypeInventoryResult, genuine, executions.RefusedReplayed},
		{"a run id that is not one", tasks.TypeInventoryResult, seal(b.reportKey, withRun(evil, "../../etc")), executions.RefusedMalformed},
	} {
		w.enqueue(t, tc.typ, tc.payload)
		got := w.next(t)
		if got.Reason != tc.want {
			t.Errorf("%s: refused as %s (%s), want %s", tc.name, got.Reason, got.Detail, tc.want)
		}
	}
	if d := gocmp.Diff(before, b.world(t)); d != "" {
		t.Errorf("the forged inventories changed Postgres (-before +after):\n%s", d)
	}
	if d := gocmp.Diff(audited, b.discoveryAudit(t)); d != "" {
		t.Errorf("the forged inventories were audited as changes (-before +after):\n%s", d)
	}
	if ns, _ := b.store.InventoryNotices(b.ctx); len(ns) != 0 {
		t.Errorf("the forged inventories left notices: %+v", ns)
	}
	if n := len(query[string](t, b, `SELECT id::text FROM audit_log WHERE action = 'report.refused' AND detail->>'type' = $1`, tasks.TypeInventoryResult)); n != 10 {
		t.Errorf("%d inventory refusals audited, want one per forgery sent as an inventory (10)", n)
	}
}

// TestDiscoveryFollowsVMs runs discovery through a real actuator against
// labsim while an admin works on hubris's VMs outside Nomos: the VMs'
// snapshots (qm listsnapshot) and the type of their disks' storage are
// read into the fleet; a VM the admin destroys is marked gone, with a
// notice, as a vanished container is; and a rollback of a VM on ZFS past
// newer snapshots names and deletes them first, since ZFS rolls back to
// the newest only (pve-storage src/PVE/Storage/ZFSPoolPlugin.pm
// volume_rollback_is_possible: "can't rollback, 'X' is not most recent
// snapshot on '<volid>'"). A host that does not answer marks no VM gone.
func TestDiscoveryFollowsVMs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fleet := testenv.NewFleet(t, func(c *labsim.Config) {
		for i := range c.Hosts {
			for j := range c.Hosts[i].VMs {
				if c.Hosts[i].VMs[j].VMID == 200 {
					c.Hosts[i].VMs[j].Storage = "local-zfs"
				}
			}
		}
	})
	if _, err := b.store.ApplySeed(b.ctx, fleet.Seed); err != nil {
		t.Fatal(err)
	}
	b.startWorkers(t, fleet)
	fleet.Admin(t, "hubris", "qm snapshot 200 first")
	fleet.Admin(t, "hubris", "qm snapshot 200 second")
	b.discover(t, 2)
	ha, err := b.store.EntityBySlug(b.ctx, "vm:hubris/200")
	if err != nil {
		t.Fatal(err)
	}
	if d := gocmp.Diff([]any{"first", "second"}, ha.Attrs["snapshots"]); d != "" || ha.AttrString("storage_type") != "zfspool" {
		t.Errorf("vm:hubris/200 snapshots (-want +got):\n%s; storage type %q, want zfspool", d, ha.AttrString("storage_type"))
	}
	p := b.request(t, "pct_rollback", "vm:hubris/200", `{"name":"first"}`)
	pdiff(t, "steps of a VM rollback on ZFS", []string{"qm delsnapshot 200 second", "qm rollback 200 first"}, p.Execution.Steps)
	pdiff(t, "facts", []string{"second"}, p.Facts.Discard)
	b.notices(t)

	fleet.Admin(t, "hubris", "qm stop 201")
	fleet.Admin(t, "hubris", "qm destroy 201")
	b.clock.Add(5 * time.Minute)
	b.discover(t, 2)
	if got, _ := b.store.EntityBySlug(b.ctx, "vm:hubris/201"); got.Lifecycle != "destroyed" {
		t.Errorf("the destroyed opnsense is %s, want destroyed (gone)", got.Lifecycle)
	}
	if got, _ := b.store.EntityBySlug(b.ctx, "vm:hubris/200"); got.Lifecycle != "active" {
		t.Errorf("homeassistant, still there, is %s", got.Lifecycle)
	}
	notices := b.notices(t)
	if len(notices) != 1 || !slices.Equal(notices[0].Gone, []store.ContainerRef{{VMID: 201, Name: "opnsense"}}) {
		t.Errorf("notices after the destroy = %+v, want one: 201 opnsense gone", notices)
	}
	if got := b.discoveryAudit(t); !slices.Contains(got, "discovery.gone 201") {
		t.Errorf("audit = %v, want opnsense's going recorded", got)
	}

	// hubris stops answering: its VMs are not gone for that.
	fleet.Admin(t, "hubris", "qm stop 200")
	fleet.Admin(t, "hubris", "qm destroy 200 --purge 1")
	if err := fleet.Sim.Inject(labsim.Fault{Kind: labsim.FaultDrop, Target: "hubris"}); err != nil {
		t.Fatal(err)
	}
	b.clock.Add(5 * time.Minute)
	b.discover(t, 2)
	if got, _ := b.store.EntityBySlug(b.ctx, "vm:hubris/200"); got.Lifecycle != "active" {
		t.Errorf("homeassistant is %s after an inventory its host did not answer", got.Lifecycle)
	}
}
