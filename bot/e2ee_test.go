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
