//go:build nomosdev

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nomoshq/nomos/internal/chatclient"
)

// runChat is `nomos chat`: a terminal client in the dev stack's ops room,
// as the operator or the guest, with the accounts from dev.json.
func runChat(ctx context.Context, env *roleEnv, args []string) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	devPath := fs.String("dev", filepath.Join(".nomos-dev", "dev.json"), "the dev stack's state `file`, written by nomos dev")
	as := fs.String("as", "operator", "chat as `operator` or guest")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: nomos chat [-dev .nomos-dev/dev.json] [-as operator|guest]\n\nType lines to talk to Nomos; /help lists the commands.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	data, err := os.ReadFile(*devPath)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s does not exist: start the stack with `nomos dev` first, or point -dev at its dev.json", *devPath)
	} else if err != nil {
		return fmt.Errorf("read %s: %w", *devPath, err)
	}
	var state devState
	if err := json.Unmarshal(data, &state); err != nil {
		return fmt.Errorf("read %s: %w", *devPath, err)
	}
	var acct devAccount
	switch *as {
	case "operator":
		acct = state.Operator
	case "guest":
		acct = state.Guest
	default:
		return fmt.Errorf("-as %q: want operator or guest", *as)
	}
	if state.HomeserverURL == "" || state.RoomID == "" || acct.UserID == "" || acct.Password == "" {
		return fmt.Errorf("%s lacks the homeserver, the room or the %s account: run `nomos dev` again to fill it in", *devPath, *as)
	}
	return chatclient.Run(ctx, chatclient.Config{
		HomeserverURL: state.HomeserverURL,
		UserID:        acct.UserID,
		Password:      acct.Password,
		RoomID:        state.RoomID,
		BotUserID:     state.BotUserID,
		In:            os.Stdin,
		Out:           env.stdout,
		Logger:        env.logger,
	})
}
