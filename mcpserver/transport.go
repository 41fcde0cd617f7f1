package mcpserver

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// ErrHTTPDisabled is the reason HTTPHandler refuses requests: no token is
// configured, and the MCP endpoint is never served without one.
var ErrHTTPDisabled = errors.New("the MCP HTTP endpoint is disabled: set mcp.token")

// HTTPEnabled reports whether HTTPHandler serves MCP (a token is set).
func (s *Server) HTTPEnabled() bool { return s.cfg.Token != "" }

// HTTPHandler serves MCP over streamable HTTP behind the bearer token. The
// caller mounts it, at /mcp by convention: mux.Handle("/mcp", h). A request
// without the token, or with another, gets 401 and a WWW-Authenticate
// challenge; when no token is configured every request gets 503, so the
// endpoint can be mounted unconditionally and still never serve tools
// unauthenticated. Every request acts as an external client (ViaMCP),
// whose plans are posted in the ops room. Call it once and mount the
// result; each call builds a new transport with its own sessions.
func (s *Server) HTTPHandler() http.Handler {
	if s.cfg.Token == "" {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, ErrHTTPDisabled.Error(), http.StatusServiceUnavailable)
		})
	}
	h := server.NewStreamableHTTPServer(s.mcp,
		server.WithHTTPContextFunc(func(ctx context.Context, _ *http.Request) context.Context {
			return WithCaller(ctx, Caller{Via: ViaMCP})
		}),
		// The bearer token is what keeps a rebinding page out: it cannot
		// know the token. The Host check would only break a reverse proxy
		// on the same machine.
		server.WithDisableLocalhostProtection(true),
		server.WithStreamableHTTPLogger(s.log.With("component", "mcp-http")),
	)
	want := sha256.Sum256([]byte(s.cfg.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearer(r)
		// Compare digests, so neither the time taken nor an early exit
		// says anything about the token's length or prefix.
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
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
		h.ServeHTTP(w, r)
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

// ServeStdio serves MCP over newline-delimited JSON-RPC on in and out until
// in ends or ctx is done, as `nomos mcp --stdio` does. The client is
// external (ViaMCP). Nothing but protocol messages is written to out.
// mcp-go keeps one stdio session per process, so serve one stream at a
// time.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	ss := server.NewStdioServer(s.mcp)
	ss.SetErrorLogger(slog.NewLogLogger(s.log.With("component", "mcp-stdio").Handler(), slog.LevelWarn))
	ss.SetContextFunc(func(ctx context.Context) context.Context {
		return WithCaller(ctx, Caller{Via: ViaMCP})
	})
	err := ss.Listen(ctx, in, out)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
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
