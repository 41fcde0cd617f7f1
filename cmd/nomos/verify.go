package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/user"
	"strings"
	"time"

	"github.com/nomoshq/nomos/store"
)

// runVerify is the bot's side of an operator's emoji verification: with
// no argument it lists the verifications the bot has shown, with their
// emoji; `nomos verify CODE` confirms that those emoji match the ones on
// the operator's screen, and the bot finishes the verification. It is
// the one step that needs the bot's host (its database), so an attacker
// holding only an operator's password cannot verify a new identity.
func runVerify(ctx context.Context, env *roleEnv, args []string) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: nomos verify [CODE]\n\nWithout CODE, list the emoji verifications the bot has shown. With CODE, confirm that its emoji are the ones on the operator's screen.")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return errors.New("give one verification code, as the ops room or `nomos verify` shows it")
	}
	_, st, err := env.devStore(ctx, "verify")
	if err != nil {
		return err
	}
	defer st.Close()
	if fs.NArg() == 0 {
		vs, err := st.Verifications(ctx)
		if err != nil {
			return err
		}
		printVerifications(env.stdout, vs, time.Now())
		return nil
	}
	v, err := st.ConfirmVerification(ctx, fs.Arg(0), confirmer())
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no verification %q: run `nomos verify` to list them", fs.Arg(0))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "Confirmed %s for %s (session %s): %s.\nThe bot finishes the verification within a few seconds; the ops room hears of it.\n",
		v.Code, v.UserID, v.DeviceID, strings.Join(v.Emoji, ", "))
	return nil
}

// printVerifications lists verifications, newest first.
func printVerifications(w io.Writer, vs []store.Verification, now time.Time) {
	if len(vs) == 0 {
		fmt.Fprintln(w, "No emoji verification has been shown. An operator starts one from their client: the bot's profile, its session, Verify.")
		return
	}
	for _, v := range vs {
		state := "waiting: compare the emoji with the operator's screen, then run nomos verify " + v.Code
		switch {
		case v.ConfirmedBy != "":
			state = "confirmed by " + v.ConfirmedBy
		case !now.Before(v.ExpiresAt):
			state = "expired"
		}
		fmt.Fprintf(w, "%s  %s  session %s  shown %s\n  %s\n  %s\n", v.Code, v.UserID, v.DeviceID, v.ShownAt.UTC().Format(time.RFC3339), strings.Join(v.Emoji, ", "), state)
	}
}

// confirmer names who confirmed, for the audit: the login on the host.
func confirmer() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = cmp.Or(u.Username, u.Uid)
	}
	return name + " (nomos verify)"
}
