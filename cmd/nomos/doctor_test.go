package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/config"
	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/seeds"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// doctorStack is a running bot and actuator, in this process, on the test
// Postgres, Redis, Dendrite and labsim, with the config they run with.
type doctorStack struct {
	cfg map[string]any
	dir string
	// secrets must never appear in the doctor's output.
	secrets []string
	// clearRoom is a room in the clear the bot is in: not one for plans
	// while verified devices are required.
	clearRoom id.RoomID
}

// writeConfig writes s.cfg, changed by edit, to a new file.
func (s *doctorStack) writeConfig(t *testing.T, edit func(map[string]any)) string {
	t.Helper()
	data, err := yaml.Marshal(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil { // a deep copy
		t.Fatal(err)
	}
	if edit != nil {
		edit(cfg)
	}
	if data, err = yaml.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(s.dir, "nomos-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

func section(cfg map[string]any, key string) map[string]any { return cfg[key].(map[string]any) }

func writeSecret(t *testing.T, dir, name, value string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startDoctorStack runs `nomos bot` and `nomos actuator` in this process
// until the test ends. The bot account exists and an operator has invited
// it to the ops room; the bot joins, creates its cross-signing keys and
// starts probing, as it would on a first start anywhere.
func startDoctorStack(t *testing.T) *doctorStack {
	t.Helper()
	ctx := testenv.Context(t)
	dir := t.TempDir()
	fleet := testenv.NewFleet(t)
	databaseURL := testenv.DatabaseURL(t)
	st, err := store.Open(ctx, store.Config{URL: databaseURL, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.ApplySeed(ctx, fleet.Seed)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}

	hs := testenv.Homeserver(t)
	botPassword := randomToken(12)
	botID, err := hs.RegisterUser(ctx, "doctorbot"+randomToken(3), botPassword, false)
	if err != nil {
		t.Fatal(err)
	}
	op := testenv.NewMatrixUser(t, "doctorop")
	// The ops room is encrypted, as approvals.require_verified_device
	// (on) wants it; the other room, in the clear, is one it refuses.
	room, err := op.Client.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: []id.UserID{id.UserID(botID)},
		InitialState: []*event.Event{{Type: event.StateEncryption, Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	clear, err := op.Client.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: []id.UserID{id.UserID(botID)}})
	if err != nil {
		t.Fatal(err)
	}
	llm := testenv.NewScriptedLLM(t)

	for _, pair := range [][2]string{{"orders.key", "orders.pub"}, {"reports.key", "reports.pub"}} {
		if err := tasks.GenerateKeyFiles(filepath.Join(dir, pair[0]), filepath.Join(dir, pair[1])); err != nil {
			t.Fatal(err)
		}
	}
	pickleKey, mcpToken, llmKey := randomToken(16), randomToken(24), "sk-doctor-"+randomToken(8)
	mcpTokenFile := writeSecret(t, dir, "mcp_token", mcpToken)
	webListen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	s := &doctorStack{dir: dir, secrets: []string{botPassword, pickleKey, mcpToken, llmKey}, clearRoom: clear.RoomID}
	s.cfg = map[string]any{
		"database": map[string]any{"url_file": writeSecret(t, dir, "database_url", databaseURL)},
		"redis":    map[string]any{"url": testenv.RedisURL(t)},
		"matrix": map[string]any{
			"homeserver_url": hs.URL(), "user_id": botID, "password_file": writeSecret(t, dir, "bot_password", botPassword),
			"operators": []string{op.UserID.String()}, "pickle_key_file": writeSecret(t, dir, "pickle_key", pickleKey),
			"recovery_key_file": filepath.Join(dir, "recovery_key"), "ops_room": room.RoomID.String(),
		},
		"llm": map[string]any{"base_url": llm.URL(), "model": "scripted", "api_key": llmKey},
		"actuator": map[string]any{
			"ssh_key_file": fleet.SSHKeyFile, "known_hosts_file": fleet.KnownHostsFile, "journal_file": filepath.Join(dir, "journal"),
		},
		"orders":  map[string]any{"signing_key_file": filepath.Join(dir, "orders.key"), "verify_key_file": filepath.Join(dir, "orders.pub")},
		"reports": map[string]any{"signing_key_file": filepath.Join(dir, "reports.key"), "verify_key_file": filepath.Join(dir, "reports.pub")},
		"web":     map[string]any{"listen": webListen},
		"mcp": map[string]any{
			"tokens": []map[string]string{{"name": "claude", "token_file": mcpTokenFile, "scope": "request", "for": "@operator:localhost"}},
			"url":    "http://" + webListen + "/mcp", "client_token_file": mcpTokenFile,
		},
	}
	configPath := s.writeConfig(t, nil)

	runCtx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	done := make(chan error, 2)
	for _, r := range []func(context.Context, *roleEnv, []string) error{runActuator, runBot} {
		go func() {
			done <- r(runCtx, &roleEnv{configPath: configPath, stdout: logs, stderr: logs, logger: testenv.Logger(t)}, nil)
		}()
	}
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("role: %v", err)
			}
		}
		if t.Failed() {
			t.Logf("bot and actuator logs:\n%s", tailString(logs.String(), 8000))
		}
	})
	return s
}

// runDoctorCLI runs `nomos -config path doctor args…` and returns its exit
// code and output.
func runDoctorCLI(path string, environ []string, args ...string) (int, string) {
	var out, errOut syncBuffer
	code := run(append([]string{"-config", path, "doctor"}, args...), environ, &out, &errOut)
	return code, out.String() + errOut.String()
}

// doctorLines are the check lines of a report, each starting ✓ or ✗.
func doctorLines(out string) []string {
	var lines []string
	for l := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(l, "✓ ") || strings.HasPrefix(l, "✗ ") {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestDoctorOnAStack runs every check against a stack that works, then
// against the same stack with Redis pointed at a closed port, then with
// one thing at a time broken in its config.
func TestDoctorOnAStack(t *testing.T) {
	s := startDoctorStack(t)
	t.Run("all pass", func(t *testing.T) { doctorAllPass(t, s) })
	t.Run("redis down", func(t *testing.T) { doctorRedisDown(t, s) })
	t.Run("broken", func(t *testing.T) { doctorFindsWhatIsWrong(t, s) })
}

func doctorAllPass(t *testing.T, s *doctorStack) {
	path := s.writeConfig(t, nil)

	code, out := runDoctorCLI(path, nil, "-wait", "2m")
	if code != 0 || strings.Contains(out, "✗") {
		t.Fatalf("nomos doctor on a working stack exited %d:\n%s", code, out)
	}
	lines := doctorLines(out)
	for _, want := range []string{
		"✓ config: valid for bot, actuator, mcp",
		"✓ postgres: reachable, schema at version",
		"✓ redis: reachable",
		"✓ homeserver: ",
		"✓ matrix login: ",
		"✓ ops room: ",
		"✓ bot device: ",
		"✓ order keys: orders.signing_key_file and orders.verify_key_file are a pair",
		"✓ report keys: reports.signing_key_file and reports.verify_key_file are a pair",
		"✓ ssh key: ",
		"✓ known_hosts: ",
		"✓ host hubris ",
		"✓ host strong ",
		"✓ site default: the actuator serves hubris, strong",
		"✓ llm: ",
		"✓ mcp tokens: 1 well formed",
		"✓ mcp client: mcp.client_token is the token named claude",
		"✓ mcp: the bot at ",
		"✓ status page: ",
	} {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, want)
		}
		if !found {
			t.Errorf("no line %q in:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "cross-signed") {
		t.Errorf("the device line does not say the device is cross-signed:\n%s", out)
	}
	for _, secret := range s.secrets {
		if strings.Contains(out, secret) {
			t.Errorf("the report shows a secret from the config:\n%s", out)
		}
	}
	// The doctor logged in with a device of its own and logged it out.
	m := section(s.cfg, "matrix")
	password, err := os.ReadFile(m["password_file"].(string))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	cli, err := mautrix.NewClient(m["homeserver_url"].(string), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Login(ctx, &mautrix.ReqLogin{
		Type: mautrix.AuthTypePassword, Identifier: mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: m["user_id"].(string)},
		Password: strings.TrimSpace(string(password)), DeviceID: "TESTLOOK", StoreCredentials: true,
	}); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = cli.Logout(ctx) }()
	devices, err := cli.GetDevicesInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, dev := range devices.Devices {
		if dev.DeviceID == doctorDeviceID {
			t.Errorf("the doctor left its device %s on the bot's account", dev.DeviceID)
		}
	}
}

// doctorRedisDown: a ✗ that names Redis and says what to do, a failing
// exit, and every other check still reported and passing.
func doctorRedisDown(t *testing.T, s *doctorStack) {
	path := s.writeConfig(t, nil)
	code, out := runDoctorCLI(path, nil, "-wait", "2m")
	if code != 0 {
		t.Fatalf("the stack is not healthy to begin with:\n%s", out)
	}
	lines := doctorLines(out)
	closed := fmt.Sprintf("redis://127.0.0.1:%d/0", testenv.FreePort(t))
	code, out = runDoctorCLI(path, []string{"NOMOS_REDIS__URL=" + closed})
	if code == 0 {
		t.Errorf("nomos doctor with Redis unreachable exited 0:\n%s", out)
	}
	var failed []string
	for _, l := range doctorLines(out) {
		if strings.HasPrefix(l, "✗") {
			failed = append(failed, l)
		}
	}
	if len(failed) != 1 || !strings.HasPrefix(failed[0], "✗ redis: cannot reach "+closed) {
		t.Errorf("want one ✗, for Redis; got %q in:\n%s", failed, out)
	}
	if !strings.Contains(out, "    → start Redis, or set redis.url") {
		t.Errorf("the Redis failure does not say what to do:\n%s", out)
	}
	if got := len(doctorLines(out)); got != len(lines) {
		t.Errorf("with Redis down the report has %d lines, want the same %d", got, len(lines))
	}
}

// doctorFindsWhatIsWrong breaks one thing at a time in a working stack's
// config and checks that the doctor names it.
func doctorFindsWhatIsWrong(t *testing.T, s *doctorStack) {
	otherPair := filepath.Join(s.dir, "other")
	if err := tasks.GenerateKeyFiles(otherPair+".key", otherPair+".pub"); err != nil {
		t.Fatal(err)
	}
	// Something else holds a web.listen address.
	impostor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if _, err := w.Write([]byte("hello from another server")); err != nil {
			t.Error(err)
		}
	}))
	t.Cleanup(impostor.Close)
	// An LLM endpoint that echoes the key it was sent in its error.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad request for key "+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), http.StatusBadRequest)
	}))
	t.Cleanup(echo.Close)
	otherToken := writeSecret(t, s.dir, "other_token", randomToken(24))

	tests := []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"the verify key is of another pair", func(c map[string]any) {
			section(c, "orders")["verify_key_file"] = otherPair + ".pub"
		}, "✗ order keys: orders.signing_key_file and orders.verify_key_file are not a pair"},
		{"the pickle key is not the one the bot ran with", func(c map[string]any) {
			section(c, "matrix")["pickle_key_file"] = writeSecret(t, s.dir, "wrong_pickle", randomToken(16))
		}, "✗ bot device: the end-to-end keys of device"},
		{"the bot's password is wrong", func(c map[string]any) {
			section(c, "matrix")["password_file"] = writeSecret(t, s.dir, "wrong_password", "not-the-password")
		}, "✗ matrix login: "},
		{"the ops room is one the bot is not in", func(c map[string]any) {
			section(c, "matrix")["ops_room"] = "!notjoined:localhost"
		}, "✗ ops room: "},
		{"a room for plans is in the clear while verified devices are required", func(c map[string]any) {
			section(c, "matrix")["rooms"] = []string{s.clearRoom.String()}
		}, "✗ room for plans: " + s.clearRoom.String() + " is not encrypted, so the bot takes no plans"},
		{"the homeserver does not answer", func(c map[string]any) {
			section(c, "matrix")["homeserver_url"] = fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))
		}, "✗ homeserver: "},
		{"the database does not answer", func(c map[string]any) {
			delete(section(c, "database"), "url_file")
			section(c, "database")["url"] = fmt.Sprintf("postgres://nomos:nomos@127.0.0.1:%d/nomos?sslmode=disable", testenv.FreePort(t))
		}, "✗ postgres: cannot connect"},
		{"the model is not offered", func(c map[string]any) {
			section(c, "llm")["model"] = "no-such-model"
		}, "✗ llm: "},
		{"the LLM endpoint fails", func(c map[string]any) {
			section(c, "llm")["base_url"] = echo.URL + "/v1"
		}, "✗ llm: GET " + echo.URL + "/v1/models answered 400 Bad Request: bad request for key [redacted]"},
		{"the client token is not one the bot accepts", func(c map[string]any) {
			section(c, "mcp")["client_token_file"] = otherToken
		}, "✗ mcp client: mcp.client_token is none of the tokens in mcp.tokens"},
		{"another server holds web.listen", func(c map[string]any) {
			section(c, "web")["listen"] = strings.TrimPrefix(impostor.URL, "http://")
		}, "✗ status page: something other than the bot answers"},
		{"the config is not valid", func(c map[string]any) {
			section(c, "matrix")["user_id"] = "nomos"
		}, "✗ config: not valid for bot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := runDoctorCLI(s.writeConfig(t, tt.edit), nil)
			if code == 0 {
				t.Errorf("exited 0:\n%s", out)
			}
			found := false
			for _, l := range doctorLines(out) {
				found = found || strings.HasPrefix(l, tt.want)
			}
			if !found {
				t.Errorf("no line %q in:\n%s", tt.want, out)
			}
			if !strings.Contains(out, "    → ") {
				t.Errorf("no fix is given:\n%s", out)
			}
			for _, secret := range s.secrets {
				if strings.Contains(out, secret) {
					t.Errorf("the report shows a secret from the config:\n%s", out)
				}
			}
		})
	}
}

// TestDoctorHostsFromProbeResults checks the hosts lines against what the
// actuator's probes left in Postgres, including a detail from a hostile
// host that tries to write to the operator's terminal.
func TestDoctorHostsFromProbeResults(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	databaseURL := testenv.DatabaseURL(t)
	st, err := store.Open(ctx, store.Config{URL: databaseURL, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	seed, err := fleetseed.Load(seeds.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplySeed(ctx, seed); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Database: config.DatabaseConfig{URL: databaseURL}}
	now := time.Now()
	d := newDoctor(cfg, []string{"bot"}, testenv.Logger(t))
	d.now = func() time.Time { return now }
	hostLine := func(host string) checkLine {
		t.Helper()
		for _, l := range d.checkHosts(ctx) {
			if strings.HasPrefix(l.text, "host "+host+" ") {
				return l
			}
		}
		t.Fatalf("no line for host %s", host)
		return checkLine{}
	}
	record := func(slug, health, detail string, at time.Time) {
		t.Helper()
		var checkID, targetID string
		err := pgxQueryRow(t, databaseURL, `SELECT id::text, target_id::text FROM check_defs WHERE slug = $1`, slug).Scan(&checkID, &targetID)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.RecordCheck(ctx, store.CheckObservation{CheckID: checkID, TargetID: targetID, Health: health, Detail: detail, At: at}); err != nil {
			t.Fatal(err)
		}
	}

	if l := hostLine("strong"); l.ok || !strings.Contains(l.text, "no probe result yet") {
		t.Errorf("before any probe: %+v", l)
	}
	// A service inside a container on strong answered: the host is reached.
	record("jellyfin-http", "unhealthy", "GET http://10.40.0.101:8096/health answered 502", now.Add(-5*time.Second))
	if l := hostLine("strong"); !l.ok || !strings.Contains(l.text, "jellyfin-http") {
		t.Errorf("after a probe through strong: %+v", l)
	}
	// hubris's key changed; the detail carries escape sequences and lines.
	record("hubris-disk", "unhealthy", "the probe could not run: command was not sent: host key refused: \x1b[2J\x1b]0;pwned\x07\nroot# ", now.Add(-time.Second))
	l := hostLine("hubris")
	if l.ok || !strings.Contains(l.text, "the actuator cannot reach it") || !strings.Contains(l.fix, "known_hosts") {
		t.Errorf("after a refused host key: %+v", l)
	}
	lines := d.scrub([]checkLine{l})
	if strings.ContainsAny(lines[0].text, "\x1b\x07\n\r") {
		t.Errorf("a control character from the host reaches the terminal: %q", lines[0].text)
	}
	// strong's nodes lack the gate's binary: bash says so for the forced
	// command, whatever the probe asked.
	record("jellyfin-http", "unhealthy", "curl failed: bash: line 1: /usr/local/bin/nomos: No such file or directory", now.Add(-time.Second))
	if l := hostLine("strong"); l.ok || !strings.Contains(l.text, "the gate binary is missing on that node") || !strings.Contains(l.fix, "every node needs the binary") {
		t.Errorf("without the gate's binary: %+v", l)
	}
	// An hour later nothing new has come: the actuator stopped.
	d.now = func() time.Time { return now.Add(time.Hour) }
	if l := hostLine("strong"); l.ok || !strings.Contains(l.text, "old") || !strings.Contains(l.fix, "actuator running") {
		t.Errorf("an hour after the last probe: %+v", l)
	}
}

func pgxQueryRow(t *testing.T, databaseURL, sql string, args ...any) pgx.Row {
	t.Helper()
	ctx := testenv.Context(t)
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn.QueryRow(ctx, sql, args...)
}

// TestDoctorWithoutAConfig refuses to guess: with no config and no dev
// stack here, it says what to pass.
func TestDoctorWithoutAConfig(t *testing.T) {
	t.Chdir(t.TempDir())
	var out, errOut syncBuffer
	code := run([]string{"doctor"}, nil, &out, &errOut)
	if code == 0 || !strings.Contains(out.String(), "✗ config: none given") || !strings.Contains(out.String(), "→ pass the config") {
		t.Errorf("nomos doctor with no config exited %d:\n%s%s", code, out.String(), errOut.String())
	}
}

// TestDoctorKeyPairs checks the pair test on each side's halves alone
// and together.
func TestDoctorKeyPairs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, p := range []string{a, b} {
		if err := tasks.GenerateKeyFiles(p+".key", p+".pub"); err != nil {
			t.Fatal(err)
		}
	}
	garbage := writeSecret(t, dir, "garbage", "not a key")
	tests := []struct {
		signing, verify string
		ok              bool
		want            string
	}{
		{a + ".key", a + ".pub", true, "are a pair"},
		{a + ".key", b + ".pub", false, "are not a pair"},
		{a + ".key", "", true, "its verify half is on the other side"},
		{"", b + ".pub", true, "its signing half is on the other side"},
		{garbage, a + ".pub", false, "orders.signing_key_file"},
		{a + ".key", garbage, false, "orders.verify_key_file"},
	}
	for _, tt := range tests {
		l := checkKeyPair("order keys", "orders", tt.signing, tt.verify, "the actuator would refuse every order")
		if l.ok != tt.ok || !strings.Contains(l.text, tt.want) || (!l.ok && l.fix == "") {
			t.Errorf("checkKeyPair(%s, %s) = %+v, want ok=%v and %q", filepath.Base(tt.signing), filepath.Base(tt.verify), l, tt.ok, tt.want)
		}
	}
}

// TestDoctorPostgresSchema: a database the migrations have not reached is
// a ✗ that says to migrate; once migrated it is a ✓.
func TestDoctorPostgresSchema(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	databaseURL := testenv.EmptyDatabaseURL(t)
	d := newDoctor(&config.Config{Database: config.DatabaseConfig{URL: databaseURL}}, []string{"migrate"}, testenv.Logger(t))
	latest, err := store.LatestVersion()
	if err != nil {
		t.Fatal(err)
	}
	l := d.checkPostgres(ctx)[0]
	if l.ok || l.text != fmt.Sprintf("postgres: the schema is at version 0; this nomos needs %d", latest) || !strings.Contains(l.fix, "nomos migrate") {
		t.Errorf("an empty database: %+v", l)
	}
	if _, _, err := store.Migrate(ctx, databaseURL); err != nil {
		t.Fatal(err)
	}
	if l := d.checkPostgres(ctx)[0]; !l.ok {
		t.Errorf("a migrated database: %+v", l)
	}
}
