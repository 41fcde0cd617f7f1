package mcpserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/nomoshq/nomos/executions"
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
	// Token is the bearer token HTTP clients present. Empty disables the
	// HTTP transport: HTTPHandler then refuses every request.
	Token string
	// ExternalActor is requested_by for an external client that gives no
	// name. Default "mcp".
	ExternalActor string
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
	log   *slog.Logger
	now   func() time.Time
}

// New validates cfg and builds the registry.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("mcpserver: Store is required")
	case cfg.Executions == nil:
		return nil, errors.New("mcpserver: Executions is required")
	case cfg.Token != "" && len(cfg.Token) < 16:
		return nil, errors.New("mcpserver: Token must be at least 16 characters")
	case cfg.LiveWait < 0, cfg.PollInterval < 0, cfg.HTTPGetTimeout < 0, cfg.MaxResultBytes < 0:
		return nil, errors.New("mcpserver: durations and sizes must not be negative")
	}
	cfg.ExternalActor = cmp.Or(cfg.ExternalActor, "mcp")
	cfg.AgentActor = cmp.Or(cfg.AgentActor, "agent")
	cfg.LiveWait = cmp.Or(cfg.LiveWait, 20*time.Second)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, 250*time.Millisecond)
	cfg.HTTPGetTimeout = cmp.Or(cfg.HTTPGetTimeout, 20*time.Second)
	cfg.MaxResultBytes = cmp.Or(cfg.MaxResultBytes, DefaultMaxResultBytes)
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
	s := &Server{cfg: cfg, store: cfg.Store, exec: cfg.Executions, log: cfg.Logger, now: cfg.Clock}
	s.fetch = newFetchClient(cfg.AllowHTTPGetAddr, cfg.HTTPGetTimeout)
	s.mcp = server.NewMCPServer("nomos", cfg.Version,
		server.WithToolCapabilities(false),
		server.WithRecovery(),
		server.WithInstructions(instructions),
		server.WithToolHandlerMiddleware(s.guard),
	)
	s.mcp.AddTools(s.tools()...)
	return s, nil
}

const instructions = `Nomos keeps a homelab of Proxmox hosts, LXC containers and services. ` +
	`Read with the bulk tools first: list_lxcs, get_state_snapshot, get_health_summary and query_metrics each answer for the whole fleet in one call. ` +
	`Use per-entity tools only for the one entity in question. ` +
	`request_execution is the only way to change anything; an operator approves it in the Matrix room.`

// Caller says who is calling a tool: the route recorded on any execution
// it requests, who the request is on behalf of, and the room its plan card
// goes to for approval.
type Caller struct {
	// Via is ViaAgent or ViaMCP.
	Via string
	// RequestedBy is the Matrix user the agent acts for, or the external
	// client's name. Empty means the configured actor for the route.
	RequestedBy string
	// RoomID is where a requested plan is posted and approved. Empty means
	// Config.OpsRoomID.
	RoomID string
	// Session is the agent session whose turn makes the call, so an
	// execution it requests re-invokes it when it ends.
	Session *store.SessionLink
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
	if c.RequestedBy == "" {
		switch c.Via {
		case ViaAgent:
			c.RequestedBy = s.cfg.AgentActor
		default:
			c.RequestedBy = s.cfg.ExternalActor
			if name := clientName(ctx); name != "" {
				c.RequestedBy = s.cfg.ExternalActor + ":" + name
			}
		}
	}
	return c
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// clientName is the name an MCP client gave when it initialized, reduced
// to a short token fit for an audit row.
func clientName(ctx context.Context) string {
	sess, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo)
	if !ok {
		return ""
	}
	name := strings.Trim(unsafeName.ReplaceAllString(sess.GetClientInfo().Name, "-"), "-")
	if len(name) > 40 {
		name = name[:40]
	}
	return name
}

// guard wraps every tool: it logs the call and caps the result, so no tool,
// however a fleet grows, returns a message larger than the agent can keep.
func (s *Server) guard(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		res, err := next(ctx, req)
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
