package actuator

import (
	"crypto/ed25519"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// TestMetricsCountWhatWasVerifiedAndRefused: the actuator's /metrics
// counts the order it ran and each request it refused by reason (a
// replay, an order and a probe signed by a stranger), sizes its journal
// and times the SSH session, and names no host, execution or command.
func TestMetricsCountWhatWasVerifiedAndRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(b.act.Collector())
	scrape := func() string {
		rec := httptest.NewRecorder()
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	_, stranger, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}

	o := b.order(t, "x-metrics", policy.RestartParams{}, b.jellyfin())
	env := b.send(t, o)
	diff(t, "the order", tasks.StatusSucceeded, b.results.result(t, o.ExecutionID).Status)
	b.deliver(t, env)
	diff(t, "its replay", tasks.RefusedReplay, b.results.nthResult(t, o.ExecutionID, 2).Refusal)
	forged := b.order(t, "x-forged", policy.RestartParams{}, b.jellyfin())
	forgedEnv, err := tasks.SignOrder(stranger, forged)
	if err != nil {
		t.Fatal(err)
	}
	b.deliver(t, forgedEnv)
	diff(t, "a forged order", tasks.RefusedBadSignature, b.results.result(t, forged.ExecutionID).Refusal)
	probe, err := tasks.NewCheckRunTask(stranger, tasks.CheckRun{CheckID: "check-forged", TargetID: "entity-1", Kind: "pct_status",
		Target: b.jellyfin(), Actuator: tasks.DefaultActuator, IssuedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.queue.Enqueue(probe); err != nil {
		t.Fatal(err)
	}
	journal := b.journalOnce(t, func(j string) bool { return strings.Contains(j, "finished x-metrics ") })

	// A forged probe is answered with nothing: wait for its count.
	const forgedProbe = `nomos_actuator_requests_refused_total{kind="probe",reason="bad_signature"} 1`
	deadline := time.Now().Add(waitTimeout)
	for !strings.Contains(scrape(), forgedProbe) {
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never counted the forged probe:\n%s", scrape())
		}
		time.Sleep(20 * time.Millisecond)
	}
	fi, err := os.Stat(b.journal)
	if err != nil {
		t.Fatal(err)
	}
	body := scrape()
	contains(t, "/metrics", body,
		`nomos_actuator_requests_verified_total{kind="order"} 1`,
		`nomos_actuator_requests_refused_total{kind="order",reason="replay"} 1`,
		`nomos_actuator_requests_refused_total{kind="order",reason="bad_signature"} 1`,
		`nomos_actuator_requests_refused_total{kind="order",reason="plan_mismatch"} 0`,
		forgedProbe,
		`nomos_actuator_journal_executions 1`,
		`nomos_actuator_journal_unfinished 0`,
		`nomos_actuator_journal_bytes `+strconv.FormatInt(fi.Size(), 10),
		`nomos_actuator_ssh_session_duration_seconds_count{result="ok"} 1`,
	)
	diff(t, "journal lines", 3, strings.Count(journal, "\n"))
	for _, secret := range []string{b.addr, "x-metrics", "x-forged", "check-forged", "jellyfin", "systemctl"} {
		if strings.Contains(body, secret) {
			t.Errorf("/metrics names %q:\n%s", secret, body)
		}
	}
}
