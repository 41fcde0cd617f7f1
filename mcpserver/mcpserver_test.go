package mcpserver_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/seeds"
	"github.com/nomoshq/nomos/store"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	operator = "@operator:localhost"
	opsRoom  = "!ops:localhost"
	// token is the request-scope token of the client named claude, made
	// for operator; readToken the read-scope token of the client named
	// dashboard.
	token     = "test-token-0123456789abcdef"
	readToken = "read-token-0123456789abcdef"
)

// testTokens are the tokens every test server accepts.
var testTokens = []mcpserver.Token{
	{Name: "claude", SHA256: mcpserver.HashToken(token), Scope: mcpserver.ScopeRequest, Owner: operator},
	{Name: "dashboard", SHA256: mcpserver.HashToken(readToken), Scope: mcpserver.ScopeRead},
}

// bundle is one server over its own database (seeded with the demo fleet)
// and Redis database, with an in-process client.
type bundle struct {
	ctx      context.Context
	store    *store.Store
	exec     *executions.Service
	srv      *mcpserver.Server
	client   *client.Client
	redis    asynq.RedisClientOpt
	redisURL string
	pub      ed25519.PublicKey
	keys     testenv.Keys
	seed     *fleetseed.Seed
}

type option func(*mcpserver.Config)

func setup(t *testing.T, opts ...option) *bundle {
	t.Helper()
	return setupWithSeed(t, nil, opts...)
}

// setupWithSeed applies seed, or the embedded demo fleet when seed is nil.
func setupWithSeed(t testing.TB, seed *fleetseed.Seed, opts ...option) *bundle {
	t.Helper()
	ctx := testenv.Context(t)
	st := testenv.Store(t)
	if seed == nil {
		var err error
		if seed, err = fleetseed.Load(seeds.FS); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.ApplySeed(ctx, seed); err != nil {
		t.Fatal(err)
	}
	redisURL := testenv.RedisURL(t)
	opt, err := asynq.ParseRedisURI(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	redisOpt := opt.(asynq.RedisClientOpt)
	queue := asynq.NewClient(redisOpt)
	t.Cleanup(func() { queue.Close() })
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := policy.NewRules(policy.RulesConfig{Operators: []string{operator}})
	if err != nil {
		t.Fatal(err)
	}
	keys := testenv.NewKeys(t)
	execs, err := executions.New(executions.Config{Store: st, Queue: queue, SigningKey: priv, ReportVerifyKey: keys.ReportVerify, Rules: rules, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	cfg := mcpserver.Config{Store: st, Executions: execs, OpsRoomID: opsRoom, Tokens: testTokens, Logger: testenv.Logger(t)}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := mcpserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := srv.InProcessClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &bundle{ctx: ctx, store: st, exec: execs, srv: srv, client: c, redis: redisOpt, redisURL: redisURL, pub: pub, keys: keys, seed: seed}
}

// call calls a tool in-process and returns its text and whether it is a
// tool error.
func (b *bundle) call(t testing.TB, ctx context.Context, name string, args map[string]any) (string, bool) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := b.client.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return resultText(t, res), res.IsError
}

func resultText(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	var parts []string
	for _, c := range res.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ok calls a tool and fails the test on a tool error.
func (b *bundle) ok(t testing.TB, name string, args map[string]any) string {
	t.Helper()
	text, isErr := b.call(t, b.ctx, name, args)
	if isErr {
		t.Fatalf("%s(%v) is a tool error: %s", name, args, text)
	}
	return text
}

// fails calls a tool and fails the test unless it is a tool error.
func (b *bundle) fails(t testing.TB, name string, args map[string]any) string {
	t.Helper()
	text, isErr := b.call(t, b.ctx, name, args)
	if !isErr {
		t.Fatalf("%s(%v) succeeded, want a tool error:\n%s", name, args, text)
	}
	return text
}

func (b *bundle) entity(t testing.TB, slug string) store.Entity {
	t.Helper()
	e, err := b.store.EntityBySlug(b.ctx, slug)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// observe records a check result against an entity.
func (b *bundle) observe(t testing.TB, slug, health, detail string, at time.Time, metrics map[string]float64) {
	t.Helper()
	e := b.entity(t, slug)
	if err := b.store.RecordCheck(b.ctx, store.CheckObservation{TargetID: e.ID.String(), Health: health, Detail: detail, At: at, Metrics: metrics}); err != nil {
		t.Fatal(err)
	}
}

func containsAll(t testing.TB, what, text string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(text, p) {
			t.Errorf("%s does not contain %q:\n%s", what, p, text)
		}
	}
}

func containsNone(t testing.TB, what, text string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if strings.Contains(text, p) {
			t.Errorf("%s contains %q, and must not:\n%s", what, p, text)
		}
	}
}

func toolNames(t testing.TB, ctx context.Context, c *client.Client) []string {
	t.Helper()
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// wantRequestTools are what a request token is offered: the agent's
// tools and delete_session, which is not for the agent.
var wantRequestTools = slices.Sorted(slices.Values(append([]string{"delete_session"}, wantTools...)))

// wantTools are the agent's tools.
var wantTools = []string{
	"get_agent_activity", "get_blast_radius", "get_entity", "get_entity_knowledge", "get_execution",
	"get_health_summary", "get_lxc_state", "get_signal_history", "get_state_snapshot", "get_trend", "get_vm_state",
	"http_get", "list_entities", "list_guests", "list_lxcs", "list_vms", "query_metrics", "request_execution", "search_knowledge", "tail_log",
}

func TestRegistryAnnotations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := b.client.ListTools(b.ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		a := tl.Annotations
		if a.ReadOnlyHint == nil || a.DestructiveHint == nil {
			t.Errorf("%s: readOnlyHint and destructiveHint must both be set, got %+v", tl.Name, a)
			continue
		}
		wantRO, wantDestructive := true, false
		if tl.Name == "request_execution" {
			wantRO, wantDestructive = false, true
		}
		if *a.ReadOnlyHint != wantRO || *a.DestructiveHint != wantDestructive {
			t.Errorf("%s: readOnlyHint=%v destructiveHint=%v, want %v and %v", tl.Name, *a.ReadOnlyHint, *a.DestructiveHint, wantRO, wantDestructive)
		}
		if len(tl.Description) < 80 {
			t.Errorf("%s: description %q is too short to tell a model when to use it", tl.Name, tl.Description)
		}
	}
	slices.Sort(names)
	if diff := cmp.Diff(wantTools, names); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	// The bulk tool says not to fan out.
	for _, tl := range res.Tools {
		if tl.Name == "list_lxcs" && !strings.Contains(tl.Description, "Never call get_lxc_state once per container") {
			t.Errorf("list_lxcs description does not warn against fan-out: %s", tl.Description)
		}
		if tl.Name == "request_execution" {
			for _, spec := range policy.Catalogue() {
				if !strings.Contains(tl.Description, "- "+string(spec.Action)+" (") {
					t.Errorf("request_execution description does not document %s", spec.Action)
				}
			}
		}
	}
}

func TestListLXCsAnswersForTheWholeFleetInOneCall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	b.observe(t, "lxc:hubris/131", "unhealthy", "container 131 is stopped", now.Add(-time.Minute), nil)
	b.observe(t, "lxc:strong/101", "healthy", "container 101 is running", now.Add(-time.Minute), nil)
	b.observe(t, "service:authentik-worker", "degraded", "authentik-worker.service is activating", now, nil)

	text := b.ok(t, "list_lxcs", nil)
	var containers int
	for _, h := range b.seed.Hosts {
		for _, c := range h.Containers {
			containers++
			row := ""
			for line := range strings.Lines(text) {
				if strings.HasPrefix(line, strconv.Itoa(c.VMID)+" "+c.Hostname+" ") {
					row = line
				}
			}
			if row == "" {
				t.Errorf("container %d (%s) is missing from list_lxcs:\n%s", c.VMID, c.Hostname, text)
				continue
			}
			containsAll(t, "row of "+c.Hostname, row, c.Hostname, h.Name, c.IP)
		}
	}
	if containers != 15 {
		t.Fatalf("the demo seed has %d containers, want 15", containers)
	}
	containsAll(t, "list_lxcs", text,
		"15 containers on 2 hosts (hubris 7, strong 8): 1 unhealthy, 13 unknown, 1 healthy",
		"131 teddycloud hubris 10.40.0.131/24 unhealthy teddycloud — container 131 is stopped",
		"103 authentik strong 10.40.0.103/24 unknown authentik,authentik-worker(degraded)",
		"105 postgres strong 10.40.0.105/24 unknown postgres")

	only := b.ok(t, "list_lxcs", map[string]any{"health": "attention", "host": "hubris"})
	containsAll(t, "filtered list_lxcs", only, "7 containers with host=hubris health=attention on 1 host (hubris 7): 1 unhealthy, 6 unknown", "131 teddycloud")
	containsNone(t, "filtered list_lxcs", only, "101 jellyfin")
	b.fails(t, "list_lxcs", map[string]any{"health": "purple"})
}

func TestHealthSummaryAndSnapshot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	for _, h := range b.seed.Hosts {
		for _, c := range h.Containers {
			b.observe(t, policy.ContainerSlug(h.ClusterName(), c.VMID), "healthy", "running", now.Add(-2*time.Minute), nil)
		}
	}
	b.observe(t, "service:jellyfin", "unhealthy", "GET /health: connection refused", now.Add(-3*time.Minute), map[string]float64{"probe_ms": 12})
	b.observe(t, "host:strong", "degraded", "/ is 88% full", now.Add(-4*time.Minute), map[string]float64{"disk_used_pct": 88})
	b.observe(t, "host:hubris", "healthy", "/ is 41% full", now.Add(-4*time.Minute), map[string]float64{"disk_used_pct": 41})
	// A probe's own bookkeeping entity is never counted.
	b.observe(t, "check:jellyfin-http", "unhealthy", "probe entity", now, nil)
	if _, _, err := b.store.RaiseSignal(b.ctx, store.NewSignal{EntityID: b.entity(t, "lxc:hubris/131").ID, Kind: "drift", Severity: "warning",
		Summary: "container 131 runs on hubris without an inventory entry", At: now.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	p, err := b.exec.Request(b.ctx, executions.Request{Action: "restart", Target: "jellyfin", RequestedBy: operator, Via: "chat", RoomID: opsRoom})
	if err != nil {
		t.Fatal(err)
	}

	sum := b.ok(t, "get_health_summary", nil)
	containsAll(t, "get_health_summary", sum,
		"host: 2 — 1 degraded, 1 healthy",
		"lxc: 15 — 15 healthy",
		"service: 21 — 1 unhealthy, 20 unknown",
		"service:jellyfin unhealthy — GET /health: connection refused",
		"host:strong degraded — / is 88% full")
	containsAll(t, "get_health_summary", sum, "unknown (no check result yet): 22 — service:adguard, service:authentik,")
	containsNone(t, "get_health_summary", sum, "check:", "probe entity", "service:vaultwarden")

	snap := b.ok(t, "get_state_snapshot", nil)
	containsAll(t, "get_state_snapshot", snap,
		"health: host 2 (1 degraded, 1 healthy); lxc 15 (15 healthy); service 21 (1 unhealthy, 20 unknown)",
		"disk used (latest, fullest first): host:strong 88% (4m ago); host:hubris 41% (4m ago);",
		"open signals: 1 (1 warning)",
		"warning drift lxc:hubris/131: container 131 runs on hubris without an inventory entry (raised, 1h ago)",
		"executions in flight: 1",
		p.Execution.ID.String()+" restart service:jellyfin: awaiting_approval (reversible_low), by "+operator+" via chat")
	if len(snap) > 4<<10 {
		t.Errorf("the demo fleet's snapshot is %d bytes; it should stay compact", len(snap))
	}
}

func TestListAndGetEntity(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	b.observe(t, "service:postgres", "healthy", "postgresql.service is active", now.Add(-time.Minute), map[string]float64{"probe_ms": 30})

	services := b.ok(t, "list_entities", map[string]any{"type": "service"})
	containsAll(t, "list_entities", services, "21 service: 20 unknown, 1 healthy",
		"service:postgres healthy in lxc:strong/105 unit postgresql.service port 5432",
		"service:authentik-worker unknown in lxc:strong/103 unit authentik-worker.service")
	containsNone(t, "list_entities", services, "\nlxc:", "check:")
	checks := b.ok(t, "list_entities", map[string]any{"type": "check"})
	containsAll(t, "checks", checks, "23 check", "check:postgres-tcp unknown tcp on service:postgres")

	ent := b.ok(t, "get_entity", map[string]any{"entity": "service:postgres"})
	containsAll(t, "get_entity", ent,
		"service:postgres postgres (service, active): healthy — postgresql.service is active",
		"unit=postgresql.service", "vmid=105",
		"in: lxc:strong/105 runs this; service:authentik depends_on this; service:gitea depends_on this",
		"policy: * → config_mutation (shared database", "restart → config_mutation",
		"metrics: probe_ms 30")
	lxc := b.ok(t, "get_entity", map[string]any{"entity": "105"})
	containsAll(t, "get_entity 105", lxc, "lxc:strong/105 postgres (lxc, active)", "this: runs service:postgres",
		"policy: * → config_mutation (the database container)", "* on service:postgres → at least config_mutation")

	amb := b.fails(t, "get_entity", map[string]any{"entity": "postgres"})
	containsAll(t, "ambiguous get_entity", amb, `"postgres" matches 2 entities: lxc:strong/105, service:postgres`)
	none := b.fails(t, "get_entity", map[string]any{"entity": "plex"})
	containsAll(t, "unknown get_entity", none, `no entity is called "plex"`)
}

func TestBlastRadius(t *testing.T) {
	t.Parallel()
	b := setup(t)
	text := b.ok(t, "get_blast_radius", map[string]any{"entity": "service:postgres"})
	containsAll(t, "get_blast_radius", text,
		"Acting on service:postgres (unknown) reaches",
		"1 service:gitea unknown — depends on service:postgres",
		"1 service:authentik unknown — depends on service:postgres",
		"1 service:paperless unknown — depends on service:postgres",
		"1 service:immich unknown — depends on service:postgres",
		"1 service:nextcloud unknown — depends on service:postgres",
		"2 service:authentik-worker unknown — depends on service:authentik",
		"2 service:grafana unknown — depends on service:authentik")
	containsNone(t, "get_blast_radius", text, "service:jellyfin", "lxc:strong/105")
	leaf := b.ok(t, "get_blast_radius", map[string]any{"entity": "service:uptime-kuma"})
	containsAll(t, "leaf blast radius", leaf, "affects nothing else")
}

func TestSignalHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	strong := b.entity(t, "host:strong").ID
	if _, _, err := b.store.RaiseSignal(b.ctx, store.NewSignal{EntityID: strong, Kind: "disk_full", Severity: "critical", Summary: "/ is 95% full", At: now.Add(-2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	again, raised, err := b.store.RaiseSignal(b.ctx, store.NewSignal{EntityID: strong, Kind: "disk_full", Severity: "critical", Summary: "again"})
	if err != nil || raised || again.Summary != "/ is 95% full" {
		t.Fatalf("raising an open signal again = %+v, %v, %v; want the open one, false", again, raised, err)
	}
	jf := b.entity(t, "service:jellyfin").ID
	if _, _, err := b.store.RaiseSignal(b.ctx, store.NewSignal{EntityID: jf, Kind: "check_failed", Severity: "warning", Summary: "health check failed", At: now.Add(-3 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := b.store.ResolveSignal(b.ctx, jf, "check_failed", now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	text := b.ok(t, "get_signal_history", nil)
	containsAll(t, "get_signal_history", text, "1 open, 1 closed in the last 7d",
		"raised critical disk_full host:strong: / is 95% full — raised 2h ago",
		"resolved warning check_failed service:jellyfin: health check failed — raised 3h ago, resolved 1h ago")
	if strings.Index(text, "disk_full") > strings.Index(text, "check_failed") {
		t.Errorf("open signals must come first:\n%s", text)
	}
	amb := b.fails(t, "get_signal_history", map[string]any{"entity": "jellyfin"})
	containsAll(t, "ambiguous entity", amb, "lxc:strong/101, service:jellyfin")
	one := b.ok(t, "get_signal_history", map[string]any{"entity": "service:jellyfin", "since": "30m"})
	containsAll(t, "one entity, short window", one, "No signals for service:jellyfin")
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	for i := range 12 {
		at := now.Add(-time.Duration(11-i) * 10 * time.Minute)
		b.observe(t, "host:strong", "healthy", "", at, map[string]float64{"disk_used_pct": 60 + float64(i)})
		b.observe(t, "host:hubris", "healthy", "", at, map[string]float64{"disk_used_pct": 40})
	}
	b.observe(t, "lxc:hubris/114", "degraded", "", now, map[string]float64{"disk_used_pct": 90})

	text := b.ok(t, "query_metrics", map[string]any{"metric": "disk_used_pct", "since": "3h", "aggregate": "max"})
	containsAll(t, "query_metrics", text,
		"disk_used_pct over the last 3h, max per entity, highest first (3 entities):",
		"lxc:hubris/114 90 — latest 90",
		"host:strong 71 — latest 71 (just now), avg 65.5, min 60, max 71, n=12",
		"host:hubris 40 —")
	if strings.Index(text, "lxc:hubris/114") > strings.Index(text, "host:strong") || strings.Index(text, "host:strong") > strings.Index(text, "host:hubris") {
		t.Errorf("query_metrics is not highest first:\n%s", text)
	}
	hosts := b.ok(t, "query_metrics", map[string]any{"metric": "disk_used_pct", "since": "3h", "type": "host", "limit": 1})
	containsAll(t, "limited query_metrics", hosts, "host:strong", "… 1 more")
	containsNone(t, "limited query_metrics", hosts, "lxc:hubris/114")
	names := b.ok(t, "query_metrics", map[string]any{"since": "3h"})
	containsAll(t, "metric names", names, "disk_used_pct — 3 entities, 25 samples")
	missing := b.ok(t, "query_metrics", map[string]any{"metric": "cpu_pct"})
	containsAll(t, "unknown metric", missing, "No cpu_pct samples", "disk_used_pct — ")

	trend := b.ok(t, "get_trend", map[string]any{"entity": "host:strong", "metric": "disk_used_pct", "since": "2h", "buckets": 4})
	containsAll(t, "get_trend", trend, "host:strong disk_used_pct over the last 2h in 30m buckets (UTC):", "max 71, 12 samples")
	if n := strings.Count(trend, " n="); n < 4 || n > 5 {
		t.Errorf("get_trend shows %d buckets, want 4 or 5:\n%s", n, trend)
	}
	none := b.ok(t, "get_trend", map[string]any{"entity": "host:strong", "metric": "cpu_pct"})
	containsAll(t, "trend of a missing metric", none, "No cpu_pct samples for host:strong", "disk_used_pct (latest just now)")
	b.fails(t, "get_trend", map[string]any{"entity": "host:strong", "metric": "disk_used_pct", "since": "yesterday"})
}

func TestKnowledge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	text := b.ok(t, "search_knowledge", map[string]any{"query": "dns resolver"})
	lines := strings.Split(text, "\n")
	i := slices.IndexFunc(lines, func(l string) bool {
		return strings.Contains(l, ". static-ip-dead-resolver (investigation): New static-IP containers")
	})
	if i < 0 || i+1 >= len(lines) {
		t.Fatalf("search_knowledge \"dns resolver\" does not find static-ip-dead-resolver:\n%s", text)
	}
	if snippet := lines[i+1]; !strings.Contains(snippet, "«DNS»") || !strings.Contains(snippet, "«resolving»") {
		t.Errorf("the hit has no highlighted snippet:\n%s", text)
	}
	containsAll(t, "search_knowledge", text, "about host:hubris, host:strong, service:adguard", "tags dns, provisioning")

	loose := b.ok(t, "search_knowledge", map[string]any{"query": "why does apt fail resolving deb.debian.org in a fresh container"})
	containsAll(t, "loose search", loose, "static-ip-dead-resolver", "no document has every word")
	nothing := b.ok(t, "search_knowledge", map[string]any{"query": "kubernetes"})
	containsAll(t, "empty search", nothing, `No document matches "kubernetes"`)

	docs := b.ok(t, "get_entity_knowledge", map[string]any{"entity": "service:postgres"})
	lines = strings.Split(docs, "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "## postgres-shared-database (doc): The shared Postgres container — linked to it directly") {
		t.Fatalf("get_entity_knowledge service:postgres does not list postgres-shared-database first:\n%s", docs)
	}
	containsAll(t, "get_entity_knowledge", docs, "gitea, authentik, paperless, immich",
		"## authentik-sso (doc): Authentik single sign-on — through service:authentik (service:authentik depends_on this)")
	lxc := b.ok(t, "get_entity_knowledge", map[string]any{"entity": "lxc:hubris/112"})
	containsAll(t, "knowledge of lxc:hubris/112", lxc, "adguard-dns", "## static-ip-dead-resolver (investigation): New static-IP containers cannot resolve names — through host:hubris (host:hubris hosts this)")
}

// TestAgentPlanFromAnUnlistedRoomGoesToTheOpsRoom: an agent session in a
// room that is not one for plans (a direct message, a room an operator
// made and invited the bot to) asks for a plan; it is recorded for the ops
// room, where its card goes, never for the session's room.
func TestAgentPlanFromAnUnlistedRoomGoesToTheOpsRoom(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *mcpserver.Config) { c.Rooms = []string{"!listed:localhost"} })
	// A service each: the same restart asked for twice would point at
	// the first plan.
	for room, service := range map[string]string{"!listed:localhost": "jellyfin", "!elsewhere:localhost": "gitea"} {
		ctx := mcpserver.WithCaller(b.ctx, mcpserver.Caller{Via: mcpserver.ViaAgent, RequestedBy: operator, RoomID: room})
		req := mcp.CallToolRequest{}
		req.Params.Name = "request_execution"
		req.Params.Arguments = map[string]any{"action": "restart", "target": service, "reason": "asked in " + room}
		res, err := b.client.CallTool(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			t.Fatalf("request_execution from %s failed: %s", room, resultText(t, res))
		}
		var got mcpserver.Requested
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatalf("structured content %s: %v", raw, err)
		}
		want := room
		if room == "!elsewhere:localhost" {
			want = opsRoom
			containsAll(t, "request_execution from an unlisted room", resultText(t, res), "its card is posted in the ops room")
		}
		if got.RoomID != want {
			t.Errorf("a plan the agent asked for in %s is for room %s, want %s", room, got.RoomID, want)
		}
	}
}

func TestRequestExecutionFromTheAgentUsesTheSessionRoom(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *mcpserver.Config) { c.Rooms = []string{"!session:localhost"} })
	ctx := mcpserver.WithCaller(b.ctx, mcpserver.Caller{Via: mcpserver.ViaAgent, RequestedBy: operator, RoomID: "!session:localhost"})
	req := mcp.CallToolRequest{}
	req.Params.Name = "request_execution"
	req.Params.Arguments = map[string]any{"action": "restart", "target": "jellyfin", "reason": "it stopped answering after a library scan"}
	res, err := b.client.CallTool(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	text := resultText(t, res)
	if res.IsError {
		t.Fatalf("request_execution failed: %s", text)
	}
	var got mcpserver.Requested
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("structured content %s: %v", raw, err)
	}
	id, err := uuid.Parse(got.ExecutionID)
	if err != nil {
		t.Fatalf("structured content has no execution id: %s", raw)
	}
	containsAll(t, "request_execution", text, "queued for approval: execution "+id.String()+" (reversible_low): restart on service:jellyfin",
		"The operator approves it in the room.", "End your turn now")
	x, err := b.store.GetExecution(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// The agent is the requester; the operator it acts for is recorded
	// beside it, so approvals.self_approval can hold them both to it.
	want := struct{ State, Via, By, For, Room, Risk string }{"awaiting_approval", "agent", "agent", operator, "!session:localhost", "reversible_low"}
	gotX := struct{ State, Via, By, For, Room, Risk string }{string(x.State), x.RequestedVia, x.RequestedBy, x.OnBehalfOf, x.RoomID, x.RiskClass}
	if diff := cmp.Diff(want, gotX); diff != "" {
		t.Errorf("execution (-want +got):\n%s", diff)
	}
	audit, err := b.store.AuditFor(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(audit, func(a store.AuditEntry) bool {
		return a.Action == "execution.requested" && a.Detail["reason"] == "it stopped answering after a library scan"
	}) {
		t.Errorf("the reason is not in the request's audit row: %+v", audit)
	}
	if x.Reason != "it stopped answering after a library scan" {
		t.Errorf("the execution's reason is %q", x.Reason)
	}

	// A call that names no caller acts as the agent in the ops room.
	plain := b.ok(t, "request_execution", map[string]any{"action": "pct_reboot", "target": "110", "params": map[string]any{}, "reason": "kernel update"})
	xs, err := b.store.ExecutionsVia(b.ctx, []string{"agent"}, 10)
	if err != nil || len(xs) != 2 || xs[0].RoomID != opsRoom || xs[0].RequestedBy != "agent" || xs[0].TargetSlug != "lxc:hubris/110" {
		t.Fatalf("the default agent request = %+v, %v:\n%s", xs, err, plain)
	}

	got2 := b.ok(t, "get_execution", map[string]any{"id": id.String()})
	containsAll(t, "get_execution", got2, "execution "+id.String()+": restart on service:jellyfin — awaiting_approval (reversible_low)",
		"requested by agent via agent for "+operator, "awaiting approval, expires in", "step 1: ")
	b.fails(t, "get_execution", map[string]any{"id": "not-an-id"})
	b.fails(t, "get_execution", map[string]any{"id": uuid.NewString()})

	act := b.ok(t, "get_agent_activity", nil)
	containsAll(t, "get_agent_activity", act, "latest executions via agent or mcp:", id.String()+" restart service:jellyfin: awaiting_approval")
}

func TestRequestExecutionRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	amb := b.fails(t, "request_execution", map[string]any{"action": "systemctl", "target": "postgres", "params": map[string]any{"verb": "reload"}, "reason": "config change"})
	containsAll(t, "ambiguous target", amb, `nothing was queued: "postgres" matches 2 entities: lxc:strong/105, service:postgres; call again with one of these slugs`)
	unknown := b.fails(t, "request_execution", map[string]any{"action": "restart", "target": "plex", "reason": "x"})
	containsAll(t, "unknown target", unknown, "nothing was queued", `"plex"`, "list_lxcs")
	badParams := b.fails(t, "request_execution", map[string]any{"action": "pct_exec", "target": "101", "params": map[string]any{"cmd": "ls"}, "reason": "x"})
	containsAll(t, "bad params", badParams, "nothing was queued", "params")
	noReason := b.fails(t, "request_execution", map[string]any{"action": "restart", "target": "jellyfin"})
	containsAll(t, "no reason", noReason, "needs a reason")
	asString := b.ok(t, "request_execution", map[string]any{"action": "pct_exec", "target": "101", "params": `{"command": "rm -rf /var/cache/apt/archives"}`, "reason": "free space"})
	containsAll(t, "params as a JSON string", asString, "queued for approval")
	xs, err := b.store.ListExecutions(b.ctx, store.ExecutionFilter{})
	if err != nil || len(xs) != 1 {
		t.Fatalf("refused requests left executions behind: %d, %v", len(xs), err)
	}
}

func TestAgentActivityCountsSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sess, err := b.store.EnsureAgentSession(b.ctx, "!ops:localhost", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.store.SetAgentSessionTitle(b.ctx, sess.ID, "jellyfin is down"); err != nil {
		t.Fatal(err)
	}
	calls := json.RawMessage(`[{"id":"c1","type":"function","function":{"name":"list_lxcs","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"get_entity","arguments":"{}"}}]`)
	_, err = b.store.AppendAgentMessages(b.ctx, sess.ID,
		store.AgentMessage{Role: store.AgentRoleUser, Content: "which containers are unhealthy?"},
		store.AgentMessage{Role: store.AgentRoleAssistant, ToolCalls: calls},
		store.AgentMessage{Role: store.AgentRoleTool, ToolCallID: "c1", Content: "13 containers"},
		store.AgentMessage{Role: store.AgentRoleTool, ToolCallID: "c2", Content: "jellyfin"},
		store.AgentMessage{Role: store.AgentRoleAssistant, Content: "All healthy."},
	)
	if err != nil {
		t.Fatal(err)
	}
	text := b.ok(t, "get_agent_activity", map[string]any{"since": "1h"})
	containsAll(t, "get_agent_activity", text,
		"Agent activity in the last 1h: 1 of 1 sessions active, 5 messages (2 assistant, 2 tool, 1 user), 2 tool calls, 0 continuations",
		`!ops:localhost "jellyfin is down" — 5 messages`,
		"no executions requested via agent or mcp yet")
}
