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
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"golang.org/x/crypto/ssh"
	"gopkg.in/yaml.v3"
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
	// StackID is also in a comment on the dev database: when the two
	// differ, the database belongs to another (or a deleted) directory.
	StackID       string     `json:"stack_id"`
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
	// Config is the nomos.yaml the roles run with.
	Config string `json:"config"`
}

type devAccount struct {
	UserID   string `json:"user_id"`
	Password string `json:"password"`
}

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

func runDev(ctx context.Context, env *roleEnv, args []string) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	dir := fs.String("dir", devDir, "`directory` for the stack's state, keys and logs")
	prepare := fs.Bool("prepare", false, "only start or install Postgres, Redis and Chromium and build Dendrite, then exit (used by make test)")
	reset := fs.Bool("reset", false, "delete the dev directory and the dev database first, and start afresh")
	matrixListen := fs.String("matrix-listen", devDendriteListen, "`address` for the Dendrite homeserver")
	database := fs.String("database", devDatabase, "Postgres `database` for the stack")
	webListen := fs.String("web-listen", devWebListen, "`address` of the bot's status page and MCP endpoint")
	redisURL := fs.String("redis", "", "Redis `URL` for the stack (default: start or reuse Redis on 127.0.0.1:6379, database 0)")
	bin := fs.String("bin", "", "the nomos `binary` to run the roles with (default: this one)")
	nSites := fs.Int("sites", 1, "run the demo hosts as this many `sites`, each with its own actuator, SSH key and journal")
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
	self, err := devBinary(*bin)
	if err != nil {
		return err
	}
	resetCmd := devResetCommand(*dir, *database)
	pg, err := devstack.EnsurePostgres(ctx, devstack.PostgresConfig{Logger: logger})
	if err != nil {
		return err
	}
	if *reset {
		if err := resetDev(ctx, pg, absDir, *database); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "Reset: deleted %s and the database %s.\n", absDir, *database)
	}
	if err := os.MkdirAll(absDir, 0o700); err != nil {
		return fmt.Errorf("dev dir: %w", err)
	}
	state := readDevState(filepath.Join(absDir, "dev.json"))
	if !devDirIntact(absDir, state) {
		state.StackID = randomToken(8)
		if err := writeDevState(filepath.Join(absDir, "dev.json"), state); err != nil {
			return err
		}
	}
	recreated, err := ensureDevDatabase(ctx, pg, *database, state.StackID)
	if err != nil {
		return err
	}
	if recreated {
		fmt.Fprintf(env.stdout, "The database %s belonged to another dev directory, or to one that was deleted: it was made afresh.\n", *database)
	}
	state.DatabaseURL = pg.URL(*database)
	state.RedisURL = *redisURL
	if state.RedisURL == "" {
		rds, err := devstack.EnsureRedis(ctx, devstack.RedisConfig{Port: devRedisPort, Dir: filepath.Join(absDir, "redis"), Logger: logger})
		if err != nil {
			return err
		}
		state.RedisURL = rds.URL(0)
	}
	if recreated || *reset {
		// Messages queued for the old stack are signed with its keys: the
		// new one would refuse each, and say so in the room.
		clearDevQueues(state.RedisURL, logger)
	}

	from, to, err := store.Migrate(ctx, state.DatabaseURL)
	if err != nil {
		return err
	}
	logger.Info("schema ready", "from_version", from, "to_version", to)
	seed, err := store.LoadSeed(seedFS(lookupEnv(env.environ, "NOMOS_SEEDS__DIR")))
	if err != nil {
		return err
	}
	siteNames := assignDevSites(seed, *nSites)
	if err := applySeed(ctx, state.DatabaseURL, seed, env); err != nil {
		return err
	}

	keys, err := ensureDevKeys(filepath.Join(absDir, "keys"))
	if err != nil {
		return err
	}
	sites, authorizedKeys, err := ensureDevSiteKeys(absDir, keys, siteNames)
	if err != nil {
		return err
	}
	state.LabsimLog = filepath.Join(absDir, "labsim", "commands.jsonl")
	sim, err := startLabsim(ctx, seed, LabsimConfig{
		StateDir:           filepath.Join(absDir, "labsim"),
		AuthorizedKeysFile: authorizedKeys,
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
	if err := ensureDevAccounts(ctx, hs, &state, resetCmd); err != nil {
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
	if state.Config, err = writeDevConfig(absDir, state, keys, *webListen); err != nil {
		return err
	}
	if err := writeDevState(filepath.Join(absDir, "dev.json"), state); err != nil {
		return err
	}

	if err := writeDevSiteConfigs(sites, keys, state.Config); err != nil {
		return err
	}
	children, err := startChildren(ctx, self, started, state.Config, env.environ, absDir, env)
	if err != nil {
		return err
	}
	siteChildren, err := startDevSites(ctx, self, sites, env)
	if err != nil {
		children.stop()
		return err
	}
	for _, c := range siteChildren {
		children.adopt(c)
	}
	// The stack runs until Ctrl-C, Dendrite exits or a role does.
	stackCtx, stopStack := context.WithCancelCause(ctx)
	defer stopStack(nil)
	go func() {
		select {
		case <-stackCtx.Done():
		case <-hs.Done():
			stopStack(fmt.Errorf("dendrite exited (see %s)", hs.LogPath()))
		case err := <-children.failed:
			stopStack(err)
		}
	}()
	printDevSummary(env, state, absDir, *dir, self, started, sim, seed)
	printDevSites(env.stdout, sites, seed)
	if slices.Contains(started, "bot") {
		runDevDoctor(stackCtx, env, state.Config)
	}
	if stackCtx.Err() == nil {
		fmt.Fprintln(env.stdout, "Press Ctrl-C to stop.")
	}
	<-stackCtx.Done()
	if cause := context.Cause(stackCtx); ctx.Err() == nil {
		logger.Error("stopping the stack", "err", cause)
		fmt.Fprintf(env.stdout, "\n%v.\nIf it fails again, `%s` starts afresh: it deletes %s and the database %s.\n", cause, resetCmd, *dir, *database)
	}
	fmt.Fprintln(env.stdout, "\nstopping the stack…")
	children.stop()
	return nil
}

// runDevDoctor checks the stack as `nomos doctor` would, waiting for the
// roles to finish starting, and prints the report.
func runDevDoctor(ctx context.Context, env *roleEnv, configPath string) {
	fmt.Fprintln(env.stdout, "\nChecking the stack (nomos doctor)…")
	cfg, err := loadConfig(configPath, env.environ)
	if err != nil {
		printCheckLines(env.stdout, []checkLine{fail("config: cannot be loaded: "+err.Error(), "this is a bug in nomos dev")})
		return
	}
	lines := newDoctor(cfg, configRoles(cfg), env.logger).run(ctx, devDoctorWait)
	if ctx.Err() == nil {
		printCheckLines(env.stdout, lines)
	}
}

// devDirIntact reports whether dir still holds what its stack id was
// made with: the pickle key that encrypts the bot's keys in the database,
// and the homeserver that knows the bot's device. Without either, the
// database cannot be used with the directory.
func devDirIntact(dir string, s devState) bool {
	if s.StackID == "" {
		return false
	}
	for _, p := range []string{filepath.Join("keys", "pickle_key"), "dendrite"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			return false
		}
	}
	return true
}

// ensureDevDatabase makes sure database name exists and belongs to the
// dev directory whose stack id is stackID. A database of another stack id,
// or one from before stack ids, is dropped and made afresh. Any other
// database is left alone.
func ensureDevDatabase(ctx context.Context, pg *devstack.Postgres, name, stackID string) (recreated bool, err error) {
	comment, exists, err := pg.DatabaseComment(ctx, name)
	if err != nil {
		return false, err
	}
	want := devStackComment + stackID
	if exists && comment == want {
		return false, nil
	}
	if exists {
		if err := devDatabaseOwned(name, comment); err != nil {
			return false, err
		}
		if err := pg.DropDatabase(ctx, name); err != nil {
			return false, err
		}
	}
	if err := pg.EnsureDatabase(ctx, name); err != nil {
		return false, err
	}
	return exists, pg.SetDatabaseComment(ctx, name, want)
}

// devDatabaseOwned refuses a database that `nomos dev` did not make: one
// it marked, or one of its names from before it marked them.
func devDatabaseOwned(name, comment string) error {
	if strings.HasPrefix(comment, devStackComment) || comment == "" && strings.HasPrefix(name, devDatabase) {
		return nil
	}
	return fmt.Errorf("the database %s exists and was not made by nomos dev, so it is left alone: pass -database with another name (the default is %s)", name, devDatabase)
}

// resetDev deletes the dev directory and the dev database, after checking
// that both are the dev stack's and that no stack runs from the directory.
func resetDev(ctx context.Context, pg *devstack.Postgres, dir, database string) error {
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() || !looksLikeDevDir(dir) {
			return fmt.Errorf("-reset: %s does not look like a nomos dev directory (it has no dev.json), so it is left alone; remove it yourself if it should go", dir)
		}
		if devstack.DendriteInUse(filepath.Join(dir, "dendrite")) {
			return fmt.Errorf("-reset: a dev stack is running from %s: stop it first (Ctrl-C where it runs)", dir)
		}
	}
	comment, exists, err := pg.DatabaseComment(ctx, database)
	if err != nil {
		return err
	}
	if exists {
		if err := devDatabaseOwned(database, comment); err != nil {
			return fmt.Errorf("-reset: %w", err)
		}
		if err := pg.DropDatabase(ctx, database); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("-reset: %w", err)
	}
	return nil
}

func looksLikeDevDir(dir string) bool {
	if filepath.Base(dir) == devDir {
		return true
	}
	if _, err := os.Stat(filepath.Join(dir, "dev.json")); err == nil {
		return true
	}
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) == 0
}

// clearDevQueues deletes the stack's queues from Redis. It only logs what
// it cannot delete: a stale message is refused, not run.
func clearDevQueues(redisURL string, logger *slog.Logger) {
	opt, err := asynq.ParseRedisURI(redisURL)
	if err != nil {
		logger.Warn("cannot clear the old stack's queues", "err", err)
		return
	}
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	queues := []string{tasks.OrderQueue(tasks.DefaultSite), tasks.ProbeQueue(tasks.DefaultSite), tasks.QueueResults}
	// Every site's queues: a stack of several sites has more.
	if all, err := insp.Queues(); err == nil {
		for _, q := range all {
			if strings.HasPrefix(q, "nomos:") && !slices.Contains(queues, q) {
				queues = append(queues, q)
			}
		}
	}
	for _, q := range queues {
		if err := insp.DeleteQueue(q, true); err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
			logger.Warn("cannot clear the old stack's queue", "queue", q, "err", err)
		}
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
func ensureDevAccounts(ctx context.Context, hs *devstack.Dendrite, s *devState, resetCmd string) error {
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
			return fmt.Errorf("log in as %s with the password in dev.json: %w (run `%s` to start afresh)", userID, err, resetCmd)
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

// writeDevConfig writes nomos.yaml, the config the stack's roles run with,
// and returns its path. Secrets go in files of their own under secrets/,
// mode 0600, so the file can be shown and `nomos -config` it works
// without environment variables.
func writeDevConfig(dir string, s devState, k devKeys, webListen string) (string, error) {
	secretDir := filepath.Join(dir, "secrets")
	if err := os.MkdirAll(secretDir, 0o700); err != nil {
		return "", err
	}
	secret := func(name, value string) (string, error) {
		path := filepath.Join(secretDir, name)
		return path, os.WriteFile(path, []byte(value+"\n"), 0o600)
	}
	databaseURL, err := secret("database_url", s.DatabaseURL)
	if err != nil {
		return "", err
	}
	botPassword, err := secret("bot_password", s.Bot.Password)
	if err != nil {
		return "", err
	}
	mcpToken, err := secret("mcp_token", s.MCPToken)
	if err != nil {
		return "", err
	}
	cfg := map[string]any{
		"database": map[string]any{"url_file": databaseURL},
		"redis":    map[string]any{"url": s.RedisURL},
		"matrix": map[string]any{
			"homeserver_url":    s.HomeserverURL,
			"user_id":           s.Bot.UserID,
			"password_file":     botPassword,
			"operators":         []string{s.Operator.UserID},
			"pickle_key_file":   k.pickleKey,
			"recovery_key_file": k.recoveryKey,
			"ops_room":          s.RoomID,
		},
		"actuator": map[string]any{
			"ssh_key_file":     k.sshKey,
			"known_hosts_file": k.knownHosts,
			"journal_file":     filepath.Join(dir, "actuator", "journal"),
		},
		"orders":  map[string]any{"signing_key_file": k.signingKey, "verify_key_file": k.verifyKey},
		"reports": map[string]any{"signing_key_file": k.reportSigningKey, "verify_key_file": k.reportVerifyKey},
		"web":     map[string]any{"listen": webListen},
		// An admin's container made straight on labsim shows up quickly.
		"inventory": map[string]any{"interval": "15s"},
		"mcp": map[string]any{
			"tokens":            []map[string]string{{"name": "dev", "token_file": mcpToken, "scope": "request"}},
			"url":               "http://" + webListen + "/mcp",
			"client_token_file": mcpToken,
		},
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	const header = "# Written by `nomos dev` on every start: edits are overwritten.\n" +
		"# The roles of the dev stack run with it; NOMOS_ variables you export win.\n" +
		"# Try: nomos -config THIS_FILE doctor, or nomos -config THIS_FILE mcp --stdio\n"
	path := filepath.Join(dir, "nomos.yaml")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append([]byte(header), data...), 0o600); err != nil {
		return "", fmt.Errorf("write nomos.yaml: %w", err)
	}
	return path, os.Rename(tmp, path)
}

// children are the role processes the dev stack runs.
type children struct {
	procs  []*exec.Cmd
	failed chan error
	wg     sync.WaitGroup
}

func startChildren(ctx context.Context, self string, names []string, configPath string, environ []string, dir string, env *roleEnv) (*children, error) {
	c := &children{failed: make(chan error, len(names))}
	for _, name := range names {
		logPath := filepath.Join(dir, name+".log")
		logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			c.stop()
			return nil, err
		}
		cmd := exec.Command(self, "-config", configPath, name)
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

func printDevSummary(env *roleEnv, s devState, dir, dirFlag, self string, started []string, sim *labsim.Sim, seed *store.Seed) {
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
		fmt.Fprintf(w, "  status page        %s\n  MCP                %s (token in %s)\n", s.StatusURL, s.MCPURL, filepath.Join(dir, "secrets", "mcp_token"))
	}
	if len(started) > 0 {
		fmt.Fprintf(w, "  roles running      %s (logs in %s/<role>.log)\n", strings.Join(started, ", "), dir)
	} else {
		fmt.Fprintf(w, "  roles running      none yet: the bot and actuator are not built in this version\n")
	}
	fmt.Fprintf(w, "  config             %s\n", s.Config)
	fmt.Fprintf(w, "\nLog in with Element (or any Matrix client): homeserver %s, user operator.\n", s.HomeserverURL)
	if roles["chat"].run != nil {
		chat := devProg() + " chat"
		if dirFlag != devDir {
			chat += " -dev " + filepath.Join(dirFlag, "dev.json")
		}
		fmt.Fprintf(w, "Or chat from this terminal: %s\n", chat)
	}
	if s.MCPURL != "" {
		fmt.Fprintf(w, "To give Claude Desktop (or another MCP client) the bot's tools, add to its config:\n  %s\n", mcpClientEntry(self, s.Config))
	}
	doctor := devProg() + " doctor"
	if dirFlag != devDir {
		doctor = devProg() + " -config " + s.Config + " doctor"
	}
	fmt.Fprintf(w, "Everything is in %s/dev.json; `%s` checks the stack again.\n", dir, doctor)
}

// mcpClientEntry is the MCP client config that runs `nomos mcp --stdio`
// against the dev stack, in Claude Desktop's form.
func mcpClientEntry(self, configPath string) string {
	q := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	return fmt.Sprintf(`{"mcpServers": {"nomos": {"command": %s, "args": ["-config", %s, "mcp", "--stdio"]}}}`, q(self), q(configPath))
}

func randomToken(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
