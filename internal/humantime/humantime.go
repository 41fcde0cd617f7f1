// Package humantime says durations and moments the way a person reads
// them, one way everywhere: a card's "for 3m12s", an alert's "after 1h05m",
// a tool result's "raised 2h ago" and the status page's "in 5m" all come
// from here.
package humantime

import (
	"fmt"
	"strconv"
	"time"
)

const day = 24 * time.Hour

// Duration is compact, at most two units, truncated: 850ms, 45s, 3m, 3m12s,
// 1h, 1h05m, 2d, 1d06h. A negative duration reads as 0s.
func Duration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return pair(d, time.Minute, "m", time.Second, "s")
	case d < day:
		return pair(d, time.Hour, "h", time.Minute, "m")
	}
	return pair(d, day, "d", time.Hour, "h")
}

// pair prints d in a big unit and, when not zero, the small unit below it,
// zero-padded so that columns line up: 3m07s, 1h05m.
func pair(d, big time.Duration, bigName string, small time.Duration, smallName string) string {
	n := int(d / big)
	if rest := int(d % big / small); rest != 0 {
		return fmt.Sprintf("%d%s%02d%s", n, bigName, rest, smallName)
	}
	return strconv.Itoa(n) + bigName
}

// Ago says how long before now t was, rounded to its largest whole unit:
// "just now" within 45 seconds either way, then "5m ago", "3h ago" (up to
// 48h) and "3d ago"; a time after now reads "in 20m". The zero time reads
// "never".
func Ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	future := d < 0
	if future {
		d = -d
	}
	var s string
	switch {
	case d < 45*time.Second:
		return "just now"
	case d < time.Hour:
		s = strconv.Itoa(int(d.Round(time.Minute)/time.Minute)) + "m"
	case d < 48*time.Hour:
		s = strconv.Itoa(int(d.Round(time.Hour)/time.Hour)) + "h"
	default:
		s = strconv.Itoa(int(d.Round(day)/day)) + "d"
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}
