package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/nomoshq/nomos/internal/testenv"

	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/web"
)

func TestStatusPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	waiting := b.plan(t, "service:jellyfin", "jellyfin hangs; api_key=hunter2 in its log", store.StateAwaitingApproval)
	// A finished run whose command carries a password-looking word, and
	// whose output and error carry secrets.
	step := "echo password=shown-as-run >/dev/null; mysql -e 'select 1'"
	ran := b.plan(t, "host:strong", "", store.StateRunning, step)
	errText := "exit 1: token=error-secret"
	tail := "connecting\nAuthorization: Bearer bearer-secret-0123456789\nok"
	b.move(t, ran.ID, store.StateRunning, store.StateFailed, func(tr *store.Transition) {
		tr.Error, tr.ProgressTail = &errText, &tail
		tr.Result = json.RawMessage(`{"exit_code":1,"stderr":"password=result-secret"}`)
	})
	jf, err := b.st.EntityBySlug(b.ctx, "service:jellyfin")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.st.RaiseSignal(b.ctx, store.NewSignal{EntityID: jf.ID, Kind: "check:jellyfin-http", Severity: "critical", Summary: "jellyfin-http: GET failed, secret=sig-secret"}); err != nil {
		t.Fatal(err)
	}

	body := b.get(t, "/", http.StatusOK)
	containsAll(t, "overview", body, "lxc:strong/101", "awaiting_approval", "/executions/"+waiting.ID.String(),
		"Open signals", "jellyfin-http: GET failed, secret=[REDACTED]", "@operator:nomos.test", "Pending approvals")
	containsNone(t, "overview", body, "sig-secret")

	page := b.get(t, "/executions/"+waiting.ID.String(), http.StatusOK)
	containsAll(t, "pending execution", page, "systemctl restart jellyfin.service", "jellyfin hangs; api_key=[REDACTED] in its log",
		"execution.requested", strings.Repeat("a", 64))
	containsNone(t, "pending execution", page, "hunter2")

	out := b.get(t, "/executions/"+ran.ID.String(), http.StatusOK)
	containsAll(t, "failed execution", out, "echo password=shown-as-run &gt;/dev/null; mysql -e &#39;select 1&#39;",
		"token=[REDACTED]", "Authorization: Bearer [REDACTED]", "execution.failed", "password=[REDACTED]")
	containsNone(t, "failed execution", out, "error-secret", "bearer-secret", "result-secret")

	b.get(t, "/executions/not-a-uuid", http.StatusNotFound)
	b.get(t, "/executions/"+uuid.NewString(), http.StatusNotFound)
	b.get(t, "/e/service:nope", http.StatusNotFound)
	b.get(t, "/no-such-page", http.StatusNotFound)
}

// TestRoutesAreReadOnly walks every route with every method that could
// change something: the router knows GET and HEAD alone.
func TestRoutesAreReadOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	paths := b.srv.RouteExamples()
	if len(paths) < 12 {
		t.Fatalf("only %d routes: %v", len(paths), paths)
	}
	for _, p := range paths {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			req, _ := http.NewRequest(m, b.http.URL+p, strings.NewReader("state=approved"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("%s %s = %d, want 405", m, p, resp.StatusCode)
			}
		}
		req, _ := http.NewRequest(http.MethodHead, b.http.URL+p, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusMethodNotAllowed {
			t.Errorf("HEAD %s = 405, want it answered", p)
		}
	}
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, p := range []string{"/", "/executions", "/static/app.css", "/healthz", "/no-such-page"} {
		resp, err := http.Get(b.http.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", p, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP %q allows inline or eval", p, csp)
		}
		for h, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"} {
			if got := resp.Header.Get(h); got != want {
				t.Errorf("%s: %s = %q, want %q", p, h, got, want)
			}
		}
	}
	// No page carries an inline script or a handler attribute.
	body := b.get(t, "/", http.StatusOK)
	if strings.Contains(body, "<script>") || strings.Contains(body, " onload=") || strings.Contains(body, "style=") {
		t.Errorf("overview carries inline script or style:\n%s", body)
	}
}

func TestHealthzAndReadyz(t *testing.T) {
	t.Parallel()
	opt, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	up := redis.NewClient(opt)
	defer up.Close()
	// Nothing listens here: Redis is down.
	down := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer down.Close()
	readyWith := func(rc *redis.Client) option {
		return func(c *web.Config) {
			c.Ready = []web.ReadyCheck{
				{Name: "postgres", Check: c.Store.Ping},
				{Name: "redis", Check: func(ctx context.Context) error { return rc.Ping(ctx).Err() }},
				{Name: "homeserver_sync"},
				{Name: "leader", Check: func(context.Context) error { return web.ErrStandby }},
			}
		}
	}
	type report struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	for _, c := range []struct {
		name   string
		rc     *redis.Client
		status int
		want   report
	}{
		// A standby bot is ready: it serves the page while the other leads.
		{"all up", up, http.StatusOK, report{"ok", map[string]string{"postgres": "ok", "redis": "ok", "homeserver_sync": "unknown", "leader": "standby"}}},
		{"redis down", down, http.StatusServiceUnavailable, report{"unavailable", map[string]string{"postgres": "ok", "redis": "unavailable", "homeserver_sync": "unknown", "leader": "standby"}}},
	} {
		b := setup(t, readyWith(c.rc))
		if got := b.get(t, "/healthz", http.StatusOK); got != "ok\n" {
			t.Errorf("%s: /healthz = %q, want ok", c.name, got)
		}
		var got report
		if err := json.Unmarshal([]byte(b.get(t, "/readyz", c.status)), &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s: /readyz (-want +got):\n%s", c.name, diff)
		}
	}
}

// TestReadyzSaysTheSyncAge: /readyz reports how long ago the bot last
// heard from the homeserver, for the watchdog on another machine, and
// leaves it out while there is no answer to age (a standby, a bot that
// has not synced yet).
func TestReadyzSaysTheSyncAge(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var last atomic.Int64 // unix nanoseconds; 0 before any sync
	b := setup(t, func(c *web.Config) {
		c.Clock = func() time.Time { return now }
		c.LastSync = func() time.Time {
			if n := last.Load(); n != 0 {
				return time.Unix(0, n)
			}
			return time.Time{}
		}
	})
	if got := b.get(t, "/readyz", http.StatusOK); strings.Contains(got, "last_sync_age_seconds") {
		t.Errorf("/readyz before any sync = %s, want no sync age", got)
	}
	last.Store(now.Add(-42 * time.Second).UnixNano())
	if got := b.get(t, "/readyz", http.StatusOK); !strings.Contains(got, `"last_sync_age_seconds":42`) {
		t.Errorf("/readyz 42s after the last sync = %s, want last_sync_age_seconds 42", got)
	}
}

// TestStaleShowsAsStale: a target whose checks stopped answering after a
// healthy result is counted and coloured stale up the grid, never healthy.
func TestStaleShowsAsStale(t *testing.T) {
	t.Parallel()
	b := setup(t)
	due, err := b.st.ClaimDueChecks(b.ctx, time.Now(), 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range due {
		if c.Slug != "jellyfin-http" {
			continue
		}
		if err := b.st.RecordCheck(b.ctx, store.CheckObservation{CheckID: c.ID.String(), TargetID: c.TargetID.String(),
			Health: "healthy", Detail: "200 OK", At: time.Now().Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	// The service goes stale, and its container with it: a container's
	// health rolls up its services'. A result an hour old is stale as it
	// is written; the pass raises its signal.
	if _, err := b.st.MarkStale(b.ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	body := b.get(t, "/", http.StatusOK)
	containsAll(t, "overview", body,
		`<span class="h-stale">stale</span><b>2</b>`,
		`<a class="tile b-stale" href="/e/lxc:strong/101" title="jellyfin: stale">101</a>`,
		`<span class="badge b-stale">stale</span> <a href="/e/host:strong">strong</a>`,
		`<a href="/e/service:jellyfin">jellyfin</a> <span class="h-stale">stale</span>`)
	containsAll(t, "jellyfin", b.get(t, "/e/service:jellyfin", http.StatusOK), `<span class="badge b-stale">stale</span> service`, "last seen: healthy")
}
