package bot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// crossSign makes the bot's device verified in Element's eyes: it reuses
// the cross-signing keys through the saved recovery key, or, on first run,
// creates them, signs this device and saves the recovery key (mode 0600).
func (b *Bot) crossSign(ctx context.Context) error {
	mach := b.crypto.Machine()
	if key := b.readRecoveryKey(); key != "" {
		if err := mach.VerifyWithRecoveryKey(ctx, key); err != nil {
			return fmt.Errorf("verify with recovery key: %w", err)
		}
		return nil
	}
	pub, err := mach.GetOwnCrossSigningPublicKeys(ctx)
	if err == nil && pub != nil && pub.MasterKey != "" {
		return errors.New("the account has cross-signing keys but no recovery key is configured (matrix.recovery_key_file)")
	}
	if b.cfg.Password == "" {
		return errors.New("creating cross-signing keys needs the password (matrix.password)")
	}
	recoveryKey, _, err := mach.GenerateAndUploadCrossSigningKeysWithPassword(ctx, b.cfg.Password, "")
	if err != nil {
		return fmt.Errorf("create cross-signing keys: %w", err)
	}
	if err := mach.SignOwnDevice(ctx, mach.OwnIdentity()); err != nil {
		return fmt.Errorf("sign own device: %w", err)
	}
	if err := mach.SignOwnMasterKey(ctx); err != nil {
		return fmt.Errorf("sign own master key: %w", err)
	}
	if b.cfg.RecoveryKeyFile == "" {
		b.logger.Warn("cross-signing keys created, but matrix.recovery_key_file is unset: the recovery key is not saved")
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(b.cfg.RecoveryKeyFile), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(b.cfg.RecoveryKeyFile, []byte(recoveryKey+"\n"), 0o600); err != nil {
		return fmt.Errorf("save recovery key: %w", err)
	}
	b.logger.Info("cross-signing keys created; recovery key saved", "file", b.cfg.RecoveryKeyFile)
	return nil
}

func (b *Bot) readRecoveryKey() string {
	if b.cfg.RecoveryKeyFile == "" {
		return ""
	}
	data, err := os.ReadFile(b.cfg.RecoveryKeyFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// onDecryptError tells the room once per sender session that a message
// could not be read, rather than once per message.
func (b *Bot) onDecryptError(evt *event.Event, err error) {
	key := evt.RoomID.String() + "|" + evt.Sender.String()
	if c, ok := evt.Content.Parsed.(*event.EncryptedEventContent); ok {
		key += "|" + string(c.SessionID)
	}
	b.mu.Lock()
	seen := b.undecryptNot[key]
	b.undecryptNot[key] = true
	b.mu.Unlock()
	b.logger.Warn("cannot decrypt message", "room_id", evt.RoomID, "sender", evt.Sender, "event_id", evt.ID, "err", err)
	if seen || evt.Sender == b.cli.UserID {
		return
	}
	ctx := context.Background()
	b.sendNotice(ctx, evt.RoomID, fmt.Sprintf("I could not decrypt a message from %s. If you just verified or reset your session, send it again; I will not repeat this notice for this session.", evt.Sender),
		"", nil)
}

var _ = id.UserID("")
