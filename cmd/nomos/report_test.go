package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nomoshq/nomos/internal/config"
	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/seeds"
)

// TestReportRolePrintsTheBrief: `nomos report` needs only the database
// URL and prints the daily brief, or with -weekly the weekly report.
func TestReportRolePrintsTheBrief(t *testing.T) {
	t.Parallel()
	ctx, url, st := testStore(t)
	seed, err := fleetseed.Load(seeds.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplySeed(ctx, seed); err != nil {
		t.Fatal(err)
	}
	env := []string{"NOMOS_DATABASE__URL=" + url, "NOMOS_REPORT__TIMEZONE=UTC", "NOMOS_WEB__PUBLIC_URL=https://nomos.example.org"}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"**Daily brief**", "UTC", "**Last 24 h**: no executions.", "**Signals**: none open.", "LLM cost: not reported", "[Signals](https://nomos.example.org/signals)"}},
		{[]string{"-weekly"}, []string{"**Weekly report**", "**Most restarted**: no service was restarted."}},
	} {
		var out, errOut bytes.Buffer
		if code := run(append([]string{"-config", "", "report"}, tc.args...), env, &out, &errOut); code != 0 {
			t.Fatalf("nomos report %v exited %d: %s", tc.args, code, errOut.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("nomos report %v lacks %q:\n%s", tc.args, w, out.String())
			}
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"-config", "", "report", "-daily", "-weekly"}, env, &out, &errOut); code == 0 {
		t.Error("nomos report -daily -weekly succeeded")
	}
}

// TestReportConfigNamesTheKey: a bad time, weekday, zone or age names
// its key; the defaults are valid.
func TestReportConfigNamesTheKey(t *testing.T) {
	t.Parallel()
	base := []string{"NOMOS_DATABASE__URL=postgres://x/y"}
	for _, tc := range []struct {
		env  string
		want string
	}{
		{"NOMOS_REPORT__DAILY=8am", "report.daily: want a time of day as HH:MM"},
		{"NOMOS_REPORT__WEEKLY=someday", "report.weekly: want a weekday"},
		{"NOMOS_REPORT__TIMEZONE=Mars/Olympus", "report.timezone: want an IANA time zone"},
		{"NOMOS_REPORT__BACKUP_MAX_AGE=5m", "report.backup_max_age: want a duration between 1h and 720h"},
	} {
		cfg, err := config.Load("", append(base, tc.env))
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate("report"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("with %s: validate = %v, want an error containing %q", tc.env, err, tc.want)
		}
	}
	cfg, err := config.Load("", base)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate("report"); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
	if s, err := cfg.Report.Schedule(); err != nil || s.Daily == nil || s.Daily.String() != "08:00" || s.Weekly == nil || s.Weekly.Day.String() != "Monday" {
		t.Errorf("default schedule = %+v, %v; want daily at 08:00 and weekly on Monday", s, err)
	}
}
