package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

// httpClient connects an initialized MCP client to url with a bearer token.
func httpClient(t *testing.T, ctx context.Context, url, bearer string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + bearer}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "gate-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}

func callTool(t *testing.T, ctx context.Context, c *client.Client, name string, args map[string]any) (string, bool) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return resultText(t, res), res.IsError
}

func executionCount(t *testing.T, b *bundle) int {
	t.Helper()
	xs, err := b.store.ListExecutions(b.ctx, store.ExecutionFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return len(xs)
}

var restartGitea = map[string]any{"action": "restart", "target": "service:gitea", "reason": "gitea returns 502"}

// nthRequest is the n-th of requests for different changes: a repeat of
// one still waiting would point at it instead of making a plan.
func nthRequest(n int) map[string]any {
	return map[string]any{"action": "pct_exec", "target": "101", "params": map[string]any{"command": fmt.Sprintf("echo request %d", n)}, "reason": "one of several"}
}

func TestReadTokenCannotRequestExecutions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := serveHTTP(t, b.srv.HTTPHandler())
	c := httpClient(t, b.ctx, url, readToken)

	names := toolNames(t, b.ctx, c)
	hiddenTools := []string{"request_execution", "get_lxc_state", "get_vm_state", "tail_log", "delete_session"}
	for _, hidden := range hiddenTools {
		for _, n := range names {
			if n == hidden {
				t.Errorf("a read-scope token is offered %s", hidden)
			}
		}
	}
	if len(names) != len(wantRequestTools)-len(hiddenTools) {
		t.Errorf("a read-scope token sees %d tools, want every tool but the %d that request: %v", len(names), len(hiddenTools), names)
	}
	// Called by name anyway, each is refused with a sentence that says why.
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"request_execution", restartGitea},
		{"request_execution", map[string]any{"action": "run", "target": "host:strong", "params": map[string]any{"command": "uptime"}, "reason": "look"}},
		{"get_lxc_state", map[string]any{"container": "101"}},
		{"get_vm_state", map[string]any{"vm": "200"}},
		{"tail_log", map[string]any{"target": "lxc:strong/101"}},
	} {
		text, isErr := callTool(t, b.ctx, c, call.tool, call.args)
		if !isErr || !strings.Contains(text, "the token of mcp:dashboard may only read") {
			t.Errorf("%s with a read token = %v %q; want it refused naming the read-only token", call.tool, isErr, text)
		}
	}
	if n := executionCount(t, b); n != 0 {
		t.Errorf("a read-scope token left %d executions", n)
	}
	// Reading still works.
	if text, isErr := callTool(t, b.ctx, c, "list_lxcs", nil); isErr || !strings.Contains(text, "15 containers") {
		t.Errorf("list_lxcs with a read token = %v %q", isErr, text)
	}
}

func TestTokenNamesTheRequester(t *testing.T) {
	t.Parallel()
	const legacy = "legacy-token-0123456789abcdef"
	b := setup(t, func(c *mcpserver.Config) { c.Token = legacy })
	url := serveHTTP(t, b.srv.HTTPHandler())
	c := httpClient(t, b.ctx, url, token)
	x := requestOverHTTP(t, b, c)
	if x.RequestedBy != "mcp:claude" || x.OnBehalfOf != operator {
		t.Errorf("recorded as requested by %q on behalf of %q, want mcp:claude on behalf of %s", x.RequestedBy, x.OnBehalfOf, operator)
	}
	text, _ := callTool(t, b.ctx, c, "get_execution", map[string]any{"id": x.ID.String()})
	containsAll(t, "get_execution", text, "requested by mcp:claude via mcp for "+operator)

	// The deprecated single token is named mcp and has no owner, so it
	// may only read.
	legacyClient := httpClient(t, b.ctx, url, legacy)
	if text, isErr := callTool(t, b.ctx, legacyClient, "request_execution", restartGitea); !isErr || !strings.Contains(text, "the token of mcp:mcp may only read") {
		t.Errorf("request_execution with the deprecated token = %v %q, want it refused as read-only", isErr, text)
	}
}

// requestOverHTTP asks for a restart of gitea through c and returns the
// execution it recorded.
func requestOverHTTP(t *testing.T, b *bundle, c *client.Client) store.Execution {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = "request_execution"
	req.Params.Arguments = restartGitea
	res, err := c.CallTool(b.ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("request_execution: %v %s", err, resultText(t, res))
	}
	var got mcpserver.Requested
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	x, err := b.store.GetExecution(b.ctx, uuid.MustParse(got.ExecutionID))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestRequestTokenActsForItsOwner: a request-scope token is made for a
// person, and what it asks for is on their behalf. With self-approval
// off, whoever holds an operator's token cannot approve the plans they
// send with it; another operator can.
func TestRequestTokenActsForItsOwner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const other = "@other:localhost"
	rules, err := policy.NewRules(policy.RulesConfig{Operators: []string{operator, other}})
	if err != nil {
		t.Fatal(err)
	}
	queue := asynq.NewClient(b.redis)
	t.Cleanup(func() { queue.Close() })
	strict, err := executions.New(executions.Config{Store: b.store, Queue: queue, SigningKey: b.keys.OrderSigning, ReportVerifyKey: b.keys.ReportVerify,
		Rules: rules, ForbidSelfApproval: true, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	c := httpClient(t, b.ctx, serveHTTP(t, b.srv.HTTPHandler()), token)
	x := requestOverHTTP(t, b, c)
	if _, err := strict.Approve(b.ctx, executions.Decision{ExecutionID: x.ID, By: operator, Method: policy.MethodReply}); !errors.Is(err, executions.ErrSelfApproval) {
		t.Fatalf("the token's owner approved its plan: %v, want ErrSelfApproval", err)
	}
	got, err := strict.Approve(b.ctx, executions.Decision{ExecutionID: x.ID, By: other, Method: policy.MethodReply})
	if err != nil || got.Approval == nil || got.Approval.DecidedBy != other {
		t.Fatalf("another operator's approval = %+v %v", got.Approval, err)
	}
}

func TestNewRefusesBadTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sum := mcpserver.HashToken(token)
	for name, tokens := range map[string][]mcpserver.Token{
		"no name":           {{SHA256: sum, Scope: mcpserver.ScopeRead}},
		"name with ':'":     {{Name: "a:b", SHA256: sum, Scope: mcpserver.ScopeRead}},
		"no scope":          {{Name: "a", SHA256: sum}},
		"admin scope":       {{Name: "a", SHA256: sum, Scope: "admin"}},
		"no digest":         {{Name: "a", Scope: mcpserver.ScopeRead}},
		"same name":         {{Name: "a", SHA256: sum, Scope: mcpserver.ScopeRead}, {Name: "a", SHA256: mcpserver.HashToken(readToken), Scope: mcpserver.ScopeRead}},
		"same digest":       {{Name: "a", SHA256: sum, Scope: mcpserver.ScopeRead}, {Name: "b", SHA256: sum, Scope: mcpserver.ScopeRequest, Owner: operator}},
		"request, no owner": {{Name: "a", SHA256: sum, Scope: mcpserver.ScopeRequest}},
		"owner not a user":  {{Name: "a", SHA256: sum, Scope: mcpserver.ScopeRequest, Owner: "operator"}},
	} {
		if _, err := mcpserver.New(mcpserver.Config{Store: b.store, Executions: b.exec, Tokens: tokens}); err == nil {
			t.Errorf("%s: New accepted %+v", name, tokens)
		}
	}
	if _, err := mcpserver.ParseTokenHash("abc"); err == nil {
		t.Error("ParseTokenHash accepted 3 hex digits")
	}
	hex := "8c6976e5b5410415bde908bd4dee15dfb167a9c873fc4bb8a81f6f2ab448a918"
	if got, err := mcpserver.ParseTokenHash(hex); err != nil || got != mcpserver.HashToken("admin") {
		t.Errorf("ParseTokenHash(sha256 of admin) = %x, %v", got, err)
	}
}

func TestRequestsAreRateLimitedPerRequester(t *testing.T) {
	t.Parallel()
	clock := testenv.NewClock(time.Now())
	// One request every 10 s, two at once.
	b := setup(t, func(c *mcpserver.Config) { c.RequestsPerMinute, c.RequestBurst, c.Clock = 6, 2, clock.Now })
	url := serveHTTP(t, b.srv.HTTPHandler())
	claude := httpClient(t, b.ctx, url, token)

	for i := range 2 {
		if text, isErr := callTool(t, b.ctx, claude, "request_execution", nthRequest(i)); isErr {
			t.Fatalf("request %d within the burst refused: %s", i+1, text)
		}
	}
	text, isErr := callTool(t, b.ctx, claude, "request_execution", nthRequest(2))
	if !isErr || !strings.Contains(text, "too many requests from mcp:claude; try again in 10s") {
		t.Errorf("third request = %v %q; want it refused naming mcp:claude and the wait", isErr, text)
	}
	// get_lxc_state requests an execution too, from the same budget.
	text, isErr = callTool(t, b.ctx, claude, "get_lxc_state", map[string]any{"container": "101"})
	if !isErr || !strings.Contains(text, "too many requests from mcp:claude") {
		t.Errorf("get_lxc_state over the limit = %v %q", isErr, text)
	}
	if n := executionCount(t, b); n != 2 {
		t.Errorf("%d executions after two allowed and two refused requests, want 2", n)
	}

	// The agent is a requester of its own, whoever it acts for: its budget
	// is untouched by claude's, and shared between operators.
	for i, who := range []string{operator, "@bob:localhost"} {
		ctx := mcpserver.WithCaller(b.ctx, mcpserver.Caller{Via: mcpserver.ViaAgent, RequestedBy: who})
		if text, isErr := b.call(t, ctx, "request_execution", nthRequest(3+i)); isErr {
			t.Fatalf("agent request %d refused while claude is over its limit: %s", i+1, text)
		}
	}
	ctx := mcpserver.WithCaller(b.ctx, mcpserver.Caller{Via: mcpserver.ViaAgent, RequestedBy: operator})
	if text, isErr := b.call(t, ctx, "request_execution", nthRequest(5)); !isErr || !strings.Contains(text, "too many requests from agent") {
		t.Errorf("third agent request = %v %q; want it refused", isErr, text)
	}

	// Ten seconds on, claude may ask once more, and only once.
	clock.Add(10 * time.Second)
	if text, isErr := callTool(t, b.ctx, claude, "request_execution", nthRequest(6)); isErr {
		t.Errorf("request after the wait refused: %s", text)
	}
	if _, isErr := callTool(t, b.ctx, claude, "request_execution", nthRequest(7)); !isErr {
		t.Error("a second request right after the wait was allowed")
	}
	if n := executionCount(t, b); n != 5 {
		t.Errorf("%d executions, want 5 (2 + 2 by the agent + 1)", n)
	}
}

func TestGetExecutionRedactsOutputNotCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := uuid.Must(uuid.NewV7())
	step := `mysql -u app -e "select 1" && echo token=shown-as-run`
	_, err := b.store.CreateExecution(b.ctx, store.NewExecution{
		Request: store.Request{
			ID: id, Action: "run", TargetSlug: "host:strong",
			Params: json.RawMessage(`{"command": "mysql -u app -e \"select 1\" && echo token=shown-as-run"}`),
			Steps:  []string{step}, RiskClass: "config_mutation", PlanHash: strings.Repeat("b", 64),
			PlanCode: "efgh", State: store.StateRunning, RequestedBy: "mcp:claude", RequestedVia: "mcp",
			Reason: "the log said api_key=reason-secret", ExpiresAt: time.Now().Add(time.Hour),
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	errText := "exit 1: Authorization: Bearer error-secret-0123456789"
	tail := "connecting\nDB_PASSWORD=output-secret\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\ndone"
	result := json.RawMessage(`{"v":1,"status":"failed","exit_code":1,"notes":["password=note-secret"],"phases":[{"name":"run","status":"failed","exit_code":1,"note":"secret: phase-secret"}]}`)
	if _, err := b.store.Transition(b.ctx, store.Transition{
		ID: id, From: []store.ExecutionState{store.StateRunning}, To: store.StateFailed,
		Audit: store.AuditEntry{Actor: "actuator", Action: "execution.failed"}, Result: result, Error: &errText, ProgressTail: &tail,
	}); err != nil {
		t.Fatal(err)
	}
	text := b.ok(t, "get_execution", map[string]any{"id": id.String()})
	containsAll(t, "get_execution", text, "step 1: "+step, `"command": "mysql -u app -e \"select 1\" && echo token=shown-as-run"`,
		"reason: the log said api_key=[REDACTED]", "DB_PASSWORD=[REDACTED]", "[REDACTED PRIVATE KEY]", "Bearer [REDACTED]", "connecting", "done")
	containsNone(t, "get_execution", text, "reason-secret", "output-secret", "b3BlbnNzaC1rZXktdjEAAAAA", "error-secret", "note-secret", "phase-secret")
}

func TestHTTPTokenMustMatchExactly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := serveHTTP(t, b.srv.HTTPHandler())
	for _, bad := range []string{strings.ToUpper(token), readToken[:len(readToken)-1], token + readToken, "dashboard", "claude"} {
		resp := post(t, url, "Bearer "+bad)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("token %q: status %d, want 401", bad, resp.StatusCode)
		}
	}
}

// rawCall posts one JSON-RPC body to url as a client that speaks the
// protocol by hand: no client library, no initialize, the stateless
// protocol version named in the header and the body.
func rawCall(t *testing.T, url, bearer, tool, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set(mcp.HeaderProtocolVersion, mcp.LATEST_PROTOCOL_VERSION)
	req.Header.Set(mcp.HeaderMethod, "tools/call")
	req.Header.Set(mcp.HeaderName, tool)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(raw)
}

// TestReadTokenCannotRequestByRawJSONRPC: the read scope is enforced on
// the call, not by the tool list a client library fetched. A read-token
// holder who writes JSON-RPC by hand (a stateless call with no initialize,
// the same call batched, a call carrying its own _meta) requests nothing.
func TestReadTokenCannotRequestByRawJSONRPC(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := serveHTTP(t, b.srv.HTTPHandler())
	meta := `"_meta":{"` + mcp.MetaKeyProtocolVersion + `":"` + mcp.LATEST_PROTOCOL_VERSION + `","` + mcp.MetaKeyClientCapabilities + `":{}}`
	call := func(id int, tool, args string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s,"name":%q,"arguments":%s}}`, id, meta, tool, args)
	}
	run := `{"action":"run","target":"host:strong","params":{"command":"uptime"},"reason":"look"}`
	for _, c := range []struct {
		tool, body string
		want       string // in the answer: the scope's refusal, or the transport's for a batch
	}{
		{"request_execution", call(1, "request_execution", run), "the token of mcp:dashboard may only read"},
		{"get_lxc_state", call(2, "get_lxc_state", `{"container":"101"}`), "the token of mcp:dashboard may only read"},
		{"request_execution", "[" + call(3, "request_execution", run) + "," + call(4, "request_execution", run) + "]", `"error"`},
	} {
		if status, text := rawCall(t, url, readToken, c.tool, c.body); !strings.Contains(text, c.want) {
			t.Errorf("%s by hand with a read token = %d %s; want it refused (%s)", c.tool, status, text, c.want)
		}
	}
	if n := executionCount(t, b); n != 0 {
		t.Errorf("a read-scope token left %d executions by raw JSON-RPC", n)
	}
	// The same stateless call with a request-scope token does request: the
	// refusal above is the scope's, not a malformed call's.
	status, text := rawCall(t, url, token, "request_execution", call(5, "request_execution", `{"action":"restart","target":"service:gitea","reason":"gitea returns 502"}`))
	if n := executionCount(t, b); n != 1 || !strings.Contains(text, "queued for approval") {
		t.Errorf("the request-scope token's stateless call = %d %s and %d executions, want one queued for approval", status, text, n)
	}
}

// TestRepeatedRequestIsAlreadyQueued: an MCP client, then the agent, ask
// for the restart the client asked for a moment ago and no one has decided
// yet: nothing new is queued, and each answer names the waiting
// execution.
func TestRepeatedRequestIsAlreadyQueued(t *testing.T) {
	t.Parallel()
	b := setup(t)
	claude := httpClient(t, b.ctx, serveHTTP(t, b.srv.HTTPHandler()), token)
	first, isErr := callToolResult(t, b.ctx, claude, "request_execution", restartGitea)
	if isErr || first.AlreadyQueued {
		t.Fatalf("first request = %v %+v", isErr, first)
	}
	again, isErr := callToolResult(t, b.ctx, claude, "request_execution", restartGitea)
	if isErr || !again.AlreadyQueued || again.ExecutionID != first.ExecutionID {
		t.Errorf("repeat = %v %+v; want already_queued naming %s", isErr, again, first.ExecutionID)
	}
	ctx := mcpserver.WithCaller(b.ctx, mcpserver.Caller{Via: mcpserver.ViaAgent, RequestedBy: operator, RoomID: opsRoom})
	text, isErr := b.call(t, ctx, "request_execution", restartGitea)
	if isErr || !strings.Contains(text, "already queued") || !strings.Contains(text, first.ExecutionID) || !strings.Contains(text, "end your turn") {
		t.Errorf("the agent's repeat = %v %q", isErr, text)
	}
	if n := executionCount(t, b); n != 1 {
		t.Errorf("%d executions after one request and two repeats, want 1", n)
	}
}

// callToolResult calls a request tool and decodes its structured answer.
func callToolResult(t *testing.T, ctx context.Context, c *client.Client, name string, args map[string]any) (mcpserver.Requested, bool) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var got mcpserver.Requested
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &got); err != nil && !res.IsError {
		t.Fatalf("structured content %s: %v", raw, err)
	}
	return got, res.IsError
}
