//go:build nomosdev

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nomoshq/nomos/internal/config"
	"github.com/nomoshq/nomos/internal/devstack"
	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/store"
)

// `nomos dev`: the whole local stack in the foreground. Only the
// development build has it (docs/architecture.md, "The development build").

// Fixed local addresses, so dev.json and a browser bookmark stay valid
// across runs.
const (
	devDir            = ".nomos-dev"
	devDendriteListen = "127.0.0.1:8008"
	devWebListen      = "127.0.0.1:8080"
	devRedisPort      = 6379
	devDatabase       = "nomos_dev"
)

// devStackComment opens the comment `nomos dev` puts on its database.
const devStackComment = "nomos dev stack "

// devDoctorWait bounds how long `nomos dev` waits for the doctor's checks
// to pass while the roles start.
const devDoctorWait = 90 * time.Second

// devRoles are started as child processes, in this order, when built.
var devRoles = []string{"actuator", "bot"}

// devFlags are `nomos dev`'s flags.
type devFlags struct {
	dir, matrixListen, database, webListen, redisURL, bin string
	prepare, reset, e2ee                                  bool
	sites                                                 int
}

func parseDevFlags(env *roleEnv, args []string) (devFlags, error) {
	var f devFlags
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.StringVar(&f.dir, "dir", devDir, "`directory` for the stack's state, keys and logs")
	fs.BoolVar(&f.prepare, "prepare", false, "only start or install Postgres, Redis and Chromium and build Dendrite, then exit (used by make test)")
	fs.BoolVar(&f.reset, "reset", false, "delete the dev directory and the dev database first, and start afresh")
	fs.StringVar(&f.matrixListen, "matrix-listen", devDendriteListen, "`address` for the Dendrite homeserver")
	fs.StringVar(&f.database, "database", devDatabase, "Postgres `database` for the stack")
	fs.StringVar(&f.webListen, "web-listen", devWebListen, "`address` of the bot's status page and MCP endpoint")
	fs.StringVar(&f.redisURL, "redis", "", "Redis `URL` for the stack (default: start or reuse Redis on 127.0.0.1:6379, database 0)")
	fs.StringVar(&f.bin, "bin", "", "the nomos `binary` to run the roles with (default: this one)")
	fs.BoolVar(&f.e2ee, "e2ee", false, "make the ops room end-to-end encrypted and require verified devices there, as a real deployment does; "+
		"`nomos chat` and other plain Matrix clients can then read nothing there (default: a room in the clear, approvals from any session)")
	fs.IntVar(&f.sites, "sites", 1, "run the demo hosts as this many `sites`, each with its own actuator, SSH key and journal")
	return f, fs.Parse(args)
}

// devStack is one run of `nomos dev`, filled in step by step.
type devStack struct {
	flags     devFlags
	dir       string // absolute
	self      string // the binary the roles run with
	resetCmd  string
	state     devState
	seed      *fleetseed.Seed
	keys      devKeys
	sim       *labsim.Sim
	hs        *devstack.Dendrite
	started   []string  // the roles running as children
	siteNames []string  // the site of each demo host, in turn
	sites     []devSite // the sites beyond the first, each with its own actuator
}

func runDev(ctx context.Context, env *roleEnv, args []string) error {
	f, err := parseDevFlags(env, args)
	if err != nil {
		return err
	}
	if f.prepare {
		return prepareTestServices(ctx, env)
	}
	s, err := openDevDir(ctx, env, f)
	if err != nil {
		return err
	}
	if err := s.loadSchema(ctx, env); err != nil {
		return err
	}
	if err := s.startServices(ctx, env.logger); err != nil {
		return err
	}
	defer func() {
		if err := s.hs.Stop(); err != nil {
			env.logger.Warn("stop dendrite", "err", err)
		}
	}()
	defer func() {
		if err := s.sim.Close(); err != nil {
			env.logger.Warn("close labsim", "err", err)
		}
	}()
	if err := s.ensureMatrix(ctx); err != nil {
		return err
	}
	if err := s.writeConfig(); err != nil {
		return err
	}
	return s.serve(ctx, env)
}

// openDevDir makes the dev directory, its database and its Redis ready,
// resetting them first when asked.
func openDevDir(ctx context.Context, env *roleEnv, f devFlags) (*devStack, error) {
	s := &devStack{flags: f, resetCmd: devResetCommand(f.dir, f.database)}
	var err error
	if s.dir, err = filepath.Abs(f.dir); err != nil {
		return nil, err
	}
	if s.self, err = devBinary(f.bin); err != nil {
		return nil, err
	}
	pg, err := devstack.EnsurePostgres(ctx, devstack.PostgresConfig{Logger: env.logger})
	if err != nil {
		return nil, err
	}
	if f.reset {
		if err := resetDev(ctx, pg, s.dir, f.database); err != nil {
			return nil, err
		}
		fmt.Fprintf(env.stdout, "Reset: deleted %s and the database %s.\n", s.dir, f.database)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("dev dir: %w", err)
	}
	s.state = readDevState(filepath.Join(s.dir, "dev.json"))
	if !devDirIntact(s.dir, s.state) {
		s.state.StackID = randomToken(8)
		if err := writeDevState(filepath.Join(s.dir, "dev.json"), s.state); err != nil {
			return nil, err
		}
	}
	recreated, err := ensureDevDatabase(ctx, pg, f.database, s.state.StackID)
	if err != nil {
		return nil, err
	}
	if recreated {
		fmt.Fprintf(env.stdout, "The database %s belonged to another dev directory, or to one that was deleted: it was made afresh.\n", f.database)
	}
	s.state.DatabaseURL = pg.URL(f.database)
	s.state.RedisURL = f.redisURL
	if s.state.RedisURL == "" {
		rds, err := devstack.EnsureRedis(ctx, devstack.RedisConfig{Port: devRedisPort, Dir: filepath.Join(s.dir, "redis"), Logger: env.logger})
		if err != nil {
			return nil, err
		}
		s.state.RedisURL = rds.URL(0)
	}
	if recreated || f.reset {
		// Messages queued for the old stack are signed with its keys: the
		// new one would refuse each, and say so in the room.
		clearDevQueues(s.state.RedisURL, env.logger)
	}
	return s, nil
}

// loadSchema migrates the dev database and applies the seed.
func (s *devStack) loadSchema(ctx context.Context, env *roleEnv) error {
	from, to, err := store.Migrate(ctx, s.state.DatabaseURL)
	if err != nil {
		return err
	}
	env.logger.Info("schema ready", "from_version", from, "to_version", to)
	if s.seed, err = fleetseed.Load(seedFS(lookupEnv(env.environ, "NOMOS_SEEDS__DIR"))); err != nil {
		return err
	}
	s.siteNames = assignDevSites(s.seed, s.flags.sites)
	return applySeed(ctx, s.state.DatabaseURL, s.seed, env)
}

// startServices makes the keys and starts labsim and Dendrite; the caller
// stops both.
func (s *devStack) startServices(ctx context.Context, logger *slog.Logger) error {
	var err error
	if s.keys, err = ensureDevKeys(filepath.Join(s.dir, "keys")); err != nil {
		return err
	}
	var authorizedKeys string
	if s.sites, authorizedKeys, err = ensureDevSiteKeys(s.dir, s.keys, s.siteNames); err != nil {
		return err
	}
	s.state.LabsimLog = filepath.Join(s.dir, "labsim", "commands.jsonl")
	s.sim, err = startLabsim(ctx, s.seed, config.LabsimConfig{
		StateDir:           filepath.Join(s.dir, "labsim"),
		AuthorizedKeysFile: authorizedKeys,
		LogFile:            s.state.LabsimLog,
	}, logger)
	if err != nil {
		return err
	}
	if err := labsim.WriteKnownHosts(s.keys.knownHosts, s.sim.KnownHostsLines()); err != nil {
		_ = s.sim.Close()
		return err
	}
	hsBin, err := devstack.EnsureDendrite(ctx, logger)
	if err == nil {
		s.hs, err = devstack.StartDendrite(ctx, devstack.DendriteConfig{
			Dir: filepath.Join(s.dir, "dendrite"), Listen: s.flags.matrixListen, BinDir: hsBin, Logger: logger,
		})
	}
	if err != nil {
		_ = s.sim.Close()
		return err
	}
	s.state.HomeserverURL = s.hs.URL()
	return nil
}

// ensureMatrix registers the accounts and makes the ops room.
func (s *devStack) ensureMatrix(ctx context.Context) error {
	if err := ensureDevAccounts(ctx, s.hs, &s.state, s.resetCmd); err != nil {
		return err
	}
	return ensureDevRoom(ctx, &s.state, s.flags.e2ee)
}

// writeConfig settles which roles run and writes nomos.yaml and dev.json.
func (s *devStack) writeConfig() error {
	if s.state.MCPToken == "" {
		s.state.MCPToken = randomToken(24)
	}
	s.started = nil
	for _, r := range devRoles {
		if roles[r].run != nil {
			s.started = append(s.started, r)
		}
	}
	if slices.Contains(s.started, "bot") {
		s.state.StatusURL = "http://" + s.flags.webListen + "/"
		s.state.MCPURL = "http://" + s.flags.webListen + "/mcp"
	} else {
		s.state.StatusURL, s.state.MCPURL = "", ""
	}
	var err error
	if s.state.Config, err = writeDevConfig(s.dir, s.state, s.keys, s.flags.webListen); err != nil {
		return err
	}
	return writeDevState(filepath.Join(s.dir, "dev.json"), s.state)
}

// serve starts the roles and runs the stack until Ctrl-C, Dendrite exits or
// a role does.
func (s *devStack) serve(ctx context.Context, env *roleEnv) error {
	if err := writeDevSiteConfigs(s.sites, s.keys, s.state.Config); err != nil {
		return err
	}
	children, err := startChildren(ctx, s.self, s.started, s.state.Config, env.environ, s.dir, env)
	if err != nil {
		return err
	}
	siteChildren, err := startDevSites(ctx, s.self, s.sites, env)
	if err != nil {
		children.stop()
		return err
	}
	for _, c := range siteChildren {
		children.adopt(c)
	}
	stackCtx, stopStack := context.WithCancelCause(ctx)
	defer stopStack(nil)
	go func() {
		select {
		case <-stackCtx.Done():
		case <-s.hs.Done():
			stopStack(fmt.Errorf("dendrite exited (see %s)", s.hs.LogPath()))
		case err := <-children.failed:
			stopStack(err)
		}
	}()
	printDevSummary(env, s.state, s.dir, s.flags.dir, s.self, s.started, s.sim, s.seed)
	printDevSites(env.stdout, s.sites, s.seed)
	if slices.Contains(s.started, "bot") {
		runDevDoctor(stackCtx, env, s.state.Config)
	}
	if stackCtx.Err() == nil {
		fmt.Fprintln(env.stdout, "Press Ctrl-C to stop.")
	}
	<-stackCtx.Done()
	if cause := context.Cause(stackCtx); ctx.Err() == nil {
		env.logger.Error("stopping the stack", "err", cause)
		fmt.Fprintf(env.stdout, "\n%v.\nIf it fails again, `%s` starts afresh: it deletes %s and the database %s.\n", cause, s.resetCmd, s.flags.dir, s.flags.database)
	}
	fmt.Fprintln(env.stdout, "\nstopping the stack…")
	children.stop()
	return nil
}

// runDevDoctor checks the stack as `nomos doctor` would, waiting for the
// roles to finish starting, and prints the report.
func runDevDoctor(ctx context.Context, env *roleEnv, configPath string) {
	fmt.Fprintln(env.stdout, "\nChecking the stack (nomos doctor)…")
	cfg, err := config.Load(configPath, env.environ)
	if err != nil {
		printCheckLines(env.stdout, []checkLine{fail("config: cannot be loaded: "+err.Error(), "this is a bug in nomos dev")})
		return
	}
	lines := newDoctor(cfg, configRoles(cfg), env.logger).run(ctx, devDoctorWait)
	if ctx.Err() == nil {
		printCheckLines(env.stdout, lines)
	}
}

// devResetCommand is the command that resets this stack, as the operator
// would type it.
func devResetCommand(dir, database string) string {
	cmd := devProg() + " dev -reset"
	if dir != devDir {
		cmd += " -dir " + dir
	}
	if database != devDatabase {
		cmd += " -database " + database
	}
	return cmd
}

// devProg is this program as the operator started it, such as
// ./bin/nomos, for the commands the stack suggests.
func devProg() string {
	prog := os.Args[0]
	if strings.HasSuffix(prog, ".test") || prog == "" {
		return "nomos"
	}
	return prog
}

// devBinary is the absolute path of the nomos binary the roles run with.
func devBinary(bin string) (string, error) {
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return "", err
		}
		if strings.HasSuffix(self, ".test") {
			return "", errors.New("nomos dev runs inside a test binary: pass -bin with a built nomos")
		}
		return self, nil
	}
	return filepath.Abs(bin)
}

// prepareTestServices makes sure what the tests need is installed and
// running, so a cold Dendrite build happens before the tests' timeouts start.
func prepareTestServices(ctx context.Context, env *roleEnv) error {
	if _, err := devstack.EnsurePostgres(ctx, devstack.PostgresConfig{Logger: env.logger}); err != nil {
		return err
	}
	if _, err := devstack.EnsureTestRedis(ctx, env.logger); err != nil {
		return err
	}
	if _, err := devstack.EnsureDendrite(ctx, env.logger); err != nil {
		return err
	}
	if _, err := devstack.EnsureChromium(ctx, env.logger); err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, "test services ready: postgres, redis, dendrite "+devstack.DendriteVersion+" and chromium")
	return nil
}

func applySeed(ctx context.Context, url string, seed *fleetseed.Seed, env *roleEnv) error {
	st, err := store.Open(ctx, store.Config{URL: url, Logger: env.logger})
	if err != nil {
		return err
	}
	defer st.Close()
	stats, err := st.ApplySeed(ctx, seed)
	if err != nil {
		return err
	}
	env.logger.Info("seed applied", "rows_written", stats.Total())
	return nil
}

func readDevState(path string) devState {
	var s devState
	data, err := os.ReadFile(path)
	if err == nil {
		_ = json.Unmarshal(data, &s) // a damaged file just means new accounts
	}
	return s
}

func writeDevState(path string, s devState) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("write dev.json: %w", err)
	}
	return os.Rename(tmp, path)
}
