//go:build nomosdev

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/internal/devstack"
	"github.com/nomoshq/nomos/internal/testenv"
)

// TestDevSites runs the demo's two hosts as two sites: each host is in
// its own site, and each site's actuator, with its own key and journal,
// answers the probes of its own host, since each consumes only its own
// site's queue.
func TestDevSites(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, devDir)
	database := "nomos_devtest_" + strings.ToLower(randomToken(4))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pg, err := devstack.EnsurePostgres(ctx, devstack.PostgresConfig{})
		if err == nil {
			err = pg.DropDatabase(ctx, database)
		}
		if err != nil {
			t.Errorf("drop %s: %v", database, err)
		}
	})
	bin := buildNomos(t)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, log := range []string{"bot.log", "actuator.log", "sites/site-2/actuator.log"} {
			if data, err := os.ReadFile(filepath.Join(dir, log)); err == nil {
				t.Logf("%s:\n%s", log, tailString(string(data), 4000))
			}
		}
	})
	args := []string{"-dir", dir, "-matrix-listen", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), "-database", database,
		"-web-listen", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), "-bin", bin, "-redis", testenv.RedisURL(t), "-sites", "2"}
	run := startDev(t, devSeedDir(t), args...)
	defer run.stop()
	checkDevDoctor(t, run.out.String())
	if !strings.Contains(run.out.String(), "Sites: default (strong) is served by the stack's actuator; site-2 (hubris) by its own") {
		t.Errorf("the summary does not name the sites:\n%s", run.out.String())
	}

	ctx := testenv.Context(t)
	conn, err := pgx.Connect(ctx, run.state.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	sites := map[string]string{}
	rows, err := conn.Query(ctx, `SELECT name, site FROM entities WHERE type = 'host'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var host, site string
		if err := rows.Scan(&host, &site); err != nil {
			t.Fatal(err)
		}
		sites[host] = site
	}
	if sites["strong"] != "default" || sites["hubris"] != "site-2" {
		t.Fatalf("hosts' sites = %v, want strong in default and hubris in site-2", sites)
	}
	// Each host's disk check runs on the host itself: only its site's
	// actuator can have answered it.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM check_defs
			WHERE slug IN ('strong-disk', 'hubris-disk') AND last_result_at IS NOT NULL AND last_health <> 'unhealthy'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the disk checks of both sites' hosts did not both answer")
		}
		time.Sleep(100 * time.Millisecond)
	}
	site2, err := os.ReadFile(filepath.Join(dir, "sites", "site-2", "actuator.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(site2), "site=site-2") || !strings.Contains(string(site2), "nomos:orders:site-2") {
		t.Errorf("site-2's actuator does not say it serves site-2's queues:\n%s", tailString(string(site2), 2000))
	}
	if _, err := os.Stat(filepath.Join(dir, "sites", "site-2", "journal")); err != nil {
		t.Errorf("site-2's actuator has no journal of its own: %v", err)
	}
	var refused int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'report.refused'`).Scan(&refused); err != nil {
		t.Fatal(err)
	}
	if refused != 0 {
		t.Errorf("the bot refused %d reports from the sites' actuators", refused)
	}
}
