package soak

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/devstack"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// nomosBinary builds cmd/nomos once per test binary: the roles run as the
// real program, in processes of their own that can be killed.
func nomosBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "nomos-soak-bin-*")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "nomos")
		cmd := exec.Command("go", "build", "-o", binPath, "../../cmd/nomos")
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false -tags=goolm", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build nomos: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// stack is the whole of Nomos for one case: every part its own, so a case
// may stop any of them.
type stack struct {
	t        *testing.T
	ctx      context.Context
	dir      string
	pg       *pgCluster
	redis    *redisServer
	hs       *devstack.Dendrite
	hsConfig devstack.DendriteConfig
	fleet    *testenv.Fleet
	db       *pgxpool.Pool
	config   string
	bot      *role
	actuator *role

	room      id.RoomID
	botUser   id.UserID
	operators []*operator
	timeline  *timeline
	status    id.EventID
	// asked counts the restarts asked for in the room.
	asked int
}

// use points the stack's failures at t, the subtest now running; the
// subtests share one stack and run one after another.
func (s *stack) use(t *testing.T) {
	s.t, s.timeline.t, s.bot.t, s.actuator.t = t, t, t, t
	for _, op := range s.operators {
		op.t = t
	}
}

// stackOptions shape a stack.
type stackOptions struct {
	// operators is how many operators share the room; default 1.
	operators int
}

func newStack(t *testing.T, opts stackOptions) *stack {
	t.Helper()
	// The stack outlives testenv.Context's five minutes under make soak.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	t.Cleanup(cancel)
	s := &stack{t: t, ctx: ctx, dir: t.TempDir()}
	began := time.Now()
	defer func() { t.Logf("stack up in %s", time.Since(began).Round(time.Millisecond)) }()
	bin := nomosBinary(t)
	s.pg = startPostgres(t)
	if err := s.pg.createDatabase(ctx, "nomos"); err != nil {
		t.Fatal(err)
	}
	dbURL := s.pg.URL("nomos")
	if _, _, err := store.Migrate(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	s.fleet = testenv.NewFleet(t)
	st, err := store.Open(ctx, store.Config{URL: dbURL, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.ApplySeed(ctx, s.fleet.Seed)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if s.db, err = pgxpool.New(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.db.Close)
	s.redis = startRedis(t)
	s.startHomeserver()
	s.setupRoom(max(opts.operators, 1))
	s.config = s.writeConfig(dbURL)
	s.actuator = newRole(t, bin, s.config, "actuator", s.dir)
	s.bot = newRole(t, bin, s.config, "bot", s.dir)
	s.actuator.start()
	s.bot.start()
	s.timeline = follow(t, s.operators[0].cli, s.room)
	// The bot is ready once it answers in the room.
	s.status = s.operators[0].say("status")
	s.timeline.waitFor("the bot's first reply", 90*time.Second, func(e roomEvent) bool { return e.Sender == s.botUser && e.isMessage() })
	return s
}

func (s *stack) startHomeserver() {
	t := s.t
	hsBin, err := devstack.EnsureDendrite(s.ctx, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	// The homeserver keeps its data in the shared test Postgres, not in the
	// cluster of the stack's own that the Postgres case stops.
	hsDB, err := testenv.HomeserverDatabaseURL(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.hsConfig = devstack.DendriteConfig{
		Dir: filepath.Join(s.dir, "dendrite"), Listen: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), BinDir: hsBin,
		DatabaseURL: hsDB,
	}
	if s.hs, err = devstack.StartDendrite(s.ctx, s.hsConfig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.hs.Stop(); err != nil {
			t.Errorf("stop dendrite: %v", err)
		}
		if t.Failed() {
			testenv.PrintHomeserverLog(s.hs.LogPath())
		}
	})
}

// restartHomeserver starts Dendrite again on its directory and address.
func (s *stack) restartHomeserver() {
	var err error
	if s.hs, err = devstack.StartDendrite(s.ctx, s.hsConfig); err != nil {
		s.t.Fatal(err)
	}
}

var botPassword = randomToken(12)

// setupRoom registers the bot and the operators; the first operator makes
// the ops room and invites the others, who join.
func (s *stack) setupRoom(operators int) {
	t, ctx := s.t, s.ctx
	botID, err := s.hs.RegisterUser(ctx, "nomos", botPassword, false)
	if err != nil {
		t.Fatal(err)
	}
	s.botUser = id.UserID(botID)
	for i := range operators {
		s.operators = append(s.operators, s.newOperator(fmt.Sprintf("operator%d", i+1)))
	}
	invite := []id.UserID{s.botUser}
	for _, op := range s.operators[1:] {
		invite = append(invite, op.id)
	}
	resp, err := s.operators[0].cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Name: "Nomos ops", Preset: "private_chat", Invite: invite})
	if err != nil {
		t.Fatal(err)
	}
	s.room = resp.RoomID
	for _, op := range s.operators {
		op.room = s.room
		if op != s.operators[0] {
			if _, err := op.cli.JoinRoomByID(ctx, s.room); err != nil {
				t.Fatal(err)
			}
		}
	}
	bot := login(t, s.hs.URL(), botID, botPassword)
	if _, err := bot.JoinRoomByID(ctx, s.room); err != nil {
		t.Fatal(err)
	}
	_, _ = bot.Logout(ctx)
}

func (s *stack) newOperator(localpart string) *operator {
	password := randomToken(8)
	userID, err := s.hs.RegisterUser(s.ctx, localpart, password, false)
	if err != nil {
		s.t.Fatal(err)
	}
	return &operator{t: s.t, ctx: s.ctx, id: id.UserID(userID), cli: login(s.t, s.hs.URL(), userID, password)}
}

func login(t *testing.T, hsURL, userID, password string) *mautrix.Client {
	t.Helper()
	cli, err := mautrix.NewClient(hsURL, "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = cli.Login(context.Background(), &mautrix.ReqLogin{
		Type:       mautrix.AuthTypePassword,
		Identifier: mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: userID},
		Password:   password, StoreCredentials: true,
	})
	if err != nil {
		t.Fatalf("log in as %s: %v", userID, err)
	}
	return cli
}

// writeConfig writes the one config file both roles run with, as an
// operator would deploy them. JSON is YAML, so no encoder is needed.
func (s *stack) writeConfig(dbURL string) string {
	t := s.t
	keys := filepath.Join(s.dir, "keys")
	if err := os.MkdirAll(keys, 0o700); err != nil {
		t.Fatal(err)
	}
	k := func(name string) string { return filepath.Join(keys, name) }
	for _, pair := range [][2]string{{k("orders.key"), k("orders.pub")}, {k("reports.key"), k("reports.pub")}} {
		if err := tasks.GenerateKeyFiles(pair[0], pair[1]); err != nil {
			t.Fatal(err)
		}
	}
	var operators []string
	for _, op := range s.operators {
		operators = append(operators, op.id.String())
	}
	cfg := map[string]any{
		"log":      map[string]any{"level": "debug"},
		"database": map[string]any{"url": dbURL},
		"redis":    map[string]any{"url": s.redis.URL()},
		"matrix": map[string]any{
			"homeserver_url": s.hs.URL(), "user_id": s.botUser.String(), "password": botPassword,
			"operators": operators, "pickle_key": randomToken(16), "ops_room": s.room.String(),
			"recovery_key_file": k("recovery_key"),
		},
		// The operators here speak plain Matrix, in a room in the clear.
		"approvals": map[string]any{"require_verified_device": false},
		"actuator": map[string]any{
			"ssh_key_file": s.fleet.SSHKeyFile, "known_hosts_file": s.fleet.KnownHostsFile,
			"journal_file": filepath.Join(s.dir, "journal"),
		},
		"reports": map[string]any{"signing_key_file": k("reports.key"), "verify_key_file": k("reports.pub")},
		"web":     map[string]any{"listen": fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))},
		// The reconciler's timings short, so a lost Redis is repaired in
		// seconds rather than a minute.
		"orders": map[string]any{
			"signing_key_file": k("orders.key"), "verify_key_file": k("orders.pub"),
			"ack_timeout": "3s", "reconcile_interval": "1s",
		},
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.dir, "nomos.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// role is one `nomos <role>` process, started, killed and started again
// by the case.
type role struct {
	t         *testing.T
	bin, name string
	config    string
	logPath   string
	mu        sync.Mutex
	cmd       *exec.Cmd
	exited    chan struct{}
}

func newRole(t *testing.T, bin, config, name, dir string) *role {
	r := &role{t: t, bin: bin, name: name, config: config, logPath: filepath.Join(dir, name+".log")}
	t.Cleanup(func() {
		r.stop()
		if t.Failed() {
			// The test's directory goes with it: keep the whole log.
			data, _ := os.ReadFile(r.logPath)
			kept := filepath.Join(os.TempDir(), fmt.Sprintf("nomos-soak-%s-%d.log", name, time.Now().Unix()))
			if err := os.WriteFile(kept, data, 0o644); err == nil {
				t.Logf("%s.log kept in %s; its tail:\n%s", name, kept, tail(string(data), 3000))
			}
		}
	})
	return r
}

func (r *role) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	logFile, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		r.t.Fatal(err)
	}
	_, _ = fmt.Fprintf(logFile, "=== soak: start %s at %s\n", r.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(r.bin, "-config", r.config, r.name)
	cmd.Env = cleanEnviron()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		r.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logFile.Close(); close(exited) }()
	r.cmd, r.exited = cmd, exited
}

// running reports whether the process is still up.
func (r *role) running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return false
	}
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

// checkUp checks that both roles are still running: they ride out a fault
// of their own accord.
func (s *stack) checkUp() {
	s.t.Helper()
	for _, r := range []*role{s.bot, s.actuator} {
		if !r.running() {
			s.t.Errorf("nomos %s exited during the fault instead of reconnecting", r.name)
			r.start()
		}
	}
}

// kill SIGKILLs the process and waits for it to be gone.
func (r *role) kill() { r.signal(syscall.SIGKILL) }

// stop asks the process to finish, as systemd would.
func (r *role) stop() { r.signal(syscall.SIGTERM) }

func (r *role) signal(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = syscall.Kill(-r.cmd.Process.Pid, sig)
	select {
	case <-r.exited:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.exited
	}
	r.cmd = nil
}

// cleanEnviron is this process's environment without NOMOS_ variables, so
// a developer's settings do not reach the roles under test.
func cleanEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NOMOS_") {
			env = append(env, kv)
		}
	}
	return env
}

func randomToken(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
