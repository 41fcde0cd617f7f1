package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/mcpserver/proxy"
)

// swappable serves whichever handler it holds, so a test can replace the
// bot's endpoint, sessions and all, as a restart would.
type swappable struct{ h atomic.Pointer[http.Handler] }

func (s *swappable) set(h http.Handler) { s.h.Store(&h) }

func (s *swappable) ServeHTTP(w http.ResponseWriter, r *http.Request) { (*s.h.Load()).ServeHTTP(w, r) }

// stdioProxy runs the proxy against url with bearer, serving a client
// over pipes, and returns that client.
func stdioProxy(t *testing.T, ctx context.Context, url, bearer string) *client.Client {
	t.Helper()
	p, err := proxy.New(ctx, proxy.Config{URL: url, Token: bearer, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	toProxy, clientOut := io.Pipe()
	clientIn, fromProxy := io.Pipe()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- p.ServeStdio(ctx, toProxy, fromProxy)
		fromProxy.Close()
	}()
	c := client.NewClient(transport.NewIO(clientIn, clientOut, io.NopCloser(strings.NewReader(""))))
	t.Cleanup(func() {
		clientOut.Close() // end of input: the proxy returns
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeStdio: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("ServeStdio did not return after its input ended")
		}
		cancel()
		c.Close()
		p.Close()
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "Claude Desktop", Version: "1"}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStdioProxyForwardsToTheBot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	endpoint := &swappable{}
	endpoint.set(b.srv.HTTPHandler())
	url := serveHTTP(t, endpoint)
	c := stdioProxy(t, b.ctx, url, token)

	if diff := cmp.Diff(wantRequestTools, toolNames(t, b.ctx, c)); diff != "" {
		t.Errorf("tools through the proxy (-want +got):\n%s", diff)
	}
	text, isErr := callTool(t, b.ctx, c, "list_lxcs", nil)
	if isErr || !strings.Contains(text, "15 containers on 2 hosts") {
		t.Errorf("list_lxcs through the proxy = %v %q", isErr, text)
	}
	// Each tool's schemas come through whole.
	if diff := cmp.Diff(toolSchemas(t, b.ctx, httpClient(t, b.ctx, url, token)), toolSchemas(t, b.ctx, c)); diff != "" {
		t.Errorf("tool schemas through the proxy (-direct +proxied):\n%s", diff)
	}
	// The resources and prompts come through too.
	if snap := readResource(t, b.ctx, c, "nomos://fleet/snapshot"); !strings.Contains(snap, "Fleet at") {
		t.Errorf("the snapshot through the proxy = %q", snap)
	}
	if rb := readResource(t, b.ctx, c, "nomos://runbooks/restart-service"); !strings.Contains(rb, `"slug": "restart-service"`) {
		t.Errorf("a runbook through the proxy = %q", rb)
	}
	containsAll(t, "triage_alert through the proxy", triagePrompt(t, b.ctx, c, "GiteaDown"), `"GiteaDown"`, "request_execution")

	req := mcp.CallToolRequest{}
	req.Params.Name = "request_execution"
	req.Params.Arguments = restartGitea
	res, err := c.CallTool(b.ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("request_execution through the proxy: %v %s", err, resultText(t, res))
	}
	var got mcpserver.Requested
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("structured content %s: %v", raw, err)
	}
	x, err := b.store.GetExecution(b.ctx, uuid.MustParse(got.ExecutionID))
	if err != nil {
		t.Fatal(err)
	}
	if x.RequestedBy != "mcp:claude" || x.RequestedVia != "mcp" || x.RoomID != opsRoom {
		t.Errorf("execution requested by %q via %q in %q; want mcp:claude via mcp in %s", x.RequestedBy, x.RequestedVia, x.RoomID, opsRoom)
	}

	text, isErr = callTool(t, b.ctx, c, "get_execution", map[string]any{"id": got.ExecutionID})
	if isErr || !strings.Contains(text, "requested by mcp:claude via mcp") {
		t.Errorf("get_execution through the proxy = %v %q", isErr, text)
	}

	// The bot restarts, with none of its sessions: the proxy's next
	// request goes through, once.
	endpoint.set(b.srv.HTTPHandler())
	if text, isErr := callTool(t, b.ctx, c, "request_execution", nthRequest(1)); isErr {
		t.Errorf("request_execution after the bot restarted: %s", text)
	}
	if n := executionCount(t, b); n != 2 {
		t.Errorf("%d executions after two requests, want 2", n)
	}
}

func TestStdioProxyWithAReadToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := serveHTTP(t, b.srv.HTTPHandler())
	c := stdioProxy(t, b.ctx, url, readToken)
	for _, n := range toolNames(t, b.ctx, c) {
		if n == "request_execution" || n == "get_lxc_state" {
			t.Errorf("the proxy of a read token offers %s", n)
		}
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "request_execution"
	req.Params.Arguments = restartGitea
	if res, err := c.CallTool(b.ctx, req); err == nil && !res.IsError {
		t.Errorf("request_execution through a read token's proxy succeeded: %s", resultText(t, res))
	}
	containsNone(t, "triage_alert through a read token's proxy", triagePrompt(t, b.ctx, c, "GiteaDown"), "request_execution", "tail_log")
	if n := executionCount(t, b); n != 0 {
		t.Errorf("%d executions through a read token's proxy", n)
	}
}

// readResource reads one resource's text through c.
func readResource(t *testing.T, ctx context.Context, c *client.Client, uri string) string {
	t.Helper()
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	res, err := c.ReadResource(ctx, req)
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	var b strings.Builder
	for _, rc := range res.Contents {
		if tc, ok := rc.(mcp.TextResourceContents); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// triagePrompt gets triage_alert for alert through c and returns its text.
func triagePrompt(t *testing.T, ctx context.Context, c *client.Client, alert string) string {
	t.Helper()
	req := mcp.GetPromptRequest{}
	req.Params.Name = "triage_alert"
	req.Params.Arguments = map[string]string{"alert": alert}
	res, err := c.GetPrompt(ctx, req)
	if err != nil {
		t.Fatalf("get triage_alert: %v", err)
	}
	var b strings.Builder
	for _, m := range res.Messages {
		if tc, ok := m.Content.(mcp.TextContent); ok {
			b.WriteString(tc.Text + "\n")
		}
	}
	return b.String()
}

func TestStdioProxyRefusesAWrongToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := serveHTTP(t, b.srv.HTTPHandler())
	_, err := proxy.New(b.ctx, proxy.Config{URL: url, Token: token + "x", Logger: testenv.Logger(t)})
	if !errors.Is(err, proxy.ErrUnauthorized) || !strings.Contains(err.Error(), "mcp.client_token") {
		t.Errorf("proxy.New with a wrong token = %v; want ErrUnauthorized naming mcp.client_token", err)
	}
}

// toolSchemas are the input and output schemas of each tool c lists, as
// JSON.
func toolSchemas(t *testing.T, ctx context.Context, c *client.Client) map[string]string {
	t.Helper()
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, tl := range res.Tools {
		raw, err := json.Marshal(tl)
		if err != nil {
			t.Fatal(err)
		}
		var wire struct {
			In  json.RawMessage `json:"inputSchema"`
			Out json.RawMessage `json:"outputSchema"`
		}
		if err := json.Unmarshal(raw, &wire); err != nil {
			t.Fatal(err)
		}
		out[tl.Name] = string(wire.In) + " " + string(wire.Out)
	}
	return out
}
