//go:build nomosdev

package main

import (
	"context"
	"fmt"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/devstack"
)

// The dev stack's Matrix accounts and ops room.

// ensureDevAccounts registers @nomos, @operator and @guest, keeping the
// passwords of an earlier run.
func ensureDevAccounts(ctx context.Context, hs *devstack.Dendrite, s *devState, resetCmd string) error {
	accounts := []struct {
		localpart string
		acct      *devAccount
	}{{"nomos", &s.Bot}, {"operator", &s.Operator}, {"guest", &s.Guest}}
	for _, a := range accounts {
		if a.acct.Password == "" {
			a.acct.Password = randomToken(12)
		}
		userID, err := hs.RegisterUser(ctx, a.localpart, a.acct.Password, false)
		if err != nil {
			return err
		}
		a.acct.UserID = userID
		// A user registered by an earlier run whose dev.json was lost has
		// another password; logging in tells us so plainly.
		if _, err := devLogin(ctx, s.HomeserverURL, *a.acct); err != nil {
			return fmt.Errorf("log in as %s with the password in dev.json: %w (run `%s` to start afresh)", userID, err, resetCmd)
		}
	}
	s.BotUserID = s.Bot.UserID
	return nil
}

func devLogin(ctx context.Context, hsURL string, a devAccount) (*mautrix.Client, error) {
	cli, err := mautrix.NewClient(hsURL, "", "")
	if err != nil {
		return nil, err
	}
	_, err = cli.Login(ctx, &mautrix.ReqLogin{
		Type:             mautrix.AuthTypePassword,
		Identifier:       mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: a.UserID},
		Password:         a.Password,
		DeviceID:         id.DeviceID("NOMOSDEV"),
		StoreCredentials: true,
	})
	if err != nil {
		return nil, err
	}
	return cli, nil
}

// ensureDevRoom reuses the ops room of an earlier run when all three users
// are still in it and it is encrypted as asked, and otherwise creates it:
// the operator creates the room and invites the bot and the guest, who
// join. An encrypted room cannot be made plain again, so asking for the
// other kind makes a new room.
func ensureDevRoom(ctx context.Context, s *devState, encrypted bool) error {
	op, err := devLogin(ctx, s.HomeserverURL, s.Operator)
	if err != nil {
		return err
	}
	// The dev homeserver keeps a session whose logout failed; it harms nothing.
	defer func() { _, _ = op.Logout(context.WithoutCancel(ctx)) }()
	if s.RoomID != "" && s.Encrypted == encrypted {
		members, err := op.JoinedMembers(ctx, id.RoomID(s.RoomID))
		if err == nil {
			_, bot := members.Joined[id.UserID(s.Bot.UserID)]
			_, guest := members.Joined[id.UserID(s.Guest.UserID)]
			if bot && guest {
				return nil
			}
		}
	}
	req := &mautrix.ReqCreateRoom{
		Name:   "Nomos ops",
		Topic:  "Ask Nomos about the fleet; approve its plans with ✅ or a reply.",
		Preset: "private_chat",
		Invite: []id.UserID{id.UserID(s.Bot.UserID), id.UserID(s.Guest.UserID)},
	}
	if encrypted {
		req.Topic = "Ask Nomos about the fleet; approve its plans by replying to the card from a verified session."
		req.InitialState = []*event.Event{{Type: event.StateEncryption,
			Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}}}}
	}
	resp, err := op.CreateRoom(ctx, req)
	if err != nil {
		return fmt.Errorf("create ops room: %w", err)
	}
	s.RoomID, s.Encrypted = resp.RoomID.String(), encrypted
	for _, a := range []devAccount{s.Bot, s.Guest} {
		cli, err := devLogin(ctx, s.HomeserverURL, a)
		if err != nil {
			return err
		}
		_, err = cli.JoinRoomByID(ctx, resp.RoomID)
		_, _ = cli.Logout(context.WithoutCancel(ctx))
		if err != nil {
			return fmt.Errorf("%s joins the ops room: %w", a.UserID, err)
		}
	}
	return nil
}
