package main

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"

	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/seeds"
	"github.com/nomoshq/nomos/store"
)

func runSeed(ctx context.Context, env *roleEnv, args []string) error {
	flags := flag.NewFlagSet("seed", flag.ContinueOnError)
	flags.SetOutput(env.stderr)
	if err := flags.Parse(args); err != nil {
		return err
	}
	cfg, err := env.config("seed")
	if err != nil {
		return err
	}
	seed, err := fleetseed.Load(seedFS(cfg.Seeds.Dir))
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, store.Config{URL: cfg.Database.URL, Logger: env.logger})
	if err != nil {
		return err
	}
	defer st.Close()
	stats, err := st.ApplySeed(ctx, seed)
	if err != nil {
		return err
	}
	if stats.Total() == 0 {
		fmt.Fprintln(env.stdout, "seed: nothing changed")
		return nil
	}
	fmt.Fprintf(env.stdout, "seed: %d entities, %d relationships, %d checks, %d policy overrides, %d knowledge docs, %d runbooks written\n",
		stats.Entities, stats.Relationships, stats.Checks, stats.Policy, stats.Knowledge, stats.Runbooks)
	return nil
}

// seedFS is the seed directory named in config, or the embedded demo fleet.
func seedFS(dir string) fs.FS {
	if dir != "" {
		return os.DirFS(dir)
	}
	return seeds.FS
}
