package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/devstack"
	"github.com/nomoshq/nomos/labsim"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// devState is .nomos-dev/dev.json: what `nomos chat`, the tests and an
// operator need to reach the local stack. A second run reads it back and
// reuses the accounts and the room.
type devState struct {
	HomeserverURL string     `json:"homeserver_url"`
	RoomID        string     `json:"room_id"`
	BotUserID     string     `json:"bot_user_id"`
	Bot           devAccount `json:"bot"`
	Operator      devAccount `json:"operator"`
	Guest         devAccount `json:"guest"`
	StatusURL     string     `json:"status_url"`
	MCPURL        string     `json:"mcp_url"`
	MCPToken      string     `json:"mcp_token"`
	LabsimLog     string     `json:"labsim_log"`
	DatabaseURL   string     `json:"database_url"`
	RedisURL      string     `json:"redis_url"`
}

type devAccount struct {
	UserID   string `json:"user_id"`
	Password string `json:"password"`
}

// Fixed local addresses, so dev.json and a browser bookmark stay valid
// across runs.
const (
	devDendriteListen = "127.0.0.1:8008"
	devWebListen      = "127.0.0.1:8080"
	devRedisPort      = 6379
	devDatabase       = "nomos_dev"
)

// devRoles are started as child processes, in this order, when built.
var devRoles = []string{"actuator", "bot"}

func runDev(ctx context.Context, env *roleEnv, args []string) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	dir := fs.String("dir", ".nomos-dev", "`directory` for the stack's state, keys and logs")
	prepare := fs.Bool("prepare", false, "only start or install Postgres, Redis and Chromium and build Dendrite, then exit (used by make test)")
	matrixListen := fs.String("matrix-listen", devDendriteListen, "`address` for the Dendrite homeserver")
	database := fs.String("database", devDatabase, "Postgres `database` for the stack")
	webListen := fs.String("web-listen", devWebListen, "`address` of the bot's status page and MCP endpoint")
	bin := fs.String("bin", "", "the nomos `binary` to run the roles with (default: this one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger := env.logger
	if *prepare {
		return prepareTestServices(ctx, env)
	}
	absDir, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(absDir, 0o700); err != nil {
		return fmt.Errorf("dev dir: %w", err)
	}
	state := readDevState(filepath.Join(absDir, "dev.json"))

	pg, err := devstack.EnsurePostgres(ctx, devstack.PostgresConfig{Logger: logger})
	if err != nil {
		return err
	}
	if err := pg.EnsureDatabase(ctx, *database); err != nil {
		return err
	}
	state.DatabaseURL = pg.URL(*database)
	rds, err := devstack.EnsureRedis(ctx, devstack.RedisConfig{Port: devRedisPort, Dir: filepath.Join(absDir, "redis"), Logger: logger})
	if err != nil {
		return err
	}
	state.RedisURL = rds.URL(0)

	from, to, err := store.Migrate(ctx, state.DatabaseURL)
	if err != nil {
		return err
	}
	logger.Info("schema ready", "from_version", from, "to_version", to)
	seed, err := store.LoadSeed(seedFS(lookupEnv(env.environ, "NOMOS_SEEDS__DIR")))
	if err != nil {
		return err
	}
	if err := applySeed(ctx, state.DatabaseURL, seed, env); err != nil {
		return err
	}

	keys, err := ensureDevKeys(filepath.Join(absDir, "keys"))
	if err != nil {
		return err
	}
	state.LabsimLog = filepath.Join(absDir, "labsim", "commands.jsonl")
	sim, err := startLabsim(ctx, seed, LabsimConfig{
		StateDir:           filepath.Join(absDir, "labsim"),
		AuthorizedKeysFile: keys.authorizedKeys,
		LogFile:            state.LabsimLog,
	}, logger)
	if err != nil {
		return err
	}
	defer sim.Close()
	if err := labsim.WriteKnownHosts(keys.knownHosts, sim.KnownHostsLines()); err != nil {
		return err
	}

	hsBin, err := devstack.EnsureDendrite(ctx, logger)
	if err != nil {
		return err
	}
	hs, err := devstack.StartDendrite(ctx, devstack.DendriteConfig{
		Dir: filepath.Join(absDir, "dendrite"), Listen: *matrixListen, BinDir: hsBin, Logger: logger,
	})
	if err != nil {
		return err
	}
	defer hs.Stop()
	state.HomeserverURL = hs.URL()
	if err := ensureDevAccounts(ctx, hs, &state); err != nil {
		return err
	}
	if err := ensureDevRoom(ctx, &state); err != nil {
		return err
	}
	if state.MCPToken == "" {
		state.MCPToken = randomToken(24)
	}
	var started []string
	for _, r := range devRoles {
		if roles[r].run != nil {
			started = append(started, r)
		}
	}
	if slices.Contains(started, "bot") {
		state.StatusURL = "http://" + *webListen + "/"
		state.MCPURL = "http://" + *webListen + "/mcp"
	} else {
		state.StatusURL, state.MCPURL = "", ""
	}
	if err := writeDevState(filepath.Join(absDir, "dev.json"), state); err != nil {
		return err
	}

	childEnv := append(devEnvironment(state, keys, absDir, *webListen), env.environ...)
	children, err := startChildren(ctx, *bin, started, childEnv, absDir, env)
	if err != nil {
		return err
	}
	printDevSummary(env, state, absDir, started, sim, seed)
	select {
	case <-ctx.Done():
	case <-hs.Done():
		logger.Error("dendrite exited; stopping the stack", "log", hs.LogPath())
	case err := <-children.failed:
		logger.Error("a role exited; stopping the stack", "err", err)
	}
	fmt.Fprintln(env.stdout, "\nstopping the stack…")
	children.stop()
	return nil
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

func applySeed(ctx context.Context, url string, seed *store.Seed, env *roleEnv) error {
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

// devKeys are the files the actuator and labsim share in the demo.
type devKeys struct {
	sshKey, authorizedKeys, knownHosts string
	signingKey, verifyKey              string
	reportSigningKey, reportVerifyKey  string
	pickleKey, recoveryKey             string
}

// ensureDevKeys creates the actuator's SSH key, the order key pair and the
// actuator's report key pair once; later runs reuse them, and a stack from
// before the report keys gets them on its next run.
func ensureDevKeys(dir string) (devKeys, error) {
	k := devKeys{
		sshKey:           filepath.Join(dir, "actuator_ed25519"),
		authorizedKeys:   filepath.Join(dir, "authorized_keys"),
		knownHosts:       filepath.Join(dir, "known_hosts"),
		signingKey:       filepath.Join(dir, "orders_signing.key"),
		verifyKey:        filepath.Join(dir, "orders_verify.pub"),
		reportSigningKey: filepath.Join(dir, "reports_signing.key"),
		reportVerifyKey:  filepath.Join(dir, "reports_verify.pub"),
		pickleKey:        filepath.Join(dir, "pickle_key"),
		recoveryKey:      filepath.Join(dir, "recovery_key"),
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return k, err
	}
	if _, err := os.Stat(k.sshKey); errors.Is(err, os.ErrNotExist) {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return k, err
		}
		block, err := ssh.MarshalPrivateKey(priv, "nomos actuator (dev)")
		if err != nil {
			return k, err
		}
		if err := os.WriteFile(k.sshKey, pem.EncodeToMemory(block), 0o600); err != nil {
			return k, err
		}
		sshPub, err := ssh.NewPublicKey(pub)
		if err != nil {
			return k, err
		}
		if err := os.WriteFile(k.authorizedKeys, ssh.MarshalAuthorizedKey(sshPub), 0o600); err != nil {
			return k, err
		}
	}
	if _, err := os.Stat(k.pickleKey); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(k.pickleKey, []byte(randomToken(32)+"\n"), 0o600); err != nil {
			return k, err
		}
	}
	for _, pair := range [][2]string{{k.signingKey, k.verifyKey}, {k.reportSigningKey, k.reportVerifyKey}} {
		if _, err := os.Stat(pair[0]); errors.Is(err, os.ErrNotExist) {
			if err := tasks.GenerateKeyFiles(pair[0], pair[1]); err != nil {
				return k, err
			}
		}
	}
	return k, nil
}

// ensureDevAccounts registers @nomos, @operator and @guest, keeping the
// passwords of an earlier run.
func ensureDevAccounts(ctx context.Context, hs *devstack.Dendrite, s *devState) error {
	accounts := []struct {
		localpart string
		acct      *devAccount
	}{{"nomos", &s.Bot}, {"operator", &s.Operator}, {"guest", &s.Guest}}
	for _, a := range accounts {
		if a.acct.Password == "" {
			a.acct.Password = randomToken(12)
		}
		userID, err := hs.RegisterUser(ctx, a.localpart, a.acct.Password, false)
		if err != nil {
			return err
		}
		a.acct.UserID = userID
		// A user registered by an earlier run whose dev.json was lost has
		// another password; logging in tells us so plainly.
		if _, err := devLogin(ctx, s.HomeserverURL, *a.acct); err != nil {
			return fmt.Errorf("log in as %s with the password in dev.json: %w (delete the dev directory to start afresh)", userID, err)
		}
	}
	s.BotUserID = s.Bot.UserID
	return nil
}

func devLogin(ctx context.Context, hsURL string, a devAccount) (*mautrix.Client, error) {
	cli, err := mautrix.NewClient(hsURL, "", "")
	if err != nil {
		return nil, err
	}
	_, err = cli.Login(ctx, &mautrix.ReqLogin{
		Type:             mautrix.AuthTypePassword,
		Identifier:       mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: a.UserID},
		Password:         a.Password,
		DeviceID:         id.DeviceID("NOMOSDEV"),
		StoreCredentials: true,
	})
	if err != nil {
		return nil, err
	}
	return cli, nil
}

// ensureDevRoom reuses the ops room of an earlier run when all three users
// are still in it, and otherwise creates it: the operator creates the room
// and invites the bot and the guest, who join.
func ensureDevRoom(ctx context.Context, s *devState) error {
	op, err := devLogin(ctx, s.HomeserverURL, s.Operator)
	if err != nil {
		return err
	}
	defer op.Logout(context.WithoutCancel(ctx))
	if s.RoomID != "" {
		members, err := op.JoinedMembers(ctx, id.RoomID(s.RoomID))
		if err == nil {
			_, bot := members.Joined[id.UserID(s.Bot.UserID)]
			_, guest := members.Joined[id.UserID(s.Guest.UserID)]
			if bot && guest {
				return nil
			}
		}
	}
	resp, err := op.CreateRoom(ctx, &mautrix.ReqCreateRoom{
		Name:   "Nomos ops",
		Topic:  "Ask Nomos about the fleet; approve its plans with ✅ or a reply.",
		Preset: "private_chat",
		Invite: []id.UserID{id.UserID(s.Bot.UserID), id.UserID(s.Guest.UserID)},
	})
	if err != nil {
		return fmt.Errorf("create ops room: %w", err)
	}
	s.RoomID = resp.RoomID.String()
	for _, a := range []devAccount{s.Bot, s.Guest} {
		cli, err := devLogin(ctx, s.HomeserverURL, a)
		if err != nil {
			return err
		}
		_, err = cli.JoinRoomByID(ctx, resp.RoomID)
		cli.Logout(context.WithoutCancel(ctx))
		if err != nil {
			return fmt.Errorf("%s joins the ops room: %w", a.UserID, err)
		}
	}
	return nil
}

// devEnvironment is the configuration the dev stack hands its roles. The
// caller's own NOMOS_ variables come after it and so take precedence.
func devEnvironment(s devState, k devKeys, dir, webListen string) []string {
	return []string{
		"NOMOS_DATABASE__URL=" + s.DatabaseURL,
		"NOMOS_REDIS__URL=" + s.RedisURL,
		"NOMOS_MATRIX__HOMESERVER_URL=" + s.HomeserverURL,
		"NOMOS_MATRIX__USER_ID=" + s.Bot.UserID,
		"NOMOS_MATRIX__PASSWORD=" + s.Bot.Password,
		"NOMOS_MATRIX__OPERATORS=" + s.Operator.UserID,
		"NOMOS_MATRIX__PICKLE_KEY_FILE=" + k.pickleKey,
		"NOMOS_MATRIX__RECOVERY_KEY_FILE=" + k.recoveryKey,
		"NOMOS_MATRIX__OPS_ROOM=" + s.RoomID,
		"NOMOS_ACTUATOR__SSH_KEY_FILE=" + k.sshKey,
		"NOMOS_ACTUATOR__KNOWN_HOSTS_FILE=" + k.knownHosts,
		"NOMOS_ACTUATOR__JOURNAL_FILE=" + filepath.Join(dir, "actuator", "journal"),
		"NOMOS_ORDERS__SIGNING_KEY_FILE=" + k.signingKey,
		"NOMOS_ORDERS__VERIFY_KEY_FILE=" + k.verifyKey,
		"NOMOS_REPORTS__SIGNING_KEY_FILE=" + k.reportSigningKey,
		"NOMOS_REPORTS__VERIFY_KEY_FILE=" + k.reportVerifyKey,
		"NOMOS_WEB__LISTEN=" + webListen,
		"NOMOS_MCP__TOKEN=" + s.MCPToken,
	}
}

// children are the role processes the dev stack runs.
type children struct {
	procs  []*exec.Cmd
	failed chan error
	wg     sync.WaitGroup
}

func startChildren(ctx context.Context, bin string, names []string, environ []string, dir string, env *roleEnv) (*children, error) {
	c := &children{failed: make(chan error, len(names))}
	self := bin
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return nil, err
		}
		if strings.HasSuffix(self, ".test") {
			return nil, errors.New("nomos dev runs inside a test binary: pass -bin with a built nomos")
		}
	}
	for _, name := range names {
		logPath := filepath.Join(dir, name+".log")
		logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			c.stop()
			return nil, err
		}
		cmd := exec.Command(self, name)
		cmd.Env = environ
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			logFile.Close()
			c.stop()
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		env.logger.Info("role started", "role", name, "pid", cmd.Process.Pid, "log", logPath)
		c.procs = append(c.procs, cmd)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer logFile.Close()
			err := cmd.Wait()
			if ctx.Err() == nil {
				c.failed <- fmt.Errorf("%s exited: %v (see %s)", name, err, logPath)
			}
		}()
	}
	return c, nil
}

// stop asks every child to finish with SIGTERM and kills what is left
// after a grace period.
func (c *children) stop() {
	for _, p := range c.procs {
		if p.Process != nil {
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
		}
	}
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		for _, p := range c.procs {
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
		}
		<-done
	}
}

func printDevSummary(env *roleEnv, s devState, dir string, started []string, sim *labsim.Sim, seed *store.Seed) {
	w := env.stdout
	fmt.Fprintf(w, "\nNomos dev stack is up (state in %s).\n\n", dir)
	fmt.Fprintf(w, "  Matrix homeserver  %s  (server name localhost, registration closed)\n", s.HomeserverURL)
	fmt.Fprintf(w, "  ops room           %s\n", s.RoomID)
	fmt.Fprintf(w, "  operator           %s  password %s\n", s.Operator.UserID, s.Operator.Password)
	fmt.Fprintf(w, "  guest (read-only)  %s  password %s\n", s.Guest.UserID, s.Guest.Password)
	fmt.Fprintf(w, "  bot                %s\n", s.Bot.UserID)
	var hosts []string
	for _, h := range seed.Hosts {
		hosts = append(hosts, h.Name+"="+sim.Addr(h.Name))
	}
	fmt.Fprintf(w, "  labsim (SSH)       %s; command log %s\n", strings.Join(hosts, " "), s.LabsimLog)
	if s.StatusURL != "" {
		fmt.Fprintf(w, "  status page        %s\n  MCP                %s (bearer token in dev.json)\n", s.StatusURL, s.MCPURL)
	}
	if len(started) > 0 {
		fmt.Fprintf(w, "  roles running      %s (logs in %s/<role>.log)\n", strings.Join(started, ", "), dir)
	} else {
		fmt.Fprintf(w, "  roles running      none yet: the bot and actuator are not built in this version\n")
	}
	fmt.Fprintf(w, "\nLog in with Element (or any Matrix client): homeserver %s, user operator.\n", s.HomeserverURL)
	if roles["chat"].run != nil {
		fmt.Fprintf(w, "Or chat from this terminal: ./bin/nomos chat\n")
	}
	fmt.Fprintf(w, "Everything is in %s/dev.json. Press Ctrl-C to stop.\n", dir)
}

func randomToken(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
