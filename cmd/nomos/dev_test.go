package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/internal/devstack"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/seeds"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// devSeedDir copies the demo seed, moving labsim's hosts to free ports.
func devSeedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	names, _ := fs.Glob(seeds.FS, "*.yaml")
	for _, n := range names {
		data, err := fs.ReadFile(seeds.FS, n)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.Replace(string(data), "127.0.0.1:2201", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), 1)
		s = strings.Replace(s, "127.0.0.1:2202", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), 1)
		if err := os.WriteFile(filepath.Join(dir, n), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startDev runs `nomos dev` in-process until the returned stop is called,
// and returns dev.json once the stack has printed its summary.
func startDev(t *testing.T, dir, seedDir, matrixListen, database, webListen, bin string) (devState, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	env := &roleEnv{
		environ: []string{"NOMOS_SEEDS__DIR=" + seedDir},
		stdout:  out, stderr: out, logger: testenv.Logger(t),
	}
	done := make(chan error, 1)
	go func() {
		done <- runDev(ctx, env, []string{"-dir", dir, "-matrix-listen", matrixListen, "-database", database, "-web-listen", webListen, "-bin", bin})
	}()
	deadline := time.After(3 * time.Minute)
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
	var st devState
	data, err := os.ReadFile(filepath.Join(dir, "dev.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	return st, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("nomos dev: %v", err)
		}
	}
}

func TestDevStackComesUpAndIsReused(t *testing.T) {
	dir := t.TempDir()
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
	first, stop := startDev(t, dir, seedDir, listen, database, webListen, bin)
	for _, key := range []string{first.HomeserverURL, first.RoomID, first.BotUserID, first.Operator.UserID,
		first.Operator.Password, first.Guest.UserID, first.Guest.Password, first.LabsimLog, first.MCPToken} {
		if key == "" {
			t.Fatalf("dev.json is missing a value: %+v", first)
		}
	}
	// A plain HTTP client logs in as the operator and sees the room.
	token := matrixLogin(t, first.HomeserverURL, "operator", first.Operator.Password)
	if rooms := joinedRooms(t, first.HomeserverURL, token); !slices.Contains(rooms, first.RoomID) {
		t.Errorf("operator's rooms %v do not include the ops room %s", rooms, first.RoomID)
	}
	// The roles it started answer: the bot replies in the room, the status
	// page is up and the MCP endpoint wants its token.
	sendText(t, first.HomeserverURL, token, first.RoomID, "status")
	waitForReply(t, first.HomeserverURL, token, first.RoomID, first.BotUserID, "Fleet status")
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
	stop()

	second, stop := startDev(t, dir, seedDir, listen, database, webListen, bin)
	defer stop()
	if second.RoomID != first.RoomID || second.Operator.Password != first.Operator.Password {
		t.Errorf("second run made a new room or account: room %s -> %s", first.RoomID, second.RoomID)
	}
	matrixLogin(t, second.HomeserverURL, "operator", second.Operator.Password)
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

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// buildNomos builds the nomos binary the dev stack runs its roles with.
func buildNomos(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nomos")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false -tags=goolm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build nomos: %v\n%s", err, out)
	}
	return bin
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

func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
