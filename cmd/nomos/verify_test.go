package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

// testStore gives a test its own database, open, and its URL for the
// role under test.
func testStore(t *testing.T) (context.Context, string, *store.Store) {
	t.Helper()
	ctx := testenv.Context(t)
	url := testenv.DatabaseURL(t)
	st, err := store.Open(ctx, store.Config{URL: url, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return ctx, url, st
}

// TestVerifyConfirmsTheShownEmoji: `nomos verify` lists the emoji the bot
// showed for an operator's verification; `nomos verify CODE` confirms it
// and records who did; a code never shown, or one past its ten minutes,
// confirms nothing.
func TestVerifyConfirmsTheShownEmoji(t *testing.T) {
	t.Parallel()
	ctx, url, st := testStore(t)
	now := time.Now().UTC()
	shown := store.Verification{Code: "a1b2c3", UserID: "@ann:example.org", DeviceID: "PHONE", Emoji: []string{"🐶 Dog", "🔑 Key"},
		ShownAt: now, ExpiresAt: now.Add(10 * time.Minute)}
	old := store.Verification{Code: "d4e5f6", UserID: "@ann:example.org", DeviceID: "LAPTOP", Emoji: []string{"🌵 Cactus"},
		ShownAt: now.Add(-time.Hour), ExpiresAt: now.Add(-50 * time.Minute)}
	for _, v := range []store.Verification{shown, old} {
		if err := st.PutVerification(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"NOMOS_DATABASE__URL=" + url}
	nomos := func(args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		code := run(append([]string{"-config", "", "verify"}, args...), env, &out, &errOut)
		return out.String(), errOut.String(), code
	}

	out, errOut, code := nomos()
	if code != 0 || !strings.Contains(out, "a1b2c3  @ann:example.org  session PHONE") || !strings.Contains(out, "🐶 Dog, 🔑 Key") ||
		!strings.Contains(out, "waiting") || !strings.Contains(out, "expired") || strings.Index(out, "a1b2c3") > strings.Index(out, "d4e5f6") {
		t.Fatalf("nomos verify exited %d (%s), listed:\n%s\nwant both, newest first, waiting and expired", code, errOut, out)
	}
	for _, bad := range []string{"ffffff", "d4e5f6"} {
		if _, errOut, code := nomos(bad); code == 0 {
			t.Errorf("nomos verify %s succeeded", bad)
		} else if by, _ := st.VerificationConfirmedBy(ctx, bad); by != "" {
			t.Errorf("nomos verify %s failed (%s) but recorded %q", bad, errOut, by)
		}
	}
	out, errOut, code = nomos("A1B2C3")
	if code != 0 || !strings.Contains(out, "Confirmed a1b2c3 for @ann:example.org") {
		t.Fatalf("nomos verify A1B2C3 exited %d (%s): %s", code, errOut, out)
	}
	if by, err := st.VerificationConfirmedBy(ctx, "a1b2c3"); err != nil || !strings.HasSuffix(by, "(nomos verify)") {
		t.Errorf("confirmed by %q (%v), want the host's login", by, err)
	}
}
