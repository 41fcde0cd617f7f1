package report_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nomoshq/nomos/report"
)

var scheduleCases = []struct {
	daily, weekly, tz string
	// err names the key at fault; empty: valid.
	err string
}{
	{"08:00", "monday", "", ""},
	{"8:05", "mon", "UTC", ""},
	{"23:59", "fri 17:30", "Europe/Berlin", ""},
	{"off", "off", "Local", ""},
	{"24:00", "monday", "", "report.daily"},
	{"08:60", "monday", "", "report.daily"},
	{"0800", "monday", "", "report.daily"},
	{"+8:00", "monday", "", "report.daily"},
	{"08:00", "someday", "", "report.weekly"},
	{"08:00", "mon 25:00", "", "report.weekly"},
	{"08:00", "mon 08:00 extra", "", "report.weekly"},
	{"08:00", "monday", "Mars/Olympus", "report.timezone"},
}

func TestReportScheduleParses(t *testing.T) {
	t.Parallel()
	for _, tc := range scheduleCases {
		_, err := report.ParseSchedule(tc.daily, tc.weekly, tc.tz)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("ParseSchedule(%q, %q, %q) = %v, want it valid", tc.daily, tc.weekly, tc.tz, err)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err+":")):
			t.Errorf("ParseSchedule(%q, %q, %q) = %v, want an error naming %s", tc.daily, tc.weekly, tc.tz, err, tc.err)
		}
	}
}

func FuzzReportSchedule(f *testing.F) {
	for _, tc := range scheduleCases {
		f.Add(tc.daily, tc.weekly, tc.tz)
	}
	f.Fuzz(func(t *testing.T, daily, weekly, tz string) {
		s, err := report.ParseSchedule(daily, weekly, tz)
		if err != nil {
			return
		}
		now := time.Date(2030, 3, 31, 1, 30, 0, 0, time.UTC)
		for _, k := range []report.Kind{report.Daily, report.Weekly} {
			due, key, ok := s.Period(k, now)
			if ok && (due.After(now) || now.Sub(due) > 8*24*time.Hour || key == "") {
				t.Errorf("%s period of %s is %s (%q): want the latest due time before it", k, now, due, key)
			}
		}
	})
}

// TestReportPeriods: a period begins at the latest due time at or before
// now, in the schedule's zone, and is named by that date.
func TestReportPeriods(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	s, err := report.ParseSchedule("08:00", "monday", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	at := func(y int, m time.Month, d, h, min int) time.Time { return time.Date(y, m, d, h, min, 0, 0, berlin) }
	for _, tc := range []struct {
		kind report.Kind
		now  time.Time
		due  time.Time
		key  string
	}{
		{report.Daily, at(2030, 1, 8, 7, 59), at(2030, 1, 7, 8, 0), "2030-01-07"},
		{report.Daily, at(2030, 1, 8, 8, 0), at(2030, 1, 8, 8, 0), "2030-01-08"},
		{report.Daily, at(2030, 1, 8, 23, 0), at(2030, 1, 8, 8, 0), "2030-01-08"},
		// 2030-01-07 is a Monday.
		{report.Weekly, at(2030, 1, 7, 8, 0), at(2030, 1, 7, 8, 0), "2030-01-07"},
		{report.Weekly, at(2030, 1, 7, 7, 0), at(2029, 12, 31, 8, 0), "2029-12-31"},
		{report.Weekly, at(2030, 1, 13, 22, 0), at(2030, 1, 7, 8, 0), "2030-01-07"},
		// Across the spring change (2030-03-31 in Berlin) a day is 23 h.
		{report.Daily, at(2030, 3, 31, 9, 0), at(2030, 3, 31, 8, 0), "2030-03-31"},
		{report.Daily, at(2030, 4, 1, 7, 0), at(2030, 3, 31, 8, 0), "2030-03-31"},
	} {
		due, key, ok := s.Period(tc.kind, tc.now)
		if !ok || !due.Equal(tc.due) || key != tc.key {
			t.Errorf("%s period at %s = %s %q %v, want %s %q", tc.kind, tc.now, due, key, ok, tc.due, tc.key)
		}
		// The same instant seen from UTC falls in the same period.
		if due2, key2, _ := s.Period(tc.kind, tc.now.UTC()); !due2.Equal(due) || key2 != key {
			t.Errorf("%s period at %s in UTC = %s %q, want %s %q", tc.kind, tc.now.UTC(), due2, key2, due, key)
		}
	}
	off, err := report.ParseSchedule("off", "off", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := off.Period(report.Daily, time.Now()); ok {
		t.Error("a daily brief that is off has a period")
	}
}

// TestScheduleSpec: each brief's time as the cron spec the bot's
// scheduler runs it by, and none for a brief that is off.
func TestScheduleSpec(t *testing.T) {
	t.Parallel()
	s, err := report.ParseSchedule("07:05", "fri 17:30", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	for kind, want := range map[report.Kind]string{report.Daily: "5 7 * * *", report.Weekly: "30 17 * * 5"} {
		if got, ok := s.Spec(kind); !ok || got != want {
			t.Errorf("Spec(%s) = %q, %v; want %q", kind, got, ok, want)
		}
	}
	off, err := report.ParseSchedule("off", "off", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	if spec, ok := off.Spec(report.Daily); ok {
		t.Errorf("Spec(daily) = %q with the daily brief off", spec)
	}
}
