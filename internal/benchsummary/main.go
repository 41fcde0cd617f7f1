// Command benchsummary reads `go test -bench` output on stdin and prints
// one screen: each headline figure beside its goal and the floor measured
// in the same run, so a regression is seen at a glance. `make bench` runs
// it last. A benchmark that did not run prints as "–"; when a figure ran
// several times (-count), the median run is shown.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// row is one line of the summary: the figure named metric of the
// benchmark named bench, against goal (at most, in the figure's unit),
// beside floor, the sum of the floor metrics of the same benchmark.
type row struct {
	what   string
	bench  string
	metric string
	goal   float64 // 0: none
	floor  []string
	unit   string
}

var rows = []row{
	{"approval → first SSH byte, 1 plan, p50", "E2EApprovalToSSH", "approval-to-ssh-p50-ms", 20, []string{"queue-floor-p50-ms", "ssh-floor-p50-ms"}, "ms"},
	{"command exit → result applied, p50", "E2EApprovalToSSH", "exit-to-applied-p50-ms", 0, nil, "ms"},
	{"approval → SSH, 10 plans at once, p50", "LoadApprovalToSSH/plans=10", "approval-to-ssh-p50-ms", 0, []string{"queue-floor-p50-ms", "ssh-floor-p50-ms"}, "ms"},
	{"approval → SSH, 50 plans at once, p50", "LoadApprovalToSSH/plans=50", "approval-to-ssh-p50-ms", 50, []string{"queue-floor-p50-ms", "ssh-floor-p50-ms"}, "ms"},
	{"approval → SSH, 50 plans at once, p99", "LoadApprovalToSSH/plans=50", "approval-to-ssh-p99-ms", 150, []string{"queue-floor-p99-ms", "ssh-floor-p99-ms"}, "ms"},
	{"approval → SSH, 200 plans at once, p99", "LoadApprovalToSSH/plans=200", "approval-to-ssh-p99-ms", 1000, []string{"queue-floor-p99-ms", "ssh-floor-p99-ms"}, "ms"},
	{"exit → applied, 50 plans at once, p99", "LoadApprovalToSSH/plans=50", "exit-to-applied-p99-ms", 0, nil, "ms"},
	{"result → LLM continuation, p50", "E2EResultToContinuation", "result-to-llm-p50-ms", 30, []string{"queue-floor-p50-ms"}, "ms"},
	{"message → card, Nomos's part, p50", "E2EMessageToCard", "nomos-added-p50-ms", 20, []string{"echo-added-p50-ms"}, "ms"},
	{"prober lag at 1,000 containers, p99", "ScaleProberLag", "lag-p99-ms", 1000, nil, "ms"},
	{"prober slots missed at 1,000 containers", "ScaleProberLag", "missed", 0, nil, ""},
	{"bot + actuator idle PSS, demo", "ScaleIdleRSS/demo", "total-pss-MB", 59, nil, "MB"},
	{"bot + actuator idle PSS, 1,000 containers", "ScaleIdleRSS/1000lxc", "total-pss-MB", 67, nil, "MB"},
}

// exactGoal marks the rows whose goal is exactly zero rather than none.
var exactGoal = map[string]bool{"missed": true}

var benchLine = regexp.MustCompile(`^Benchmark(\S+?)(-\d+)?\s+\d+\s+(.*)$`)

// parse collects every run's metrics per benchmark name.
func parse(r io.Reader) map[string][]map[string]float64 {
	runs := map[string][]map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		f := strings.Fields(m[3])
		metrics := map[string]float64{}
		for i := 0; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				metrics[f[i+1]] = v
			}
		}
		runs[m[1]] = append(runs[m[1]], metrics)
	}
	return runs
}

// median is the median of metric over runs, and whether any run had it.
func median(runs []map[string]float64, metric string) (float64, bool) {
	var vs []float64
	for _, r := range runs {
		if v, ok := r[metric]; ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return 0, false
	}
	slices.Sort(vs)
	return vs[len(vs)/2], true
}

func format(v float64, unit string) string {
	s := strconv.FormatFloat(v, 'f', 1, 64)
	if unit == "" {
		s = strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strings.TrimSpace(s + " " + unit)
}

func main() {
	if err := summarize(os.Stdout, parse(os.Stdin)); err != nil {
		fmt.Fprintln(os.Stderr, "benchsummary:", err)
		os.Exit(1)
	}
}

// summarize prints the summary of runs to out. Its error is out's: a
// summary that never reached its reader does not pass for printed.
func summarize(out io.Writer, runs map[string][]map[string]float64) error {
	w := bufio.NewWriter(out)
	fmt.Fprintf(w, "\n%-44s %12s %12s %14s  %s\n", "figure (median run)", "measured", "goal", "floor", "")
	for _, r := range rows {
		v, ok := median(runs[r.bench], r.metric)
		measured, goal, floor, verdict := "–", "–", "", ""
		if r.goal > 0 || exactGoal[r.metric] {
			goal = "≤ " + format(r.goal, r.unit)
		}
		if ok {
			measured = format(v, r.unit)
			switch {
			case goal == "–":
			case v <= r.goal:
				verdict = "ok"
			default:
				verdict = "OVER"
			}
		}
		if len(r.floor) > 0 {
			var sum float64
			all := true
			for _, f := range r.floor {
				fv, ok := median(runs[r.bench], f)
				all = all && ok
				sum += fv
			}
			if all {
				floor = format(sum, r.unit)
			}
		}
		fmt.Fprintf(w, "%-44s %12s %12s %14s  %s\n", r.what, measured, goal, floor, verdict)
	}
	fmt.Fprintln(w, "\nfloors: queue (a bare asynq round trip) + ssh (a bare connection to the first byte), or a bare bot's echo, in the same run.")
	fmt.Fprintln(w, "The machine's load moves every figure; compare a figure with its floor (docs/operations.md, \"Latency, measured\").")
	return w.Flush()
}
