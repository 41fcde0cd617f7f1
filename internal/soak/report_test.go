package soak

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// full reports whether this is the soak run (NOMOS_SOAK=1, make soak),
// with the full trial counts, rather than the short one in make test.
func full() bool { return os.Getenv("NOMOS_SOAK") != "" }

// trials is short in make test and long under make soak.
// NOMOS_SOAK_SCALE, a fraction such as 0.2, runs that part of the long
// counts (never fewer than the short ones): a reduced soak that still
// writes docs/reliability.md, marked as not the full one.
func trials(short, long int) int {
	if f, err := strconv.ParseFloat(os.Getenv("NOMOS_SOAK_SCALE"), 64); err == nil && f > 0 && f < 1 {
		return max(short, int(float64(long)*f))
	}
	if full() {
		return long
	}
	return short
}

// between is a random duration in [lo, hi).
func between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rand.Int64N(int64(hi-lo)))
}

// result is one line of docs/reliability.md.
type result struct {
	Case          string
	Trials        int
	RunsExpected  int
	RunsSeen      int
	LostDecisions int
	Recover       []time.Duration
	// Note carries what else the case measured, such as a latency.
	Note string
}

// caseOrder is the order of the table's rows.
var caseOrder = []string{
	"actuator SIGKILLed mid-order",
	"bot SIGKILLed around an approval",
	"Redis FLUSHALL after approvals",
	"Redis restarted after approvals",
	"Postgres restarted under load",
	"homeserver stopped while plans run",
	"host drops SSH sessions mid-command",
	"concurrent plans, 3 operators, 2 hosts",
}

var (
	resultsMu sync.Mutex
	results   = map[string]result{}
)

// record keeps r and, under make soak, writes docs/reliability.md again
// with every case run so far.
func record(t interface{ Logf(string, ...any) }, r result) {
	t.Logf("%s: %d trials, %d runs expected, %d seen, %d lost decisions, recovery %s; %s",
		r.Case, r.Trials, r.RunsExpected, r.RunsSeen, r.LostDecisions, recovery(r.Recover), r.Note)
	resultsMu.Lock()
	defer resultsMu.Unlock()
	results[r.Case] = r
	// NOMOS_SOAK_REPORT writes the table from a short run too, marked so.
	if !full() && os.Getenv("NOMOS_SOAK_REPORT") == "" {
		return
	}
	path := filepath.Join("..", "..", "docs", "reliability.md")
	if err := os.WriteFile(path, []byte(renderReport(results, earlierRows(path))+handWritten(path)), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "soak: write docs/reliability.md: %v\n", err)
	}
}

// handWritten is what follows the table in the report at path, from its
// first "## " heading on: notes kept by hand, such as what changed since
// an earlier run, which a new run leaves as they are.
func handWritten(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if i := strings.Index(string(data), "\n## "); i >= 0 {
		return string(data[i:])
	}
	return ""
}

// earlierRows reads the table rows of the report at path by case, so a
// run of some cases (-run 'TestFaults/redis') keeps the others' figures.
func earlierRows(path string) map[string]string {
	rows := map[string]string{}
	data, err := os.ReadFile(path)
	if err != nil {
		return rows
	}
	// Only the generated part: the notes kept by hand below it may hold
	// tables of their own.
	if i := strings.Index(string(data), "\n## "); i >= 0 {
		data = data[:i]
	}
	for line := range strings.Lines(string(data)) {
		for _, name := range caseOrder {
			if strings.HasPrefix(line, "| "+name+" |") && !strings.Contains(line, "| not run |") {
				row := strings.ReplaceAll(strings.TrimRight(line, "\n"), " (earlier run)", "")
				rows[name] = strings.TrimSuffix(row, " |") + " (earlier run) |"
			}
		}
	}
	return rows
}

func renderReport(rs map[string]result, earlier map[string]string) string {
	var b strings.Builder
	b.WriteString(`# Reliability

Written by ` + "`make soak`" + ` (internal/soak with NOMOS_SOAK=1); do not edit by
hand. Each case runs the real stack: a Postgres cluster and a Redis server
of its own, Dendrite, labsim serving the two demo hosts over SSH, and the
` + "`nomos bot`" + ` and ` + "`nomos actuator`" + ` processes built from the checkout. It
breaks one part, again and again, while an operator asks for restarts in
the ops room and approves them with ✅.

- **runs expected**: approved orders whose command should reach a host
  once (an order cut off mid-command may end ` + "`outcome_unknown`" + ` instead).
- **runs seen**: commands of those orders in labsim's command log. More
  than expected would mean something ran twice.
- **lost decisions**: approvals that were not recorded exactly once, or
  orders approved but never run nor reported ` + "`outcome_unknown`" + `.
- **time to recover**: from the fault's end (the process restarted, the
  server back) to the order's end, median and worst.

`)
	counts := "the full counts (make soak)"
	if f := os.Getenv("NOMOS_SOAK_SCALE"); f != "" {
		counts = "the counts cut to " + f + " of the full soak (NOMOS_SOAK_SCALE), not the full soak: run make soak for the real figures"
	} else if !full() {
		counts = "the short counts of make test, not the full soak: run make soak for the real figures"
	}
	fmt.Fprintf(&b, "Last run: %s, with %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), counts)
	b.WriteString("| case | trials | runs expected | runs seen | lost decisions | time to recover | notes |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|---|\n")
	for _, name := range caseOrder {
		r, ok := rs[name]
		if !ok {
			if row, ok := earlier[name]; ok {
				b.WriteString(row + "\n")
			} else {
				fmt.Fprintf(&b, "| %s | not run | | | | | |\n", name)
			}
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s | %s |\n", r.Case, r.Trials, r.RunsExpected, r.RunsSeen, r.LostDecisions, recovery(r.Recover), r.Note)
	}
	return b.String()
}

func recovery(ds []time.Duration) string {
	if len(ds) == 0 {
		return "–"
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return fmt.Sprintf("%s median, %s worst", roundDur(ds[len(ds)/2]), roundDur(ds[len(ds)-1]))
}

func roundDur(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	}
	return d.Round(100 * time.Millisecond).String()
}

// percentile returns the p-th percentile (0–100) of ds.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[min(len(ds)-1, len(ds)*p/100)]
}

func itoa(n int) string { return strconv.Itoa(n) }
