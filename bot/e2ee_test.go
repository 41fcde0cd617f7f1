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
)

// TestEncryptedRoom runs a command and an approval in an end-to-end
// encrypted room, and checks that the bot cross-signed its device.
func TestEncryptedRoom(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := b.ctx
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
	if err := helper.Init(ctx); err != nil {
		t.Fatal(err)
	}
	op.Crypto = helper
	b.opCrypto = helper
	syncCtx, stopSync := context.WithCancel(context.Background())
	syncDone := make(chan struct{})
	go func() { defer close(syncDone); _ = op.SyncWithContext(syncCtx) }()
	t.Cleanup(func() { stopSync(); <-syncDone })

	resp, err := op.CreateRoom(ctx, &mautrix.ReqCreateRoom{
		Preset: "private_chat", Name: "encrypted ops", Invite: []id.UserID{b.botUser.UserID},
		InitialState: []*event.Event{{
			Type:    event.StateEncryption,
			Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.room = resp.RoomID
	b.waitFor(t, func(e *event.Event) bool {
		return e.Type == event.StateMember && e.GetStateKey() == b.botUser.UserID.String() && e.Content.AsMember().Membership == event.MembershipJoin
	})
	// Wait until the operator's own sync knows the bot joined, so the room
	// key is shared with the bot's device.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		members, _ := op.StateStore.GetRoomJoinedOrInvitedMembers(ctx, b.room)
		enc, _ := op.StateStore.IsEncrypted(ctx, b.room)
		joined := false
		for _, m := range members {
			joined = joined || m == b.botUser.UserID
		}
		if enc && joined {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	b.say(t, b.operator, "restart jellyfin", "")
	card := b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval"))
	if _, err := op.SendReaction(ctx, b.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
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
