package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nomoshq/nomos/tasks"
)

// keyFiles are what `nomos keygen` writes: two Ed25519 pairs, each half
// named for the one process that may read it. The names are the secret
// files deploy/compose.yaml and the systemd units expect.
var keyFiles = []struct{ name, holder, key string }{
	{"orders_signing.key", "bot", "orders.signing_key_file"},
	{"orders_verify.pub", "actuator", "orders.verify_key_file"},
	{"reports_signing.key", "actuator", "reports.signing_key_file"},
	{"reports_verify.pub", "bot", "reports.verify_key_file"},
}

// runKeygen writes the order and report key pairs into a directory. It
// refuses to replace any existing file: a new signing key silently breaks
// the pair the other process holds.
func runKeygen(_ context.Context, env *roleEnv, args []string) error {
	flags := flag.NewFlagSet("keygen", flag.ContinueOnError)
	flags.SetOutput(env.stderr)
	flags.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: nomos keygen DIR\n\nwrites the order and report key pairs into DIR (mode 0600):")
		for _, f := range keyFiles {
			fmt.Fprintf(env.stderr, "  %-20s for the %s only (%s)\n", f.name, f.holder, f.key)
		}
	}
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() != 1 {
		flags.Usage()
		return errors.New("want one argument, the directory to write the keys into")
	}
	dir := flags.Arg(0)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create key directory: %w", err)
	}
	for _, f := range keyFiles {
		path := filepath.Join(dir, f.name)
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("%s already exists: keygen never replaces a key: move the old files away first if you mean to replace both halves", path)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("check %s: %w", path, err)
		}
	}
	for _, pair := range [][2]string{{"orders_signing.key", "orders_verify.pub"}, {"reports_signing.key", "reports_verify.pub"}} {
		signing, verify := filepath.Join(dir, pair[0]), filepath.Join(dir, pair[1])
		if err := tasks.GenerateKeyFiles(signing, verify); err != nil {
			return fmt.Errorf("write key pair %s: %w", signing, err)
		}
		// Public, but only the process named for it has any use for it.
		if err := os.Chmod(verify, 0o600); err != nil {
			return fmt.Errorf("restrict %s: %w", verify, err)
		}
	}
	fmt.Fprintf(env.stdout, "wrote two key pairs in %s (mode 0600):\n", dir)
	for _, f := range keyFiles {
		fmt.Fprintf(env.stdout, "  %-20s the %s only: %s\n", f.name, f.holder, f.key)
	}
	return nil
}
