package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/nomoshq/nomos/report"
)

// runReport prints the daily brief or the weekly report, as the bot
// would post it, from the database alone.
func runReport(ctx context.Context, env *roleEnv, args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	daily := fs.Bool("daily", false, "print the daily brief: the last 24 h and the state now (the default)")
	weekly := fs.Bool("weekly", false, "print the weekly report: the last 7 days and their trends")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *daily && *weekly {
		return errors.New("give -daily or -weekly, not both")
	}
	kind := report.Daily
	if *weekly {
		kind = report.Weekly
	}
	cfg, st, err := env.devStore(ctx, "report") // in a checkout where `nomos dev` runs, read its database
	if err != nil {
		return err
	}
	defer st.Close()
	sched, err := cfg.Report.Schedule()
	if err != nil {
		return err
	}
	r, err := report.Build(ctx, st, kind, report.Options{
		Now: time.Now(), Location: sched.Location, StatusURL: cmp.Or(cfg.Web.PublicURL, publicURL(cfg.Web.Listen)),
		BackupMaxAge: cfg.Report.BackupMaxAge,
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(env.stdout, r.Markdown)
	return err
}
