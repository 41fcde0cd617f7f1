package main

import (
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/crypto/ssh"

	"github.com/nomoshq/nomos/actuator"
	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/metrics"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/seeds"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/web"
)

// roleMetrics is what the bot's and the actuator's /metrics serve, built
// by the functions the roles use, over a real database, Redis and
// actuator, with at least one series in every family.
type roleMetrics struct {
	registries map[string]*prometheus.Registry // by role
	// ours are the families Nomos itself describes, by role.
	ours map[string][]string
}

func setupRoleMetrics(t *testing.T) roleMetrics {
	t.Helper()
	ctx := testenv.Context(t)

	// The bot: its parts' figures, each fed once; asynq's, with a task in a
	// queue; the page's, over a database holding entities and an execution.
	m := metrics.New()
	m.Approval("approved", "reversible_low", time.Minute)
	m.ExecutionEnded("succeeded", "reversible_low", 3*time.Second)
	m.MatrixSend(metrics.ResultOK, 20*time.Millisecond)
	m.MatrixSync(5 * time.Millisecond)
	m.LLMRequest(metrics.ResultOK, time.Second)
	m.LLMTokens(10, 5)
	m.MCPCall("list_lxcs", metrics.ResultOK)
	redisOpt, err := asynq.ParseRedisURI(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClient(redisOpt)
	defer client.Close()
	if _, err := client.Enqueue(asynq.NewTask("metrics:test", nil), asynq.Queue("nomos:metrics")); err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspector(redisOpt)
	t.Cleanup(func() { insp.Close() })
	botReg, err := botMetricsRegistry(m, insp)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, store.Config{URL: testenv.DatabaseURL(t), Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	seed, err := fleetseed.Load(seeds.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplySeed(ctx, seed); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateExecution(ctx, store.NewExecution{Request: store.Request{
		ID: uuid.Must(uuid.NewV7()), Action: "restart", TargetSlug: "service:jellyfin", Params: json.RawMessage(`{}`),
		Steps: []string{"pct exec 101 -- systemctl restart jellyfin.service"}, RiskClass: "reversible_low",
		PlanHash: strings.Repeat("a", 64), PlanCode: "abcd", State: store.StateAwaitingApproval,
		RequestedBy: "@operator:nomos.test", RequestedVia: "chat", ExpiresAt: time.Now().Add(30 * time.Minute),
	}}, nil); err != nil {
		t.Fatal(err)
	}
	page, err := web.New(web.Config{Store: st, Logger: testenv.Logger(t), Registry: botReg})
	if err != nil {
		t.Fatal(err)
	}

	// The actuator, built but not started: its collector reads its
	// journal and counters.
	keys := testenv.NewKeys(t)
	_, sshKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(sshKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	knownHosts := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(knownHosts, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	act, err := actuator.New(actuator.Config{
		RedisURL: testenv.RedisURL(t), VerifyKey: keys.OrderVerify, ReportSigningKey: keys.ReportSigning,
		SSHSigner: signer, KnownHostsFile: knownHosts, JournalPath: filepath.Join(dir, "journal"),
	})
	if err != nil {
		t.Fatal(err)
	}
	actReg, err := metricsRegistry(act.Collector())
	if err != nil {
		t.Fatal(err)
	}
	build := metrics.BuildInfo(version, commit)
	return roleMetrics{
		registries: map[string]*prometheus.Registry{"bot": botReg, "actuator": actReg},
		ours: map[string][]string{
			"bot":      describedNames(t, build, m, page.Collector()),
			"actuator": describedNames(t, build, act.Collector()),
		},
	}
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// describedNames are the metric names cs describe.
func describedNames(t *testing.T, cs ...prometheus.Collector) []string {
	t.Helper()
	var names []string
	for _, c := range cs {
		ch := make(chan *prometheus.Desc)
		go func() {
			c.Describe(ch)
			close(ch)
		}()
		for d := range ch {
			match := fqName.FindStringSubmatch(d.String())
			if match == nil {
				t.Fatalf("no name in %s", d)
			}
			names = append(names, match[1])
		}
	}
	return names
}

// gathered are the family names reg serves, with their types.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, mf := range mfs {
		out[mf.GetName()] = strings.ToLower(mf.GetType().String())
	}
	return out
}

// TestMetricsPassPromlint: every family the bot's and the actuator's
// /metrics serve passes promlint (base units, _total on counters only,
// help on every family…), ours and the Go client's; and every family Nomos
// describes is among those linted, so none escapes for want of a series.
// asynq's queue metrics are left out of the lint: their names are
// asynq's, the ones asynqmon and the dashboards written for asynq read,
// and two of its gauges end in _total.
func TestMetricsPassPromlint(t *testing.T) {
	t.Parallel()
	rm := setupRoleMetrics(t)
	for role, reg := range rm.registries {
		problems, err := testutil.GatherAndLint(reg)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			if !strings.HasPrefix(p.Metric, "asynq_") {
				t.Errorf("%s /metrics: %s: %s", role, p.Metric, p.Text)
			}
		}
		served := gathered(t, reg)
		for _, name := range rm.ours[role] {
			if _, ok := served[name]; !ok {
				t.Errorf("%s /metrics: %s is registered but served no series, so it was not linted", role, name)
			}
		}
		if _, ok := served["nomos_build_info"]; !ok {
			t.Errorf("%s /metrics lacks nomos_build_info", role)
		}
	}
	if served := gathered(t, rm.registries["bot"]); served["asynq_tasks_enqueued_total"] == "" {
		t.Errorf("the bot's /metrics lacks asynq's queue metrics: %v", served)
	}
}

// TestBuildInfo: nomos_build_info is 1, labelled with the version and
// commit the binary was stamped with and the Go release that built it.
func TestBuildInfo(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.BuildInfo("v0.3.0", "abc123"))
	want := `
# HELP nomos_build_info Always 1; its labels say which build of Nomos the process runs (version, commit, goversion).
# TYPE nomos_build_info gauge
nomos_build_info{commit="abc123",goversion="` + runtime.Version() + `",version="v0.3.0"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "nomos_build_info"); err != nil {
		t.Error(err)
	}
}

// dashboardMetric finds the metric names in a PromQL expression: ours,
// asynq's and the Go client's. Label names, functions and Grafana
// variables carry none of these prefixes.
var dashboardMetric = regexp.MustCompile(`\b(?:nomos|asynq|go|process)_[a-z0-9_]+\b`)

// TestDashboardUsesRegisteredMetrics: every metric deploy/grafana/nomos.json
// queries is one the bot or the actuator serves (a histogram's _bucket,
// _sum and _count included), so a renamed metric cannot leave a panel
// silently empty.
func TestDashboardUsesRegisteredMetrics(t *testing.T) {
	t.Parallel()
	rm := setupRoleMetrics(t)
	served := map[string]string{}
	for _, reg := range rm.registries {
		for name, typ := range gathered(t, reg) {
			served[name] = typ
		}
	}
	known := func(name string) bool {
		if _, ok := served[name]; ok {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && served[base] == "histogram" {
				return true
			}
		}
		return false
	}

	exprs := dashboardExprs(t, "../../deploy/grafana/nomos.json")
	if len(exprs) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	var used []string
	for _, e := range exprs {
		names := dashboardMetric.FindAllString(e, -1)
		if len(names) == 0 {
			t.Errorf("dashboard query %q names no metric of Nomos", e)
		}
		for _, name := range names {
			if !known(name) {
				t.Errorf("dashboard query %q uses %s, which neither role serves", e, name)
			}
			used = append(used, name)
		}
	}
	// The check would pass on a dashboard of misspelt names that happen
	// to match nothing; make sure it sees the families it is meant for.
	for _, want := range []string{"nomos_build_info", "nomos_actuator_requests_refused_total", "asynq_tasks_enqueued_total"} {
		if !slices.Contains(used, want) {
			t.Errorf("the dashboard does not chart %s", want)
		}
	}
}

// dashboardExprs returns every "expr" in a Grafana dashboard: panel
// targets and template variable queries.
func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "query" || k == "definition") && dashboardMetric.MatchString(s) {
					exprs = append(exprs, s)
				} else if ok && k == "expr" {
					exprs = append(exprs, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	return exprs
}
