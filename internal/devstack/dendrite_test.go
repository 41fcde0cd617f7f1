package devstack

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/synapseadmin"
)

// TestDendrite runs a real Dendrite: accounts, a room two users share, and a
// restart on the same state dir that keeps the accounts and the server key;
// once with SQLite files in the dir and once with a Postgres database, which
// the test suites use.
func TestDendrite(t *testing.T) {
	skipIfShort(t)
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		cfg := testDendriteConfig(t)
		testDendrite(t, cfg)
		if _, err := os.Stat(filepath.Join(cfg.Dir, "dendrite_roomserver.db")); err != nil {
			t.Errorf("the roomserver's SQLite file: %v", err)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pg, err := EnsurePostgres(ctx, PostgresConfig{})
		if err != nil {
			t.Fatalf("EnsurePostgres: %v", err)
		}
		name := "nomos_devstack_dendrite_" + strings.ToLower(rand.Text()[:8])
		if err := pg.EnsureDatabase(ctx, name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := pg.DropDatabase(context.Background(), name); err != nil {
				t.Errorf("drop %s: %v", name, err)
			}
		})
		cfg := testDendriteConfig(t)
		cfg.DatabaseURL = pg.URL(name)
		testDendrite(t, cfg)

		// The data went to Postgres, not to files in the dir.
		if dbs, _ := filepath.Glob(filepath.Join(cfg.Dir, "*.db")); len(dbs) > 0 {
			t.Errorf("SQLite files in the dir of a Postgres-backed Dendrite: %v", dbs)
		}
		conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var rooms int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM roomserver_rooms").Scan(&rooms); err != nil {
			t.Fatalf("count the roomserver's rooms in Postgres: %v", err)
		}
		if rooms == 0 {
			t.Error("no room in the Postgres database after a room was made")
		}
	})

	t.Run("a DatabaseURL that is not Postgres", func(t *testing.T) {
		cfg := DendriteConfig{Dir: t.TempDir(), BinDir: t.TempDir(), DatabaseURL: "file:dendrite.db"}
		if _, err := StartDendrite(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "postgres://") {
			t.Errorf("StartDendrite: err = %v, want one naming postgres://", err)
		}
	})
}

func testDendriteConfig(t *testing.T) DendriteConfig {
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	binDir, err := EnsureDendrite(t.Context(), logger)
	if err != nil {
		t.Fatalf("EnsureDendrite: %v", err) // no skip: without Dendrite nothing Matrix-facing is tested
	}
	return DendriteConfig{Dir: t.TempDir(), BinDir: binDir, Logger: logger}
}

func testDendrite(t *testing.T, cfg DendriteConfig) {
	ctx := t.Context()
	const alicePassword, bobPassword = "alice-password-1", "bob-password-1"

	d := startTestDendrite(t, cfg)
	if _, err := StartDendrite(ctx, cfg); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second StartDendrite on a dir in use: err = %v, want an in-use error", err)
	}

	alice, err := d.RegisterUser(ctx, "alice", alicePassword, true)
	if err != nil {
		t.Fatalf("RegisterUser(alice): %v", err)
	}
	bob, err := d.RegisterUser(ctx, "bob", bobPassword, false)
	if err != nil {
		t.Fatalf("RegisterUser(bob): %v", err)
	}
	bobAgain, err := d.RegisterUser(ctx, "bob", bobPassword, false)
	if err != nil {
		t.Fatalf("RegisterUser(bob) again: %v", err)
	}
	if diff := cmp.Diff([]string{"@alice:localhost", "@bob:localhost", "@bob:localhost"}, []string{alice, bob, bobAgain}); diff != "" {
		t.Errorf("user ids (-want +got):\n%s", diff)
	}

	// Without the shared secret nobody registers, least of all an admin.
	cli, err := mautrix.NewClient(d.URL(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = (&synapseadmin.Client{Client: cli}).SharedSecretRegister(ctx, "not-the-shared-secret",
		synapseadmin.ReqSharedSecretRegister{Username: "mallory", Password: "mallory-password-1", Admin: true})
	if !errors.Is(err, mautrix.MForbidden) {
		t.Errorf("registering with the wrong shared secret: err = %v, want M_FORBIDDEN", err)
	}

	aliceToken := matrixLogin(t, d.URL(), "alice", alicePassword)
	bobToken := matrixLogin(t, d.URL(), "bob", bobPassword)

	var created struct {
		RoomID string `json:"room_id"`
	}
	matrixCall(t, http.MethodPost, d.URL()+"/_matrix/client/v3/createRoom", aliceToken,
		map[string]any{"preset": "private_chat", "name": "devstack test"}, http.StatusOK, &created)
	if created.RoomID == "" {
		t.Fatal("createRoom returned no room_id")
	}
	room := d.URL() + "/_matrix/client/v3/rooms/" + url.PathEscape(created.RoomID)
	matrixCall(t, http.MethodPost, room+"/invite", aliceToken, map[string]any{"user_id": bob}, http.StatusOK, nil)
	matrixCall(t, http.MethodPost, room+"/join", bobToken, map[string]any{}, http.StatusOK, nil)

	var members struct {
		Joined map[string]json.RawMessage `json:"joined"`
	}
	matrixCall(t, http.MethodGet, room+"/joined_members", aliceToken, nil, http.StatusOK, &members)
	if diff := cmp.Diff([]string{alice, bob}, slices.Sorted(maps.Keys(members.Joined))); diff != "" {
		t.Errorf("joined members (-want +got):\n%s", diff)
	}

	matrixWaitJoined(t, d.URL(), bobToken, created.RoomID) // the sync API, which the bot reads, has the join too

	keyBefore := readDendriteFile(t, filepath.Join(cfg.Dir, "matrix_key.pem"))
	if err := d.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-d.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}

	// Reuse: the same dir brings back the key, the secret, the accounts and the room.
	d2 := startTestDendrite(t, cfg)
	if diff := cmp.Diff(keyBefore, readDendriteFile(t, filepath.Join(cfg.Dir, "matrix_key.pem"))); diff != "" {
		t.Errorf("signing key changed across restart (-want +got):\n%s", diff)
	}
	aliceAgain, err := d2.RegisterUser(ctx, "alice", alicePassword, true)
	if err != nil {
		t.Fatalf("RegisterUser(alice) after restart: %v", err)
	}
	if diff := cmp.Diff(alice, aliceAgain); diff != "" {
		t.Errorf("user id after restart (-want +got):\n%s", diff)
	}
	bobToken = matrixLogin(t, d2.URL(), "bob", bobPassword)
	matrixCall(t, http.MethodPost, d2.URL()+"/_matrix/client/v3/login", "",
		matrixPasswordLogin("bob", "not-the-password"), http.StatusForbidden, nil)

	var joined struct {
		JoinedRooms []string `json:"joined_rooms"`
	}
	matrixCall(t, http.MethodGet, d2.URL()+"/_matrix/client/v3/joined_rooms", bobToken, nil, http.StatusOK, &joined)
	if diff := cmp.Diff([]string{created.RoomID}, joined.JoinedRooms); diff != "" {
		t.Errorf("bob's rooms after restart (-want +got):\n%s", diff)
	}
	matrixWaitJoined(t, d2.URL(), bobToken, created.RoomID)
	if err := d2.Stop(); err != nil {
		t.Fatalf("Stop after restart: %v", err)
	}
}

// TestDendriteStopsOrphan covers a Dendrite left running by a parent that died
// without Stop: the next start on the same dir stops it and takes over.
func TestDendriteStopsOrphan(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	binDir, err := EnsureDendrite(t.Context(), nil)
	if err != nil {
		t.Fatalf("EnsureDendrite: %v", err)
	}
	cfg := DendriteConfig{Dir: t.TempDir(), BinDir: binDir, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	orphan, err := StartDendrite(t.Context(), cfg)
	if err != nil {
		t.Fatalf("StartDendrite: %v", err)
	}
	orphan.unlockDir() // what the kernel does when the owning process dies

	d := startTestDendrite(t, cfg)
	<-orphan.Done()
	if err := orphan.Stop(); err == nil {
		t.Error("Stop of the replaced orphan: err = nil, want an already-exited error")
	}
	if _, err := d.RegisterUser(t.Context(), "carol", "carol-password-1", false); err != nil {
		t.Errorf("RegisterUser on the new server: %v", err)
	}
}

// TestDendriteStartFailureShowsLog checks that a Dendrite that dies during
// start-up yields an error carrying its own explanation from the log.
func TestDendriteStartFailureShowsLog(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	binDir, err := EnsureDendrite(t.Context(), nil)
	if err != nil {
		t.Fatalf("EnsureDendrite: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "matrix_key.pem"), []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := StartDendrite(t.Context(), DendriteConfig{Dir: dir, BinDir: binDir})
	if err == nil {
		_ = d.Stop()
		t.Fatal("StartDendrite with a broken signing key: err = nil, want an error")
	}
	for _, want := range []string{"exited before it was ready", "private_key"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("StartDendrite error does not mention %q:\n%v", want, err)
		}
	}
}

func startTestDendrite(t *testing.T, cfg DendriteConfig) *Dendrite {
	t.Helper()
	start := time.Now()
	d, err := StartDendrite(t.Context(), cfg)
	if err != nil {
		t.Fatalf("StartDendrite: %v", err)
	}
	t.Logf("dendrite ready at %s after %s", d.URL(), time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return d
}

func matrixPasswordLogin(user, password string) map[string]any {
	return map[string]any{
		"type":       "m.login.password",
		"identifier": map[string]any{"type": "m.id.user", "user": user},
		"password":   password,
	}
}

func matrixLogin(t *testing.T, baseURL, user, password string) (accessToken string) {
	t.Helper()
	var resp struct {
		AccessToken string `json:"access_token"`
	}
	matrixCall(t, http.MethodPost, baseURL+"/_matrix/client/v3/login", "", matrixPasswordLogin(user, password), http.StatusOK, &resp)
	if resp.AccessToken == "" {
		t.Fatalf("login %s: no access_token", user)
	}
	return resp.AccessToken
}

// matrixCall sends a client-server API request and fails the test unless the
// response has status want; out, if not nil, receives the JSON body.
func matrixCall(t *testing.T, method, endpoint, token string, in any, want int, out any) {
	t.Helper()
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("%s %s: %v", method, endpoint, err)
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, endpoint, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, endpoint, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, endpoint, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, endpoint, err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, endpoint, resp.StatusCode, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, endpoint, raw, err)
		}
	}
}

// matrixWaitJoined long-polls /sync as token until roomID is among the joined
// rooms. The test's deadline bounds the wait.
func matrixWaitJoined(t *testing.T, baseURL, token, roomID string) {
	t.Helper()
	since := ""
	for {
		q := url.Values{"timeout": {"10000"}}
		if since != "" {
			q.Set("since", since)
		}
		var resp struct {
			NextBatch string `json:"next_batch"`
			Rooms     struct {
				Join map[string]json.RawMessage `json:"join"`
			} `json:"rooms"`
		}
		matrixCall(t, http.MethodGet, baseURL+"/_matrix/client/v3/sync?"+q.Encode(), token, nil, http.StatusOK, &resp)
		if _, ok := resp.Rooms.Join[roomID]; ok {
			return
		}
		since = resp.NextBatch
	}
}

func readDendriteFile(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// skipIfShort skips a test that starts Dendrite under go test -short, as
// testenv.Homeserver does for the packages above this one (which this
// package cannot import).
func skipIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped under -short: it starts the Dendrite homeserver")
	}
}
