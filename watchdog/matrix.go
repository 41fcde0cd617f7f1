package watchdog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/zerobridge"
)

// DeviceID is the device the watchdog logs in as with a password: the
// same one on every start, so restarts do not pile up devices.
const DeviceID = id.DeviceID("NOMOSWATCHDOG")

// ErrEncryptedRoom is why NewMatrix refuses an encrypted room: the
// watchdog sends in the clear (it keeps no crypto store, so it has nothing
// to lose on a fresh machine), and a plain message in an encrypted room is
// shown with a warning, or not at all by clients that hide them.
var ErrEncryptedRoom = errors.New("the room is encrypted, and the watchdog sends without encryption: give it an unencrypted room of its own with the operators in it (docs/operations.md, \"The watchdog\")")

// MatrixConfig is the watchdog's own Matrix account and where it pages.
type MatrixConfig struct {
	HomeserverURL string
	UserID        id.UserID
	// Password or AccessToken; one is required.
	Password    string
	AccessToken string
	// Room is where it posts. It must not be encrypted; the account joins
	// it (it must be invited).
	Room id.RoomID
	// Operators are mentioned in every page.
	Operators []id.UserID
	Logger    *slog.Logger
}

// Matrix is a Pager that posts in one room from the watchdog's account,
// without end-to-end encryption.
type Matrix struct {
	cli       *mautrix.Client
	room      id.RoomID
	operators []id.UserID
}

var _ Pager = (*Matrix)(nil)

// NewMatrix logs in, joins the room and checks that it is not encrypted.
func NewMatrix(ctx context.Context, cfg MatrixConfig) (*Matrix, error) {
	if len(cfg.Operators) == 0 {
		return nil, errors.New("watchdog: name the operators to page")
	}
	cli, err := mautrix.NewClient(cfg.HomeserverURL, cfg.UserID, cfg.AccessToken)
	if err != nil {
		return nil, fmt.Errorf("watchdog: matrix client: %w", err)
	}
	if cfg.Logger != nil {
		cli.Log = zerobridge.Logger(cfg.Logger)
	}
	if cfg.AccessToken == "" {
		_, err = cli.Login(ctx, &mautrix.ReqLogin{
			Type:             mautrix.AuthTypePassword,
			Identifier:       mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: cfg.UserID.String()},
			Password:         cfg.Password,
			DeviceID:         DeviceID,
			StoreCredentials: true,
		})
		if err != nil {
			return nil, fmt.Errorf("watchdog: log in as %s: %w", cfg.UserID, err)
		}
	} else if who, err := cli.Whoami(ctx); err != nil {
		return nil, fmt.Errorf("watchdog: the access token of %s: %w", cfg.UserID, err)
	} else if who.UserID != cfg.UserID {
		return nil, fmt.Errorf("watchdog: the access token is %s's, not %s's", who.UserID, cfg.UserID)
	}
	if _, err := cli.JoinRoomByID(ctx, cfg.Room); err != nil {
		return nil, fmt.Errorf("watchdog: join %s (invite %s first): %w", cfg.Room, cfg.UserID, err)
	}
	var enc event.EncryptionEventContent
	switch err := cli.StateEvent(ctx, cfg.Room, event.StateEncryption, "", &enc); {
	case err == nil && enc.Algorithm != "":
		return nil, fmt.Errorf("watchdog: room %s: %w", cfg.Room, ErrEncryptedRoom)
	case err != nil && !errors.Is(err, mautrix.MNotFound):
		return nil, fmt.Errorf("watchdog: read the encryption of %s: %w", cfg.Room, err)
	}
	return &Matrix{cli: cli, room: cfg.Room, operators: cfg.Operators}, nil
}

// Send posts m: a page as m.text mentioning the operators (in m.mentions
// and by name in the body, for clients without intentional mentions), and
// anything else as m.notice, which mentions nobody.
func (m *Matrix) Send(ctx context.Context, msg Message) error {
	content := &event.MessageEventContent{MsgType: event.MsgNotice, Body: msg.Text, Mentions: &event.Mentions{}}
	if msg.Page {
		names := make([]string, len(m.operators))
		for i, op := range m.operators {
			names[i] = op.String()
		}
		content.MsgType = event.MsgText
		content.Body = msg.Text + " " + strings.Join(names, " ")
		content.Mentions = &event.Mentions{UserIDs: m.operators}
	}
	if _, err := m.cli.SendMessageEvent(ctx, m.room, event.EventMessage, content); err != nil {
		return fmt.Errorf("send to %s: %w", m.room, err)
	}
	return nil
}
