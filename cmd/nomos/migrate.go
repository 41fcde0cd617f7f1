package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/nomoshq/nomos/store"
)

func runMigrate(ctx context.Context, env *roleEnv, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := env.config("migrate")
	if err != nil {
		return err
	}
	from, to, err := store.Migrate(ctx, cfg.Database.URL)
	if err != nil {
		return err
	}
	if from == to {
		fmt.Fprintf(env.stdout, "schema is up to date at version %d\n", to)
	} else {
		fmt.Fprintf(env.stdout, "migrated schema from version %d to %d\n", from, to)
	}
	return nil
}
