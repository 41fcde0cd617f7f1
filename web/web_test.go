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
