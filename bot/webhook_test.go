package bot_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/web"
)

const hookToken = "alertmanager-token-0123456789abcdef"

// amAlert builds one alert of an Alertmanager v4 webhook payload.
func amAlert(status, name, instance, summary string, startsAt time.Time) map[string]any {
	a := map[string]any{
		"status":       status,
		"labels":       map[string]string{"alertname": name, "instance": instance, "job": "node", "severity": "critical"},
		"annotations":  map[string]string{"summary": summary},
		"startsAt":     startsAt.Format(time.RFC3339Nano),
		"endsAt":       "0001-01-01T00:00:00Z",
		"generatorURL": "http://prometheus:9090/graph",
		"fingerprint":  "c0ffee",
	}
	if status == "resolved" {
		a["endsAt"] = time.Now().Format(time.RFC3339Nano)
	}
	return a
}

// postAlerts sends one webhook batch and returns the status code.
func postAlerts(t testing.TB, url, token string, alerts ...map[string]any) int {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"version": "4", "groupKey": "{}:{alertname=\"x\"}", "truncatedAlerts": 0, "status": "firing", "receiver": "nomos",
		"groupLabels": map[string]string{}, "commonLabels": map[string]string{}, "commonAnnotations": map[string]string{},
		"externalURL": "http://alertmanager:9093", "alerts": alerts,
	})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url+web.AlertmanagerPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestAlertmanagerAlertsBecomeSignals: a firing Alertmanager alert on an
// address of the fleet becomes a signal on the service there and is
// announced; its resolution is a recovery reply. An alert on a service
// whose own Nomos check is already announced is not announced twice. A
// wrong token changes nothing (401), and an alert naming no entity is
// refused (422).
func TestAlertmanagerAlertsBecomeSignals(t *testing.T) {
	t.Parallel()
	b := setup(t, withAlerts())
	hook, err := web.NewAlertmanagerHook(web.AlertmanagerHookConfig{Store: b.store, Token: hookToken, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(web.AlertmanagerPath, hook)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	openSignals := func() []store.Signal {
		t.Helper()
		sigs, err := b.store.ListSignals(b.ctx, store.SignalFilter{})
		if err != nil {
			t.Fatal(err)
		}
		return sigs
	}

	start := time.Now().Add(-time.Minute)
	gitea := amAlert("firing", "GiteaDown", "10.40.0.102:3000", "gitea answers 502", start)
	for _, token := range []string{"", "wrong-token-0123456789abcdef0123456789", hookToken + "x"} {
		if code := postAlerts(t, srv.URL, token, gitea); code != http.StatusUnauthorized {
			t.Errorf("token %q: status %d, want 401", token, code)
		}
	}
	if sigs := openSignals(); len(sigs) != 0 {
		t.Fatalf("refused requests raised signals: %+v", sigs)
	}

	// jellyfin's own check fails and is announced first.
	due, err := b.store.ClaimDueChecks(b.ctx, start, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range due {
		if c.Slug == "jellyfin-http" {
			if err := b.store.RecordCheck(b.ctx, store.CheckObservation{CheckID: c.ID.String(), TargetID: c.TargetID.String(),
				Health: "unhealthy", Detail: "GET failed", At: start}); err != nil {
				t.Fatal(err)
			}
		}
	}
	b.waitFor(t, b.botSays("service:jellyfin is failing"))

	// One batch: Prometheus also sees jellyfin down (raised earlier, so a
	// pass would announce it first), gitea down, and a host Nomos does not
	// know. The known ones are applied; the batch is answered 422.
	jellyfin := amAlert("firing", "JellyfinDown", "10.40.0.101:8096", "jellyfin probe failed", start.Add(-time.Second))
	stranger := amAlert("firing", "NodeDown", "192.0.2.77:9100", "node exporter gone", start)
	if code := postAlerts(t, srv.URL, hookToken, jellyfin, gitea, stranger); code != http.StatusUnprocessableEntity {
		t.Errorf("a batch with an unknown target: status %d, want 422", code)
	}
	alert := b.waitFor(t, b.botSays("service:gitea is failing", "gitea answers 502"))
	kinds := map[string]string{}
	for _, g := range openSignals() {
		kinds[g.EntitySlug+" "+g.Kind] = g.Severity
	}
	for _, want := range []string{"service:gitea alertmanager:GiteaDown", "service:jellyfin alertmanager:JellyfinDown"} {
		if kinds[want] != "critical" {
			t.Errorf("no critical signal %q among %v", want, kinds)
		}
	}
	if n := countContaining(b.botBodies(t), "service:jellyfin is failing"); n != 1 {
		t.Errorf("jellyfin was announced %d times, want once: Prometheus's alert repeated Nomos's own", n)
	}
	if n := countContaining(b.botBodies(t), "192.0.2.77"); n != 0 {
		t.Errorf("the unknown target was announced")
	}

	// Firing again changes nothing; resolving is a recovery reply.
	if code := postAlerts(t, srv.URL, hookToken, gitea); code != http.StatusNoContent {
		t.Errorf("repeating a firing alert: status %d, want 204", code)
	}
	if code := postAlerts(t, srv.URL, hookToken, amAlert("resolved", "GiteaDown", "10.40.0.102:3000", "gitea answers 502", start)); code != http.StatusNoContent {
		t.Errorf("resolving: status %d, want 204", code)
	}
	recovered := b.waitFor(t, b.botSays("service:gitea recovered", "alertmanager:GiteaDown"))
	if got := recovered.Content.AsMessage().RelatesTo.GetReplyTo(); got != alert.ID {
		t.Errorf("the recovery replies to %q, want the alert %s", got, alert.ID)
	}
	if n := countContaining(b.botBodies(t), "service:gitea is failing"); n != 1 {
		t.Errorf("gitea was announced %d times, want once", n)
	}
}
