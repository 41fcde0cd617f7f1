package main

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestParseTakesTheMedianRun: every run of a benchmark is read, sub-benchmarks
// by their full name, and a figure is the median of its runs.
func TestParseTakesTheMedianRun(t *testing.T) {
	t.Parallel()
	out := `goos: linux
BenchmarkE2EApprovalToSSH-2   	     200	  44587729 ns/op	        16.00 approval-to-ssh-p50-ms	       110.3 approval-to-ssh-p99-ms
BenchmarkE2EApprovalToSSH-2   	     200	  44587729 ns/op	        12.00 approval-to-ssh-p50-ms	       110.3 approval-to-ssh-p99-ms
BenchmarkE2EApprovalToSSH-2   	     200	  44587729 ns/op	        30.00 approval-to-ssh-p50-ms	       110.3 approval-to-ssh-p99-ms
BenchmarkLoadApprovalToSSH/plans=50-2         	       1	10406412060 ns/op	       948.7 approval-to-ssh-p50-ms
PASS
`
	runs := parse(strings.NewReader(out))
	if v, ok := median(runs["E2EApprovalToSSH"], "approval-to-ssh-p50-ms"); !ok || v != 16 {
		t.Errorf("median of 16, 12, 30 = %v, %v; want 16", v, ok)
	}
	if v, ok := median(runs["LoadApprovalToSSH/plans=50"], "approval-to-ssh-p50-ms"); !ok || v != 948.7 {
		t.Errorf("the sub-benchmark's figure = %v, %v; want 948.7", v, ok)
	}
	if _, ok := median(runs["ScaleProberLag"], "lag-p99-ms"); ok {
		t.Error("a benchmark that did not run has a figure")
	}
}

// TestSummarizeReportsAFailedWrite: a summary that cannot be written (here
// to /dev/full, which refuses every write with ENOSPC as a full disk does)
// is an error, not a silent exit; one that can is the whole table.
func TestSummarizeReportsAFailedWrite(t *testing.T) {
	t.Parallel()
	runs := parse(strings.NewReader("BenchmarkE2EApprovalToSSH-2   200   44587729 ns/op   16.00 approval-to-ssh-p50-ms\n"))
	var out strings.Builder
	if err := summarize(&out, runs); err != nil {
		t.Fatalf("summarize to a buffer: %v", err)
	}
	if want := "approval → first SSH byte, 1 plan, p50"; !strings.Contains(out.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, out.String())
	}

	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full here: %v", err)
	}
	defer func() { _ = full.Close() }()
	if err := summarize(full, runs); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("summarize to a full device: %v, want ENOSPC", err)
	}
}
