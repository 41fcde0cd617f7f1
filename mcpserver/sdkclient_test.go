package mcpserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

// sdkClientDir holds the official MCP TypeScript SDK client and its
// package-lock.json; make prepare installs it.
const sdkClientDir = "testdata/sdkclient"

// sdkPlan is what the SDK client does: see testdata/sdkclient/client.mjs.
type sdkPlan struct {
	Calls     []sdkCall   `json:"calls"`
	Prompts   []sdkPrompt `json:"prompts"`
	Resources []string    `json:"resources"`
}

type sdkCall struct {
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
}

type sdkPrompt struct {
	Name      string            `json:"name"`
	Arguments map[string]string `json:"arguments"`
}

// sdkReport is what the SDK client saw.
type sdkReport struct {
	Tools []struct {
		Name          string          `json:"name"`
		InputSchema   json.RawMessage `json:"inputSchema"`
		OutputSchema  json.RawMessage `json:"outputSchema"`
		InputCompiles bool            `json:"inputCompiles"`
		InputError    string          `json:"inputError"`
	} `json:"tools"`
	Calls []struct {
		Tool              string          `json:"tool"`
		Arguments         map[string]any  `json:"arguments"`
		ArgumentsValid    *bool           `json:"argumentsValid"`
		ArgumentErrors    json.RawMessage `json:"argumentErrors"`
		IsError           bool            `json:"isError"`
		Text              string          `json:"text"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		Validated         *bool           `json:"validated"`
		ValidationErrors  json.RawMessage `json:"validationErrors"`
		RejectsBroken     *bool           `json:"rejectsBroken"`
		Thrown            string          `json:"thrown"`
	} `json:"calls"`
	Resources []struct {
		URI      string `json:"uri"`
		MIMEType string `json:"mimeType"`
	} `json:"resources"`
	Templates []struct {
		URITemplate string `json:"uriTemplate"`
	} `json:"templates"`
	Reads []struct {
		URI      string `json:"uri"`
		Contents []struct {
			URI  string `json:"uri"`
			Text string `json:"text"`
		} `json:"contents"`
		Thrown string `json:"thrown"`
	} `json:"reads"`
	Prompts []struct {
		Name string `json:"name"`
	} `json:"prompts"`
	PromptResults []struct {
		Name     string            `json:"name"`
		Messages []json.RawMessage `json:"messages"`
		Thrown   string            `json:"thrown"`
	} `json:"promptResults"`
}

// runSDKClient runs the SDK client against url with bearer, carrying out
// plan. It installs the client's packages from the lockfile when they are
// missing; make prepare installs Node and npm.
func runSDKClient(t *testing.T, url, bearer string, plan sdkPlan) sdkReport {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed, and the MCP TypeScript SDK client needs it: run make prepare")
	}
	if _, err := os.Stat(filepath.Join(sdkClientDir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		npm := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--prefer-offline")
		npm.Dir = sdkClientDir
		if out, err := npm.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", sdkClientDir, err, out)
		}
	}
	in, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "client.mjs")
	cmd.Dir = sdkClientDir
	cmd.Env = append(os.Environ(), "MCP_URL="+url, "MCP_TOKEN="+bearer)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("SDK client: %v\n%s", err, stderr.String())
	}
	var r sdkReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("SDK client report: %v\n%s\n%s", err, out, stderr.String())
	}
	return r
}

// TestSDKClientValidatesEveryTool drives Nomos's MCP endpoint with the
// official TypeScript SDK client over streamable HTTP, against the demo
// fleet in a real Postgres, with a real actuator over SSH to labsim for the
// live probes. The client lists the tools, calls every one, and validates
// each result's structuredContent against the tool's declared output schema
// (the SDK does it itself; the client checks again with Ajv, and checks the
// validator refuses a broken copy). It also lists and reads the resources
// and gets the prompts.
func TestSDKClientValidatesEveryTool(t *testing.T) {
	t.Parallel()
	fleet := testenv.NewFleet(t)
	page := newCountingServer(t, func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "# jellyfin\nA media server.") })
	b := setupWithSeed(t, fleet.Seed, func(c *mcpserver.Config) {
		c.AllowHTTPGetAddr = func(a netip.Addr) bool { return a.IsLoopback() }
		c.HTTPAllow = []string{"localhost"}
		// Six requests in a row: three live probes and three requests.
		c.RequestBurst = 10
	})
	startActuator(t, b, fleet)
	session, err := b.store.EnsureAgentSession(b.ctx, opsRoom, "")
	if err != nil {
		t.Fatal(err)
	}
	url := serveHTTP(t, b.srv.HTTPHandler())
	pageURL := strings.Replace(page.URL, "127.0.0.1", "localhost", 1) + "/README.md"

	plan := sdkPlan{
		Calls: []sdkCall{
			{"list_lxcs", nil},
			{"list_lxcs", map[string]any{"health": "attention"}},
			{"list_vms", map[string]any{}},
			{"list_guests", map[string]any{"host": "strong"}},
			{"get_state_snapshot", nil},
			{"get_health_summary", nil},
			{"list_entities", map[string]any{"type": "service"}},
			{"get_entity", map[string]any{"entity": "service:jellyfin"}},
			{"get_blast_radius", map[string]any{"entity": "lxc:strong/101"}},
			{"get_signal_history", map[string]any{"since": "1d", "limit": 5}},
			{"query_metrics", nil},
			{"query_metrics", map[string]any{"metric": "disk_used_pct", "aggregate": "max", "type": "lxc", "limit": 3}},
			{"get_trend", map[string]any{"entity": "lxc:strong/101", "metric": "disk_used_pct", "buckets": 4}},
			{"search_knowledge", map[string]any{"query": "jellyfin"}},
			{"get_entity_knowledge", map[string]any{"entity": "service:jellyfin", "limit": 2}},
			{"get_lxc_state", map[string]any{"container": "101"}},
			{"get_vm_state", map[string]any{"vm": "homeassistant"}},
			{"tail_log", map[string]any{"target": "service:jellyfin", "lines": 3}},
			// A probe approves itself and runs; a change waits for an
			// operator; a plan of two steps is one request.
			{"request_execution", map[string]any{"action": "pct_status", "target": "lxc:strong/101", "reason": "is it up"}},
			{"get_execution", map[string]any{"id": "$execution_id"}},
			{"request_execution", map[string]any{"action": "systemctl", "target": "service:jellyfin", "params": map[string]any{"verb": "reload"}, "reason": "pick up the new config"}},
			{"request_execution", map[string]any{"target": "lxc:strong/101", "reason": "snapshot before the upgrade",
				"steps": []any{map[string]any{"action": "pct_snapshot"}, map[string]any{"action": "apt_upgrade", "params": map[string]any{"mode": "upgrade"}}}}},
			{"get_agent_activity", map[string]any{"since": "1h", "limit": 3}},
			{"http_get", map[string]any{"url": pageURL, "max_chars": 2000}},
			{"delete_session", map[string]any{"id": session.ID.String()}},
		},
		Resources: []string{"nomos://fleet/snapshot", "nomos://runbooks", "nomos://runbooks/restart-service", "nomos://runbooks/no-such-runbook"},
		Prompts: []sdkPrompt{
			{"triage_alert", map[string]string{"alert": "DiskFilling lxc 101 root at 93%", "entity": "lxc:strong/101"}},
			{"explain_execution", map[string]string{"id": "0190f3c2-7a1e-7b44-9c1d-2f6e8a9b0c3d"}},
		},
	}
	r := runSDKClient(t, url, token, plan)

	// Every tool is listed, its input schema compiles in Ajv, and every
	// one is called.
	var listed []string
	outputSchemas := map[string]json.RawMessage{}
	inputs := map[string]map[string]any{}
	for _, tl := range r.Tools {
		listed = append(listed, tl.Name)
		if !tl.InputCompiles {
			t.Errorf("Ajv cannot compile %s's input schema: %s", tl.Name, tl.InputError)
		}
		var in map[string]any
		if err := json.Unmarshal(tl.InputSchema, &in); err != nil {
			t.Fatal(err)
		}
		inputs[tl.Name] = in
		if len(tl.OutputSchema) > 0 && string(tl.OutputSchema) != "null" {
			outputSchemas[tl.Name] = tl.OutputSchema
		}
	}
	called := map[string]bool{}
	for _, c := range plan.Calls {
		called[c.Tool] = true
	}
	for _, name := range listed {
		if !called[name] {
			t.Errorf("the test does not call %s: add it to the plan", name)
		}
	}
	if want := []string{"get_lxc_state", "list_lxcs", "request_execution", "tail_log"}; !containsEvery(listed, want) {
		t.Errorf("listed tools %v lack one of %v", listed, want)
	}

	validated := map[string]int{}
	for _, c := range r.Calls {
		what := fmt.Sprintf("%s(%v)", c.Tool, c.Arguments)
		switch {
		case c.Thrown != "":
			t.Errorf("%s threw in the SDK client (an output schema mismatch throws there): %s", what, c.Thrown)
			continue
		case c.IsError:
			t.Errorf("%s is a tool error: %s", what, c.Text)
			continue
		case c.ArgumentsValid == nil || !*c.ArgumentsValid:
			t.Errorf("%s: Ajv finds the arguments invalid against the declared input schema: %s", what, c.ArgumentErrors)
		}
		hasStructured := len(c.StructuredContent) > 0 && string(c.StructuredContent) != "null"
		_, declared := outputSchemas[c.Tool]
		switch {
		case hasStructured && !declared:
			t.Errorf("%s returned structuredContent but declares no output schema", what)
		case declared && !hasStructured:
			t.Errorf("%s declares an output schema but returned no structuredContent", what)
		case declared:
			if c.Validated == nil || !*c.Validated {
				t.Errorf("%s: structuredContent %s does not validate against its output schema: %s", what, c.StructuredContent, c.ValidationErrors)
			}
			if c.RejectsBroken == nil || !*c.RejectsBroken {
				t.Errorf("%s: the output validator accepted a broken result; it checks nothing", what)
			}
			validated[c.Tool]++
		}
	}
	want := map[string]int{"request_execution": 3, "get_execution": 1, "get_health_summary": 1}
	if !reflect.DeepEqual(validated, want) {
		t.Errorf("results validated against an output schema, by tool: %v, want %v", validated, want)
	}
	checkRequestedResults(t, r)
	checkStructuredResults(t, r)

	// The input schemas say integer, enum and default where the handler
	// does, and request_execution's steps are oneOf keyed by every
	// catalogue action, each with that action's params.
	lines := property(t, inputs, "tail_log", "lines")
	if lines["type"] != "integer" || lines["default"] != float64(policy.DefaultLogLines) || lines["maximum"] != float64(policy.MaxLogLines) {
		t.Errorf("tail_log lines = %v, want an integer defaulting to %d, at most %d", lines, policy.DefaultLogLines, policy.MaxLogLines)
	}
	agg := property(t, inputs, "query_metrics", "aggregate")
	if agg["default"] != "latest" || !reflect.DeepEqual(agg["enum"], []any{"latest", "avg", "max", "min"}) {
		t.Errorf("query_metrics aggregate = %v, want an enum defaulting to latest", agg)
	}
	checkStepsSchema(t, inputs["request_execution"])

	// Resources and prompts.
	var uris, templates, prompts []string
	for _, res := range r.Resources {
		uris = append(uris, res.URI)
	}
	for _, tm := range r.Templates {
		templates = append(templates, tm.URITemplate)
	}
	for _, p := range r.Prompts {
		prompts = append(prompts, p.Name)
	}
	sort.Strings(uris)
	if !reflect.DeepEqual(uris, []string{"nomos://fleet/snapshot", "nomos://runbooks"}) ||
		!reflect.DeepEqual(templates, []string{"nomos://runbooks/{slug}"}) ||
		!reflect.DeepEqual(prompts, []string{"explain_execution", "triage_alert"}) {
		t.Errorf("resources %v, templates %v, prompts %v", uris, templates, prompts)
	}
	reads := map[string]string{}
	for _, rd := range r.Reads {
		if rd.Thrown != "" {
			reads[rd.URI] = "thrown: " + rd.Thrown
			continue
		}
		for _, c := range rd.Contents {
			reads[rd.URI] += c.Text
		}
	}
	containsAll(t, "the snapshot resource", reads["nomos://fleet/snapshot"], "Fleet at", "health: ")
	containsAll(t, "the runbooks resource", reads["nomos://runbooks"], `"slug": "restart-service"`, `"slug": "audit-updates"`, `"uri": "nomos://runbooks/restart-service"`)
	containsAll(t, "one runbook", reads["nomos://runbooks/restart-service"], `"slug": "restart-service"`, `"steps"`)
	containsNone(t, "one runbook", reads["nomos://runbooks/restart-service"], "audit-updates")
	containsAll(t, "an unknown runbook", reads["nomos://runbooks/no-such-runbook"], "thrown: ", `no runbook "no-such-runbook"`)
	triage := promptText(t, r, "triage_alert")
	containsAll(t, "triage_alert for a request token", triage, `"DiskFilling lxc 101 root at 93%"`, "get_signal_history", "request_execution", "Fleet at")
	containsAll(t, "explain_execution", promptText(t, r, "explain_execution"), "get_execution", "0190f3c2-7a1e-7b44-9c1d-2f6e8a9b0c3d")

	// delete_session did what it says.
	if _, err := b.store.AgentSession(b.ctx, session.ID); err == nil {
		t.Error("delete_session left the session")
	}
}

// checkRequestedResults checks the three request_execution results: the
// probe ran, the change waits for an operator, the plan has two steps.
func checkRequestedResults(t *testing.T, r sdkReport) {
	t.Helper()
	var got []mcpserver.Requested
	for _, c := range r.Calls {
		if c.Tool != "request_execution" || len(c.StructuredContent) == 0 {
			continue
		}
		var q mcpserver.Requested
		if err := json.Unmarshal(c.StructuredContent, &q); err != nil {
			t.Fatal(err)
		}
		got = append(got, q)
	}
	if len(got) != 3 {
		t.Fatalf("%d request_execution results, want 3", len(got))
	}
	if got[0].Action != "pct_status" || got[0].State != string(store.StateSucceeded) {
		t.Errorf("the probe = %+v, want a pct_status that succeeded", got[0])
	}
	if got[1].Action != "systemctl" || got[1].State != string(store.StateAwaitingApproval) || got[1].RoomID != opsRoom {
		t.Errorf("the change = %+v, want a systemctl awaiting approval in %s", got[1], opsRoom)
	}
	if len(got[2].Steps) != 2 || got[2].Steps[0].Action != "pct_snapshot" || got[2].Steps[1].Action != "apt_upgrade" {
		t.Errorf("the plan = %+v, want pct_snapshot then apt_upgrade", got[2])
	}
}

// checkStructuredResults checks that get_execution and get_health_summary
// say in structuredContent what their text says.
func checkStructuredResults(t *testing.T, r sdkReport) {
	t.Helper()
	for _, c := range r.Calls {
		switch c.Tool {
		case "get_execution":
			var x mcpserver.ExecutionStatus
			if err := json.Unmarshal(c.StructuredContent, &x); err != nil {
				t.Fatal(err)
			}
			if x.ExecutionID != c.Arguments["id"] || x.Action != "pct_status" || x.State != string(store.StateSucceeded) ||
				x.Result == nil || x.Result.Status != "succeeded" || x.RequestedBy != "mcp:claude" {
				t.Errorf("get_execution's structuredContent = %+v, want the pct_status probe that succeeded", x)
			}
			containsAll(t, "get_execution's text", c.Text, x.ExecutionID, "pct_status", "succeeded")
		case "get_health_summary":
			var h mcpserver.HealthSummary
			if err := json.Unmarshal(c.StructuredContent, &h); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, v := range h.Total {
				n += v
			}
			if h.ByType["lxc"] == nil || n == 0 || h.NotHealthyCount != len(h.NotHealthy) {
				t.Errorf("get_health_summary's structuredContent = %+v", h)
			}
			containsAll(t, "get_health_summary's text", c.Text, fmt.Sprintf("total: %d", n))
			// The text names each one but those never checked, which
			// it counts in one line.
			for _, e := range h.NotHealthy {
				if e.Health != "unknown" {
					containsAll(t, "get_health_summary's text", c.Text, e.Slug+" "+e.Health)
				}
			}
		}
	}
}

// checkStepsSchema checks that a step is oneOf keyed by every catalogue
// action, each branch with that action's params as the policy's struct
// has them.
func checkStepsSchema(t *testing.T, request map[string]any) {
	t.Helper()
	steps := property(t, map[string]map[string]any{"request_execution": request}, "request_execution", "steps")
	items, _ := steps["items"].(map[string]any)
	branches, _ := items["oneOf"].([]any)
	byAction := map[string]map[string]any{}
	for _, b := range branches {
		branch := b.(map[string]any)
		props := branch["properties"].(map[string]any)
		action := props["action"].(map[string]any)["const"].(string)
		byAction[action] = resolveRef(t, request, props["params"].(map[string]any))
	}
	for _, spec := range policy.Catalogue() {
		params, ok := byAction[string(spec.Action)]
		if !ok {
			t.Errorf("steps has no branch for %s", spec.Action)
			continue
		}
		typ, _ := policy.ParamsType(spec.Action)
		var want []string
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if name != "description" && name != "discard" {
				want = append(want, name)
			}
		}
		var got []string
		props, _ := params["properties"].(map[string]any)
		for name := range props {
			got = append(got, name)
		}
		sort.Strings(want)
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s params in the schema = %v, want %v", spec.Action, got, want)
		}
	}
	if len(branches) != len(policy.Catalogue()) {
		t.Errorf("steps has %d branches for %d actions", len(branches), len(policy.Catalogue()))
	}
}

// resolveRef follows a "#/$defs/name" reference within root.
func resolveRef(t *testing.T, root, s map[string]any) map[string]any {
	t.Helper()
	ref, ok := s["$ref"].(string)
	if !ok {
		return s
	}
	name, ok := strings.CutPrefix(ref, "#/$defs/")
	defs, _ := root["$defs"].(map[string]any)
	def, found := defs[name].(map[string]any)
	if !ok || !found {
		t.Fatalf("reference %s does not resolve", ref)
	}
	return def
}

func property(t *testing.T, inputs map[string]map[string]any, tool, name string) map[string]any {
	t.Helper()
	props, _ := inputs[tool]["properties"].(map[string]any)
	p, ok := props[name].(map[string]any)
	if !ok {
		t.Fatalf("%s's input schema has no property %s: %v", tool, name, inputs[tool])
	}
	return p
}

// promptText joins the text of a prompt's messages, embedded resources
// included.
func promptText(t *testing.T, r sdkReport, name string) string {
	t.Helper()
	for _, p := range r.PromptResults {
		if p.Name != name {
			continue
		}
		if p.Thrown != "" {
			t.Fatalf("prompt %s threw: %s", name, p.Thrown)
		}
		var b strings.Builder
		for _, m := range p.Messages {
			var msg struct {
				Content struct {
					Text     string `json:"text"`
					Resource struct {
						Text string `json:"text"`
					} `json:"resource"`
				} `json:"content"`
			}
			if err := json.Unmarshal(m, &msg); err != nil {
				t.Fatal(err)
			}
			b.WriteString(msg.Content.Text + msg.Content.Resource.Text + "\n")
		}
		return b.String()
	}
	t.Fatalf("no result for prompt %s", name)
	return ""
}

func containsEvery(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
