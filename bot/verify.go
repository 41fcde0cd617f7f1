package bot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto/verificationhelper"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/store"
)

// verifyPoll is how often a shown verification looks for its
// confirmation on the host.
const verifyPoll = time.Second

// verifyTimeout is how long a client waits in a verification, as the
// Matrix spec has it (ten minutes from the request).
const verifyTimeout = 10 * time.Minute

// verifier answers an operator's interactive verification of the bot's
// session by emoji (SAS), through mautrix's verification helper. The bot
// shows its emoji in the ops room and in `nomos verify`, and confirms them
// only once someone on the bot's host has compared them with the
// operator's screen and run `nomos verify CODE`: whoever holds only the
// operator's password can start a verification, but cannot finish one.
// Once confirmed, the verified session counts, and when it has signed the
// operator's master key the bot signs that key with its user-signing key,
// so every session the key signs counts again.
//
// The helper gets a syncer of its own, fed from the bot's: the operator's
// MAC (their half of the final step) is held back until the bot side has
// confirmed. The helper never trusts a key before that, and it always sees
// the bot's MAC first: mautrix v0.32's ConfirmSAS, when it comes second,
// checks the other side's master key against the bot's own and fails.
type verifier struct {
	b      *Bot
	helper *verificationhelper.VerificationHelper
	txns   verificationhelper.VerificationStore
	own    *mautrix.DefaultSyncer

	mu    sync.Mutex
	waits map[id.VerificationTransactionID]*sasWait
}

// sasWait is one verification whose emoji the bot has shown.
type sasWait struct {
	code      string
	user      id.UserID
	device    id.DeviceID
	confirmed bool
	// heldMAC is the operator's MAC, kept from the helper until the
	// emoji are confirmed on the host.
	heldMAC *event.Event
	stop    context.CancelFunc
}

var (
	_ verificationhelper.RequiredCallbacks = (*verifier)(nil)
	_ verificationhelper.ShowSASCallbacks  = (*verifier)(nil)
)

// startVerifier lets operators verify the bot by emoji. The bot answers
// verification sent to its session (to-device); it supports emoji only.
func (b *Bot) startVerifier(ctx context.Context) error {
	v := &verifier{b: b, own: mautrix.NewDefaultSyncer(), txns: verificationhelper.NewInMemoryVerificationStore(),
		waits: map[id.VerificationTransactionID]*sasWait{}}
	main := b.cli.Syncer
	b.cli.Syncer = v.own // Init registers its handlers on the client's syncer
	v.helper = verificationhelper.NewVerificationHelper(b.cli, b.crypto.Machine(), v.txns, v, false, false, true)
	err := v.helper.Init(ctx)
	b.cli.Syncer = main
	if err != nil {
		return fmt.Errorf("verification helper: %w", err)
	}
	syncer := main.(mautrix.ExtensibleSyncer)
	for _, t := range []event.Type{
		event.ToDeviceVerificationRequest, event.ToDeviceVerificationReady, event.ToDeviceVerificationStart,
		event.ToDeviceVerificationAccept, event.ToDeviceVerificationKey, event.ToDeviceVerificationDone,
		event.ToDeviceVerificationCancel,
	} {
		syncer.OnEventType(t, v.own.Dispatch)
	}
	syncer.OnEventType(event.ToDeviceVerificationMAC, v.onMAC)
	b.verifier = v
	return nil
}

// verificationCode is the short name `nomos verify` gives a verification.
func verificationCode(txn id.VerificationTransactionID) string {
	sum := sha256.Sum256([]byte(txn))
	return hex.EncodeToString(sum[:])[:6]
}

// VerificationRequested accepts a request from an operator and cancels
// any other: only an operator's identity matters to the bot.
func (v *verifier) VerificationRequested(ctx context.Context, txn id.VerificationTransactionID, from id.UserID, device id.DeviceID) {
	log := v.b.logger.With("transaction_id", txn, "sender", from, "device_id", device)
	if !v.b.isOperator(from) {
		log.Info("verification request from a non-operator cancelled")
		if err := v.helper.CancelVerification(ctx, txn, event.VerificationCancelCodeUser, "Nomos verifies its operators only"); err != nil {
			log.Warn("cancel verification", "err", err)
		}
		return
	}
	log.Info("verification request accepted")
	if err := v.helper.AcceptVerification(ctx, txn); err != nil {
		log.Warn("accept verification", "err", err)
	}
}

// VerificationReady: the operator's client starts the emoji exchange.
func (v *verifier) VerificationReady(context.Context, id.VerificationTransactionID, id.DeviceID, bool, bool, *verificationhelper.QRCode) {
}

// ShowSAS shows the emoji in the ops room and records them for `nomos
// verify`, then waits for the host to confirm them.
func (v *verifier) ShowSAS(ctx context.Context, txn id.VerificationTransactionID, emojis []rune, names []string, _ []int) {
	tx, err := v.txns.GetVerificationTransaction(ctx, txn)
	if err != nil {
		v.b.logger.Warn("verification shown for an unknown transaction", "transaction_id", txn, "err", err)
		return
	}
	now := v.b.now().UTC()
	rec := store.Verification{
		Code: verificationCode(txn), UserID: tx.TheirUserID.String(), DeviceID: tx.TheirDeviceID.String(),
		ShownAt: now, ExpiresAt: now.Add(verifyTimeout),
	}
	for i, e := range emojis {
		rec.Emoji = append(rec.Emoji, string(e)+" "+names[i])
	}
	if err := v.b.store.PutVerification(ctx, rec); err != nil {
		v.b.logger.Error("record verification", "transaction_id", txn, "err", err)
		// ShowSAS runs under the helper's lock, which Cancel takes too.
		go func() {
			_ = v.helper.CancelVerification(context.WithoutCancel(ctx), txn, event.VerificationCancelCodeUser, "Nomos could not record the verification")
		}()
		return
	}
	wctx, stop := context.WithDeadline(ctx, rec.ExpiresAt)
	v.mu.Lock()
	v.waits[txn] = &sasWait{code: rec.Code, user: tx.TheirUserID, device: tx.TheirDeviceID, stop: stop}
	v.mu.Unlock()
	v.b.logger.Info("verification emoji shown", "transaction_id", txn, "sender", tx.TheirUserID, "device_id", tx.TheirDeviceID, "code", rec.Code, "emoji", strings.Join(rec.Emoji, ", "))
	go func() {
		if room := id.RoomID(v.b.cfg.OpsRoom); room != "" {
			plain, htm := NoticeVerificationShown(rec)
			v.b.sendNotice(wctx, room, plain, htm, nil)
		}
		v.awaitConfirmation(wctx, txn, rec.Code)
	}()
}

// awaitConfirmation polls for `nomos verify CODE` until it comes, the
// verification ends, or it expires.
func (v *verifier) awaitConfirmation(ctx context.Context, txn id.VerificationTransactionID, code string) {
	tick := time.NewTicker(verifyPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		by, err := v.b.store.VerificationConfirmedBy(ctx, code)
		if err != nil || by == "" {
			continue
		}
		v.confirm(ctx, txn, by)
		return
	}
}

// confirm sends the bot's MAC, then hands the helper the operator's MAC
// if it came first; whichever comes second finishes the verification.
func (v *verifier) confirm(ctx context.Context, txn id.VerificationTransactionID, by string) {
	v.mu.Lock()
	w := v.waits[txn]
	if w == nil {
		v.mu.Unlock()
		return
	}
	w.confirmed = true
	held := w.heldMAC
	w.heldMAC = nil
	v.mu.Unlock()
	v.b.logger.Info("verification emoji confirmed on the host", "transaction_id", txn, "code", w.code, "confirmed_by", by)
	if err := v.helper.ConfirmSAS(ctx, txn); err != nil {
		v.b.logger.Warn("confirm verification", "transaction_id", txn, "err", err)
		return
	}
	if held != nil {
		v.own.Dispatch(ctx, held)
	}
}

// onMAC passes the operator's MAC to the helper once the emoji are
// confirmed on the host, and holds it until then.
func (v *verifier) onMAC(ctx context.Context, evt *event.Event) {
	var txn id.VerificationTransactionID
	if c, ok := evt.Content.Parsed.(event.VerificationTransactionable); ok {
		txn = c.GetTransactionID()
	}
	v.mu.Lock()
	w := v.waits[txn]
	if w != nil && !w.confirmed {
		w.heldMAC = evt
		v.mu.Unlock()
		return
	}
	v.mu.Unlock()
	v.own.Dispatch(ctx, evt)
}

// VerificationCancelled forgets the verification.
func (v *verifier) VerificationCancelled(_ context.Context, txn id.VerificationTransactionID, code event.VerificationCancelCode, reason string) {
	v.b.logger.Info("verification cancelled", "transaction_id", txn, "code", code, "reason", reason)
	v.forget(txn)
}

// VerificationDone trusts the operator's identity, records it, and tells
// the ops room. Verifying a session (to-device, as Element does for
// "Verify session") proves that session's key, and the helper marks that
// session verified. The identity (master key) is trusted, by signing it
// with the bot's user-signing key, when the verified session signed it:
// its holder vouches for that identity, and a password alone can upload a
// new master key but cannot make an old session sign it.
func (v *verifier) VerificationDone(ctx context.Context, txn id.VerificationTransactionID, _ event.VerificationMethod) {
	w := v.forget(txn)
	if w == nil {
		return
	}
	master, err := v.trustIdentity(ctx, w.user, w.device)
	log := v.b.logger.With("transaction_id", txn, "sender", w.user, "device_id", w.device)
	if err != nil {
		log.Warn("session verified; identity not trusted", "err", err)
	} else {
		log.Info("operator identity verified", "master_key", master)
	}
	detail := map[string]any{"code": w.code, "device_id": w.device.String(), "master_key": master.String(), "method": "sas"}
	if err != nil {
		detail["identity_error"] = err.Error()
	}
	if err := v.b.store.AppendAudit(ctx, store.AuditEntry{Actor: w.user.String(), Action: "identity.verified", Detail: detail}); err != nil {
		log.Error("audit verification", "err", err)
	}
	if room := id.RoomID(v.b.cfg.OpsRoom); room != "" {
		plain, htm := NoticeIdentityVerified(w.user.String(), w.device.String(), w.code, err == nil)
		v.b.sendNotice(ctx, room, plain, htm, nil)
	}
}

// trustIdentity signs user's master key with the bot's user-signing key
// when the session device, just verified, has signed that master key.
func (v *verifier) trustIdentity(ctx context.Context, user id.UserID, device id.DeviceID) (id.Ed25519, error) {
	mach := v.b.crypto.Machine()
	if _, err := mach.FetchKeys(ctx, []id.UserID{user}, true); err != nil {
		return "", fmt.Errorf("fetch keys: %w", err)
	}
	keys, err := mach.GetCrossSigningPublicKeys(ctx, user)
	if err != nil || keys == nil {
		return "", fmt.Errorf("no cross-signing keys for %s: %v", user, err)
	}
	dev, err := mach.CryptoStore.GetDevice(ctx, user, device)
	if err != nil || dev == nil {
		return keys.MasterKey, fmt.Errorf("session %s unknown: %v", device, err)
	}
	signed, err := mach.CryptoStore.IsKeySignedBy(ctx, user, keys.MasterKey, user, dev.SigningKey)
	if err != nil {
		return keys.MasterKey, fmt.Errorf("master key signatures: %w", err)
	}
	if !signed {
		return keys.MasterKey, fmt.Errorf("the verified session %s has not signed the master key %s", device, keys.MasterKey)
	}
	if err := mach.SignUser(ctx, user, keys.MasterKey); err != nil {
		return keys.MasterKey, fmt.Errorf("sign master key: %w", err)
	}
	return keys.MasterKey, nil
}

func (v *verifier) forget(txn id.VerificationTransactionID) *sasWait {
	v.mu.Lock()
	defer v.mu.Unlock()
	w := v.waits[txn]
	if w != nil {
		w.stop()
		delete(v.waits, txn)
	}
	return w
}

// NoticeVerificationShown tells the ops room that an operator is
// verifying the bot by emoji, shows the bot's emoji, and says who
// confirms them and how.
func NoticeVerificationShown(v store.Verification) (plain, html string) {
	emoji := strings.Join(v.Emoji, ", ")
	p := fmt.Sprintf("%s is verifying me by emoji from the session %s. My emoji are: %s. "+
		"I confirm them only when someone on the Nomos host has compared them with that screen and runs: nomos verify %s "+
		"(until then nothing changes; a password alone cannot finish this). If nobody here started it, cancel it and change that account's password.",
		v.UserID, v.DeviceID, emoji, v.Code)
	h := fmt.Sprintf("%s is verifying me by emoji from the session %s. My emoji are: <strong>%s</strong>. "+
		"I confirm them only when someone on the Nomos host has compared them with that screen and runs: %s "+
		"(until then nothing changes; a password alone cannot finish this). If nobody here started it, cancel it and change that account's password.",
		escape(v.UserID), codeSpan(v.DeviceID), escape(emoji), codeSpan("nomos verify "+v.Code))
	return p, h
}

// NoticeIdentityVerified tells the ops room that an operator's session,
// and with it their identity when that session signed it, is trusted.
func NoticeIdentityVerified(userID, deviceID, code string, identity bool) (plain, html string) {
	p := fmt.Sprintf("Verified %s by emoji (%s): I now trust their current identity, and approvals from every session it signs count again.", userID, code)
	if !identity {
		p = fmt.Sprintf("Verified %s's session %s by emoji (%s): approvals from that session count. That session has not signed their current identity, so their other sessions still do not count; "+
			"verify me from a session that holds the identity (the one that reset it, or one verified with the recovery key).", userID, deviceID, code)
	}
	return p, escape(p)
}

// DeviceID is the bot's Matrix session, the one an operator verifies;
// empty before Run has connected.
func (b *Bot) DeviceID() id.DeviceID {
	if b.cli == nil {
		return ""
	}
	return b.cli.DeviceID
}
