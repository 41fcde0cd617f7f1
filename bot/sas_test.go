package bot_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

// jsClient is the operator's client in testdata/sasclient: matrix-js-sdk
// with its Rust crypto, the stack Element Web runs on.
type jsClient struct {
	// device is the client's session.
	device string
	in     io.WriteCloser
	mu     sync.Mutex
	next   int
	answer map[int]chan map[string]any
}

// sasClientDir holds the client and its package-lock.json.
const sasClientDir = "testdata/sasclient"

// startJSClient logs the operator in with a new session of the JS client.
// It installs the client's packages from the lockfile when they are
// missing; make prepare installs Node and npm.
func startJSClient(t *testing.T, u *testenv.MatrixUser, env ...string) *jsClient {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed, and the matrix-js-sdk client needs it: run make prepare")
	}
	if _, err := os.Stat(filepath.Join(sasClientDir, "node_modules", "matrix-js-sdk")); err != nil {
		npm := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--prefer-offline")
		npm.Dir = sasClientDir
		if out, err := npm.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", sasClientDir, err, out)
		}
	}
	cmd := exec.Command(node, "client.mjs")
	cmd.Dir = sasClientDir
	cmd.Env = append(os.Environ(), "HOMESERVER="+testenv.Homeserver(t).URL(), "USER_ID="+u.UserID.String(), "PASSWORD="+u.Password)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = testWriter{t}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	js := &jsClient{in: in, answer: map[int]chan map[string]any{}}
	ready := make(chan map[string]any, 1)
	js.answer[0] = ready
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var msg map[string]any
			if err := json.Unmarshal(sc.Bytes(), &msg); err != nil {
				t.Logf("js client: %s", sc.Bytes())
				continue
			}
			n, _ := msg["id"].(float64)
			js.mu.Lock()
			ch := js.answer[int(n)]
			js.mu.Unlock()
			if ch != nil {
				ch <- msg
			}
		}
	}()
	t.Cleanup(func() {
		_, _ = io.WriteString(in, `{"cmd":"quit"}`+"\n")
		_ = in.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = cmd.Wait()
	})
	js.device = js.await(t, ready, "log in")["device"].(string)
	return js
}

// send sends a command and returns the channel its answers come on.
func (js *jsClient) send(t *testing.T, cmd map[string]any) chan map[string]any {
	t.Helper()
	js.mu.Lock()
	js.next++
	n := js.next
	ch := make(chan map[string]any, 4)
	js.answer[n] = ch
	js.mu.Unlock()
	cmd["id"] = n
	line, _ := json.Marshal(cmd)
	if _, err := js.in.Write(append(line, '\n')); err != nil {
		t.Fatal(err)
	}
	return ch
}

// do sends a command and waits for its answer, failing on an error.
func (js *jsClient) do(t *testing.T, cmd map[string]any) map[string]any {
	t.Helper()
	return js.await(t, js.send(t, cmd), fmt.Sprint(cmd["cmd"]))
}

func (js *jsClient) await(t *testing.T, ch chan map[string]any, what string) map[string]any {
	t.Helper()
	msg := js.answerOf(t, ch, what)
	if e, ok := msg["error"]; ok {
		t.Fatalf("js client %s: %v", what, e)
	}
	return msg
}

// answerOf waits for the next answer on ch, error or not.
func (js *jsClient) answerOf(t *testing.T, ch chan map[string]any, what string) map[string]any {
	t.Helper()
	select {
	case msg := <-ch:
		return msg
	case <-time.After(90 * time.Second):
		t.Fatalf("js client %s: no answer", what)
		return nil
	}
}

// testWriter logs the JS client's stderr.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("js client: %s", strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestIdentityResetVerifiedByEmoji: an operator's approvals count from
// their cross-signed sessions (TOFU); after they reset their identity in a
// matrix-js-sdk client (Element's crypto stack), an encrypted "go ahead"
// does not count, and the bot says that their identity changed and how to
// verify it. The operator verifies the bot's session by emoji: their side
// alone (all that a password gets an attacker) leaves the "go ahead"
// uncounted; once someone on the host confirms the emoji the bot showed
// (`nomos verify CODE`), it counts, and so does one from another session
// the new identity signs.
func TestIdentityResetVerifiedByEmoji(t *testing.T) {
	t.Parallel()
	b := setup(t, withEncryption(), withOpsRoom())
	crossSignOperator(t, b, b.opCrypto)

	b.say(t, b.operator, "restart jellyfin", "")
	first := b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval"))
	b.say(t, b.operator, "go ahead", first.ID)
	b.waitFor(t, b.cardEdited(first.ID, "succeeded"))

	js := startJSClient(t, b.operator)
	reset := js.do(t, map[string]any{"cmd": "reset"})

	b.say(t, b.operator, "restart gitea", "")
	card := b.waitFor(t, b.botSays("restart gitea", "awaiting approval"))
	// Element sends reactions in the clear, so in this encrypted room the
	// bot offers no ✅ under the card; ❌ denies from any session.
	b.waitFor(t, reactedBy(b.botUser.UserID, card.ID, "❌"))
	if got := b.botReactions(t, card.ID); len(got) != 1 || got[0] != "❌" {
		t.Errorf("the bot reacted %v to a card in an encrypted room, want only ❌", got)
	}
	refused := js.do(t, map[string]any{"cmd": "say", "room": b.room.String(), "body": "go ahead", "reply_to": card.ID.String()})
	howTo := b.waitFor(t, b.botSays("your identity changed since I first saw it", b.botUser.UserID.String(), "nomos verify"))
	if howTo.Content.AsMessage().RelatesTo.GetThreadParent() != card.ID {
		t.Errorf("the identity-changed notice is not in the card's thread")
	}
	b.waitRefused(t, id.EventID(refused["event_id"].(string)))

	botDevice := b.bot.DeviceID()
	verifying := js.send(t, map[string]any{"cmd": "verify", "user": b.botUser.UserID.String(), "device": botDevice.String()})
	shown := js.await(t, verifying, "verify")
	// A person compares the pictures; clients differ in variation
	// selectors (☎ and ☎️), so the names are compared.
	var theirs []string
	for _, e := range shown["sas"].([]any) {
		theirs = append(theirs, fmt.Sprint(e.([]any)[1]))
	}
	notice := b.waitFor(t, b.botSays("is verifying me by emoji", "nomos verify"))
	vs, err := b.store.Verifications(b.ctx)
	if err != nil || len(vs) != 1 {
		t.Fatalf("verifications %+v (%v), want the one shown", vs, err)
	}
	var ours []string
	for _, e := range vs[0].Emoji {
		_, name, _ := strings.Cut(e, " ")
		ours = append(ours, name)
		if !strings.Contains(notice.Content.AsMessage().Body, e) {
			t.Errorf("the room's notice %q lacks %q", notice.Content.AsMessage().Body, e)
		}
	}
	if vs[0].UserID != b.operator.UserID.String() || strings.Join(ours, " ") != strings.Join(theirs, " ") {
		t.Fatalf("the host sees %+v; the operator's client shows %v", vs[0], theirs)
	}

	// The operator's client has confirmed the emoji; without the host the
	// new identity still does not count.
	early := js.do(t, map[string]any{"cmd": "say", "room": b.room.String(), "body": "go ahead", "reply_to": card.ID.String()})
	b.waitRefused(t, id.EventID(early["event_id"].(string)))
	if x := b.execFor(t, card.ID); x.State != store.StateAwaitingApproval {
		t.Fatalf("an approval before the host confirmed moved the plan to %s", x.State)
	}

	if _, err := b.store.ConfirmVerification(b.ctx, vs[0].Code, "root on the Nomos host"); err != nil {
		t.Fatal(err)
	}
	js.await(t, verifying, "verify to finish")
	b.waitFor(t, b.botSays("Verified "+b.operator.UserID.String()+" by emoji"))

	approval := js.do(t, map[string]any{"cmd": "say", "room": b.room.String(), "body": "go ahead", "reply_to": card.ID.String()})
	b.waitFor(t, b.cardEdited(card.ID, "succeeded"))
	if x := b.execFor(t, card.ID); x.Approval == nil || x.Approval.EventID != approval["event_id"] {
		t.Errorf("approval %+v, want the verified identity's go ahead %v", x.Approval, approval["event_id"])
	}

	// A new session of the operator's, which the new identity signs,
	// counts as well: the bot trusts the identity, not one session.
	phone := startJSClient(t, b.operator, "RECOVERY_KEY="+reset["recovery_key"].(string))
	phone.do(t, map[string]any{"cmd": "restore"})
	b.say(t, b.operator, "restart postgres", "")
	third := b.waitFor(t, b.botSays("restart postgres", "awaiting approval"))
	phone.do(t, map[string]any{"cmd": "say", "room": b.room.String(), "body": "go ahead", "reply_to": third.ID.String()})
	b.waitFor(t, b.cardEdited(third.ID, "succeeded"))
}

// TestVerificationFromANonOperatorIsCancelled: the bot verifies its
// operators only; anyone else in the room who asks to verify it gets a
// cancellation, and nothing is shown for the host to confirm.
func TestVerificationFromANonOperatorIsCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t, withEncryption(), withOpsRoom())
	guest := startJSClient(t, b.guest)
	msg := guest.answerOf(t, guest.send(t, map[string]any{"cmd": "verify", "user": b.botUser.UserID.String(), "device": b.bot.DeviceID().String()}), "verify")
	if e, _ := msg["error"].(string); !strings.Contains(e, "cancelled") {
		t.Fatalf("a non-operator's verification ended with %v, want it cancelled", msg)
	}
	if vs, err := b.store.Verifications(b.ctx); err != nil || len(vs) != 0 {
		t.Errorf("verifications shown to the host: %+v (%v), want none", vs, err)
	}
}
