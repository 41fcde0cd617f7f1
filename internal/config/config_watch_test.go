package config

import (
	"strings"
	"testing"
	"time"
)

// TestWatchConfigRefusesWhatCannotRun: each malformed schedule or window
// is refused with its key named and what is wanted, all at once; a good
// one is read with its zone and the schedules a window's standing
// approval may serve.
func TestWatchConfigRefusesWhatCannotRun(t *testing.T) {
	t.Parallel()
	good := Config{
		Report:  ReportConfig{Timezone: "Europe/Berlin"},
		Windows: []WindowConfig{{Name: "nightly", Cron: "0 3 * * *", Duration: time.Hour, Targets: []string{"service:jellyfin"}, Reason: "updates", Allow: "reversible_low"}},
		Schedules: []ScheduleConfig{{Name: "jf", Cron: "10 3 * * *", Action: "restart", Target: "service:jellyfin", Standing: "nightly"},
			{Name: "status", Cron: "@every 15m", Action: "pct_status", Target: "lxc:101", Timezone: "UTC"}},
	}
	runs, windows, err := good.Watch()
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || len(windows) != 1 || windows[0].Location.String() != "Europe/Berlin" || runs[1].Location.String() != "UTC" || runs[0].Standing != "nightly" {
		t.Errorf("read %+v and %+v", runs, windows)
	}

	bad := Config{
		Windows: []WindowConfig{
			{Name: "w", Cron: "0 3 * *", Duration: 0, Reason: "", Allow: "destructive"},
			{Name: "w", Cron: "@daily", Duration: time.Hour, Targets: []string{"x"}, Reason: "r", Timezone: "Mars/Olympus"},
		},
		Schedules: []ScheduleConfig{
			{Name: "bad name!", Cron: "61 * * * *", Action: "nuke", Target: "x"},
			{Name: "both", Cron: "@hourly", Action: "restart", Runbook: "rb", Target: ""},
			{Name: "orphan", Cron: "@hourly", Runbook: "rb", Target: "x", Standing: "nowhere"},
		},
	}
	_, _, err = bad.Watch()
	if err == nil {
		t.Fatal("a malformed config was accepted")
	}
	for _, want := range []string{
		"windows[0].cron: cron spec", "windows[0].duration:", "windows[0].targets:", "windows[0].reason:",
		"windows[0].allow: want read_only, reversible_low or config_mutation", "windows[1].name: want a unique name",
		"windows[1].timezone:", "schedules[0].name:", "schedules[0].cron:", "schedules[0].action:",
		"schedules[1]: want either action or runbook", "schedules[1].target:", "schedules[2].standing: names no window",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
}
