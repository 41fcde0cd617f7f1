package mcpserver_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nomoshq/nomos/internal/metrics"
	"github.com/nomoshq/nomos/mcpserver"
)

// TestToolCallsAreCounted: each call of a registered tool is counted by
// tool and result, a read token's request refused as such; a client
// calling made-up tool names adds no series, so it cannot grow /metrics.
func TestToolCallsAreCounted(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	b := setup(t, func(c *mcpserver.Config) { c.Metrics = m })
	c := httpClient(t, b.ctx, serveHTTP(t, b.srv.HTTPHandler()), readToken)

	if _, isErr := callTool(t, b.ctx, c, "list_lxcs", nil); isErr {
		t.Fatal("list_lxcs failed")
	}
	if _, isErr := callTool(t, b.ctx, c, "request_execution", restartGitea); !isErr {
		t.Fatal("a read token requested an execution")
	}
	if _, isErr := callTool(t, b.ctx, c, "http_get", map[string]any{"url": "http://127.0.0.1/"}); !isErr {
		t.Fatal("http_get fetched with an empty allowlist")
	}
	for i := range 20 {
		req := mcp.CallToolRequest{}
		req.Params.Name = fmt.Sprintf("made_up_tool_%d", i)
		if _, err := c.CallTool(b.ctx, req); err == nil {
			t.Fatalf("%s answered", req.Params.Name)
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var got []string
	for line := range strings.Lines(rec.Body.String()) {
		if strings.HasPrefix(line, "nomos_mcp_calls_total{") {
			got = append(got, strings.TrimSpace(line))
		}
	}
	want := []string{
		`nomos_mcp_calls_total{result="error",tool="http_get"} 1`,
		`nomos_mcp_calls_total{result="ok",tool="list_lxcs"} 1`,
		`nomos_mcp_calls_total{result="refused",tool="request_execution"} 1`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("/metrics MCP calls (-want +got):\n%s", diff)
	}
}
