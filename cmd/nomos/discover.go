package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/store"
)

// discoverPoll is how often `nomos discover` looks for the answers.
const discoverPoll = 250 * time.Millisecond

// runDiscover asks for an inventory of every host now (with -from, it
// replays outputs collected from the hosts instead). Without -config in
// a checkout where `nomos dev` runs, it asks that stack. It needs only the
// database: the bot's discovery pass sends the requests (signed, as
// always) within a few seconds, and the actuator's answers are applied as
// any other. With -wait it reports what each host's inventory found.
func runDiscover(ctx context.Context, env *roleEnv, args []string) error {
	fs := flag.NewFlagSet("discover", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	wait := fs.Duration("wait", 2*time.Minute, "how long to wait for every host's inventory; 0 asks and returns")
	from := fs.String("from", "", "read each host's collected outputs from `DIR` (DIR/<host>/cluster-resources.json, ...) and print what the inventory would record, as JSON; no SSH, config or database")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *from != "" {
		return runDiscoverFrom(env.stdout, *from)
	}
	_, st, err := env.devStore(ctx, "discover") // in a checkout where `nomos dev` runs, ask its stack
	if err != nil {
		return err
	}
	defer st.Close()
	runs, err := st.RequestInventory(ctx, "nomos discover")
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		return errors.New("the fleet has no hosts: add them to the seeds and run `nomos seed` first")
	}
	hosts := make([]string, len(runs))
	ids := make([]uuid.UUID, len(runs))
	for i, r := range runs {
		hosts[i], ids[i] = r.Host, r.ID
	}
	fmt.Fprintf(env.stdout, "Asked for an inventory of %s.\n", strings.Join(hosts, ", "))
	if *wait <= 0 {
		fmt.Fprintln(env.stdout, "The bot sends it on its next discovery pass; the ops room hears of what it finds.")
		return nil
	}
	deadline := time.NewTimer(*wait)
	defer deadline.Stop()
	tick := time.NewTicker(discoverPoll)
	defer tick.Stop()
	for {
		if runs, err = st.InventoryRuns(ctx, ids); err != nil {
			return err
		}
		if allApplied(runs) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			printInventories(env.stdout, runs)
			return fmt.Errorf("no answer from every host within %s: is `nomos bot` running with inventory.interval above 0, and the actuator with it?", *wait)
		case <-tick.C:
		}
	}
	printInventories(env.stdout, runs)
	for _, r := range runs {
		if r.Error != "" {
			return errors.New("the inventory of some hosts could not be taken")
		}
	}
	return nil
}

func allApplied(runs []store.InventoryRun) bool {
	for _, r := range runs {
		if r.AppliedAt == nil {
			return false
		}
	}
	return true
}

// printInventories says, a line per host, what its inventory found.
func printInventories(w io.Writer, runs []store.InventoryRun) {
	for _, r := range runs {
		switch {
		case r.AppliedAt == nil && r.SentAt == nil:
			fmt.Fprintf(w, "%s: not sent yet\n", r.Host)
		case r.AppliedAt == nil:
			fmt.Fprintf(w, "%s: sent at %s, no answer yet\n", r.Host, r.SentAt.Local().Format(time.TimeOnly))
		case r.Error != "":
			fmt.Fprintf(w, "%s: the inventory could not be taken: %s\n", r.Host, r.Error)
		case r.Changes == nil:
			fmt.Fprintf(w, "%s: done\n", r.Host)
		default:
			fmt.Fprintf(w, "%s: %s\n", r.Host, inventorySummary(*r.Changes))
		}
	}
}

func inventorySummary(c store.InventoryChanges) string {
	parts := []string{fmt.Sprintf("%d containers", c.Seen)}
	refs := func(what string, rs []store.ContainerRef) {
		if len(rs) == 0 {
			return
		}
		names := make([]string, len(rs))
		for i, r := range rs {
			names[i] = fmt.Sprintf("%d %s", r.VMID, r.Name)
		}
		parts = append(parts, what+" "+strings.Join(names, ", "))
	}
	refs("new:", c.New)
	refs("back:", c.Back)
	for _, ch := range c.Changed {
		parts = append(parts, fmt.Sprintf("changed: %d %s (%s)", ch.VMID, ch.Name, strings.Join(ch.Keys, ", ")))
	}
	refs("gone:", c.Gone)
	for _, rs := range c.RunStates {
		parts = append(parts, fmt.Sprintf("%d %s %s → %s", rs.VMID, rs.Name, rs.From, rs.To))
	}
	refs("left to their executions:", c.Skipped)
	if c.Superseded {
		parts = append(parts, "a newer inventory was applied first")
	} else if len(parts) == 1 {
		parts = append(parts, "nothing changed")
	}
	return strings.Join(parts, "; ")
}
