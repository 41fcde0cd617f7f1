// Command nomos runs every Nomos role from one binary: the Matrix bot, the
// SSH actuator, the migration and seed tools, the simulated Proxmox host and
// the local development stack. main only parses flags, loads config and wires
// services together; each role's work lives in its package.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/nomoshq/nomos/internal/config"
)

// role is one subcommand of the nomos binary.
type role struct {
	summary string
	run     func(ctx context.Context, env *roleEnv, args []string) error
}

// roleEnv is what every role receives from main.
type roleEnv struct {
	configPath string
	environ    []string
	// stdin is for a role that asks the operator something.
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	logger *slog.Logger
}

// config loads and validates the configuration for the named role.
func (e *roleEnv) config(name string) (*config.Config, error) {
	cfg, err := config.Load(e.configPath, e.environ)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(name); err != nil {
		return nil, err
	}
	e.logger = newLogger(e.stderr, cfg.Log)
	return cfg, nil
}

// roles is filled in init, since runDev consults it. The development
// build adds `dev`, `labsim` and `chat` (roles_dev.go).
var roles map[string]role

func init() {
	roles = map[string]role{
		"migrate":  {summary: "apply pending database migrations", run: runMigrate},
		"seed":     {summary: "upsert the fleet, policy, knowledge and runbooks from seed files", run: runSeed},
		"version":  {summary: "print the version", run: runVersion},
		"bot":      {summary: "run the Matrix bot: plans, approvals, live status", run: runBot},
		"actuator": {summary: "run the SSH actuator that carries out approved orders; -pin HOST pins a node's host key", run: runActuator},
		"mcp":      {summary: "serve the bot's MCP tools over stdio (--stdio), or make a client token (token NAME)", run: runMCP},
		"keygen":   {summary: "write the order and report key pairs into a directory", run: runKeygen},
		"doctor":   {summary: "check the config and everything the roles need, and say what to fix", run: runDoctor},
		"discover": {summary: "ask the bot for an inventory of every host now, and say what it found", run: runDiscover},
		"verify":   {summary: "list the emoji verifications operators started with the bot, or confirm one (CODE) after comparing the emoji", run: runVerify},
		"report":   {summary: "print the daily brief (-daily) or the weekly report (-weekly) from the database", run: runReport},
		"watchdog": {summary: "watch the bot from another machine over two paths, and page the operators when both fail", run: runWatchdog},
		"gate":     {summary: "the forced command on a Proxmox host: run only what nomos sends (SSH_ORIGINAL_COMMAND)", run: runGate},
	}
	maps.Copy(roles, devOnlyRoles())
}

// The summaries of the development build's roles, which the production
// build lists too.
const (
	labsimSummary = "serve simulated Proxmox hosts over SSH"
	devSummary    = "bring up the whole local stack in the foreground"
	chatSummary   = "a terminal Matrix client for the dev stack's operator"
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code.
func run(args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nomos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", lookupEnv(environ, "NOMOS_CONFIG"), "YAML config `file` (also NOMOS_CONFIG)")
	fs.Usage = func() { usage(stderr, fs) }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		usage(stderr, fs)
		return 2
	}
	name := fs.Arg(0)
	r, ok := roles[name]
	if !ok {
		fmt.Fprintf(stderr, "nomos: unknown role %q\n\n", name)
		usage(stderr, fs)
		return 2
	}
	env := &roleEnv{
		configPath: *configPath,
		environ:    environ,
		stdin:      os.Stdin,
		stdout:     stdout,
		stderr:     stderr,
		logger:     newLogger(stderr, config.LogConfig{Level: "info", Format: "text"}),
	}
	ctx, stop := signalContext()
	defer stop()
	if err := r.run(ctx, env, fs.Args()[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		var code exitCodeError
		if errors.As(err, &code) {
			return int(code)
		}
		fmt.Fprintf(stderr, "nomos %s: %v\n", name, err)
		return 1
	}
	return 0
}

// signalContext ends at the first SIGINT or SIGTERM, which asks the role
// to stop gracefully. Nomos stops catching the signals then, so a second
// Ctrl-C ends the process at once rather than waiting out the shutdown.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-caught:
		case <-ctx.Done():
		}
		// Stop catching before the role hears of it, so no second signal
		// can fall between the two.
		signal.Stop(caught)
		cancel()
	}()
	return ctx, cancel
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "usage: nomos [-config file] <role> [flags]\n\nroles:")
	names := make([]string, 0, len(roles))
	for n := range roles {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-9s %s\n", n, roles[n].summary)
	}
	fmt.Fprintln(w, "\nflags:")
	fs.PrintDefaults()
}

func newLogger(w io.Writer, cfg config.LogConfig) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Level))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func lookupEnv(environ []string, key string) string {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// randomToken is n random bytes in hex, for passwords and tokens.
func randomToken(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
