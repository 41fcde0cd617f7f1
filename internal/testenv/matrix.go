package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/devstack"
)

var (
	hsOnce sync.Once
	hs     *devstack.Dendrite
	hsErr  error
	userN  atomic.Int64
)

// Homeserver returns the Dendrite shared by the tests of this package,
// starting it on first use. It runs on a free loopback port with
// federation and open registration off, and stops when the package's
// tests end (see Main). Under go test -short the test is skipped instead:
// -short runs the fast half of the suite, without a homeserver; make test
// and CI run everything.
func Homeserver(t testing.TB) *devstack.Dendrite {
	t.Helper()
	SkipIfShort(t, "it needs the Dendrite homeserver")
	hsOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		var bin string
		bin, hsErr = devstack.EnsureDendrite(ctx, nil)
		if hsErr != nil {
			return
		}
		var dbURL string
		if dbURL, hsErr = HomeserverDatabaseURL(ctx); hsErr != nil {
			return
		}
		var dir string
		dir, hsErr = os.MkdirTemp("", "nomos-dendrite-*")
		if hsErr != nil {
			return
		}
		hs, hsErr = devstack.StartDendrite(ctx, devstack.DendriteConfig{
			Dir: filepath.Join(dir, "hs"), Listen: "127.0.0.1:0", BinDir: bin, DatabaseURL: dbURL,
		})
		if hsErr != nil {
			return
		}
		atShutdown(func() {
			if err := hs.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "testenv: stop dendrite: %v\n", err)
			}
			_ = os.RemoveAll(dir)
		})
		atFailure(func() { PrintHomeserverLog(hs.LogPath()) })
	})
	if hsErr != nil {
		t.Fatalf("testenv: dendrite: %v", hsErr)
	}
	return hs
}

// MatrixUser is a registered account on the test homeserver.
type MatrixUser struct {
	UserID   id.UserID
	Password string
	Client   *mautrix.Client
}

// NewMatrixUser registers a fresh user whose localpart starts with prefix
// and returns it logged in. Names are unique across the package's tests.
func NewMatrixUser(t testing.TB, prefix string) *MatrixUser {
	t.Helper()
	h := Homeserver(t)
	ctx := Context(t)
	localpart := fmt.Sprintf("%s%d%s", prefix, userN.Add(1), randomHex(2))
	password := randomHex(8)
	userID, err := h.RegisterUser(ctx, localpart, password, false)
	if err != nil {
		t.Fatalf("testenv: register %s: %v", localpart, err)
	}
	cli, err := mautrix.NewClient(h.URL(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = cli.Login(ctx, &mautrix.ReqLogin{
		Type:             mautrix.AuthTypePassword,
		Identifier:       mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: userID},
		Password:         password,
		StoreCredentials: true,
	})
	if err != nil {
		t.Fatalf("testenv: log in as %s: %v", userID, err)
	}
	return &MatrixUser{UserID: id.UserID(userID), Password: password, Client: cli}
}

// HomeserverDatabaseURL makes an empty Postgres database for a Dendrite of
// the tests and returns its URL; it is dropped when the package's tests
// end. On SQLite, Dendrite answers some of the concurrent requests a test
// suite makes with HTTP 500 ("database is locked").
func HomeserverDatabaseURL(ctx context.Context) (string, error) {
	p, err := postgres(ctx)
	if err != nil {
		return "", err
	}
	name := "nomos_dendrite_" + randomHex(6)
	if err := p.EnsureDatabase(ctx, name); err != nil {
		return "", err
	}
	atShutdown(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.DropDatabase(ctx, name); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: leaving %s behind: %v\n", name, err)
		}
	})
	return p.URL(name), nil
}

// PrintHomeserverLog prints the last of what a Dendrite logged above info
// level, so that a failure the homeserver caused (an HTTP 500 a test met)
// says why; the log itself goes with the test's temporary directory.
func PrintHomeserverLog(path string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: dendrite log: %v\n", err)
		return
	}
	var lines []string
	for line := range strings.Lines(string(raw)) {
		if strings.Contains(line, "level=warn") || strings.Contains(line, "level=error") ||
			strings.Contains(line, "level=fatal") || strings.Contains(line, "panic") {
			lines = append(lines, line)
		}
	}
	const keep = 60
	total := len(lines)
	if len(lines) > keep {
		lines = lines[len(lines)-keep:]
	}
	fmt.Fprintf(os.Stderr, "testenv: dendrite's warnings and errors (last %d of %d):\n%s", len(lines), total, strings.Join(lines, ""))
}
