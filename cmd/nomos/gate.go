package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/syslog"
	"os"
	"strconv"

	"github.com/nomoshq/nomos/hostgate"
)

// exitCodeError ends nomos with this status and no further message: the role
// has already said what it had to.
type exitCodeError int

func (c exitCodeError) Error() string { return "exit status " + strconv.Itoa(int(c)) }

// runGate is the forced command in a Proxmox host's authorized_keys:
//
//	restrict,command="/usr/local/bin/nomos gate" ssh-ed25519 AAAA… nomos-actuator
//
// It runs the command in SSH_ORIGINAL_COMMAND if it is one Nomos sends,
// replacing itself with the program, and refuses anything else (exit 126,
// one line on stderr, one in the journal). With -check it only says
// whether a command would pass; with -install it puts that line into
// root's authorized_keys, once (hostgate.Install).
func runGate(_ context.Context, env *roleEnv, args []string) error {
	fs := flag.NewFlagSet("gate", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	rulesFile := fs.String("rules", hostgate.DefaultRulesFile, "the gate's rules `file`; host_shell: true there lets the run action's sh -c through")
	check := fs.String("check", "", "only say whether the gate would run this `command`")
	install := fs.Bool("install", false, "put the gate's forced-command line for the actuator's key into root's authorized_keys, once, and report the cluster's nodes")
	key := fs.String("key", "", "with -install: the actuator's public `key`, as in ssh_key.pub")
	keyFile := fs.String("key-file", "", "with -install: a `file` holding the actuator's public key")
	binary := fs.String("binary", hostgate.DefaultBinary, "with -install: the `path` of nomos on every node, which sshd runs as the forced command")
	from := fs.String("from", "", "with -install: the Nomos machine's `addresses` (sshd from= patterns), the only ones the key may come from")
	root := fs.String("root", "/", "with -install: the `directory` taken as /, for tests")
	node := fs.String("node", "", "with -install: this node's `name` in /etc/pve/nodes (default its short host name)")
	dryRun := fs.Bool("dry-run", false, "with -install: say what would change and change nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: the command comes from SSH_ORIGINAL_COMMAND, or from -check", fs.Arg(0))
	}
	if *install {
		pub := *key
		if *keyFile != "" {
			if pub != "" {
				return errors.New("give the key with -key or -key-file, not both")
			}
			data, err := os.ReadFile(*keyFile)
			if err != nil {
				return fmt.Errorf("read the public key: %w", err)
			}
			pub = string(data)
		}
		if pub == "" {
			return errors.New("-install needs the actuator's public key: -key-file ssh_key.pub, or -key 'ssh-ed25519 AAAA… nomos-actuator'")
		}
		_, err := hostgate.Install(hostgate.InstallConfig{
			Root: *root, PublicKey: pub, Binary: *binary, From: *from, Node: *node, DryRun: *dryRun, Out: env.stdout,
		})
		return err
	}
	checking := false
	fs.Visit(func(f *flag.Flag) { checking = checking || f.Name == "check" })
	if checking {
		rules, err := hostgate.LoadRules(*rulesFile)
		if err != nil {
			return err
		}
		argv, err := hostgate.Check(*check, rules)
		if err != nil {
			fmt.Fprintln(env.stderr, "nomos gate: "+err.Error())
			return exitCodeError(hostgate.ExitRefused)
		}
		fmt.Fprintln(env.stdout, "allowed: "+hostgate.Quote(argv))
		return nil
	}

	command := lookupEnv(env.environ, "SSH_ORIGINAL_COMMAND")
	var journal hostgate.Journal
	// The local syslog socket, if the host has one; otherwise refusals
	// go to stderr only.
	if w, err := syslog.New(syslog.LOG_AUTHPRIV|syslog.LOG_WARNING, "nomos-gate"); err == nil {
		defer func() { _ = w.Close() }() // each line was sent when it was written
		journal = w
	}
	code := hostgate.Run(hostgate.Config{
		Command:   command,
		RulesFile: *rulesFile,
		Environ:   env.environ,
		Stderr:    env.stderr,
		Journal:   journal,
	})
	if code == 0 {
		return nil
	}
	return exitCodeError(code)
}
