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

	"github.com/nomoshq/nomos/internal/devstack"
	"github.com/nomoshq/nomos/internal/fleetgen"
	"github.com/nomoshq/nomos/internal/testenv"
)

// BenchmarkScaleIdleRSS runs the dev stack as `make demo` does, with the bot
// and the actuator as processes of their own, and reports the resident
// memory of each once the stack has settled: for the demo fleet, and for
// the generated fleet of 1,000 containers, 3,000 services and 5,000
// checks, which the bot probes all the while. Run it with -benchtime 1x.
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
				bot, act := idleRSS(b, f.seed(b))
				b.ReportMetric(bot, "bot-MB")
				b.ReportMetric(act, "actuator-MB")
				b.ReportMetric(bot+act, "total-MB")
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

// idleRSS starts a dev stack on seedDir, lets it settle, and returns the
// resident memory of its bot and its actuator in MB.
func idleRSS(b *testing.B, seedDir string) (bot, act float64) {
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
	args := []string{"-dir", dir, "-matrix-listen", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(b)), "-database", database,
		"-web-listen", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(b)), "-bin", buildNomos(b), "-redis", testenv.RedisURL(b)}
	run := startDev(b, seedDir, args...)
	defer run.stop()
	// Past the first sync, the first probes and the first inventory.
	time.Sleep(20 * time.Second)
	config := filepath.Join(dir, "nomos.yaml")
	return rssOf(b, config, "bot"), rssOf(b, config, "actuator")
}

// rssOf is the resident memory, in MB, of the process running role with
// config, found by its command line.
func rssOf(b *testing.B, config, role string) float64 {
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
		status, err := os.ReadFile(filepath.Join(filepath.Dir(p), "status"))
		if err != nil {
			b.Fatal(err)
		}
		for line := range strings.SplitSeq(string(status), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
				if err != nil {
					b.Fatal(err)
				}
				return float64(kb) / 1024
			}
		}
	}
	b.Fatalf("no %s process runs with %s", role, config)
	return 0
}
