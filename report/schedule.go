// Package report writes the daily brief and the weekly report: what
// changed, what is open and what is wrong, gathered from the database
// alone (no LLM) and written as short Markdown for a phone. It also says
// when each falls due (Schedule), so that the leading bot posts one per
// period and a brief missed during a failover is posted once, late.
package report

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kind is a brief's kind.
type Kind string

// The kinds of brief.
const (
	Daily  Kind = "daily"
	Weekly Kind = "weekly"
)

// TimeOfDay is an hour and minute on the wall clock of the schedule's
// location.
type TimeOfDay struct{ Hour, Minute int }

func (t TimeOfDay) String() string { return fmt.Sprintf("%02d:%02d", t.Hour, t.Minute) }

// parseTimeOfDay reads "HH:MM" on a 24-hour clock.
func parseTimeOfDay(s string) (TimeOfDay, bool) {
	h, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || len(h) < 1 || len(h) > 2 || len(m) != 2 {
		return TimeOfDay{}, false
	}
	hour, err1 := strconv.Atoi(h)
	minute, err2 := strconv.Atoi(m)
	if err1 != nil || err2 != nil || hour < 0 || hour > 23 || minute < 0 || minute > 59 || h[0] == '+' || h[0] == '-' {
		return TimeOfDay{}, false
	}
	return TimeOfDay{hour, minute}, true
}

// WeeklyTime is a weekday and a time on it.
type WeeklyTime struct {
	Day time.Weekday
	At  TimeOfDay
}

// Schedule says when each brief falls due.
type Schedule struct {
	// Daily is when the daily brief falls due each day; nil: never.
	Daily *TimeOfDay
	// Weekly is when the weekly report falls due each week; nil: never.
	Weekly *WeeklyTime
	// Location is the time zone both are read in; nil means UTC.
	Location *time.Location
}

var weekdays = map[string]time.Weekday{}

func init() {
	for d := time.Sunday; d <= time.Saturday; d++ {
		name := strings.ToLower(d.String())
		weekdays[name], weekdays[name[:3]] = d, d
	}
}

// ParseSchedule reads the config keys report.daily ("08:00", or "off"),
// report.weekly (a weekday, "monday" or "mon", at the daily time; or a
// weekday and a time, "fri 17:30"; or "off") and report.timezone (an
// IANA zone such as Europe/Berlin; empty means local). Each error names
// its key; several are joined (errors.Join).
func ParseSchedule(daily, weekly, timezone string) (Schedule, error) {
	var s Schedule
	var errs []error
	switch tz := strings.TrimSpace(timezone); tz {
	case "", "Local", "local":
		s.Location = time.Local
	default:
		loc, err := time.LoadLocation(tz)
		if err != nil {
			errs = append(errs, fmt.Errorf("report.timezone: want an IANA time zone such as Europe/Berlin or UTC, or nothing for the host's, got %q", timezone))
		}
		s.Location = loc
	}
	at := TimeOfDay{8, 0}
	if !isOff(daily) {
		t, ok := parseTimeOfDay(daily)
		if ok {
			at = t
			s.Daily = &t
		} else {
			errs = append(errs, fmt.Errorf("report.daily: want a time of day as HH:MM such as 08:00, or off, got %q", daily))
		}
	}
	if !isOff(weekly) {
		w, ok := parseWeekly(weekly, at)
		if ok {
			s.Weekly = &w
		} else {
			errs = append(errs, fmt.Errorf("report.weekly: want a weekday such as monday (at report.daily's time), a weekday and HH:MM such as \"fri 17:30\", or off, got %q", weekly))
		}
	}
	if len(errs) > 0 {
		return Schedule{}, errors.Join(errs...)
	}
	return s, nil
}

func isOff(s string) bool {
	s = strings.ToLower(strings.TrimSpace(s))
	return s == "off" || s == "false" || s == "never"
}

func parseWeekly(s string, at TimeOfDay) (WeeklyTime, bool) {
	fields := strings.Fields(strings.ToLower(s))
	if len(fields) == 0 || len(fields) > 2 {
		return WeeklyTime{}, false
	}
	day, ok := weekdays[fields[0]]
	if !ok {
		return WeeklyTime{}, false
	}
	if len(fields) == 2 {
		if at, ok = parseTimeOfDay(fields[1]); !ok {
			return WeeklyTime{}, false
		}
	}
	return WeeklyTime{day, at}, true
}

// Spec is kind's schedule as a cron spec, read in s.Location, for the
// bot's scheduler; ok is false when the kind is off.
func (s Schedule) Spec(kind Kind) (spec string, ok bool) {
	switch {
	case kind == Daily && s.Daily != nil:
		return fmt.Sprintf("%d %d * * *", s.Daily.Minute, s.Daily.Hour), true
	case kind == Weekly && s.Weekly != nil:
		return fmt.Sprintf("%d %d * * %d", s.Weekly.At.Minute, s.Weekly.At.Hour, int(s.Weekly.Day)), true
	}
	return "", false
}

// Period says which period of kind holds now: due is when it began (the
// latest time the brief fell due at or before now) and key names it, as
// the date it began on ("2025-01-06"). ok is false when the kind is off.
func (s Schedule) Period(kind Kind, now time.Time) (due time.Time, key string, ok bool) {
	loc := s.Location
	if loc == nil {
		loc = time.UTC
	}
	local := now.In(loc)
	// Noon on the local date: stepping back whole days from it never
	// crosses a date boundary on a daylight-saving change.
	noon := time.Date(local.Year(), local.Month(), local.Day(), 12, 0, 0, 0, loc)
	at := func(days int, t TimeOfDay) time.Time {
		y, m, d := noon.AddDate(0, 0, -days).Date()
		return time.Date(y, m, d, t.Hour, t.Minute, 0, 0, loc)
	}
	switch {
	case kind == Daily && s.Daily != nil:
		due = at(0, *s.Daily)
		if due.After(now) {
			due = at(1, *s.Daily)
		}
	case kind == Weekly && s.Weekly != nil:
		back := (int(noon.Weekday()) - int(s.Weekly.Day) + 7) % 7
		due = at(back, s.Weekly.At)
		if due.After(now) {
			due = at(back+7, s.Weekly.At)
		}
	default:
		return time.Time{}, "", false
	}
	return due, due.Format("2006-01-02"), true
}
