package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/config"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// TestDiscoverAsksAndSaysWhatItFound runs `nomos discover` against a
// database no bot serves, then against the bot's discovery and the
// actuator role, wired as `nomos bot` and `nomos actuator` wire them,
// while an admin makes a container straight on labsim.
func TestDiscoverAsksAndSaysWhatItFound(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	dir := t.TempDir()
	fleet := testenv.NewFleet(t)
	databaseURL := testenv.DatabaseURL(t)
	st, err := store.Open(ctx, store.Config{URL: databaseURL, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.ApplySeed(ctx, fleet.Seed); err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2]string{{"orders.key", "orders.pub"}, {"reports.key", "reports.pub"}} {
		if err := tasks.GenerateKeyFiles(filepath.Join(dir, pair[0]), filepath.Join(dir, pair[1])); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := yaml.Marshal(map[string]any{
		"database": map[string]any{"url_file": writeSecret(t, dir, "database_url", databaseURL)},
		"redis":    map[string]any{"url": testenv.RedisURL(t)},
		"matrix":   map[string]any{"operators": []string{"@operator:localhost"}},
		"actuator": map[string]any{
			"ssh_key_file": fleet.SSHKeyFile, "known_hosts_file": fleet.KnownHostsFile, "journal_file": filepath.Join(dir, "journal"),
		},
		"orders":    map[string]any{"signing_key_file": filepath.Join(dir, "orders.key"), "verify_key_file": filepath.Join(dir, "orders.pub")},
		"reports":   map[string]any{"signing_key_file": filepath.Join(dir, "reports.key"), "verify_key_file": filepath.Join(dir, "reports.pub")},
		"inventory": map[string]any{"interval": "15s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "nomos.yaml")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	discover := func(args ...string) (int, string) {
		var out, errOut syncBuffer
		code := run(append([]string{"-config", path, "discover"}, args...), nil, &out, &errOut)
		return code, out.String() + errOut.String()
	}

	// No bot: asking works; waiting says nobody answered.
	if code, out := discover("-wait", "0"); code != 0 || !strings.Contains(out, "Asked for an inventory of hubris, strong.") {
		t.Errorf("discover -wait 0 exited %d:\n%s", code, out)
	}
	code, out := discover("-wait", "300ms")
	if code == 0 || !strings.Contains(out, "hubris: not sent yet") || !strings.Contains(out, "is `nomos bot` running") {
		t.Errorf("discover with no bot exited %d:\n%s", code, out)
	}

	// The actuator role and the bot's discovery and results consumer.
	runCtx, cancel := context.WithCancel(context.Background())
	actDone := make(chan error, 1)
	go func() {
		actDone <- runActuator(runCtx, &roleEnv{configPath: path, stdout: &syncBuffer{}, stderr: &syncBuffer{}, logger: testenv.Logger(t)}, nil)
	}()
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := openLifecycle(ctx, cfg, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	results := asynq.NewServer(l.redis, tasks.ResultsServerConfig(asynq.Config{TaskCheckInterval: 50 * time.Millisecond, LogLevel: asynq.ErrorLevel}))
	if err := results.Start(&executions.ResultsHandler{Service: l.execs}); err != nil {
		t.Fatal(err)
	}
	discDone := make(chan struct{})
	go func() { defer close(discDone); l.execs.RunDiscovery(runCtx) }()
	t.Cleanup(func() {
		cancel()
		<-discDone
		results.Shutdown()
		l.Close()
		if err := <-actDone; err != nil {
			t.Errorf("actuator: %v", err)
		}
	})
	// The runs asked for above are sent and answered first.
	waitNoOpenRuns(t, ctx, databaseURL)

	fleet.Admin(t, "strong", "pct create 150 local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --hostname newbox --start 1")
	code, out = discover("-wait", "1m")
	if code != 0 || !strings.Contains(out, "strong: 9 containers; new: 150 newbox") || !strings.Contains(out, "hubris: 7 containers; nothing changed") {
		t.Errorf("discover exited %d:\n%s", code, out)
	}
	if e, err := st.EntityBySlug(ctx, "lxc:strong/150"); err != nil || e.RunState != "running" {
		t.Errorf("lxc:strong/150 after discover: %+v, %v", e, err)
	}
}

func waitNoOpenRuns(t *testing.T, ctx context.Context, databaseURL string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	waitUntil(t, func() bool {
		var open int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM inventory_runs WHERE applied_at IS NULL`).Scan(&open); err != nil {
			t.Fatal(err)
		}
		return open == 0
	})
}
