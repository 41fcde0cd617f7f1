package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/hibiken/asynq"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver for the crypto store
	"go.mau.fi/util/dbutil"

	"github.com/nomoshq/nomos/bot"
	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

func runBot(ctx context.Context, env *roleEnv, args []string) error {
	fs := flag.NewFlagSet("bot", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := env.config("bot")
	if err != nil {
		return err
	}
	logger := env.logger
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
		return err
	}
	execs, err := executions.New(executions.Config{
		Store: st, Queue: queue, SigningKey: signingKey, Rules: rules,
		OrderTTL: cfg.Orders.TTL, Logger: logger.With("component", "executions"),
	})
	if err != nil {
		return err
	}
	cryptoDB, err := dbutil.NewWithDialect(cfg.Database.URL, "pgx")
	if err != nil {
		return fmt.Errorf("crypto store: %w", err)
	}
	defer cryptoDB.Close()
	b, err := bot.New(bot.Config{
		HomeserverURL: cfg.Matrix.HomeserverURL, UserID: cfg.Matrix.UserID,
		Password: cfg.Matrix.Password, AccessToken: cfg.Matrix.AccessToken,
		Operators: cfg.Matrix.Operators, Store: st, Executions: execs,
		CryptoDB: cryptoDB, PickleKey: []byte(cfg.Matrix.PickleKey), RecoveryKeyFile: cfg.Matrix.RecoveryKeyFile,
		Redis: redisOpt, Logger: logger.With("component", "bot"),
	})
	if err != nil {
		return err
	}
	return b.Run(ctx)
}
