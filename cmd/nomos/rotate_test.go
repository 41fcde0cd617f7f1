package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/config"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// keyPair writes a signing key and its verify key into dir as name.key and
// name.pub.
func keyPair(t *testing.T, dir, name string) (signing, verify string) {
	t.Helper()
	signing, verify = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	if err := tasks.GenerateKeyFiles(signing, verify); err != nil {
		t.Fatal(err)
	}
	return signing, verify
}

func TestConfigPreviousVerifyKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, current := keyPair(t, dir, "current")
	_, previous := keyPair(t, dir, "previous")
	garbage := writeFile(t, dir, "garbage.pub", "not a key")
	for _, tc := range []struct {
		name, role string
		env        []string
		want       string // empty: nothing about the previous key
	}{
		{"actuator during a rotation", "actuator", []string{"NOMOS_ORDERS__VERIFY_KEY_FILE=" + current, "NOMOS_ORDERS__PREVIOUS_VERIFY_KEY_FILE=" + previous}, ""},
		{"actuator, previous key missing", "actuator", []string{"NOMOS_ORDERS__VERIFY_KEY_FILE=" + current, "NOMOS_ORDERS__PREVIOUS_VERIFY_KEY_FILE=" + filepath.Join(dir, "gone.pub")},
			"orders.previous_verify_key_file: want the public key being rotated out, as a PEM file"},
		{"actuator, previous key not a key", "actuator", []string{"NOMOS_ORDERS__VERIFY_KEY_FILE=" + current, "NOMOS_ORDERS__PREVIOUS_VERIFY_KEY_FILE=" + garbage},
			"orders.previous_verify_key_file: want the public key being rotated out"},
		{"actuator, previous key is the current one", "actuator", []string{"NOMOS_ORDERS__VERIFY_KEY_FILE=" + current, "NOMOS_ORDERS__PREVIOUS_VERIFY_KEY_FILE=" + current},
			"orders.previous_verify_key_file: holds the same key as orders.verify_key_file"},
		{"bot during a rotation", "bot", []string{"NOMOS_REPORTS__VERIFY_KEY_FILE=" + current, "NOMOS_REPORTS__PREVIOUS_VERIFY_KEY_FILE=" + previous}, ""},
		{"bot, previous key is the current one", "bot", []string{"NOMOS_REPORTS__VERIFY_KEY_FILE=" + current, "NOMOS_REPORTS__PREVIOUS_VERIFY_KEY_FILE=" + current},
			"reports.previous_verify_key_file: holds the same key as reports.verify_key_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Load("", tc.env)
			if err != nil {
				t.Fatal(err)
			}
			// The rest of the config is missing, so validate fails;
			// only what it says about the previous key matters here.
			err = cfg.Validate(tc.role)
			if err == nil {
				t.Fatal("validate = nil, want the rest of the config missing")
			}
			got := err.Error()
			switch {
			case tc.want == "" && strings.Contains(got, "previous_verify_key_file"):
				t.Errorf("validate(%s) complains of a good previous key:\n%s", tc.role, got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("validate(%s) = %s\nwant %q", tc.role, got, tc.want)
			}
		})
	}
}

// TestRotationThroughTheConfig: orders.previous_verify_key_file reaches the
// actuator, so an order signed with the previous key runs, and
// reports.previous_verify_key_file reaches the bot, so a report signed with
// the previous key passes its signature check; without them, the same
// report is refused as forged.
func TestRotationThroughTheConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	oldOrders, oldOrdersPub := keyPair(t, dir, "orders-old")
	_, newOrdersPub := keyPair(t, dir, "orders-new")
	oldReports, oldReportsPub := keyPair(t, dir, "reports-old")
	newReports, newReportsPub := keyPair(t, dir, "reports-new")
	redisURL := testenv.RedisURL(t)
	ctx := testenv.Context(t)

	t.Run("actuator", func(t *testing.T) {
		fleet := testenv.NewFleet(t)
		stderr := &syncBuffer{}
		env := &roleEnv{stdout: stderr, stderr: stderr, logger: testenv.Logger(t), environ: []string{
			"NOMOS_REDIS__URL=" + redisURL,
			"NOMOS_ACTUATOR__SSH_KEY_FILE=" + fleet.SSHKeyFile,
			"NOMOS_ACTUATOR__KNOWN_HOSTS_FILE=" + fleet.KnownHostsFile,
			"NOMOS_ACTUATOR__JOURNAL_FILE=" + filepath.Join(dir, "journal"),
			"NOMOS_ORDERS__VERIFY_KEY_FILE=" + newOrdersPub,
			"NOMOS_ORDERS__PREVIOUS_VERIFY_KEY_FILE=" + oldOrdersPub,
			"NOMOS_REPORTS__SIGNING_KEY_FILE=" + newReports,
		}}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- runActuator(runCtx, env, nil) }()
		defer func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("actuator: %v", err)
			}
		}()

		opt, err := asynq.ParseRedisURI(redisURL)
		if err != nil {
			t.Fatal(err)
		}
		priv, err := tasks.LoadSigningKey(oldOrders)
		if err != nil {
			t.Fatal(err)
		}
		reports := make(chan *asynq.Task, 64)
		results := asynq.NewServer(opt, asynq.Config{Queues: map[string]int{tasks.QueueResults: 1}, TaskCheckInterval: 20 * time.Millisecond, LogLevel: asynq.ErrorLevel})
		answerApprovals(t, opt, priv)
		if err := results.Start(asynq.HandlerFunc(func(_ context.Context, task *asynq.Task) error { reports <- task; return nil })); err != nil {
			t.Fatal(err)
		}
		defer results.Shutdown()
		client := asynq.NewClient(opt)
		defer client.Close()
		id := uuid.NewString()
		envelope, err := tasks.SignOrder(priv, restartOrder(t, fleet, id))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Enqueue(tasks.NewRunTask(tasks.DefaultSite, id, envelope)); err != nil {
			t.Fatal(err)
		}
		task := waitReport(t, reports, func(task *asynq.Task) bool { return task.Type() == tasks.TypeExecutionResult })
		reportPub, err := tasks.LoadVerifyKey(newReportsPub)
		if err != nil {
			t.Fatal(err)
		}
		r, err := tasks.VerifyResult(tasks.VerifyKeys{reportPub}, task.Payload())
		if err != nil || r.ExecutionID != id || r.Status != tasks.StatusSucceeded {
			t.Fatalf("an order signed with the previous key: %s %s %q %v; want it run", r.ExecutionID, r.Status, r.Error, err)
		}
		if !strings.Contains(stderr.String(), "key rotation: orders signed with the previous order key are accepted too") {
			t.Errorf("the actuator does not log that it accepts the previous key:\n%s", stderr.String())
		}
	})

	t.Run("bot", func(t *testing.T) {
		base := []string{
			"NOMOS_DATABASE__URL=" + testenv.DatabaseURL(t),
			"NOMOS_REDIS__URL=" + redisURL,
			"NOMOS_MATRIX__OPERATORS=@op:localhost",
			"NOMOS_ORDERS__SIGNING_KEY_FILE=" + oldOrders,
			"NOMOS_REPORTS__VERIFY_KEY_FILE=" + newReportsPub,
		}
		oldKey, err := tasks.LoadSigningKey(oldReports)
		if err != nil {
			t.Fatal(err)
		}
		progress, err := tasks.SignProgress(oldKey, tasks.Progress{ExecutionID: uuid.NewString(), Actuator: tasks.DefaultActuator, Seq: 1})
		if err != nil {
			t.Fatal(err)
		}
		// refusal applies the old key's report with a bot built from env.
		refusal := func(env []string) executions.ReportRefusal {
			t.Helper()
			cfg, err := config.Load("", env)
			if err != nil {
				t.Fatal(err)
			}
			l, err := openLifecycle(ctx, cfg, testenv.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			_, err = l.execs.ApplyReport(ctx, tasks.TypeExecutionProgress, progress)
			var refused *executions.RefusedReportError
			if !errors.As(err, &refused) {
				t.Fatalf("ApplyReport = %v, want a refusal", err)
			}
			return refused.Reason
		}
		// The report names no execution the bot sent, so it is refused
		// either way; what matters is whether its signature passed.
		if got := refusal(append(base, "NOMOS_REPORTS__PREVIOUS_VERIFY_KEY_FILE="+oldReportsPub)); got != executions.RefusedNotDispatched {
			t.Errorf("during the overlap, a report signed with the previous key was refused as %s, want %s (past the signature check)", got, executions.RefusedNotDispatched)
		}
		if got := refusal(base); got != executions.RefusedBadSignature {
			t.Errorf("after the overlap, a report signed with the previous key was refused as %s, want %s", got, executions.RefusedBadSignature)
		}
	})
}

// restartOrder is the order the bot would sign to restart jellyfin.
func restartOrder(t *testing.T, fleet *testenv.Fleet, id string) tasks.Order {
	t.Helper()
	target := policy.Target{Type: policy.TargetService, ID: "svc-jellyfin", Slug: "service:jellyfin", Host: "strong", VMID: 101, Unit: "jellyfin.service"}
	plan, err := policy.NewPlan(policy.RestartParams{}, target)
	if err != nil {
		t.Fatal(err)
	}
	hash, err := policy.PlanHash(plan)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	return tasks.Order{
		ExecutionID: id, Actuator: tasks.DefaultActuator, Action: "restart", Params: json.RawMessage(`{}`), Steps: plan.Steps, RiskClass: "reversible_low", PlanHash: hash,
		Target:   tasks.Target{ID: target.ID, Slug: target.Slug, Type: "service", Host: "strong", HostAddr: fleet.Sim.Addr("strong"), VMID: 101, Unit: "jellyfin.service"},
		IssuedAt: now, ExpiresAt: now.Add(15 * time.Minute),
	}
}

// TestSystemdRotationLines uncomments the lines a key rotation turns on in
// each unit and its YAML, as docs/operations.md says to, and checks that
// the unit still meets its spec and its roles start with the previous key.
func TestSystemdRotationLines(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		spec       unitSpec
		credential string
		previous   func(*config.Config) string
	}{
		{unitSpecs[0], "reports_verify.previous.pub", func(c *config.Config) string { return c.Reports.PreviousVerifyKeyFile }},
		{unitSpecs[1], "orders_verify.previous.pub", func(c *config.Config) string { return c.Orders.PreviousVerifyKeyFile }},
	} {
		t.Run(c.spec.file, func(t *testing.T) {
			t.Parallel()
			unitText := readText(t, filepath.Join(deployDir, "systemd", c.spec.file))
			on := strings.Replace(unitText, "#LoadCredential="+c.credential+":", "LoadCredential="+c.credential+":", 1)
			if on == unitText {
				t.Fatalf("%s has no commented LoadCredential= for %s", c.spec.file, c.credential)
			}
			u := parseUnitText(c.spec.file, on)
			if problems := unitProblems(u, c.spec); len(problems) > 0 {
				t.Errorf("with the rotation line on:\n%s", strings.Join(problems, "\n"))
			}
			yamlText := readText(t, filepath.Join(deployDir, "systemd", c.spec.yaml))
			yamlOn := strings.Replace(yamlText, "  # previous_verify_key_file: ", "  previous_verify_key_file: ", 1)
			if yamlOn == yamlText {
				t.Fatalf("%s has no commented previous_verify_key_file", c.spec.yaml)
			}
			root := t.TempDir()
			for _, cred := range u.credentials() {
				writeFakeSecret(t, filepath.Join(root, cred.name), cred.name)
			}
			yamlOn = strings.ReplaceAll(yamlOn, "/run/credentials/"+c.spec.file+"/", root+"/")
			yamlOn = strings.ReplaceAll(yamlOn, "/var/lib/"+c.spec.stateDir+"/", root+"/")
			path := writeFile(t, root, c.spec.yaml, yamlOn)
			cfg, err := config.Load(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, role := range c.spec.roles {
				if err := cfg.Validate(strings.Fields(role)[0]); err != nil {
					t.Errorf("%s with the rotation lines on would not start: %v", c.spec.file, err)
				}
			}
			if got, want := c.previous(cfg), filepath.Join(root, c.credential); got != want {
				t.Errorf("previous_verify_key_file = %q, want the credential %q", got, want)
			}
		})
	}
}
