package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/seeds"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/web"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestStatusPage(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	ctx := testenv.Context(t)
	seed, err := store.LoadSeed(seeds.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplySeed(ctx, seed); err != nil {
		t.Fatal(err)
	}
	id := uuid.Must(uuid.NewV7())
	_, err = st.CreateExecution(ctx, store.NewExecution{
		ID: id, Action: "restart", TargetSlug: "service:jellyfin", Params: json.RawMessage(`{}`),
		Steps: []string{"pct exec 101 -- systemctl restart jellyfin.service"}, RiskClass: "reversible_low",
		PlanHash: strings.Repeat("a", 64), PlanCode: "abcd", State: store.StateAwaitingApproval,
		RequestedBy: "agent", RequestedVia: "agent", Reason: "jellyfin hangs; api_key=hunter2 in its log", ExpiresAt: time.Now().Add(time.Hour),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A finished run whose command carries a password-looking word, and
	// whose output and error carry secrets.
	ran := uuid.Must(uuid.NewV7())
	step := "echo password=shown-as-run >/dev/null; mysql -e 'select 1'"
	_, err = st.CreateExecution(ctx, store.NewExecution{
		ID: ran, Action: "run", TargetSlug: "host:strong", Params: json.RawMessage(`{}`),
		Steps: []string{step}, RiskClass: "config_mutation",
		PlanHash: strings.Repeat("c", 64), PlanCode: "wxyz", State: store.StateRunning,
		RequestedBy: "mcp:claude", RequestedVia: "mcp", ExpiresAt: time.Now().Add(time.Hour),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	errText := "exit 1: token=error-secret"
	tail := "connecting\nAuthorization: Bearer bearer-secret-0123456789\nok"
	if _, err := st.Transition(ctx, store.Transition{ID: ran, From: []store.ExecutionState{store.StateRunning}, To: store.StateFailed,
		Audit: store.AuditEntry{Actor: "actuator", Action: "execution.failed"}, Error: &errText, ProgressTail: &tail}); err != nil {
		t.Fatal(err)
	}
	jf, err := st.EntityBySlug(ctx, "service:jellyfin")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.RaiseSignal(ctx, store.NewSignal{EntityID: jf.ID, Kind: "check:jellyfin-http", Severity: "critical", Summary: "jellyfin-http: GET failed"}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&web.Handler{Store: st, Logger: testenv.Logger(t)})
	defer srv.Close()

	body := get(t, srv.URL+"/", http.StatusOK)
	for _, want := range []string{"service:jellyfin", "lxc:131", "awaiting_approval", "/executions/" + id.String(),
		"Open signals", "check:jellyfin-http", "jellyfin-http: GET failed"} {
		if !strings.Contains(body, want) {
			t.Errorf("status page lacks %q", want)
		}
	}
	page := get(t, srv.URL+"/executions/"+id.String(), http.StatusOK)
	if !strings.Contains(page, "systemctl restart jellyfin.service") {
		t.Error("execution page lacks its steps")
	}
	if !strings.Contains(page, "Why: jellyfin hangs; api_key=[REDACTED] in its log") || strings.Contains(page, "hunter2") {
		t.Errorf("execution page does not show the redacted reason:\n%s", page)
	}
	out := get(t, srv.URL+"/executions/"+ran.String(), http.StatusOK)
	for _, want := range []string{"echo password=shown-as-run &gt;/dev/null; mysql -e &#39;select 1&#39;", "token=[REDACTED]",
		"Authorization: Bearer [REDACTED]", "requested by mcp:claude via mcp"} {
		if !strings.Contains(out, want) {
			t.Errorf("execution page lacks %q:\n%s", want, out)
		}
	}
	for _, secret := range []string{"error-secret", "bearer-secret"} {
		if strings.Contains(out, secret) {
			t.Errorf("execution page shows %q:\n%s", secret, out)
		}
	}
	get(t, srv.URL+"/executions/not-a-uuid", http.StatusNotFound)
	resp, err := http.Post(srv.URL+"/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST / = %d, want 405: the page is read-only", resp.StatusCode)
	}
}

func get(t *testing.T, url string, want int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s = %d, want %d", url, resp.StatusCode, want)
	}
	return string(b)
}
