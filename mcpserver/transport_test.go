package mcpserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/store"
)

// serveHTTP mounts the handler at /mcp, as the bot does.
func serveHTTP(t *testing.T, h http.Handler) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`

func post(t *testing.T, url, auth string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(initBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestHTTPNeedsTheBearerToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := serveHTTP(t, b.srv.HTTPHandler())
	cases := []struct {
		name, auth, challenge string
	}{
		{"no token", "", `Bearer realm="nomos"`},
		{"wrong token", "Bearer " + token + "x", `Bearer realm="nomos", error="invalid_token"`},
		{"a prefix of the token", "Bearer " + token[:10], `Bearer realm="nomos", error="invalid_token"`},
		{"another scheme", "Basic " + token, `Bearer realm="nomos"`},
	}
	for _, c := range cases {
		resp := post(t, url, c.auth)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", c.name, resp.StatusCode)
		}
		if got := resp.Header.Get("WWW-Authenticate"); got != c.challenge {
			t.Errorf("%s: WWW-Authenticate %q, want %q", c.name, got, c.challenge)
		}
		body, _ := io.ReadAll(resp.Body)
		if strings.Contains(string(body), "list_lxcs") || strings.Contains(string(body), "serverInfo") {
			t.Errorf("%s: a refused request got MCP content: %s", c.name, body)
		}
	}
	if resp := post(t, url, "Bearer "+token); resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Errorf("with the token: status %d, want 200: %s", resp.StatusCode, body)
	}
}

func TestHTTPIsOffWithoutAToken(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *mcpserver.Config) { c.Tokens = nil })
	if b.srv.HTTPEnabled() {
		t.Error("HTTPEnabled with no token")
	}
	url := serveHTTP(t, b.srv.HTTPHandler())
	for _, auth := range []string{"", "Bearer ", "Bearer anything-at-all-0123456789"} {
		if resp := post(t, url, auth); resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("Authorization %q: status %d, want 503", auth, resp.StatusCode)
		}
	}
}

func TestNewRefusesAShortToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := mcpserver.New(mcpserver.Config{Store: b.store, Executions: b.exec, Token: "short"}); err == nil {
		t.Error("New accepted a 5-character token")
	}
	if _, err := mcpserver.New(mcpserver.Config{Executions: b.exec}); err == nil {
		t.Error("New accepted a config without a store")
	}
}

func TestHTTPServesTheSameToolsAndRequestsGoToTheOpsRoom(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := serveHTTP(t, b.srv.HTTPHandler())
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Start(b.ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "Claude Desktop", Version: "1"}
	if _, err := c.Initialize(b.ctx, init); err != nil {
		t.Fatal(err)
	}
	// A request token is offered the agent's tools and delete_session,
	// which is not for the agent.
	agent := append(toolNames(t, b.ctx, b.client), "delete_session")
	slices.Sort(agent)
	if diff := cmp.Diff(agent, toolNames(t, b.ctx, c)); diff != "" {
		t.Errorf("HTTP tools differ from the in-process ones and delete_session (-want +http):\n%s", diff)
	}

	req := mcp.CallToolRequest{}
	req.Params.Name = "request_execution"
	req.Params.Arguments = map[string]any{"action": "restart", "target": "service:gitea", "reason": "gitea returns 502"}
	res, err := c.CallTool(b.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	text := resultText(t, res)
	if res.IsError {
		t.Fatalf("request_execution over HTTP failed: %s", text)
	}
	containsAll(t, "request_execution over HTTP", text, "queued for approval: execution", "Its card is posted in the ops room")
	var got mcpserver.Requested
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	x, err := b.store.GetExecution(b.ctx, uuid.MustParse(got.ExecutionID))
	if err != nil {
		t.Fatal(err)
	}
	if x.RequestedVia != "mcp" || x.RoomID != opsRoom {
		t.Errorf("an HTTP request was recorded via %q in room %q; want via mcp, in %s", x.RequestedVia, x.RoomID, opsRoom)
	}
	// The token names the requester, not the name the client claims.
	if x.RequestedBy != "mcp:claude" {
		t.Errorf("requested_by %q, want the token's name, mcp:claude", x.RequestedBy)
	}
	audit, err := b.store.AuditFor(b.ctx, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(audit, func(a store.AuditEntry) bool { return a.Action == "execution.requested" && a.Actor == "mcp:claude" }) {
		t.Errorf("the audit log does not name mcp:claude as the requester: %+v", audit)
	}
}

func TestHTTPRequestWithoutAnOpsRoomIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *mcpserver.Config) { c.OpsRoomID = "" })
	// An external caller (no room of its own) with no ops room configured.
	ctx := mcpserver.WithCaller(b.ctx, mcpserver.Caller{Via: mcpserver.ViaMCP})
	text, isErr := b.call(t, ctx, "request_execution", map[string]any{"action": "restart", "target": "service:gitea", "reason": "x"})
	if !isErr || !strings.Contains(text, "no ops room is configured") {
		t.Errorf("request without a room = %v %q; want a refusal naming the missing ops room", isErr, text)
	}
}
