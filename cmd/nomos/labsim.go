//go:build nomosdev

package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"

	"github.com/nomoshq/nomos/hostgate"
	"github.com/nomoshq/nomos/internal/config"
	"github.com/nomoshq/nomos/internal/devstack"
	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/labsim"
)

func runLabsim(ctx context.Context, env *roleEnv, args []string) error {
	fs := flag.NewFlagSet("labsim", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	knownHosts := fs.String("known-hosts", "", "write the hosts' keys to this known_hosts `file` for the actuator")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := env.config("labsim")
	if err != nil {
		return err
	}
	seed, err := fleetseed.Load(seedFS(cfg.Seeds.Dir))
	if err != nil {
		return err
	}
	sim, err := startLabsim(ctx, seed, cfg.Labsim, env.logger)
	if err != nil {
		return err
	}
	defer func() {
		if err := sim.Close(); err != nil {
			env.logger.Warn("close labsim", "err", err)
		}
	}()
	if *knownHosts != "" {
		if err := labsim.WriteKnownHosts(*knownHosts, sim.KnownHostsLines()); err != nil {
			return err
		}
	}
	for _, h := range seed.Hosts {
		fmt.Fprintf(env.stdout, "labsim: host %s listening on %s\n", h.Name, sim.Addr(h.Name))
	}
	<-ctx.Done()
	return nil
}

// startLabsim serves the seeded fleet.
func startLabsim(ctx context.Context, seed *fleetseed.Seed, cfg config.LabsimConfig, logger *slog.Logger) (*labsim.Sim, error) {
	lc := devstack.LabsimConfig(seed, cfg.StateDir, cfg.AuthorizedKeysFile, cfg.LogFile, logger)
	if cfg.Gate {
		lc.Gate = &hostgate.Rules{HostShell: cfg.GateHostShell, PrivilegedContainers: cfg.GatePrivilegedContainers}
	}
	sim, err := labsim.New(lc)
	if err != nil {
		return nil, err
	}
	if err := sim.Start(ctx); err != nil {
		return nil, err
	}
	return sim, nil
}
