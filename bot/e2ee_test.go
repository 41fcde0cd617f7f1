package bot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto/cryptohelper"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

// withEncryption gives the operator an end-to-end encryption device (not
// cross-signed yet, its helper in b.opCrypto) and makes the bundle's room
// encrypted, with verified devices required there.
func withEncryption() func(*bundle) {
	return func(b *bundle) { b.encrypted = true }
}

// operatorCrypto gives the operator an end-to-end encryption device that
// syncs until the test ends.
func operatorCrypto(t testing.TB, b *bundle) {
	t.Helper()
	opDB, err := dbutil.NewWithDialect(testenv.DatabaseURL(t), "pgx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { opDB.Close() })
	op := b.operator.Client
	helper, err := cryptohelper.NewCryptoHelper(op, []byte("operator pickle key for tests"), opDB)
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Init(b.ctx); err != nil {
		t.Fatal(err)
	}
	op.Crypto = helper
	b.opCrypto = helper
	syncCtx, stopSync := context.WithCancel(context.Background())
	syncDone := make(chan struct{})
	go func() { defer close(syncDone); _ = op.SyncWithContext(syncCtx) }()
	t.Cleanup(func() { stopSync(); <-syncDone })
}

// encryptionState is the initial state that makes a new room encrypted.
func encryptionState() []*event.Event {
	return []*event.Event{{
		Type:    event.StateEncryption,
		Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}},
	}}
}

// awaitKeyShare waits until the operator's own sync knows the bot joined
// the encrypted room, so the room key is shared with the bot's device.
func awaitKeyShare(t testing.TB, b *bundle) {
	t.Helper()
	op := b.operator.Client
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		members, _ := op.StateStore.GetRoomJoinedOrInvitedMembers(b.ctx, b.room)
		enc, _ := op.StateStore.IsEncrypted(b.ctx, b.room)
		joined := false
		for _, m := range members {
			joined = joined || m == b.botUser.UserID
		}
		if enc && joined {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// crossSignOperator does what verifying a session in Element does: it
// creates the operator's cross-signing keys and signs their device.
func crossSignOperator(t *testing.T, b *bundle, helper *cryptohelper.CryptoHelper) {
	t.Helper()
	mach := helper.Machine()
	if _, _, err := mach.GenerateAndUploadCrossSigningKeysWithPassword(b.ctx, b.operator.Password, ""); err != nil {
		t.Fatal(err)
	}
	if err := mach.SignOwnDevice(b.ctx, mach.OwnIdentity()); err != nil {
		t.Fatal(err)
	}
	if err := mach.SignOwnMasterKey(b.ctx); err != nil {
		t.Fatal(err)
	}
}

// reactEncrypted sends an encrypted reaction, as a client that encrypts
// reactions does (Element sends them in the clear; SendReaction does too).
func reactEncrypted(t *testing.T, b *bundle, helper *cryptohelper.CryptoHelper, target id.EventID, key string) id.EventID {
	t.Helper()
	content := &event.ReactionEventContent{RelatesTo: event.RelatesTo{Type: event.RelAnnotation, EventID: target, Key: key}}
	enc, err := helper.Encrypt(b.ctx, b.room, event.EventReaction, content)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.operator.Client.SendMessageEvent(b.ctx, b.room, event.EventEncrypted, enc)
	if err != nil {
		t.Fatal(err)
	}
	return resp.EventID
}

// TestEncryptedRoom runs a command and an approval in an end-to-end
// encrypted room, and checks that the bot cross-signed its device.
func TestEncryptedRoom(t *testing.T) {
	t.Parallel()
	b := setup(t, withEncryption())
	ctx := b.ctx
	helper := b.opCrypto
	crossSignOperator(t, b, helper)
	op := b.operator.Client

	b.say(t, b.operator, "restart jellyfin", "")
	card := b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval", "from a verified session"))
	b.say(t, b.operator, "go ahead", card.ID)
	b.waitFor(t, b.cardEdited(card.ID, "succeeded"))

	// Everything the bot said in this room went out encrypted.
	msgs, err := op.Messages(ctx, b.room, "", "", mautrix.DirectionBackward, nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range msgs.Chunk {
		if e.Sender == b.botUser.UserID && e.Type == event.EventMessage {
			t.Errorf("the bot sent a plaintext message in an encrypted room: %s", e.ID)
		}
	}

	// The bot's device is signed by its self-signing key.
	keys, err := op.QueryKeys(ctx, &mautrix.ReqQueryKeys{DeviceKeys: mautrix.DeviceKeysRequest{b.botUser.UserID: {}}})
	if err != nil {
		t.Fatal(err)
	}
	ssk, ok := keys.SelfSigningKeys[b.botUser.UserID]
	if !ok {
		t.Fatal("the bot published no self-signing key")
	}
	sskKey := ssk.FirstKey()
	signed := false
	for _, dev := range keys.DeviceKeys[b.botUser.UserID] {
		for keyID := range dev.Signatures[b.botUser.UserID] {
			if strings.HasSuffix(string(keyID), string(sskKey)) {
				signed = true
			}
		}
	}
	if !signed {
		t.Errorf("no device of the bot is signed by its self-signing key %s", sskKey)
	}
}

// TestApprovalNeedsVerifiedDevice: in an encrypted room, an operator's ✅
// from a device they have not cross-signed does not approve, and the bot
// says once, in the card's thread, how to verify it; a ✅ sent in the
// clear does not approve either. Once the operator cross-signs that
// device, its next ✅ approves.
func TestApprovalNeedsVerifiedDevice(t *testing.T) {
	t.Parallel()
	b := setup(t, withEncryption())
	helper := b.opCrypto
	b.say(t, b.operator, "restart jellyfin", "")
	card := b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval", "from a verified session"))

	first := reactEncrypted(t, b, helper, card.ID, "✅")
	howTo := b.waitFor(t, b.botSays("your approval was not counted", "you have not verified", "Settings → Sessions", string(b.operator.Client.DeviceID)))
	if howTo.Content.AsMessage().RelatesTo.GetThreadParent() != card.ID {
		t.Errorf("the how-to-verify reply is not in the card's thread")
	}
	second := reactEncrypted(t, b, helper, card.ID, "👍")
	plain, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "✅")
	if err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.botSays("your approval was not counted", "it was not encrypted"))
	b.waitRefused(t, second)
	b.waitRefused(t, plain.EventID)
	if x := b.execFor(t, card.ID); x.State != store.StateAwaitingApproval {
		t.Fatalf("an unverified device's approval moved the plan to %s", x.State)
	}
	if n := countContaining(b.botBodies(t), "you have not verified"); n != 1 {
		t.Errorf("%d how-to-verify replies for one device and card, want 1", n)
	}

	crossSignOperator(t, b, helper)
	if _, err := b.operator.Client.RedactEvent(b.ctx, b.room, first); err != nil {
		t.Fatal(err)
	}
	approval := reactEncrypted(t, b, helper, card.ID, "✅")
	b.waitFor(t, b.cardEdited(card.ID, "succeeded"))
	x := b.execFor(t, card.ID)
	if x.Approval == nil || x.Approval.EventID != approval.String() || x.Approval.Method != "reaction" {
		t.Errorf("approval %+v, want the verified device's ✅ %s", x.Approval, approval)
	}
	if n := b.count(t, "pct exec 101 -- systemctl restart jellyfin.service"); n != 1 {
		t.Errorf("labsim ran the restart %d times, want once", n)
	}
}

// waitRefused waits until the approval carried by eventID has been refused
// and audited.
func (b *bundle) waitRefused(t *testing.T, eventID id.EventID) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := b.storeQuery(t, `SELECT count(*) FROM audit_log WHERE action = 'execution.decision_refused' AND detail->>'event_id' = '`+eventID.String()+`'`, &n)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the approval %s was never refused", eventID)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestUndecryptableMessageIsNoticedOncePerSession: messages encrypted
// with a room key the bot never received get one notice for the sender's
// session, not one per message, after the bot has waited for the key.
func TestUndecryptableMessageIsNoticedOncePerSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	content := map[string]any{
		"algorithm":  id.AlgorithmMegolmV1,
		"ciphertext": "AxihVb7xo1HMJHEKb1wUta6VJVTtvUwSeuUC9xCHiB6O0l3QXHT5pZ7gGxunOuV1u8zf5VJoV2WVXLZV5FBAlF+l39NX3o58gXrlXAzBIuLB3SdS3tK97oabNxvY7F4ZRBVPApWkqgDw84osZwh3SiW5hh0UvdQfUazql5Zf+26maiJgaz33MTtSRU7ApSEAsfSbZQ+1cFfGTRZdK5byzvnfY9iD69TSFhqN5G+AU54yq9tNfsdIW5Q56dxZTw2oOttOFpkSNgg",
		"device_id":  "NOTSHARED",
		"sender_key": "8Ky9Ad2WqpI0Q3b9dT6vN8sS0m1H4kZl2Yx3Qe5Rw7A",
		"session_id": "k2R1Yp0x7Q9wE3rT5yU8iO1pA4sD6fG9hJ2kL5zX8cV",
	}
	for range 2 {
		if _, err := b.operator.Client.SendMessageEvent(b.ctx, b.room, event.EventEncrypted, content); err != nil {
			t.Fatal(err)
		}
	}
	b.waitFor(t, b.botSays("could not decrypt a message from "+b.operator.UserID.String()))
	// The bot goes on working; by the time it answers, the second
	// message's failure has long been handled too.
	b.say(t, b.operator, "status", "")
	b.waitFor(t, b.botSays("Fleet status"))
	if n := countContaining(b.botBodies(t), "could not decrypt"); n != 1 {
		t.Errorf("%d undecryptable-message notices, want 1 for one session", n)
	}
}

// TestApprovalCountsOnlyInTheCardsRoom: a reaction or reply decides a
// plan only in the room its card is in. An operator session that the
// encrypted ops room does not trust (here: never cross-signed, as a stolen
// access token would be) cannot get round the rule by inviting the bot to
// a room in the clear and answering the card's event id from there.
func TestApprovalCountsOnlyInTheCardsRoom(t *testing.T) {
	t.Parallel()
	b := setup(t, withEncryption())
	ops := b.room
	b.say(t, b.operator, "restart jellyfin", "")
	card := b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval", "from a verified session"))
	b.execFor(t, card.ID)

	resp, err := b.operator.Client.CreateRoom(b.ctx, &mautrix.ReqCreateRoom{
		Preset: "private_chat", Name: "side room", Invite: []id.UserID{b.botUser.UserID},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.room = resp.RoomID
	b.waitFor(t, func(e *event.Event) bool {
		return e.Type == event.StateMember && e.GetStateKey() == b.botUser.UserID.String() && e.Content.AsMember().Membership == event.MembershipJoin
	})
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	// The reply names a card that is not in this room, and this room is
	// not one for plans anyway.
	b.say(t, b.operator, "yes", card.ID)
	b.barrier(t)

	b.room = ops
	x := b.execFor(t, card.ID)
	if x.State != store.StateAwaitingApproval || x.Approval != nil {
		t.Fatalf("answers from another room moved the plan to %s, approval %+v; want it still awaiting a decision in its own room", x.State, x.Approval)
	}
	if n := b.count(t, "pct exec 101 -- systemctl restart jellyfin.service"); n != 0 {
		t.Errorf("labsim ran the restart %d times", n)
	}
}
