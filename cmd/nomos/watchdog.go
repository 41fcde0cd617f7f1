package main

import (
	"context"
	"flag"

	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/supervisor"
	"github.com/nomoshq/nomos/watchdog"
)

// runWatchdog watches the bot from another machine over watchdog.lan_url
// and watchdog.mesh_url and pages the operators from its own Matrix
// account when both fail. It reads no database, Redis or key.
func runWatchdog(ctx context.Context, env *roleEnv, args []string) error {
	fs := flag.NewFlagSet("watchdog", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := env.config("watchdog")
	if err != nil {
		return err
	}
	w := cfg.Watchdog
	logger := env.logger.With("component", "watchdog")
	operators := make([]id.UserID, len(w.Operators))
	for i, op := range w.Operators {
		operators[i] = id.UserID(op)
	}
	pager, err := watchdog.NewMatrix(ctx, watchdog.MatrixConfig{
		HomeserverURL: w.HomeserverURL, UserID: id.UserID(w.UserID), Password: w.Password, AccessToken: w.AccessToken,
		Room: id.RoomID(w.Room), Operators: operators, Logger: logger,
	})
	if err != nil {
		return err
	}
	dog, err := watchdog.New(watchdog.Config{
		Paths: []watchdog.Path{{Name: "LAN", URL: w.LANURL}, {Name: "mesh", URL: w.MeshURL}},
		Pager: pager, Timeout: w.Timeout, FailAfter: w.FailAfter, MaxSyncAge: w.MaxSyncAge,
		RepageAfter: w.RepageAfter, MaxPages: w.MaxPages, Logger: logger,
	})
	if err != nil {
		return err
	}
	logger.Info("watching the bot", "lan", w.LANURL, "mesh", w.MeshURL, "interval", w.Interval.String(), "room_id", w.Room)
	// Under systemd it is Type=notify like the other roles: ready once it
	// watches, and its watchdog pinged while it does.
	return runSupervised(ctx, logger, supervisor.New(logger, supervisor.Service{
		Name: "watchdog", Run: func(ctx context.Context) error { return dog.Run(ctx, w.Interval) },
	}))
}
