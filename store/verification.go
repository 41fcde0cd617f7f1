package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Verification is an emoji verification (SAS) of an operator's identity
// that the bot has shown and that waits for someone on the bot's host to
// confirm with `nomos verify CODE`. It lives in bot_state: it is small,
// short-lived, and the record of what was shown stays for the audit.
type Verification struct {
	// Code names the verification to `nomos verify`.
	Code string `json:"code"`
	// UserID and DeviceID are the operator and the session verifying.
	UserID   string `json:"user_id"`
	DeviceID string `json:"device_id"`
	// Emoji are the seven emoji with their names, as the bot shows them:
	// "🐶 Dog".
	Emoji []string `json:"emoji"`
	// ShownAt is when the bot showed them; ExpiresAt is when the
	// operator's client gives up.
	ShownAt   time.Time `json:"shown_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// ConfirmedBy is who confirmed the emoji match on the host; empty
	// while it waits.
	ConfirmedBy string `json:"-"`
}

const (
	verificationKey          = "verification:"
	verificationConfirmedKey = "verification_confirmed:"
)

// PutVerification records a verification the bot is showing.
func (s *Store) PutVerification(ctx context.Context, v Verification) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode verification %s: %w", v.Code, err)
	}
	_, err = s.SetBotStateOnce(ctx, verificationKey+v.Code, string(data))
	return err
}

// Verifications lists the verifications the bot has shown, newest first,
// with who confirmed each.
func (s *Store) Verifications(ctx context.Context) ([]Verification, error) {
	rows, err := s.pool.Query(ctx, `SELECT v.value, coalesce(c.value, '') FROM bot_state v
		LEFT JOIN bot_state c ON c.key = $2 || substr(v.key, length($1) + 1)
		WHERE v.key LIKE $1 || '%'`, verificationKey, verificationConfirmedKey)
	if err != nil {
		return nil, fmt.Errorf("list verifications: %w", err)
	}
	defer rows.Close()
	var out []Verification
	for rows.Next() {
		var data, by string
		if err := rows.Scan(&data, &by); err != nil {
			return nil, fmt.Errorf("list verifications: %w", err)
		}
		var v Verification
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			return nil, fmt.Errorf("decode verification: %w", err)
		}
		v.ConfirmedBy = by
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list verifications: %w", err)
	}
	slices.SortFunc(out, func(a, b Verification) int { return b.ShownAt.Compare(a.ShownAt) })
	return out, nil
}

// ConfirmVerification records that by compared the emoji of the
// verification code with the operator's screen and found them the same.
// ErrNotFound when no such verification was shown; an expired one cannot
// be confirmed.
func (s *Store) ConfirmVerification(ctx context.Context, code, by string) (Verification, error) {
	code = strings.ToLower(strings.TrimSpace(code))
	data, err := s.BotState(ctx, verificationKey+code)
	if err != nil {
		return Verification{}, err
	}
	var v Verification
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		return Verification{}, fmt.Errorf("decode verification %s: %w", code, err)
	}
	if !s.now().Before(v.ExpiresAt) {
		return v, fmt.Errorf("verification %s expired at %s: start it again from the client", code, v.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if v.ConfirmedBy, err = s.SetBotStateOnce(ctx, verificationConfirmedKey+code, by); err != nil {
		return v, err
	}
	return v, nil
}

// VerificationConfirmedBy says who confirmed verification code, or ""
// while nobody has.
func (s *Store) VerificationConfirmedBy(ctx context.Context, code string) (string, error) {
	by, err := s.BotState(ctx, verificationConfirmedKey+code)
	if errors.Is(err, ErrNotFound) {
		return "", nil
	}
	return by, err
}
