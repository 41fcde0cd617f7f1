package main

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgconn"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/crypto/signatures"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/zerobridge"
)

// checkMatrix checks, in turn, that the homeserver answers, that the bot
// can log in, that it is in each room for plans (encrypted, while verified
// devices are required) and that its device is cross-signed. A step that fails ends the check, since the later ones
// depend on it.
func (d *doctor) checkMatrix(ctx context.Context) []checkLine {
	m := d.cfg.Matrix
	hs, err := mautrix.NewClient(m.HomeserverURL, "", "")
	if err != nil {
		return []checkLine{fail("homeserver: "+err.Error(), "set matrix.homeserver_url to the homeserver's client URL, such as https://matrix.example.org")}
	}
	hs.Log = zerobridge.Logger(d.logger)
	versions, err := hs.Versions(ctx)
	if err != nil || len(versions.Versions) == 0 {
		return []checkLine{fail(fmt.Sprintf("homeserver: %s does not answer GET /_matrix/client/versions: %v", m.HomeserverURL, err),
			"start the homeserver, or set matrix.homeserver_url to its client URL (what Element's sign-in asks for)")}
	}
	lines := []checkLine{pass(fmt.Sprintf("homeserver: %s answers (Matrix %s)", m.HomeserverURL, versions.Versions[len(versions.Versions)-1]))}

	cli, how, err := d.login(ctx)
	if err != nil {
		fix := "check matrix.user_id and matrix.password (or matrix.password_file) against the homeserver"
		if m.AccessToken != "" {
			fix = "matrix.access_token is not valid for " + m.UserID + ": log in again and store the new token"
		}
		return append(lines, fail(fmt.Sprintf("matrix login: %s cannot log in with %s: %v", m.UserID, how, err), fix))
	}
	lines = append(lines, pass(fmt.Sprintf("matrix login: %s logs in with %s", m.UserID, how)))

	lines = append(lines, d.checkRooms(ctx, cli)...)
	if d.cfg.Database.URL != "" {
		lines = append(lines, d.checkDevice(ctx, cli))
	}
	return lines
}

// checkRooms checks each room for plans (matrix.ops_room, matrix.rooms):
// the bot is in it and, while approvals.require_verified_device is on, it
// is encrypted, since the bot takes no plans in one in the clear.
func (d *doctor) checkRooms(ctx context.Context, cli *mautrix.Client) []checkLine {
	m := d.cfg.Matrix
	if m.OpsRoom == "" && len(m.Rooms) == 0 {
		return []checkLine{fail("ops room: none set (matrix.ops_room): the bot takes no plans in any room, and has nowhere to post alerts and MCP requests",
			"create a room for operators, invite "+m.UserID+" from an operator's account, and set matrix.ops_room to the room's id (Element: Room settings → Advanced)")}
	}
	joined, err := cli.JoinedRooms(ctx)
	if err != nil {
		return []checkLine{fail("ops room: cannot list the bot's rooms: "+err.Error(), "try again; the homeserver's log says why it failed")}
	}
	var lines []checkLine
	check := func(label, key, room string) {
		if !slices.Contains(joined.JoinedRooms, id.RoomID(room)) {
			lines = append(lines, fail(fmt.Sprintf("%s: %s is not joined to %s", label, m.UserID, room),
				"invite "+m.UserID+" to the room from an operator's account (matrix.operators): the running bot joins by itself\ncheck that "+key+" is the room's id (Element: room settings, Advanced)"))
			return
		}
		if !d.cfg.Approvals.RequireVerifiedDevice {
			lines = append(lines, pass(fmt.Sprintf("%s: %s is joined to %s (approvals.require_verified_device is off: plans are taken there encrypted or not)", label, m.UserID, room)))
			return
		}
		var enc event.EncryptionEventContent
		if err := cli.StateEvent(ctx, id.RoomID(room), event.StateEncryption, "", &enc); err != nil || enc.Algorithm == "" {
			lines = append(lines, fail(fmt.Sprintf("%s: %s is not encrypted, so the bot takes no plans and counts no decisions there: "+
				"with approvals.require_verified_device on, only a verified session approves, and in a room in the clear a stolen access token could decide unseen", label, room),
				"turn encryption on in the room (Element: Room settings → Security & Privacy → Encrypted; it cannot be turned off again)\n"+
					"or, only for a test stack whose clients cannot encrypt, set approvals.require_verified_device: false"))
			return
		}
		lines = append(lines, pass(fmt.Sprintf("%s: %s is joined to %s, which is encrypted", label, m.UserID, room)))
	}
	if m.OpsRoom != "" {
		check("ops room", "matrix.ops_room", m.OpsRoom)
	}
	for i, r := range m.Rooms {
		check("room for plans", fmt.Sprintf("matrix.rooms[%d]", i), r)
	}
	return lines
}

// doctorDeviceID is the device the doctor logs in as; it logs out again
// when done, which removes it.
const doctorDeviceID = id.DeviceID("NOMOSDOCTOR")

// login logs in as the bot, once per doctor run: with the access token
// (whoami, no new device) or the password (a device of the doctor's own,
// never the bot's, whose session it would end).
func (d *doctor) login(ctx context.Context) (*mautrix.Client, string, error) {
	m := d.cfg.Matrix
	how := "matrix.password"
	if m.AccessToken != "" {
		how = "matrix.access_token"
	}
	if d.session != nil {
		return d.session, how, nil
	}
	cli, err := mautrix.NewClient(m.HomeserverURL, id.UserID(m.UserID), m.AccessToken)
	if err != nil {
		return nil, how, err
	}
	cli.Log = zerobridge.Logger(d.logger)
	if m.AccessToken != "" {
		who, err := cli.Whoami(ctx)
		if err != nil {
			return nil, how, err
		}
		if who.UserID != id.UserID(m.UserID) {
			return nil, how, fmt.Errorf("the token belongs to %s", who.UserID)
		}
	} else {
		_, err = cli.Login(ctx, &mautrix.ReqLogin{
			Type:                     mautrix.AuthTypePassword,
			Identifier:               mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: m.UserID},
			Password:                 m.Password,
			DeviceID:                 doctorDeviceID,
			InitialDeviceDisplayName: "nomos doctor",
			StoreCredentials:         true,
		})
		if err != nil {
			return nil, how, err
		}
	}
	d.session = cli
	return cli, how, nil
}

// checkDevice checks the bot's own device: the crypto store in Postgres
// opens with matrix.pickle_key, the homeserver has that device's keys,
// and the bot's self-signing key, itself signed by its master key, has
// signed them. That is what Element calls a verified session.
func (d *doctor) checkDevice(ctx context.Context, cli *mautrix.Client) checkLine {
	m := d.cfg.Matrix
	db, err := dbutil.NewWithDialect(d.cfg.Database.URL, "pgx")
	if err != nil {
		return fail("bot device: cannot open the crypto store: "+err.Error(), "correct database.url")
	}
	defer db.Close()
	cs := crypto.NewSQLCryptoStore(db, dbutil.NoopLogger, "", "", []byte(m.PickleKey))
	deviceID, err := cs.FindDeviceID(ctx)
	var pgErr *pgconn.PgError
	noTable := errors.As(err, &pgErr) && pgErr.Code == "42P01"
	if noTable || err == nil && deviceID == "" {
		return fail("bot device: the bot has no device yet", "start `nomos bot` once: it creates its device and cross-signing keys")
	}
	if err != nil {
		return fail("bot device: cannot read the crypto store: "+err.Error(), "check database.url; the bot keeps its device in that database")
	}
	acct, err := cs.GetAccount(ctx)
	if err != nil || acct == nil {
		return fail(fmt.Sprintf("bot device: the end-to-end keys of device %s do not open with matrix.pickle_key: %v", deviceID, err),
			"set matrix.pickle_key (or pickle_key_file) back to the key the bot first ran with\nif it is lost, the bot needs a new device: make a new, empty database for it (nomos migrate and seed), then start it; its recovery key (matrix.recovery_key_file) verifies the new device\nfor the dev stack: nomos dev -reset")
	}
	ownKey, _, err := acct.Internal.IdentityKeys()
	if err != nil {
		return fail("bot device: cannot read the device's keys: "+err.Error(), "restart the bot; its log says more")
	}
	userID := id.UserID(m.UserID)
	keys, err := cli.QueryKeys(ctx, &mautrix.ReqQueryKeys{DeviceKeys: mautrix.DeviceKeysRequest{userID: mautrix.DeviceIDList{}}})
	if err != nil {
		return fail("bot device: cannot query the bot's keys: "+err.Error(), "try again; the homeserver's log says why it failed")
	}
	dev, ok := keys.DeviceKeys[userID][deviceID]
	if !ok {
		return fail(fmt.Sprintf("bot device: the homeserver has no keys for the bot's device %s", deviceID),
			"start `nomos bot`: it uploads its device keys at start\nif the homeserver was reset while the bot's database was kept, give the bot a new database (for the dev stack: nomos dev -reset)")
	}
	if dev.Keys.GetEd25519(deviceID) != ownKey {
		return fail(fmt.Sprintf("bot device: the homeserver's keys for device %s are not the keys in the bot's database", deviceID),
			"another client logged in as the bot with the same device id: log it out, then restart the bot")
	}
	notSigned := "start `nomos bot` with matrix.password and matrix.recovery_key_file set: it creates or reuses its cross-signing keys and signs its device\nor verify the session in Element: the bot's profile, Sessions, Verify"
	master, hasMaster := keys.MasterKeys[userID]
	selfSigning, hasSelf := keys.SelfSigningKeys[userID]
	if !hasMaster || !hasSelf {
		return fail(fmt.Sprintf("bot device: %s has no cross-signing keys, so Element shows device %s as unverified", m.UserID, deviceID), notSigned)
	}
	masterKey, sskKey := master.FirstKey(), selfSigning.FirstKey()
	if ok, _ := signatures.VerifySignatureJSON(selfSigning, userID, masterKey.String(), masterKey); !ok {
		return fail("bot device: the bot's self-signing key is not signed by its master key", notSigned)
	}
	if ok, _ := signatures.VerifySignatureJSON(&dev, userID, sskKey.String(), sskKey); !ok {
		return fail(fmt.Sprintf("bot device: %s is not cross-signed, so Element shows it as unverified", deviceID), notSigned)
	}
	return pass(fmt.Sprintf("bot device: %s opens with matrix.pickle_key and is cross-signed", deviceID))
}
