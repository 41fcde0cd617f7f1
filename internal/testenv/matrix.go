package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
		var dir string
		dir, hsErr = os.MkdirTemp("", "nomos-dendrite-*")
		if hsErr != nil {
			return
		}
		hs, hsErr = devstack.StartDendrite(ctx, devstack.DendriteConfig{
			Dir: filepath.Join(dir, "hs"), Listen: "127.0.0.1:0", BinDir: bin,
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
