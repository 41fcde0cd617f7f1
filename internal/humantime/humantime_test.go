package humantime_test

import (
	"testing"
	"time"

	"github.com/nomoshq/nomos/internal/humantime"
)

func TestDuration(t *testing.T) {
	t.Parallel()
	cases := []struct {
		d    time.Duration
		want string
	}{
		{-5 * time.Second, "0s"},
		{0, "0s"},
		{850 * time.Millisecond, "850ms"},
		{time.Second, "1s"},
		{45*time.Second + 900*time.Millisecond, "45s"}, // truncated, never rounded up
		{3 * time.Minute, "3m"},
		{3*time.Minute + 7*time.Second, "3m07s"},
		{59*time.Minute + 59*time.Second, "59m59s"},
		{time.Hour, "1h"},
		{time.Hour + 5*time.Minute + 59*time.Second, "1h05m"},
		{90 * time.Minute, "1h30m"},
		{23*time.Hour + 59*time.Minute, "23h59m"},
		{24 * time.Hour, "1d"},
		{30 * time.Hour, "1d06h"},
		{7 * 24 * time.Hour, "7d"},
		{90 * 24 * time.Hour, "90d"},
	}
	for _, c := range cases {
		if got := humantime.Duration(c.d); got != c.want {
			t.Errorf("Duration(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestAgo(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		before time.Duration
		want   string
	}{
		{0, "just now"},
		{10 * time.Second, "just now"},
		{-30 * time.Second, "just now"},
		{50 * time.Second, "1m ago"},
		{90 * time.Second, "2m ago"},
		{5 * time.Minute, "5m ago"},
		{59 * time.Minute, "59m ago"},
		{61 * time.Minute, "1h ago"},
		{3 * time.Hour, "3h ago"},
		{47 * time.Hour, "47h ago"},
		{72 * time.Hour, "3d ago"},
		{25 * 24 * time.Hour, "25d ago"},
		{-20 * time.Minute, "in 20m"},
		{-49 * time.Hour, "in 2d"},
	}
	for _, c := range cases {
		if got := humantime.Ago(now, now.Add(-c.before)); got != c.want {
			t.Errorf("Ago(now-%v) = %q, want %q", c.before, got, c.want)
		}
	}
	if got := humantime.Ago(now, time.Time{}); got != "never" {
		t.Errorf("Ago(zero time) = %q, want never", got)
	}
}

func FuzzDuration(f *testing.F) {
	for _, d := range []time.Duration{0, 850 * time.Millisecond, 187 * time.Second, 30 * time.Hour, -1} {
		f.Add(int64(d))
	}
	f.Fuzz(func(t *testing.T, n int64) {
		s := humantime.Duration(time.Duration(n))
		if s == "" || len(s) > 12 {
			t.Fatalf("Duration(%d) = %q: want a short, non-empty string", n, s)
		}
	})
}
