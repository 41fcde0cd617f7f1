package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/mcpserver/proxy"
	"github.com/nomoshq/nomos/policy"
)

// runMCP is `nomos mcp --stdio`: the MCP tools for a local client (Claude
// Desktop, another agent) over stdin and stdout, as a thin client of the
// bot's /mcp endpoint. It reads mcp.url and mcp.client_token and nothing
// else: no database, no Redis, no signing key. The bot validates, records
// and posts every request under the token's name. Logs go to stderr, since
// stdout carries the protocol. `nomos mcp token NAME` makes a token.
func runMCP(ctx context.Context, env *roleEnv, args []string) error {
	if len(args) > 0 && args[0] == "token" {
		return runMCPToken(env, args[1:])
	}
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	stdio := fs.Bool("stdio", false, "serve MCP over stdin and stdout, forwarding to the bot at mcp.url")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !*stdio {
		return errors.New("use --stdio to serve a local client, or `nomos mcp token NAME` to make a token; MCP over HTTP is served by `nomos bot` at /mcp")
	}
	cfg, err := env.config("mcp")
	if err != nil {
		return err
	}
	logger := env.logger.With("component", "mcp")
	p, err := proxy.New(ctx, proxy.Config{URL: cfg.MCP.URL, Token: cfg.MCP.ClientToken, Version: version, Logger: logger})
	if err != nil {
		return err
	}
	defer p.Close()
	logger.Info("serving MCP over stdio", "bot", cfg.MCP.URL, "tools", len(p.Tools()))
	return p.ServeStdio(ctx, os.Stdin, env.stdout)
}

// runMCPToken is `nomos mcp token [-scope read|request] [-for USER] NAME`:
// it prints a new random token for a client and the mcp.tokens entry,
// with only the token's hash, that lets the bot accept it. A token reads
// unless asked otherwise; one that may request names the person it is
// for, whose plans its requests are.
func runMCPToken(env *roleEnv, args []string) error {
	fs := flag.NewFlagSet("mcp token", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	scope := fs.String("scope", string(mcpserver.ScopeRead), "`read` (the read tools only) or request (may also request executions, which operators approve; needs -for)")
	owner := fs.String("for", "", "the Matrix `user` the token is for, such as @alice:example.org: its plans are on their behalf, so with approvals.self_approval off they cannot approve them")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: nomos mcp token [-scope read|request] [-for @user:server] NAME")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || !mcpserver.ValidTokenName(fs.Arg(0)) {
		fs.Usage()
		return errors.New("want one NAME of 1 to 40 letters, digits, '.', '_' or '-', such as claude-desktop")
	}
	if *scope != string(mcpserver.ScopeRead) && *scope != string(mcpserver.ScopeRequest) {
		return fmt.Errorf("-scope: want read or request, got %q", *scope)
	}
	if *owner != "" {
		if err := policy.ValidateMatrixUserID(*owner); err != nil {
			return fmt.Errorf("-for: %w", err)
		}
	}
	if *scope == string(mcpserver.ScopeRequest) && *owner == "" {
		return errors.New("-scope request needs -for @user:server, the person the token is for: what it requests is on their behalf")
	}
	name, token := fs.Arg(0), randomToken(24)
	sum := mcpserver.HashToken(token)
	entry := fmt.Sprintf("{name: %s, token_sha256: %s, scope: %s}", name, hex.EncodeToString(sum[:]), *scope)
	if *owner != "" {
		entry = fmt.Sprintf("{name: %s, token_sha256: %s, scope: %s, for: %q}", name, hex.EncodeToString(sum[:]), *scope, *owner)
	}
	fmt.Fprintf(env.stdout, `token for %[1]s (shown once; give it to the client as mcp.client_token, or as its bearer token):
  %[2]s

add to mcp.tokens in the bot's config (only the hash is kept there):
  - %[3]s
`, name, token, entry)
	return nil
}
