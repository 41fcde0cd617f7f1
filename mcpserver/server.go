package mcpserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/metrics"
	"github.com/nomoshq/nomos/store"
)

// Routes a request can take, as executions record them (requested_via).
const (
	// ViaAgent marks calls from the bot's own agent, in-process.
	ViaAgent = executions.ViaAgent
	// ViaMCP marks calls from external MCP clients, over HTTP or stdio.
	ViaMCP = executions.ViaMCP
)

// DefaultMaxResultBytes caps the text of any one tool result. It matches
// the size of a stored agent message, so a result is never cut twice.
const DefaultMaxResultBytes = 16 << 10

// Config configures a Server.
type Config struct {
	// Store is what every read tool queries. Required.
	Store *store.Store
	// Executions is the gate request_execution and get_lxc_state go
	// through. Required.
	Executions *executions.Service
	// OpsRoomID is the Matrix room where plans requested by external MCP
	// clients are posted for approval, and the room of an in-process call
	// that names none. Without it, external clients can read but not
	// request.
	OpsRoomID string
	// Rooms are the rooms besides OpsRoomID where plans are posted and
	// approved (matrix.rooms). A plan an in-process caller asks for from
	// any other room is posted in OpsRoomID instead, so it is never
	// carded only in a room nobody watches.
	Rooms []string
	// Tokens are the bearer tokens HTTP clients present, each with its
	// name and scope. None (and no Token) disables the HTTP transport:
	// HTTPHandler then refuses every request.
	Tokens []Token
	// Token is a single bearer token, accepted as one read-scope token
	// named "mcp": it has no owner, so it cannot request. Deprecated: use
	// Tokens, which keeps only a digest and names the token's owner.
	Token string
	// ExternalActor prefixes requested_by for external clients: a token
	// named claude requests as "mcp:claude". Default "mcp".
	ExternalActor string
	// RequestsPerMinute is how many executions one requester (an MCP
	// token, or the agent) may ask for per minute, through
	// request_execution or get_lxc_state. Default 10.
	RequestsPerMinute int
	// RequestBurst is how many of those may come at once. Default 5.
	RequestBurst int
	// HTTPAllow lists the domains http_get may fetch: a name allows itself
	// and its subdomains, an IP address only itself. Empty means http_get
	// fetches nothing. Checked before any DNS lookup and on every redirect.
	HTTPAllow []string
	// AgentActor is requested_by for an in-process call whose Caller names
	// nobody. Default "agent".
	AgentActor string
	// LiveWait bounds how long get_lxc_state waits for its probe before it
	// answers with the execution id. Default 20s.
	LiveWait time.Duration
	// PollInterval is how often get_lxc_state looks for the probe's
	// result. Default 250ms.
	PollInterval time.Duration
	// AllowHTTPGetAddr decides which resolved addresses http_get may
	// connect to, for the first request and every redirect. Default
	// PublicAddr.
	AllowHTTPGetAddr func(netip.Addr) bool
	// HTTPGetTimeout bounds one http_get, redirects included. Default 20s.
	HTTPGetTimeout time.Duration
	// MaxResultBytes caps the text of any tool result. Default
	// DefaultMaxResultBytes.
	MaxResultBytes int
	// Metrics counts tool calls by tool and result; nil counts nothing.
	Metrics *metrics.Metrics
	// Version is reported to clients. Default "dev".
	Version string
	Logger  *slog.Logger
	Clock   func() time.Time
}

// Server holds the tool registry and its transports.
type Server struct {
	cfg   Config
	store *store.Store
	exec  *executions.Service
	mcp   *server.MCPServer
	fetch *http.Client
	// allow is Config.HTTPAllow, normalised.
	allow  allowlist
	limits *requestLimiter
	log    *slog.Logger
	now    func() time.Time
}

// LegacyTokenName names the single token of Config.Token.
const LegacyTokenName = "mcp"

// New validates cfg and builds the registry.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("mcpserver: Store is required")
	case cfg.Executions == nil:
		return nil, errors.New("mcpserver: Executions is required")
	case cfg.Token != "" && len(cfg.Token) < MinTokenLength:
		return nil, fmt.Errorf("mcpserver: Token must be at least %d characters", MinTokenLength)
	case cfg.LiveWait < 0, cfg.PollInterval < 0, cfg.HTTPGetTimeout < 0, cfg.MaxResultBytes < 0,
		cfg.RequestsPerMinute < 0, cfg.RequestBurst < 0:
		return nil, errors.New("mcpserver: durations, sizes and rates must not be negative")
	}
	cfg.Tokens = slices.Clone(cfg.Tokens)
	if cfg.Token != "" {
		cfg.Tokens = append(cfg.Tokens, Token{Name: LegacyTokenName, SHA256: HashToken(cfg.Token), Scope: ScopeRead})
		cfg.Token = ""
	}
	if err := validateTokens(cfg.Tokens); err != nil {
		return nil, err
	}
	allow, err := parseAllowlist(cfg.HTTPAllow)
	if err != nil {
		return nil, err
	}
	cfg.ExternalActor = cmp.Or(cfg.ExternalActor, "mcp")
	cfg.AgentActor = cmp.Or(cfg.AgentActor, "agent")
	cfg.LiveWait = cmp.Or(cfg.LiveWait, 20*time.Second)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, 250*time.Millisecond)
	cfg.HTTPGetTimeout = cmp.Or(cfg.HTTPGetTimeout, 20*time.Second)
	cfg.MaxResultBytes = cmp.Or(cfg.MaxResultBytes, DefaultMaxResultBytes)
	cfg.RequestsPerMinute = cmp.Or(cfg.RequestsPerMinute, 10)
	cfg.RequestBurst = cmp.Or(cfg.RequestBurst, 5)
	cfg.Version = cmp.Or(cfg.Version, "dev")
	if cfg.AllowHTTPGetAddr == nil {
		cfg.AllowHTTPGetAddr = PublicAddr
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	s := &Server{cfg: cfg, store: cfg.Store, exec: cfg.Executions, log: cfg.Logger, now: cfg.Clock,
		allow: allow, limits: newRequestLimiter(cfg.RequestsPerMinute, cfg.RequestBurst)}
	s.fetch = newFetchClient(cfg.AllowHTTPGetAddr, allow, cfg.HTTPGetTimeout)
	hooks := &server.Hooks{}
	hooks.AddAfterListTools(s.hideRequestTools)
	s.mcp = server.NewMCPServer("nomos", cfg.Version,
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithPromptCapabilities(false),
		// structuredContent is checked against its tool's output schema
		// before a client sees it. Arguments are checked by typed, in
		// words a model can act on.
		server.WithOutputSchemaValidation(),
		server.WithRecovery(),
		server.WithResourceRecovery(),
		server.WithInstructions(instructions),
		server.WithToolHandlerMiddleware(s.guard),
		server.WithHooks(hooks),
	)
	tools, err := s.tools()
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	s.mcp.AddTools(tools...)
	s.mcp.AddResources(s.resources()...)
	s.mcp.AddResourceTemplates(s.resourceTemplates()...)
	s.mcp.AddPrompts(s.prompts()...)
	return s, nil
}

const instructions = `Nomos keeps a homelab of Proxmox hosts, LXC containers and services. ` +
	`Read with the bulk tools first: list_lxcs, get_state_snapshot, get_health_summary and query_metrics each answer for the whole fleet in one call. ` +
	`Use per-entity tools only for the one entity in question. ` +
	`request_execution is the only way to change anything; an operator approves it in the Matrix room. ` +
	`The resources ` + snapshotURI + ` and ` + runbooksURI + ` and the prompts triage_alert and explain_execution only read.`

// Caller says who is calling a tool: the route recorded on any execution
// it requests, who the request is on behalf of, and the room its plan card
// goes to for approval.
type Caller struct {
	// Via is ViaAgent or ViaMCP.
	Via string
	// RequestedBy is the Matrix user the agent acts for, or the external
	// client's name. Empty means the configured actor for the route.
	RequestedBy string
	// Owner is the Matrix user an external client's token was made for:
	// its plans are on their behalf. Empty for the agent, whose
	// RequestedBy is the person it acts for.
	Owner string
	// ReadOnly limits the caller to the read tools: a read-scope token.
	ReadOnly bool
	// RoomID is where a requested plan is posted and approved. Empty means
	// Config.OpsRoomID.
	RoomID string
	// Session is the agent session whose turn makes the call, so an
	// execution it requests re-invokes it when it ends.
	Session *store.SessionLink

	// toOpsRoom: the caller's room is not one for plans, so its plans go
	// to the ops room.
	toOpsRoom bool
}

type callerKey struct{}

// WithCaller returns a context whose tool calls act as c. The bot wraps
// the context of each in-process CallTool with it, naming the session's
// room and the operator who spoke. External transports set their own
// Caller on every request, so a client can never choose it.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the Caller set by WithCaller.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// caller resolves who is calling: the context's Caller with its blanks
// filled in, or an external client when the context names nobody.
func (s *Server) caller(ctx context.Context) Caller {
	c, ok := CallerFrom(ctx)
	if !ok || (c.Via != ViaAgent && c.Via != ViaMCP) {
		c = Caller{Via: ViaMCP}
	}
	c.RoomID = cmp.Or(c.RoomID, s.cfg.OpsRoomID)
	if c.RoomID != s.cfg.OpsRoomID && !slices.Contains(s.cfg.Rooms, c.RoomID) {
		c.RoomID, c.toOpsRoom = s.cfg.OpsRoomID, true
	}
	if c.RequestedBy == "" {
		switch c.Via {
		case ViaAgent:
			c.RequestedBy = s.cfg.AgentActor
		default:
			c.RequestedBy = s.cfg.ExternalActor
		}
	}
	return c
}

// requester is whose budget a request counts against: each external
// client by its name, and the agent as one requester whoever it acts for.
func (s *Server) requester(c Caller) string {
	if c.Via == ViaAgent {
		return s.cfg.AgentActor
	}
	return c.RequestedBy
}

// requestTools are the tools that request an execution or change what
// Nomos keeps: a read-scope caller neither sees nor calls them.
var requestTools = map[string]bool{"request_execution": true, "get_lxc_state": true, "get_vm_state": true, "tail_log": true, "delete_session": true}

// notForTheAgent are the tools the agent neither sees nor calls: an agent
// steered by text it read must not erase the record of what it did.
var notForTheAgent = map[string]bool{"delete_session": true}

// hideRequestTools drops requestTools from a read-scope caller's list,
// and notForTheAgent from the agent's.
func (s *Server) hideRequestTools(ctx context.Context, _ any, _ *mcp.ListToolsRequest, res *mcp.ListToolsResult) {
	if res == nil {
		return
	}
	c := s.caller(ctx)
	res.Tools = slices.DeleteFunc(res.Tools, func(t mcp.Tool) bool {
		return (c.ReadOnly && requestTools[t.Name]) || (c.Via == ViaAgent && notForTheAgent[t.Name])
	})
}

// refuseReadOnly is the answer to a read-scope caller that calls one of
// requestTools.
func (s *Server) refuseReadOnly(ctx context.Context, tool string, c Caller) *mcp.CallToolResult {
	s.log.WarnContext(ctx, "read-scope MCP client tried a tool that needs scope request", "tool", tool, "requested_by", c.RequestedBy)
	return mcp.NewToolResultError(fmt.Sprintf("refused: %s needs a request token, and the token of %s may only read; "+
		"an operator can make a request token for the person who uses it (nomos mcp token -scope request -for @user:server NAME)", tool, c.RequestedBy))
}

// refuseAgent is the answer to the agent calling one of notForTheAgent.
func (s *Server) refuseAgent(ctx context.Context, tool string, c Caller) *mcp.CallToolResult {
	s.log.WarnContext(ctx, "the agent tried a tool that is not for it", "tool", tool, "requested_by", c.RequestedBy)
	return mcp.NewToolResultError(fmt.Sprintf("refused: %s is not for the agent; an operator can do it in the room", tool))
}

// allowRequest refuses a request from a read-scope caller or one over its
// rate; nil means go ahead. Nothing is recorded for a refused request.
func (s *Server) allowRequest(ctx context.Context, tool string, c Caller) *mcp.CallToolResult {
	if c.ReadOnly {
		return s.refuseReadOnly(ctx, tool, c)
	}
	who := s.requester(c)
	if ok, wait := s.limits.allow(who, s.now()); !ok {
		s.log.WarnContext(ctx, "request rate exceeded", "tool", tool, "requester", who)
		return mcp.NewToolResultError(fmt.Sprintf("nothing was queued: too many requests from %s; try again in %ds", who, seconds(wait)))
	}
	return nil
}

// guard wraps every tool: it refuses the request tools to a read-scope
// caller, logs the call and caps the result, so no tool, however a fleet
// grows, returns a message larger than the agent can keep.
func (s *Server) guard(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		var res *mcp.CallToolResult
		var err error
		result := metrics.ResultRefused
		if c := s.caller(ctx); c.ReadOnly && requestTools[req.Params.Name] {
			res = s.refuseReadOnly(ctx, req.Params.Name, c)
		} else if c.Via == ViaAgent && notForTheAgent[req.Params.Name] {
			res = s.refuseAgent(ctx, req.Params.Name, c)
		} else {
			res, err = next(ctx, req)
			result = callResult(res, err)
		}
		// Only registered tools reach here, so a client cannot add series.
		s.cfg.Metrics.MCPCall(req.Params.Name, result)
		size := 0
		if res != nil {
			for i, c := range res.Content {
				if tc, ok := c.(mcp.TextContent); ok {
					tc.Text = capText(tc.Text, s.cfg.MaxResultBytes)
					res.Content[i] = tc
					size += len(tc.Text)
				}
			}
		}
		s.log.Debug("tool call", "tool", req.Params.Name, "via", s.caller(ctx).Via,
			"bytes", size, "is_error", res != nil && res.IsError, "duration", time.Since(start), "err", err)
		return res, err
	}
}

// callResult is a finished call's result label.
func callResult(res *mcp.CallToolResult, err error) string {
	if err != nil || res == nil || res.IsError {
		return metrics.ResultError
	}
	return metrics.ResultOK
}

// capText cuts text to at most n bytes on a line or rune boundary and says
// so at the end.
func capText(text string, n int) string {
	if len(text) <= n {
		return text
	}
	note := fmt.Sprintf("\n[cut at %d of %d bytes; narrow the query (a filter, a shorter window or a lower limit)]", n, len(text))
	cut := max(n-len(note), 0)
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	if nl := strings.LastIndexByte(text[:cut], '\n'); nl > cut/2 {
		cut = nl
	}
	return text[:cut] + note
}

// internal logs the cause of a failure and returns the fixed sentence the
// model sees instead.
func (s *Server) internal(ctx context.Context, tool string, err error, sentence string) *mcp.CallToolResult {
	s.log.ErrorContext(ctx, "tool failed", "tool", tool, "err", err)
	return mcp.NewToolResultError(sentence)
}
