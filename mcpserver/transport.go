package mcpserver

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// ErrHTTPDisabled is the reason HTTPHandler refuses requests: no token is
// configured, and the MCP endpoint is never served without one.
var ErrHTTPDisabled = errors.New("the MCP HTTP endpoint is disabled: add a token to mcp.tokens")

// HTTPEnabled reports whether HTTPHandler serves MCP (a token is set).
func (s *Server) HTTPEnabled() bool { return len(s.cfg.Tokens) > 0 }

type tokenKey struct{}

// HTTPHandler serves MCP over streamable HTTP behind the bearer tokens. The
// caller mounts it, at /mcp by convention: mux.Handle("/mcp", h). A request
// without a configured token gets 401 and a WWW-Authenticate challenge;
// when no token is configured every request gets 503, so the endpoint can
// be mounted unconditionally and still never serve tools unauthenticated.
// Every request acts as the external client its token names ("mcp:<name>"),
// limited to the read tools for a read-scope token, and its plans are
// posted in the ops room. Call it once and mount the result; each call
// builds a new transport with its own sessions.
func (s *Server) HTTPHandler() http.Handler {
	if !s.HTTPEnabled() {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, ErrHTTPDisabled.Error(), http.StatusServiceUnavailable)
		})
	}
	h := server.NewStreamableHTTPServer(s.mcp,
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			// The handler below put the token there; a request that
			// reached here without one acts with nobody's rights.
			t, ok := r.Context().Value(tokenKey{}).(Token)
			if !ok {
				return WithCaller(ctx, Caller{Via: ViaMCP, RequestedBy: s.cfg.ExternalActor, ReadOnly: true})
			}
			return WithCaller(ctx, Caller{
				Via: ViaMCP, RequestedBy: s.cfg.ExternalActor + ":" + t.Name, Owner: t.Owner,
				ReadOnly: t.Scope != ScopeRequest || t.Owner == "",
			})
		}),
		// The bearer token is what keeps a rebinding page out: it cannot
		// know the token. The Host check would only break a reverse proxy
		// on the same machine.
		server.WithDisableLocalhostProtection(true),
		server.WithStreamableHTTPLogger(s.log.With("component", "mcp-http")),
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearer(r)
		t, known := match(s.cfg.Tokens, got)
		if !ok || !known {
			challenge := `Bearer realm="nomos"`
			if ok {
				challenge += `, error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			s.log.Warn("MCP request refused: missing or wrong bearer token", "remote_addr", r.RemoteAddr, "token_given", ok)
			http.Error(w, "a valid bearer token is required", http.StatusUnauthorized)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxRequestBytes)
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, t)))
	})
}

// maxRequestBytes bounds one JSON-RPC request over HTTP; the largest real
// one, a request_execution with a post_install script, is far smaller.
const maxRequestBytes = 1 << 20

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// InProcessClient returns an initialized mcp-go client connected to this
// server in the same process, for the bot's agent: the same registry and
// the same gate as every other client. Calls act as ViaAgent; wrap the
// context of each call with WithCaller to name the room the plan belongs
// to and the operator it acts for. Close the client when done.
func (s *Server) InProcessClient(ctx context.Context) (*client.Client, error) {
	c := client.NewClient(&agentTransport{InProcessTransport: transport.NewInProcessTransport(s.mcp)})
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "nomos-agent", Version: s.cfg.Version}
	if _, err := c.Initialize(ctx, init); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// agentTransport is the in-process transport with a default Caller: a call
// whose context names none acts as the agent, not as an external client.
type agentTransport struct {
	*transport.InProcessTransport
}

func (t *agentTransport) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	if _, ok := CallerFrom(ctx); !ok {
		ctx = WithCaller(ctx, Caller{Via: ViaAgent})
	}
	return t.InProcessTransport.SendRequest(ctx, req)
}
