package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nomoshq/nomos/labsim"
	"github.com/nomoshq/nomos/store"
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
	seed, err := store.LoadSeed(seedFS(cfg.Seeds.Dir))
	if err != nil {
		return err
	}
	sim, err := startLabsim(ctx, seed, cfg.Labsim, env.logger)
	if err != nil {
		return err
	}
	defer sim.Close()
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

// startLabsim serves the seeded fleet: every host on its seeded ssh address,
// every container with its services active and enabled.
func startLabsim(ctx context.Context, seed *store.Seed, cfg LabsimConfig, logger *slog.Logger) (*labsim.Sim, error) {
	sim, err := labsim.New(labsimConfig(seed, cfg, logger))
	if err != nil {
		return nil, err
	}
	if err := sim.Start(ctx); err != nil {
		return nil, err
	}
	return sim, nil
}

func labsimConfig(seed *store.Seed, cfg LabsimConfig, logger *slog.Logger) labsim.Config {
	lc := labsim.Config{
		StateDir:           cfg.StateDir,
		AuthorizedKeysFile: cfg.AuthorizedKeysFile,
		LogPath:            cfg.LogFile,
		Logger:             logger,
	}
	for _, h := range seed.Hosts {
		host := labsim.Host{Name: h.Name, Addr: h.SSH}
		if host.Addr == "" {
			host.Addr = "127.0.0.1:0"
		}
		for _, c := range h.Containers {
			ct := labsim.Container{
				VMID: c.VMID, Hostname: c.Hostname, IP: c.IP, Gateway: c.Gateway,
				Cores: c.Cores, MemoryMB: c.MemoryMB, DiskGB: c.DiskGB, Status: c.Status,
			}
			if ct.IP != "dhcp" && ct.Gateway != "" {
				// The demo fleet's resolver works; a dead one is a fault
				// that tests and the demo inject on purpose.
				ct.Nameserver = "1.1.1.1"
			}
			for _, s := range c.Services {
				ct.Services = append(ct.Services, labsim.Service{
					Name: s.Name, Unit: strings.TrimSpace(s.Unit), Port: s.Port,
					HealthPath: s.HealthPath, Active: c.Status != "stopped", Enabled: true,
				})
			}
			host.Containers = append(host.Containers, ct)
		}
		lc.Hosts = append(lc.Hosts, host)
	}
	return lc
}
