package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/nomoshq/nomos/bot"
	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/schedule"
	"github.com/nomoshq/nomos/policy"
)

var scheduleName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// watch reads schedules and windows into what the bot runs; each error
// names its key, and all are returned at once.
func (c *Config) Watch() ([]bot.ScheduledRun, []bot.WindowSchedule, error) {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	location := func(key, tz string) *time.Location {
		tz = strings.TrimSpace(tz)
		if tz == "" {
			tz = c.Report.Timezone
		}
		if tz == "" || tz == "Local" || tz == "local" {
			return time.Local
		}
		loc, err := time.LoadLocation(tz)
		if err != nil {
			bad(key, "want an IANA time zone such as Europe/Berlin, got %q", tz)
			return time.UTC
		}
		return loc
	}
	// job checks what a window and a schedule share: a unique name and a
	// cron spec.
	job := func(key, name, spec string, seen map[string]bool) {
		if !scheduleName.MatchString(name) || seen[name] {
			bad(key+".name", "want a unique name of letters, digits, '.', '_' and '-', got %q", name)
		}
		seen[name] = true
		if _, err := schedule.ParseSpec(spec); err != nil {
			bad(key+".cron", "%v", err)
		}
	}
	windows := map[string]bool{}
	var ws []bot.WindowSchedule
	for i, w := range c.Windows {
		key := fmt.Sprintf("windows[%d]", i)
		job(key, w.Name, w.Cron, windows)
		if w.Duration <= 0 || w.Duration > executions.MaxWindow {
			bad(key+".duration", "want a duration from 1m to %s, got %s", executions.MaxWindow, w.Duration)
		}
		if len(w.Targets) == 0 {
			bad(key+".targets", "want at least one target, such as service:jellyfin")
		}
		if strings.TrimSpace(w.Reason) == "" {
			bad(key+".reason", "want a reason, shown in the room")
		}
		if w.Allow != "" {
			if cl, err := policy.ParseClass(w.Allow); err != nil || cl == policy.Destructive {
				bad(key+".allow", "want read_only, reversible_low or config_mutation (a standing approval never covers destructive plans), got %q", w.Allow)
			}
		}
		ws = append(ws, bot.WindowSchedule{Name: w.Name, Spec: w.Cron, Location: location(key+".timezone", w.Timezone),
			Duration: w.Duration, Targets: w.Targets, Reason: w.Reason, Allow: w.Allow})
	}
	names := map[string]bool{}
	var runs []bot.ScheduledRun
	for i, s := range c.Schedules {
		key := fmt.Sprintf("schedules[%d]", i)
		job(key, s.Name, s.Cron, names)
		if (s.Action == "") == (s.Runbook == "") {
			bad(key, "want either action or runbook")
		}
		if s.Action != "" {
			if _, err := policy.Lookup(policy.Action(s.Action)); err != nil {
				bad(key+".action", "%v", err)
			}
		}
		if strings.TrimSpace(s.Target) == "" {
			bad(key+".target", "want a target, such as service:jellyfin")
		}
		if s.Standing != "" && !windows[s.Standing] {
			bad(key+".standing", "names no window in windows: %q", s.Standing)
		}
		var params json.RawMessage
		if s.Params != nil {
			raw, err := json.Marshal(s.Params)
			if err != nil {
				bad(key+".params", "%v", err)
			}
			params = raw
		}
		runs = append(runs, bot.ScheduledRun{Name: s.Name, Spec: s.Cron, Location: location(key+".timezone", s.Timezone),
			Action: s.Action, Params: params, Runbook: s.Runbook, Target: s.Target, Standing: s.Standing})
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	return runs, ws, nil
}
