// Package proxy serves MCP over stdio for a local client (Claude Desktop,
// another agent) by forwarding every call to the bot's /mcp endpoint over
// streamable HTTP. It holds one client token and nothing else: no
// database, no Redis, no signing key. Only the bot plans, signs and
// dispatches, and it records every request under the token's name.
package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Config configures a Proxy.
type Config struct {
	// URL is the bot's MCP endpoint, such as http://127.0.0.1:8080/mcp.
	// Required.
	URL string
	// Token is the bearer token the bot knows this client by (one of its
	// mcp.tokens). Required.
	Token string
	// HTTPClient makes the requests. Default: a client without a timeout,
	// since request_execution may wait for a quick read-only result.
	HTTPClient *http.Client
	// Version is reported to the local client. Default "dev".
	Version string
	Logger  *slog.Logger
}

// Proxy forwards MCP from a local stdio client to the bot.
type Proxy struct {
	cfg          Config
	log          *slog.Logger
	tools        []mcp.Tool
	resources    []mcp.Resource
	templates    []mcp.ResourceTemplate
	prompts      []mcp.Prompt
	instructions string
	remote       *client.Client
}

// ErrUnauthorized is returned by New when the bot refuses the token.
var ErrUnauthorized = errors.New("the bot refused the MCP client token")

// New connects to the bot, and lists the tools its token may use, and its
// resources and prompts: what the proxy then offers. It fails at once when the bot cannot be
// reached or refuses the token, so a misconfigured client says so on
// start rather than on its first call.
func New(ctx context.Context, cfg Config) (*Proxy, error) {
	if cfg.URL == "" || cfg.Token == "" {
		return nil, errors.New("proxy: URL and Token are required")
	}
	cfg.Version = cmp.Or(cfg.Version, "dev")
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Proxy{cfg: cfg, log: cfg.Logger}
	remote, init, err := p.connect(ctx)
	if err != nil {
		return nil, err
	}
	tools, err := remote.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		remote.Close()
		return nil, fmt.Errorf("list the tools of %s: %w", cfg.URL, err)
	}
	p.remote, p.tools, p.instructions = remote, tools.Tools, init.Instructions
	if err := p.listTheRest(ctx, init.Capabilities); err != nil {
		remote.Close()
		return nil, err
	}
	return p, nil
}

// listTheRest lists the resources, resource templates and prompts, where
// the bot offers them (a bot older than they has none).
func (p *Proxy) listTheRest(ctx context.Context, caps mcp.ServerCapabilities) error {
	if caps.Resources != nil {
		res, err := p.remote.ListResources(ctx, mcp.ListResourcesRequest{})
		if err != nil {
			return fmt.Errorf("list the resources of %s: %w", p.cfg.URL, err)
		}
		templates, err := p.remote.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
		if err != nil {
			return fmt.Errorf("list the resource templates of %s: %w", p.cfg.URL, err)
		}
		p.resources, p.templates = res.Resources, templates.ResourceTemplates
	}
	if caps.Prompts != nil {
		prompts, err := p.remote.ListPrompts(ctx, mcp.ListPromptsRequest{})
		if err != nil {
			return fmt.Errorf("list the prompts of %s: %w", p.cfg.URL, err)
		}
		p.prompts = prompts.Prompts
	}
	return nil
}

// connect opens and initializes one session with the bot.
func (p *Proxy) connect(ctx context.Context) (*client.Client, *mcp.InitializeResult, error) {
	opts := []transport.StreamableHTTPCOption{
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + p.cfg.Token}),
	}
	if p.cfg.HTTPClient != nil {
		opts = append(opts, transport.WithHTTPBasicClient(p.cfg.HTTPClient))
	}
	c, err := client.NewStreamableHttpClient(p.cfg.URL, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("MCP client for %s: %w", p.cfg.URL, err)
	}
	if err := c.Start(ctx); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("connect to %s: %w", p.cfg.URL, err)
	}
	req := mcp.InitializeRequest{}
	// This protocol version keeps no session on the server: every call
	// stands alone, so a restarted bot simply answers the next one.
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "nomos-mcp-stdio", Version: p.cfg.Version}
	init, err := c.Initialize(ctx, req)
	if err != nil {
		c.Close()
		if errors.Is(err, transport.ErrAuthorizationRequired) || errors.Is(err, transport.ErrUnauthorized) {
			return nil, nil, fmt.Errorf("%w: %s answered 401; check mcp.client_token against mcp.tokens in the bot's config", ErrUnauthorized, p.cfg.URL)
		}
		return nil, nil, fmt.Errorf("initialize MCP with %s (is `nomos bot` running with mcp.tokens set?): %w", p.cfg.URL, err)
	}
	return c, init, nil
}

// Tools are the tools the bot offers this token, as the proxy offers them.
func (p *Proxy) Tools() []mcp.Tool { return p.tools }

// Close closes the connection to the bot.
func (p *Proxy) Close() error { return p.remote.Close() }

// ServeStdio serves MCP over newline-delimited JSON-RPC on in and out
// until in ends or ctx is done. Nothing but protocol messages is written
// to out. mcp-go keeps one stdio session per process, so serve one stream
// at a time.
func (p *Proxy) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	opts := []server.ServerOption{
		server.WithToolCapabilities(false),
		server.WithRecovery(),
		server.WithInstructions(p.instructions),
	}
	if len(p.resources)+len(p.templates) > 0 {
		opts = append(opts, server.WithResourceCapabilities(false, false))
	}
	if len(p.prompts) > 0 {
		opts = append(opts, server.WithPromptCapabilities(false))
	}
	local := server.NewMCPServer("nomos", p.cfg.Version, opts...)
	for _, t := range p.tools {
		local.AddTool(t, p.forward)
	}
	for _, r := range p.resources {
		local.AddResource(r, p.read)
	}
	for _, t := range p.templates {
		local.AddResourceTemplate(t, p.read)
	}
	for _, pr := range p.prompts {
		local.AddPrompt(pr, p.prompt)
	}
	ss := server.NewStdioServer(local)
	ss.SetErrorLogger(slog.NewLogLogger(p.log.With("component", "mcp-stdio").Handler(), slog.LevelWarn))
	err := ss.Listen(ctx, in, out)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// forward calls the same tool on the bot and returns its result as is.
func (p *Proxy) forward(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	fwd := mcp.CallToolRequest{}
	fwd.Params = req.Params
	res, err := p.remote.CallTool(ctx, fwd)
	if err != nil {
		p.log.WarnContext(ctx, "forwarding a tool call to the bot failed", "tool", req.Params.Name, "url", p.cfg.URL, "err", err)
		return mcp.NewToolResultError(fmt.Sprintf("%s through the Nomos bot at %s failed: %v", req.Params.Name, p.cfg.URL, err)), nil
	}
	return res, nil
}

// read forwards a resource read to the bot.
func (p *Proxy) read(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	fwd := mcp.ReadResourceRequest{}
	fwd.Params.URI = req.Params.URI
	res, err := p.remote.ReadResource(ctx, fwd)
	if err != nil {
		p.log.WarnContext(ctx, "forwarding a resource read to the bot failed", "uri", req.Params.URI, "url", p.cfg.URL, "err", err)
		return nil, fmt.Errorf("%s through the Nomos bot at %s: %w", req.Params.URI, p.cfg.URL, err)
	}
	return res.Contents, nil
}

// prompt forwards a prompt to the bot.
func (p *Proxy) prompt(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	fwd := mcp.GetPromptRequest{}
	fwd.Params = req.Params
	res, err := p.remote.GetPrompt(ctx, fwd)
	if err != nil {
		p.log.WarnContext(ctx, "forwarding a prompt to the bot failed", "prompt", req.Params.Name, "url", p.cfg.URL, "err", err)
		return nil, fmt.Errorf("%s through the Nomos bot at %s: %w", req.Params.Name, p.cfg.URL, err)
	}
	return res, nil
}
