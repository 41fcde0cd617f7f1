package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// runMCP is `nomos mcp --stdio`: the MCP tools for a local client (Claude
// Desktop, another agent) over stdin and stdout. Requests pass the same
// gate as the bot's; the bot, listening to the database, posts their cards
// in the room given by --room. Logs go to stderr, since stdout carries the
// protocol.
func runMCP(ctx context.Context, env *roleEnv, args []string) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	stdio := fs.Bool("stdio", false, "serve MCP over stdin and stdout")
	room := fs.String("room", "", "Matrix `room id` (!abc:example.org) where plans this client requests are posted for approval; without it the client can read but not request")
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
	if cfg.Orders.SigningKeyFile == "" {
		return errors.New("orders.signing_key_file: required by nomos mcp, which signs the read-only probes it runs")
	}
	st, err := store.Open(ctx, store.Config{URL: cfg.Database.URL, Logger: logger})
	if err != nil {
		return err
	}
	defer st.Close()
	redisOpt, err := asynq.ParseRedisURI(cfg.Redis.URL)
	if err != nil {
		return fmt.Errorf("redis.url: %w", err)
	}
	queue := asynq.NewClient(redisOpt)
	defer queue.Close()
	signingKey, err := tasks.LoadSigningKey(cfg.Orders.SigningKeyFile)
	if err != nil {
		return err
	}
	rules, err := policy.NewRules(policy.RulesConfig{Operators: cfg.Matrix.Operators})
	if err != nil {
		return fmt.Errorf("matrix.operators: %w", err)
	}
	execs, err := executions.New(executions.Config{
		Store: st, Queue: queue, SigningKey: signingKey, Rules: rules,
		OrderTTL: cfg.Orders.TTL, Logger: logger.With("component", "executions"),
	})
	if err != nil {
		return err
	}
	srv, err := mcpserver.New(mcpserver.Config{
		Store: st, Executions: execs, OpsRoomID: *room, Version: version, Logger: logger,
	})
	if err != nil {
		return err
	}
	logger.Info("serving MCP over stdio", "ops_room", *room)
	return srv.ServeStdio(ctx, os.Stdin, env.stdout)
}
