//go:build nomosdev

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/sys/unix"

	"github.com/nomoshq/nomos/internal/devstack"
	"github.com/nomoshq/nomos/internal/fleetgen"
	"github.com/nomoshq/nomos/internal/testenv"
)

// BenchmarkScaleIdleRSS runs the dev stack as `make demo` does, with the bot
// and the actuator as processes of their own, and reports the memory of
// each once the stack has settled: for the demo fleet, and for the
// generated fleet of 1,000 containers, 3,000 services and 5,000 checks,
// which the bot probes all the while. Run it with -benchtime 1x.
//
// Both roles run the one nomos binary, so the pages of its code they
// touch are in memory once, yet counted in each one's RSS. The total is
// given both ways: RSS summed, and PSS summed (each shared page split
// between the processes that map it), which is what the pair costs the
// machine; anon is the private memory, mostly the Go heap. total-cpu-s
// is the processor time both spent from their start to the measurement,
// to weigh a change that trades memory for collector work.
func BenchmarkScaleIdleRSS(b *testing.B) {
	for _, f := range []struct {
		name string
		seed func(b *testing.B) string
	}{
		{"demo", func(b *testing.B) string { return devSeedDir(b) }},
		{"1000lxc", generatedSeedDir},
	} {
		b.Run(f.name, func(b *testing.B) {
			for b.Loop() {
				bot, act := idleMemory(b, f.seed(b))
				b.ReportMetric(bot.rss, "bot-rss-MB")
				b.ReportMetric(act.rss, "actuator-rss-MB")
				b.ReportMetric(bot.pss, "bot-pss-MB")
				b.ReportMetric(act.pss, "actuator-pss-MB")
				b.ReportMetric(bot.rss+act.rss, "total-rss-MB")
				b.ReportMetric(bot.pss+act.pss, "total-pss-MB")
				b.ReportMetric(bot.anon+act.anon, "total-anon-MB")
				b.ReportMetric(bot.cpu+act.cpu, "total-cpu-s")
			}
		})
	}
}

// generatedSeedDir writes the generated fleet as seed files, its hosts on
// free ports.
func generatedSeedDir(b *testing.B) string {
	dir := b.TempDir()
	seed := fleetgen.Seed(fleetgen.Config{Addr: func(int) string { return fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(b)) }})
	for name, v := range map[string]any{"fleet.yaml": map[string]any{"hosts": seed.Hosts}, "checks.yaml": map[string]any{"checks": seed.Checks}} {
		data, err := yaml.Marshal(v)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// uncache writes the freshly linked binary at path to disk and drops it
// from the page cache, so that the roles read it in as they would an
// installed one. The linker writes its output through a shared mapping,
// which leaves the file in the page cache in larger pieces than reading
// it back does (large folios), and the kernel maps a piece whole on a
// process's first touch of any page in it: straight from the linker,
// `nomos version` alone mapped 32 MB of the binary, read back from disk
// 25 MB. A packaged binary is read from disk, or from pages a plain write
// left, which map like those read from disk.
func uncache(b *testing.B, path string) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }() // opened to sync and advise, nothing written through it
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Fatal(err)
	}
}

// memory is a process's resident memory, in MB, from smaps_rollup, and
// the processor time it has used, in seconds.
type memory struct{ rss, pss, anon, cpu float64 }

// idleMemory starts a dev stack on seedDir, lets it settle, and returns
// the memory of its bot and its actuator.
func idleMemory(b *testing.B, seedDir string) (bot, act memory) {
	b.StopTimer()
	defer b.StartTimer()
	top := b.TempDir()
	dir := filepath.Join(top, devDir)
	database := "nomos_devbench_" + strings.ToLower(randomToken(4))
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if pg, err := devstack.EnsurePostgres(ctx, devstack.PostgresConfig{}); err == nil {
			_ = pg.DropDatabase(ctx, database)
		}
	})
	bin := buildNomos(b)
	uncache(b, bin)
	args := []string{"-dir", dir, "-matrix-listen", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(b)), "-database", database,
		"-web-listen", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(b)), "-bin", bin, "-redis", testenv.RedisURL(b)}
	run := startDev(b, seedDir, args...)
	defer run.stop()
	// Past the first sync, the first probes and the first inventory.
	time.Sleep(20 * time.Second)
	config := filepath.Join(dir, "nomos.yaml")
	return memoryOf(b, config, "bot"), memoryOf(b, config, "actuator")
}

// memoryOf is the memory of the process running role with config, found
// by its command line.
func memoryOf(b *testing.B, config, role string) memory {
	want := []byte("-config\x00" + config + "\x00" + role + "\x00")
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err != nil || !bytes.HasSuffix(cmdline, want) {
			continue
		}
		rollup, err := os.ReadFile(filepath.Join(filepath.Dir(p), "smaps_rollup"))
		if err != nil {
			b.Fatal(err)
		}
		var m memory
		stat, err := os.ReadFile(filepath.Join(filepath.Dir(p), "stat"))
		if err != nil {
			b.Fatal(err)
		}
		// utime and stime, in clock ticks of 1/100 s, follow the
		// command name, which ends at the last ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		utime, _ := strconv.Atoi(fields[11])
		stime, _ := strconv.Atoi(fields[12])
		m.cpu = float64(utime+stime) / 100
		for line := range strings.SplitSeq(string(rollup), "\n") {
			name, rest, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			if err != nil {
				continue
			}
			switch name {
			case "Rss":
				m.rss = float64(kb) / 1024
			case "Pss":
				m.pss = float64(kb) / 1024
			case "Anonymous":
				m.anon = float64(kb) / 1024
			}
		}
		return m
	}
	b.Fatalf("no %s process runs with %s", role, config)
	return memory{}
}
