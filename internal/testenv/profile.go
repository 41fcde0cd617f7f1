package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
)

// StartProfiles starts a CPU profile and records every blocking event and
// mutex contention from now on; the returned func stops them and writes
// cpu.pprof, block.pprof and mutex.pprof to dir, for `go tool pprof`.
func StartProfiles(tb testing.TB, dir string) (stop func()) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	cpu, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		tb.Fatal(err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		tb.Fatal(err)
	}
	runtime.SetBlockProfileRate(1)
	runtime.SetMutexProfileFraction(1)
	return func() {
		pprof.StopCPUProfile()
		if err := cpu.Close(); err != nil {
			tb.Error(err)
		}
		for _, name := range []string{"block", "mutex"} {
			f, err := os.Create(filepath.Join(dir, name+".pprof"))
			if err != nil {
				tb.Fatal(err)
			}
			if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
				tb.Error(err)
			}
			if err := f.Close(); err != nil {
				tb.Error(err)
			}
		}
		runtime.SetBlockProfileRate(0)
		runtime.SetMutexProfileFraction(0)
	}
}
