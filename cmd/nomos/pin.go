package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nomoshq/nomos/actuator"
	"github.com/nomoshq/nomos/internal/config"
)

// pinOptions are `nomos actuator -pin`'s flags.
type pinOptions struct {
	host       string
	yes        bool
	knownHosts string
}

// errNotConfirmed: the operator did not type yes.
var errNotConfirmed = errors.New("not pinned: the fingerprint was not confirmed")

// runPin shows a node's SSH host key and pins it in the actuator's
// known_hosts once the operator has compared its fingerprint with the one
// the node's console shows. It never replaces a pinned key.
func runPin(ctx context.Context, env *roleEnv, o pinOptions) error {
	file := o.knownHosts
	if file == "" {
		cfg, err := config.Load(env.configPath, env.environ)
		if err != nil {
			return err
		}
		if file = cfg.Actuator.KnownHostsFile; file == "" {
			return errors.New("no known_hosts file: set actuator.known_hosts_file in the config, or give -known-hosts FILE")
		}
	}
	addr, err := actuator.HostAddr(o.host)
	if err != nil {
		return fmt.Errorf("-pin %w", err)
	}
	key, err := actuator.ScanHostKey(ctx, addr, 10*time.Second)
	if err != nil {
		return err
	}
	pinned, err := key.Pinned(file)
	if err != nil {
		return err
	}
	fp := key.Fingerprint()
	if pinned {
		fmt.Fprintf(env.stdout, "%s's %s key %s is pinned in %s already; nothing to do.\n", addr, key.Key.Type(), fp, file)
		return nil
	}
	fmt.Fprintf(env.stdout, "%s presents this %s host key:\n\n    %s\n\n"+
		"Compare it with the fingerprint the node itself shows, on its console\nor in the Proxmox web UI's Shell:\n\n    %s\n\n",
		addr, key.Key.Type(), fp, key.ConsoleCommand())
	if !o.yes {
		fmt.Fprintf(env.stdout, "Pin it in %s? Type yes only if the two are the same: ", file)
		answer, _ := bufio.NewReader(env.stdin).ReadString('\n')
		if strings.TrimSpace(answer) != "yes" {
			fmt.Fprintln(env.stdout)
			return errNotConfirmed
		}
	}
	if _, err := key.Pin(file); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "Pinned %s in %s. The actuator reads the file at each connection;\n"+
		"under systemd it reads the copy made when it started: systemctl restart nomos-actuator.\n", addr, file)
	return nil
}
