package web_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/nomoshq/nomos/internal/devstack"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

// tab is a headless Chromium tab that records what went wrong on its
// pages: console errors, uncaught exceptions, CSP and network errors in
// the log, and any dialog (an alert means something ran).
type tab struct {
	ctx context.Context
	mu  sync.Mutex
	bad []string
}

// newTab starts Debian's Chromium with a fresh profile. Without Chromium
// the test fails: `make prepare` installs it. Under -short the test is
// skipped.
func newTab(t testing.TB, width, height int) *tab {
	t.Helper()
	testenv.SkipIfShort(t, "it drives Chromium")
	path, err := devstack.ChromiumPath()
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true), chromedp.Flag("disable-extensions", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(width, height),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	tb := &tab{ctx: ctx}
	dialogs := make(chan string, 8)
	err = chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				tb.record(fmt.Sprintf("console.%s: %v", ev.Type, ev.Args))
			}
		case *runtime.EventExceptionThrown:
			tb.record("exception: " + ev.ExceptionDetails.Text)
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError {
				tb.record(fmt.Sprintf("log %s: %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		case *page.EventJavascriptDialogOpening:
			tb.record("a dialog opened: " + ev.Message)
			select {
			case dialogs <- ev.Message:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// A dialog blocks the page until answered: dismiss each one (it has
	// already been recorded as a failure).
	go func() {
		for range dialogs {
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		t.Fatal(err)
	}
	return tb
}

func (tb *tab) record(s string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.bad = append(tb.bad, s)
}

// problems returns and clears what went wrong since the last call.
func (tb *tab) problems() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	out := tb.bad
	tb.bad = nil
	return out
}

// open navigates and waits until the page's script has run.
func (tb *tab) open(t testing.TB, url string) {
	t.Helper()
	// A page that fails to render has no footer: fail, never wait for ever.
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady("footer")); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
}

func eval[T any](t testing.TB, tb *tab, expr string) T {
	t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript predicate until it holds or the test's
// context ends; it measures nothing.
func waitFor(t testing.TB, tb *tab, what, predicate string) {
	t.Helper()
	if _, err := chromedp.Run(tb.ctx, chromedp.Poll[bool](predicate, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// TestBrowserPagesRender opens every page of a populated fleet in
// Chromium: none logs an error or trips the CSP, and the hostile markup in
// a plan's reason, a knowledge document and command output shows as text,
// creates no element and runs nothing.
func TestBrowserPagesRender(t *testing.T) {
	b := setup(t)
	a := b.populate(t)
	tb := newTab(t, 1280, 900)
	for _, p := range pagesOf(a) {
		tb.open(t, b.http.URL+p)
		if n := eval[int](t, tb, `document.querySelectorAll('main img, main [onerror]').length`); n != 0 {
			t.Errorf("%s: %d img or onerror elements in the page", p, n)
		}
		if nav := eval[int](t, tb, `document.querySelectorAll('nav a').length`); nav != 7 {
			t.Errorf("%s: nav has %d links, want 7", p, nav)
		}
		for _, pr := range tb.problems() {
			t.Errorf("%s: %s", p, pr)
		}
	}
	for _, p := range []string{"/executions/" + a.pending.ID.String(), "/executions/" + a.failed.ID.String(),
		"/knowledge?q=jellyfin+transcoding", "/e/service:jellyfin"} {
		tb.open(t, b.http.URL+p)
		if text := eval[string](t, tb, `document.querySelector('main').innerText`); !strings.Contains(text, hostile) {
			t.Errorf("%s does not show the markup as text", p)
		}
	}
	// Whatever slipped through would be stopped by the CSP too: an inline
	// script injected now is refused and reported.
	eval[bool](t, tb, `(function(){var s=document.createElement('script');s.textContent='window.__ran=1';document.body.appendChild(s);return true})()`)
	if ran := eval[bool](t, tb, `window.__ran === 1`); ran {
		t.Error("an inline script ran despite the CSP")
	}
	tb.problems()
}

// TestBrowserOverviewFollowsLive: with the overview and an execution
// open, a plan approved and then run changes both pages without a reload.
func TestBrowserOverviewFollowsLive(t *testing.T) {
	b := setup(t)
	x := b.plan(t, "service:jellyfin", "jellyfin hangs", store.StateAwaitingApproval)
	tb := newTab(t, 1280, 900)
	tb.open(t, b.http.URL+"/")
	waitFor(t, tb, "the live feed", `document.getElementById('live-dot').classList.contains('on')`)
	eval[bool](t, tb, `window.__sameDocument = true`)
	row := fmt.Sprintf(`document.querySelector('#live-overview [data-execution="%s"]')`, x.ID)
	if st := eval[string](t, tb, row+`.dataset.state`); st != "awaiting_approval" {
		t.Fatalf("overview shows %s as %s", x.ID, st)
	}
	b.move(t, x.ID, store.StateAwaitingApproval, store.StateApproved, func(tr *store.Transition) {
		tr.Decision = &store.Approval{Decision: "approved", DecidedBy: "@operator:nomos.test", Method: "reaction", PlanHash: x.PlanHash, DecidedAt: time.Now()}
	})
	waitFor(t, tb, "the overview to show the approval", row+`?.dataset.state === 'approved'`)
	if !eval[bool](t, tb, `window.__sameDocument === true`) {
		t.Error("the overview reloaded instead of updating in place")
	}

	tb.open(t, b.http.URL+"/executions/"+x.ID.String())
	waitFor(t, tb, "the live feed", `document.getElementById('live-dot').classList.contains('on')`)
	eval[bool](t, tb, `window.__sameDocument = true`)
	b.move(t, x.ID, store.StateApproved, store.StateDispatched, nil)
	waitFor(t, tb, "the execution to show dispatched", `document.getElementById('state').textContent === 'dispatched'`)
	if !eval[bool](t, tb, `window.__sameDocument === true`) {
		t.Error("the execution page reloaded instead of updating in place")
	}
	for _, pr := range tb.problems() {
		t.Error(pr)
	}
}

// TestBrowserFitsAPhone: at 390 px the overview and an execution detail
// have no horizontal scrolling.
func TestBrowserFitsAPhone(t *testing.T) {
	b := setup(t)
	a := b.populate(t)
	tb := newTab(t, 390, 844)
	for _, p := range []string{"/", "/executions/" + a.failed.ID.String(), "/executions/" + a.pending.ID.String(), "/executions", "/e/service:jellyfin"} {
		tb.open(t, b.http.URL+p)
		if w := eval[int](t, tb, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("%s is %d px wide at 390 px: it scrolls sideways", p, w)
		}
	}
	for _, pr := range tb.problems() {
		t.Error(pr)
	}
}

// TestScreenshots takes the pictures docs/user-guide.md shows: into
// NOMOS_SCREENSHOTS when it names a directory (make screenshots writes
// docs/img), else into a temporary one, so every run proves they can be
// taken and are real PNG images.
func TestScreenshots(t *testing.T) {
	dir := cmp.Or(os.Getenv("NOMOS_SCREENSHOTS"), t.TempDir())
	b := setup(t)
	b.populateWith(t, "(see its log)")
	// One plan the way an operator sees most: asked, approved in the room,
	// run, and back with its output.
	x := b.plan(t, "service:jellyfin", "jellyfin-http fails: GET /health answers 502", store.StateAwaitingApproval)
	b.move(t, x.ID, store.StateAwaitingApproval, store.StateApproved, func(tr *store.Transition) {
		tr.Audit.Actor, tr.Audit.Detail = "@operator:nomos.test", map[string]any{"method": "reaction"}
		tr.Decision = &store.Approval{Decision: "approved", DecidedBy: "@operator:nomos.test", Method: "reaction", EventID: "$Kq2b9x:nomos.test", PlanHash: x.PlanHash, DecidedAt: time.Now()}
	})
	b.move(t, x.ID, store.StateApproved, store.StateDispatched, nil)
	b.move(t, x.ID, store.StateDispatched, store.StateRunning, nil)
	out := "$ pct exec 101 -- systemctl restart jellyfin.service\n$ systemctl is-active jellyfin.service\nactive\n"
	b.move(t, x.ID, store.StateRunning, store.StateSucceeded, func(tr *store.Transition) {
		tr.ProgressTail, tr.Result = &out, []byte(`{"exit_code":0,"duration_ms":2140}`)
	})
	for _, w := range []int{1280, 390} {
		tb := newTab(t, w, 900)
		for name, p := range map[string]string{"overview": "/", "execution": "/executions/" + x.ID.String()} {
			tb.open(t, b.http.URL+p)
			png, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
				t.Fatalf("the %s screenshot at %d px is not a PNG image (%d bytes)", name, w, len(png))
			}
			file := filepath.Join(dir, fmt.Sprintf("%s-%d.png", name, w))
			if err := os.WriteFile(file, png, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s", file)
		}
	}
}
