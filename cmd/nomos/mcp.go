package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"os"

	"github.com/nomoshq/nomos/mcpserver"
)

// runMCP is `nomos mcp --stdio`: the MCP tools for a local client (Claude
// Desktop, another agent) over stdin and stdout. Requests pass the same
// gate as the bot's; the bot, listening to the database, posts their cards
// in the ops room. Logs go to stderr, since stdout carries the protocol.
func runMCP(ctx context.Context, env *roleEnv, args []string) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	stdio := fs.Bool("stdio", false, "serve MCP over stdin and stdout")
	room := fs.String("room", "", "Matrix `room id` where plans this client requests are posted for approval (default matrix.ops_room); without one the client can read but not request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !*stdio {
		return errors.New("only --stdio is served by this role; MCP over HTTP is served by `nomos bot` at /mcp when mcp.token is set")
	}
	cfg, err := env.config("mcp")
	if err != nil {
		return err
	}
	logger := env.logger.With("component", "mcp")
	l, err := openLifecycle(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer l.Close()
	opsRoom := cmp.Or(*room, cfg.Matrix.OpsRoom)
	srv, err := mcpserver.New(mcpserver.Config{
		Store: l.store, Executions: l.execs, OpsRoomID: opsRoom, Version: version, Logger: logger,
	})
	if err != nil {
		return err
	}
	logger.Info("serving MCP over stdio", "ops_room", opsRoom)
	return srv.ServeStdio(ctx, os.Stdin, env.stdout)
}
