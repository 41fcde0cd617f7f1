package main

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/config"
	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/seeds"
	"github.com/nomoshq/nomos/store"
)

var tokenOutput = regexp.MustCompile(`(?s)shown once.*?\n  ([0-9a-f]{48})\n.*\n  (- \{name: claude, token_sha256: ([0-9a-f]{64}), scope: (read|request)(, for: "([^"]+)")?\})\n`)

// tokenOwner is whom the request tokens of these tests are for.
const tokenOwner = "@operator:localhost"

// newMCPToken runs `nomos mcp token` with args and NAME claude, and
// returns the token and the mcp.tokens line it printed.
func newMCPToken(t *testing.T, args ...string) (token, line string) {
	t.Helper()
	var out, errOut strings.Builder
	args = append(append([]string{"mcp", "token"}, args...), "claude")
	if code := run(args, nil, &out, &errOut); code != 0 {
		t.Fatalf("nomos %v exited %d: %s", args, code, errOut.String())
	}
	m := tokenOutput.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("nomos mcp token printed:\n%s", out.String())
	}
	if sum := mcpserver.HashToken(m[1]); hex.EncodeToString(sum[:]) != m[3] {
		t.Fatalf("the printed hash %s is not the SHA-256 of the printed token", m[3])
	}
	return m[1], m[2]
}

// TestMCPTokenCommand: `nomos mcp token` makes a read token unless asked
// for request, and a request token names the person it is for, who
// becomes the owner of what it requests.
func TestMCPTokenCommand(t *testing.T) {
	t.Parallel()
	token, line := newMCPToken(t, "-scope", "request", "-for", tokenOwner)
	other, readLine := newMCPToken(t)
	if token == other {
		t.Error("two runs printed the same token")
	}
	for _, tc := range []struct {
		line  string
		scope mcpserver.Scope
		owner string
	}{
		{line, mcpserver.ScopeRequest, tokenOwner},
		{readLine, mcpserver.ScopeRead, ""}, // the default
	} {
		// The printed line is a valid mcp.tokens entry.
		cfg, err := config.Load(writeFile(t, t.TempDir(), "nomos.yaml", "mcp:\n  tokens:\n    "+tc.line+"\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		tokens, err := cfg.MCP.ServerTokens()
		if err != nil || len(tokens) != 1 || tokens[0].Name != "claude" || tokens[0].Scope != tc.scope || tokens[0].Owner != tc.owner {
			t.Errorf("%s loads as %+v, %v; want scope %s for %q", tc.line, tokens, err, tc.scope, tc.owner)
		}
	}
	var out, errOut strings.Builder
	for _, args := range [][]string{
		{"mcp", "token"}, {"mcp", "token", "a:b"}, {"mcp", "token", "-scope", "admin", "x"},
		{"mcp", "token", "-scope", "request", "x"},                  // whose?
		{"mcp", "token", "-scope", "request", "-for", "alice", "x"}, // not a user id
	} {
		if code := run(args, nil, &out, &errOut); code == 0 {
			t.Errorf("nomos %v exited 0", args)
		}
	}
}

// TestMCPRequestTokenWithoutOwnerOnlyReads: a request token in a config
// written before tokens had owners, and the deprecated mcp.token, are
// served with scope read, and doctor says how to give them an owner.
func TestMCPRequestTokenWithoutOwnerOnlyReads(t *testing.T) {
	t.Parallel()
	sum := mcpserver.HashToken("old-token-0123456789abcdef")
	cfg, err := config.Load(writeFile(t, t.TempDir(), "nomos.yaml", "mcp:\n  token: legacy-token-0123456789abcdef\n  tokens:\n"+
		"    - {name: old, token_sha256: "+hex.EncodeToString(sum[:])+", scope: request}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := cfg.MCP.ServerTokens()
	if err != nil || len(tokens) != 2 {
		t.Fatalf("serverTokens = %+v, %v", tokens, err)
	}
	for _, tok := range tokens {
		if tok.Scope != mcpserver.ScopeRead || tok.Owner != "" {
			t.Errorf("token %s is served with scope %s for %q; want read, for nobody", tok.Name, tok.Scope, tok.Owner)
		}
	}
	d := &doctor{cfg: cfg}
	var found bool
	for _, l := range d.checkMCP(testenv.Context(t)) {
		if !l.ok && strings.Contains(l.text, "old ask for scope request but name nobody") && strings.Contains(l.fix, "-for @user:server") {
			found = true
		}
	}
	if !found {
		t.Errorf("doctor does not say that token old only reads: %+v", d.checkMCP(testenv.Context(t)))
	}
	bad, err := config.Load(writeFile(t, t.TempDir(), "nomos.yaml", "mcp:\n  tokens:\n"+
		"    - {name: bad, token_sha256: "+hex.EncodeToString(sum[:])+", scope: request, for: alice}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Validate("bot"); err == nil || !strings.Contains(err.Error(), "mcp.tokens[0].for: the person the token is for: must be a Matrix user id") {
		t.Errorf("a token for \"alice\", not a Matrix user id: validate = %v", err)
	}
}

// TestMCPStdioIsAThinClient runs the built `nomos mcp --stdio` with only
// mcp.url and mcp.client_token in its environment, no database URL, Redis
// or signing key, against a real bot-side MCP endpoint, and checks that a
// read and a request go through and the request is the token's.
func TestMCPStdioIsAThinClient(t *testing.T) {
	bin := buildNomos(t)
	ctx := testenv.Context(t)
	token, _ := newMCPToken(t, "-scope", "request", "-for", tokenOwner)

	// The bot's side: store, queue, signing key, gate and /mcp endpoint.
	st := testenv.Store(t)
	seed, err := fleetseed.Load(seeds.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplySeed(ctx, seed); err != nil {
		t.Fatal(err)
	}
	redisOpt, err := asynq.ParseRedisURI(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	queue := asynq.NewClient(redisOpt)
	t.Cleanup(func() { queue.Close() })
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := policy.NewRules(policy.RulesConfig{Operators: []string{"@operator:localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	execs, err := executions.New(executions.Config{Store: st, Queue: queue, SigningKey: priv, Rules: rules, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mcpserver.New(mcpserver.Config{
		Store: st, Executions: execs, OpsRoomID: "!ops:localhost", Logger: testenv.Logger(t),
		Tokens: []mcpserver.Token{{Name: "claude", SHA256: mcpserver.HashToken(token), Scope: mcpserver.ScopeRequest, Owner: tokenOwner}},
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.HTTPHandler())
	bot := httptest.NewServer(mux)
	t.Cleanup(bot.Close)

	// The stdio role, with an environment that holds nothing else.
	tokenFile := filepath.Join(t.TempDir(), "client-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "mcp", "--stdio")
	cmd.Env = []string{"HOME=" + t.TempDir(), "NOMOS_MCP__URL=" + bot.URL + "/mcp", "NOMOS_MCP__CLIENT_TOKEN_FILE=" + tokenFile}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(transport.NewIO(stdout, stdin, io.NopCloser(strings.NewReader(""))))
	t.Cleanup(func() {
		c.Close()
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("nomos mcp --stdio: %v", err)
		}
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

	req := mcp.CallToolRequest{}
	req.Params.Name = "list_lxcs"
	res, err := c.CallTool(ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("list_lxcs through nomos mcp --stdio: %v %+v", err, res)
	}
	if text := res.Content[0].(mcp.TextContent).Text; !strings.Contains(text, "15 containers on 2 hosts") {
		t.Errorf("list_lxcs through nomos mcp --stdio = %q", text)
	}

	req = mcp.CallToolRequest{}
	req.Params.Name = "request_execution"
	req.Params.Arguments = map[string]any{"action": "restart", "target": "service:gitea", "reason": "gitea returns 502"}
	res, err = c.CallTool(ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("request_execution through nomos mcp --stdio: %v %+v", err, res)
	}
	var got mcpserver.Requested
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("structured content %s: %v", raw, err)
	}
	x, err := st.GetExecution(ctx, uuid.MustParse(got.ExecutionID))
	if err != nil {
		t.Fatal(err)
	}
	if x.RequestedBy != "mcp:claude" || x.RequestedVia != "mcp" || x.OnBehalfOf != tokenOwner || x.State != store.StateAwaitingApproval {
		t.Errorf("the request through stdio is %s, by %q via %q for %q; want awaiting_approval by mcp:claude via mcp for %s", x.State, x.RequestedBy, x.RequestedVia, x.OnBehalfOf, tokenOwner)
	}
}

func TestMCPStdioRefusesAWrongToken(t *testing.T) {
	t.Parallel()
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="nomos", error="invalid_token"`)
		http.Error(w, "a valid bearer token is required", http.StatusUnauthorized)
	}))
	defer bot.Close()
	var out, errOut strings.Builder
	code := run([]string{"mcp", "--stdio"}, []string{"NOMOS_MCP__URL=" + bot.URL + "/mcp", "NOMOS_MCP__CLIENT_TOKEN=wrong-token-0123456789"}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "check mcp.client_token against mcp.tokens") {
		t.Errorf("nomos mcp --stdio with a refused token exited %d:\n%s", code, errOut.String())
	}
	if out.Len() != 0 {
		t.Errorf("stdout carries protocol only, got %q", out.String())
	}
}
