//go:build nomosdev

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nomoshq/nomos/internal/config"
	"github.com/nomoshq/nomos/internal/devstack"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/seeds"
)

// devSeedDir copies the demo seed, moving labsim's hosts to free ports.
func devSeedDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	names, _ := fs.Glob(seeds.FS, "*.yaml")
	for _, n := range names {
		data, err := fs.ReadFile(seeds.FS, n)
		if err != nil {
			t.Fatal(err)
		}
		// One pass: a port written in is never taken for the next to replace.
		s := strings.NewReplacer("127.0.0.1:2201", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)),
			"127.0.0.1:2202", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))).Replace(string(data))
		if err := os.WriteFile(filepath.Join(dir, n), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// devRun is one `nomos dev` running in this process.
type devRun struct {
	state devState
	out   *syncBuffer
	stop  func()
}

// startDev runs `nomos dev` in-process with args until stop is called,
// and returns once the stack has printed its summary and its doctor's
// report.
func startDev(t testing.TB, seedDir string, args ...string) devRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	env := &roleEnv{
		environ: []string{"NOMOS_SEEDS__DIR=" + seedDir},
		stdout:  out, stderr: out, logger: testenv.Logger(t),
	}
	done := make(chan error, 1)
	go func() { done <- runDev(ctx, env, args) }()
	deadline := time.After(5 * time.Minute)
	for !strings.Contains(out.String(), "Press Ctrl-C to stop") {
		select {
		case err := <-done:
			cancel()
			t.Fatalf("nomos dev exited early: %v\n%s", err, out.String())
		case <-deadline:
			cancel()
			t.Fatalf("nomos dev did not come up:\n%s", out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	dir := args[slices.Index(args, "-dir")+1]
	var st devState
	data, err := os.ReadFile(filepath.Join(dir, "dev.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	return devRun{state: st, out: out, stop: func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("nomos dev: %v", err)
		}
	}}
}

// checkDevDoctor checks that the stack's own doctor passed every check.
func checkDevDoctor(t testing.TB, out string) {
	t.Helper()
	if !strings.Contains(out, "Checking the stack (nomos doctor)") || !strings.Contains(out, "checks passed.") || strings.Contains(out, "✗") {
		t.Errorf("the dev stack's doctor did not pass:\n%s", out)
	}
}

func TestDevStackComesUpAndIsReused(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, devDir)
	seedDir := devSeedDir(t)
	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	database := "nomos_devtest_" + strings.ToLower(randomToken(4))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pg, err := devstack.EnsurePostgres(ctx, devstack.PostgresConfig{})
		if err == nil {
			err = pg.DropDatabase(ctx, database)
		}
		if err != nil {
			t.Errorf("drop %s: %v", database, err)
		}
	})

	bin := buildNomos(t)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, role := range []string{"bot", "actuator"} {
			if data, err := os.ReadFile(filepath.Join(dir, role+".log")); err == nil {
				t.Logf("%s.log:\n%s", role, tailString(string(data), 4000))
			}
		}
	})
	webListen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	args := []string{"-dir", dir, "-matrix-listen", listen, "-database", database, "-web-listen", webListen, "-bin", bin, "-redis", testenv.RedisURL(t)}
	run1 := startDev(t, seedDir, args...)
	first := run1.state
	for _, key := range []string{first.HomeserverURL, first.RoomID, first.BotUserID, first.Operator.UserID,
		first.Operator.Password, first.Guest.UserID, first.Guest.Password, first.LabsimLog, first.MCPToken, first.StackID, first.Config} {
		if key == "" {
			t.Fatalf("dev.json is missing a value: %+v", first)
		}
	}
	checkDevDoctor(t, run1.out.String())
	// A plain HTTP client logs in as the operator and sees the room.
	token := matrixLogin(t, first.HomeserverURL, "operator", first.Operator.Password)
	if rooms := joinedRooms(t, first.HomeserverURL, token); !slices.Contains(rooms, first.RoomID) {
		t.Errorf("operator's rooms %v do not include the ops room %s", rooms, first.RoomID)
	}
	// The roles it started answer: the bot replies in the room, the status
	// page is up and the MCP endpoint wants its token.
	sendText(t, first.HomeserverURL, token, first.RoomID, "status")
	waitForReply(t, first.HomeserverURL, token, first.RoomID, first.BotUserID, "Fleet status")
	// A client that speaks plain Matrix asks for a plan in the ops room
	// and gets its card: the stack's room in the clear is one for plans.
	sendText(t, first.HomeserverURL, token, first.RoomID, "restart jellyfin")
	waitForReply(t, first.HomeserverURL, token, first.RoomID, first.BotUserID, "awaiting approval")
	if status := httpStatus(t, first.StatusURL); status != http.StatusOK {
		t.Errorf("status page %s = %d", first.StatusURL, status)
	}
	if status := httpStatus(t, first.MCPURL); status != http.StatusUnauthorized {
		t.Errorf("MCP endpoint without a token = %d, want 401", status)
	}
	// The actuator's probe results verify against the report key the
	// stack generated for the bot: health comes in, and nothing is refused.
	for _, name := range []string{"reports_signing.key", "reports_verify.pub", "orders_signing.key", "orders_verify.pub"} {
		if _, err := os.Stat(filepath.Join(dir, "keys", name)); err != nil {
			t.Errorf("the dev stack did not generate %s: %v", name, err)
		}
	}
	waitSignedProbeResult(t, first.DatabaseURL)
	guestToken := matrixLogin(t, first.HomeserverURL, "guest", first.Guest.Password)
	if rooms := joinedRooms(t, first.HomeserverURL, guestToken); !slices.Contains(rooms, first.RoomID) {
		t.Errorf("guest's rooms %v do not include the ops room %s", rooms, first.RoomID)
	}
	checkDevConfig(t, dir, first)
	checkDevDoctorCLI(t, bin, top)
	checkDevMCPEntry(t, run1.out.String(), bin, first.Config)
	run1.stop()

	run2 := startDev(t, seedDir, args...)
	second := run2.state
	if second.RoomID != first.RoomID || second.Operator.Password != first.Operator.Password || second.StackID != first.StackID {
		t.Errorf("second run made a new room, account or stack: room %s -> %s, stack %s -> %s", first.RoomID, second.RoomID, first.StackID, second.StackID)
	}
	if strings.Contains(run2.out.String(), "made afresh") {
		t.Errorf("the second run made the database afresh:\n%s", run2.out.String())
	}
	checkDevDoctor(t, run2.out.String())
	matrixLogin(t, second.HomeserverURL, "operator", second.Operator.Password)
	run2.stop()

	// The dev directory is deleted, as the old advice said, but the dev
	// database stays with the bot's keys, encrypted with the deleted
	// pickle key. The stack must start afresh and the bot answer.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	run3 := startDev(t, seedDir, args...)
	defer run3.stop()
	third := run3.state
	if !strings.Contains(run3.out.String(), "made afresh") || third.StackID == first.StackID {
		t.Errorf("the third run did not make the database afresh (stack %s -> %s):\n%s", first.StackID, third.StackID, run3.out.String())
	}
	checkDevDoctor(t, run3.out.String())
	token = matrixLogin(t, third.HomeserverURL, "operator", third.Operator.Password)
	sendText(t, third.HomeserverURL, token, third.RoomID, "status")
	waitForReply(t, third.HomeserverURL, token, third.RoomID, third.BotUserID, "Fleet status")
}

// checkDevConfig checks nomos.yaml: private, secrets only by file, and
// the config the roles run with.
func checkDevConfig(t *testing.T, dir string, s devState) {
	t.Helper()
	if s.Config != filepath.Join(dir, "nomos.yaml") {
		t.Errorf("dev.json config = %s, want %s", s.Config, filepath.Join(dir, "nomos.yaml"))
	}
	for _, p := range []string{s.Config, filepath.Join(dir, "secrets", "mcp_token"), filepath.Join(dir, "secrets", "bot_password"), filepath.Join(dir, "secrets", "database_url")} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", p, st.Mode().Perm())
		}
	}
	data, err := os.ReadFile(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{s.Bot.Password, s.MCPToken, s.DatabaseURL} {
		if strings.Contains(string(data), secret) {
			t.Errorf("nomos.yaml holds a secret itself rather than its file:\n%s", data)
		}
	}
	cfg, err := config.Load(s.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{"bot", "actuator", "mcp", "discover"} {
		if err := cfg.Validate(role); err != nil {
			t.Errorf("nomos.yaml is not valid for %s: %v", role, err)
		}
	}
	// The ops room is in the clear, for clients that speak plain Matrix,
	// so verified devices are not required there, or it would take no plans.
	if s.Encrypted || cfg.Approvals.RequireVerifiedDevice || cfg.Matrix.OpsRoom != s.RoomID {
		t.Errorf("the dev stack's ops room %s (encrypted %v) runs with require_verified_device %v, ops_room %s; want a room in the clear without it",
			s.RoomID, s.Encrypted, cfg.Approvals.RequireVerifiedDevice, cfg.Matrix.OpsRoom)
	}
	if cfg.Inventory.Interval != 15*time.Second {
		t.Errorf("the dev stack takes an inventory every %s, want 15s", cfg.Inventory.Interval)
	}
	if cfg.MCP.Token != "" || len(cfg.MCP.Tokens) != 1 || cfg.MCP.Tokens[0].Name != "dev" || cfg.MCP.ClientToken != s.MCPToken {
		t.Errorf("nomos.yaml's MCP tokens = %+v, want one named dev whose token is the client's", cfg.MCP)
	}
}

// checkDevDoctorCLI runs the built `nomos doctor` as an operator would in
// the checkout: without -config or any NOMOS_ variable it finds the dev
// stack. With Redis pointed at a closed port it fails and names Redis.
func checkDevDoctorCLI(t *testing.T, bin, checkout string) {
	t.Helper()
	doctor := func(environ ...string) (int, string) {
		cmd := exec.Command(bin, "doctor")
		cmd.Dir = checkout
		cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, environ...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), string(out)
	}
	code, out := doctor()
	if code != 0 || !strings.Contains(out, "checking the dev stack (.nomos-dev/nomos.yaml)") || strings.Contains(out, "✗") {
		t.Errorf("./bin/nomos doctor in the checkout exited %d:\n%s", code, out)
	}
	closed := fmt.Sprintf("redis://127.0.0.1:%d/0", testenv.FreePort(t))
	code, out = doctor("NOMOS_REDIS__URL=" + closed)
	if code == 0 || !strings.Contains(out, "✗ redis: cannot reach "+closed) || strings.Count(out, "✗") != 1 {
		t.Errorf("./bin/nomos doctor with Redis stopped exited %d:\n%s", code, out)
	}
}

// checkDevMCPEntry follows the printed MCP client entry to the letter, as
// Claude Desktop would: it runs its command with its args and nothing in
// the environment, and lists the fleet through it.
func checkDevMCPEntry(t *testing.T, out, bin, configPath string) {
	t.Helper()
	_, after, ok := strings.Cut(out, "add to its config:\n  ")
	if !ok {
		t.Fatalf("the summary shows no MCP client entry:\n%s", out)
	}
	line, _, _ := strings.Cut(after, "\n")
	var entry struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(line), &entry); err != nil {
		t.Fatalf("the MCP client entry is not JSON: %v\n%s", err, line)
	}
	server := entry.MCPServers["nomos"]
	if server.Command != bin || !slices.Equal(server.Args, []string{"-config", configPath, "mcp", "--stdio"}) {
		t.Fatalf("the MCP client entry is %s", line)
	}
	ctx := testenv.Context(t)
	cmd := exec.CommandContext(ctx, server.Command, server.Args...)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"HOME=" + t.TempDir()}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(transport.NewIO(stdout, stdin, io.NopCloser(strings.NewReader(""))))
	defer func() {
		c.Close()
		_ = stdin.Close()
		_ = cmd.Wait()
	}()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "Claude Desktop", Version: "1"}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "list_lxcs"
	res, err := c.CallTool(ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("list_lxcs through the MCP client entry: %v %+v", err, res)
	}
	if text := res.Content[0].(mcp.TextContent).Text; !strings.Contains(text, "containers on 2 hosts") {
		t.Errorf("list_lxcs through the MCP client entry = %q", text)
	}
}

// waitSignedProbeResult waits until a probe result from the actuator is
// on record, and checks that no report was refused on the way.
func waitSignedProbeResult(t *testing.T, databaseURL string) {
	t.Helper()
	ctx := testenv.Context(t)
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM check_defs WHERE last_result_at IS NOT NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no probe result reached the database")
		}
		time.Sleep(100 * time.Millisecond)
	}
	var refused int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'report.refused'`).Scan(&refused); err != nil {
		t.Fatal(err)
	}
	if refused != 0 {
		t.Errorf("the bot refused %d reports from its own actuator", refused)
	}
}

func matrixLogin(t *testing.T, hs, user, password string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"type":       "m.login.password",
		"identifier": map[string]string{"type": "m.id.user", "user": user},
		"password":   password,
	})
	resp, err := http.Post(hs+"/_matrix/client/v3/login", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("login as %s: status %d, %v", user, resp.StatusCode, err)
	}
	return out.AccessToken
}

func joinedRooms(t *testing.T, hs, token string) []string {
	t.Helper()
	req, _ := http.NewRequest("GET", hs+"/_matrix/client/v3/joined_rooms", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		JoinedRooms []string `json:"joined_rooms"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.JoinedRooms
}

func sendText(t *testing.T, hs, token, room, text string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"msgtype": "m.text", "body": text})
	req, _ := http.NewRequest("PUT", fmt.Sprintf("%s/_matrix/client/v3/rooms/%s/send/m.room.message/%s", hs, url.PathEscape(room), randomToken(6)), bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("send message: %d", resp.StatusCode)
	}
}

// waitForReply polls the room until sender posted a message containing want.
func waitForReply(t *testing.T, hs, token, room, sender, want string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/_matrix/client/v3/rooms/%s/messages?dir=b&limit=50", hs, url.PathEscape(room)), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			var out struct {
				Chunk []struct {
					Sender  string `json:"sender"`
					Content struct {
						Body string `json:"body"`
					} `json:"content"`
				} `json:"chunk"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			for _, e := range out.Chunk {
				if e.Sender == sender && strings.Contains(e.Content.Body, want) {
					return
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s never said %q in %s", sender, want, room)
}

func httpStatus(t *testing.T, u string) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestDevDatabaseBelongsToItsDirectory runs the dev stack's database
// bookkeeping against the test Postgres: a database of another stack, or
// from before stack ids, is made afresh; any other database and any other
// directory is left alone, even by -reset.
func TestDevDatabaseBelongsToItsDirectory(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pg, err := devstack.EnsurePostgres(ctx, devstack.PostgresConfig{})
	if err != nil {
		t.Fatal(err)
	}
	newName := func(prefix string) string {
		name := prefix + strings.ToLower(randomToken(4))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := pg.DropDatabase(ctx, name); err != nil {
				t.Errorf("drop %s: %v", name, err)
			}
		})
		return name
	}
	// mark leaves a table in the database, standing for the old stack's
	// crypto account; hasMark says whether it is still there.
	mark := func(name string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, pg.URL(name))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "CREATE TABLE old_stack_mark (id int)"); err != nil {
			t.Fatal(err)
		}
	}
	hasMark := func(name string) bool {
		t.Helper()
		conn, err := pgx.Connect(ctx, pg.URL(name))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT to_regclass('old_stack_mark') IS NOT NULL").Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	ensure := func(name, stackID string) bool {
		t.Helper()
		recreated, err := ensureDevDatabase(ctx, pg, name, stackID)
		if err != nil {
			t.Fatalf("ensureDevDatabase(%s, %s): %v", name, stackID, err)
		}
		return recreated
	}

	dev := newName("nomos_devtest_")
	if ensure(dev, "aaaa") {
		t.Error("a new database counts as made afresh")
	}
	mark(dev)
	if ensure(dev, "aaaa") || !hasMark(dev) {
		t.Error("the database of the same stack was made afresh")
	}
	// The directory was deleted: a new stack id.
	if !ensure(dev, "bbbb") || hasMark(dev) {
		t.Error("the database of another stack was kept")
	}
	if comment, _, _ := pg.DatabaseComment(ctx, dev); comment != devStackComment+"bbbb" {
		t.Errorf("the database is marked %q, want the new stack's id", comment)
	}

	// A database from before stack ids, with the dev stack's name.
	legacy := newName("nomos_devtest_")
	if err := pg.EnsureDatabase(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	mark(legacy)
	if !ensure(legacy, "cccc") || hasMark(legacy) {
		t.Error("an unmarked dev database was kept")
	}

	// -database pointed at a database nomos dev did not make.
	other := newName("nomos_other_")
	if err := pg.EnsureDatabase(ctx, other); err != nil {
		t.Fatal(err)
	}
	mark(other)
	if _, err := ensureDevDatabase(ctx, pg, other, "dddd"); err == nil || !hasMark(other) {
		t.Errorf("a database nomos dev did not make was dropped (err %v)", err)
	}
	if err := pg.SetDatabaseComment(ctx, other, "production, keep"); err != nil {
		t.Fatal(err)
	}
	if err := resetDev(ctx, pg, t.TempDir(), other); err == nil || !hasMark(other) {
		t.Errorf("-reset dropped a database nomos dev did not make (err %v)", err)
	}

	// -reset with -dir pointed at a directory that is not a dev stack's.
	precious := t.TempDir()
	writeFile(t, precious, "thesis.tex", "years of work")
	if err := resetDev(ctx, pg, precious, dev); err == nil {
		t.Error("-reset deleted a directory without dev.json")
	}
	if _, err := os.Stat(filepath.Join(precious, "thesis.tex")); err != nil {
		t.Errorf("-reset touched a directory that is not a dev stack's: %v", err)
	}
	if _, exists, _ := pg.DatabaseComment(ctx, dev); !exists {
		t.Error("-reset refused the directory but dropped the database anyway")
	}

	// -reset of a real dev directory and database: refused while a stack
	// runs from it (its Dendrite holds the lock), done once it stopped.
	devDirPath := filepath.Join(t.TempDir(), "stack")
	if err := os.MkdirAll(filepath.Join(devDirPath, "dendrite"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, devDirPath, "dev.json", "{}")
	lock, err := os.OpenFile(filepath.Join(devDirPath, "dendrite", "dendrite.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if err := resetDev(ctx, pg, devDirPath, dev); err == nil || !strings.Contains(err.Error(), "a dev stack is running") {
		t.Errorf("-reset while the stack runs: %v", err)
	}
	if _, exists, _ := pg.DatabaseComment(ctx, dev); !exists {
		t.Error("-reset dropped the database of a running stack")
	}
	if err := lock.Close(); err != nil {
		t.Fatal(err)
	}
	if err := resetDev(ctx, pg, devDirPath, dev); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(devDirPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("-reset left %s: %v", devDirPath, err)
	}
	if _, exists, _ := pg.DatabaseComment(ctx, dev); exists {
		t.Error("-reset left the dev database")
	}
}
