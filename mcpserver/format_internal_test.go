package mcpserver

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var sinceCases = []struct {
	in   string
	want time.Duration
	ok   bool
}{
	{"", time.Hour, true},
	{"30m", 30 * time.Minute, true},
	{"6h", 6 * time.Hour, true},
	{"7d", 7 * 24 * time.Hour, true},
	{"1.5d", 36 * time.Hour, true},
	{"2w", 14 * 24 * time.Hour, true},
	{" 24H ", 24 * time.Hour, true},
	{"1h30m", 90 * time.Minute, true},
	{"365d", maxSince, true},
	{"0h", 0, false},
	{"-1h", 0, false},
	{"yesterday", 0, false},
	{"d", 0, false},
}

func TestParseSince(t *testing.T) {
	t.Parallel()
	for _, c := range sinceCases {
		got, err := parseSince(c.in, time.Hour)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseSince(%q) = %v, %v; want %v, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func FuzzParseSince(f *testing.F) {
	for _, c := range sinceCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		d, err := parseSince(in, time.Hour)
		if err == nil && (d <= 0 || d > maxSince) {
			t.Fatalf("parseSince(%q) = %v, outside (0, %v]", in, d, maxSince)
		}
	})
}

func TestCapText(t *testing.T) {
	t.Parallel()
	short := "fits"
	if got := capText(short, 100); got != short {
		t.Errorf("capText changed text under the cap: %q", got)
	}
	long := strings.Repeat("line of text é\n", 2000)
	got := capText(long, 1000)
	if len(got) > 1000 || !utf8.ValidString(got) {
		t.Fatalf("capText(…, 1000) returned %d bytes (valid UTF-8: %v)", len(got), utf8.ValidString(got))
	}
	if !strings.Contains(got, "[cut at 1000 of 32000 bytes; narrow the query") {
		t.Errorf("capText does not say it cut: %q", got[len(got)-120:])
	}
	if i := strings.Index(got, "\n[cut"); !strings.HasSuffix(got[:i], "é") {
		t.Errorf("capText did not cut at a line end: %q", got[i-20:i])
	}
}

func TestVMIDRanges(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   []int
		want string
	}{
		{[]int{101}, "101"},
		{[]int{103, 101, 102, 110, 112, 111, 131}, "101-103, 110-112, 131"},
		{[]int{100, 102, 104}, "100, 102, 104"},
	}
	for _, c := range cases {
		if got := VMIDRanges(c.in); got != c.want {
			t.Errorf("VMIDRanges(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestPctStatus(t *testing.T) {
	t.Parallel()
	cases := []struct {
		out, want string
		ok        bool
	}{
		{"== run\nstatus: running\n", "running", true},
		{"status: stopped", "stopped", true},
		{"== run\nConfiguration file 'nodes/strong/lxc/999.conf' does not exist\n", "", false},
		{"", "", false},
	}
	for _, c := range cases {
		got, ok := pctStatus(c.out)
		if got != c.want || ok != c.ok {
			t.Errorf("pctStatus(%q) = %q, %v; want %q, %v", c.out, got, ok, c.want, c.ok)
		}
	}
}
