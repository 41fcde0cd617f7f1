// Package watchdog watches Nomos from another machine: it asks the bot's
// /healthz and /readyz over two paths (the LAN address and the public or
// mesh name through the reverse proxy) and pages the operators through a
// Matrix account of its own only when every path fails, so a dead stack
// pages and a broken proxy does not. It holds no database, Redis or SSH
// key; its only secret is its Matrix password or token.
package watchdog

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/nomoshq/nomos/internal/humantime"
)

// Message is what the watchdog says in its room.
type Message struct {
	// Text is the plain-text body.
	Text string
	// Page makes it an m.text that mentions the operators, so push
	// reaches a phone; otherwise it is an m.notice, which pushes nobody.
	Page bool
}

// Pager sends the watchdog's messages. *Matrix is one.
type Pager interface {
	Send(ctx context.Context, m Message) error
}

// Path is one way to reach the bot.
type Path struct {
	// Name says which path it is in messages: "LAN", "mesh".
	Name string
	// URL is the bot's status page over this path; /healthz and /readyz
	// are read below it.
	URL string
}

// Config configures a Watchdog.
type Config struct {
	// Paths are the ways to reach the bot, at least two. Required.
	Paths []Path
	// Pager sends pages, recoveries and partial-outage summaries.
	// Required.
	Pager Pager
	// Timeout bounds each request. Default 10s.
	Timeout time.Duration
	// FailAfter is how many failed checks in a row take a path down.
	// Default 2, so one lost packet pages nobody.
	FailAfter int
	// MaxSyncAge is how long ago the bot may last have heard from the
	// homeserver (/readyz's last_sync_age_seconds) before the path counts
	// as failing: a bot that answers HTTP but no longer syncs hears no
	// operator. Default 3m.
	MaxSyncAge time.Duration
	// RepageAfter is how long after the first page of an outage the
	// second is sent; each later one waits twice as long as the one
	// before. Default 30m.
	RepageAfter time.Duration
	// MaxPages bounds the pages of one outage. Default 3.
	MaxPages int
	// HTTPClient makes the requests; nil means a client with Timeout.
	HTTPClient *http.Client
	// Clock is the source of "now"; nil means time.Now.
	Clock func() time.Time
	// Logger receives every path's ups and downs; nil means
	// slog.Default().
	Logger *slog.Logger
}

// pathState is what the watchdog knows of one path.
type pathState struct {
	Path
	healthz, readyz string
	fails           int       // failed checks in a row
	down            bool      // FailAfter failures in a row
	downSince       time.Time // first failure of the run that took it down
	lastErr         error
	// fullOutage is set when every path was down at some point while this
	// one was: its healing is then not a partial outage.
	fullOutage bool
}

// Watchdog checks the paths on each Check and says what changed.
type Watchdog struct {
	cfg    Config
	now    func() time.Time
	logger *slog.Logger
	client *http.Client
	paths  []*pathState

	outage      bool      // every path is down
	outageSince time.Time // when the last path to go down began to fail
	pages       int       // pages sent in this outage
	nextPage    time.Time // when the next page is due
}

// New checks cfg and applies its defaults.
func New(cfg Config) (*Watchdog, error) {
	if len(cfg.Paths) < 2 {
		return nil, errors.New("watchdog: want at least two paths to the bot, such as the LAN address and the mesh name")
	}
	if cfg.Pager == nil {
		return nil, errors.New("watchdog: a Pager is required")
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, 10*time.Second)
	cfg.FailAfter = cmp.Or(cfg.FailAfter, 2)
	cfg.MaxSyncAge = cmp.Or(cfg.MaxSyncAge, 3*time.Minute)
	cfg.RepageAfter = cmp.Or(cfg.RepageAfter, 30*time.Minute)
	cfg.MaxPages = cmp.Or(cfg.MaxPages, 3)
	w := &Watchdog{cfg: cfg, now: cfg.Clock, logger: cmp.Or(cfg.Logger, slog.Default()), client: cfg.HTTPClient}
	if w.now == nil {
		w.now = time.Now
	}
	if w.client == nil {
		w.client = &http.Client{Timeout: cfg.Timeout}
	}
	for _, p := range cfg.Paths {
		if p.Name == "" {
			return nil, fmt.Errorf("watchdog: the path to %s has no name", p.URL)
		}
		u, err := url.Parse(p.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("watchdog: the %s path: want an http:// or https:// URL of the bot's status page, got %q", p.Name, p.URL)
		}
		w.paths = append(w.paths, &pathState{Path: p, healthz: u.JoinPath("healthz").String(), readyz: u.JoinPath("readyz").String()})
	}
	return w, nil
}

// Run checks every interval until ctx ends.
func (w *Watchdog) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		w.Check(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Check asks every path once, at once, then pages, announces a recovery
// or sums up a healed path as the new state calls for.
func (w *Watchdog) Check(ctx context.Context) {
	errs := make([]error, len(w.paths))
	done := make(chan struct{}, len(w.paths))
	for i, p := range w.paths {
		go func() {
			errs[i] = w.probe(ctx, p)
			done <- struct{}{}
		}()
	}
	for range w.paths {
		<-done
	}
	now := w.now()
	var healed []*pathState
	for i, p := range w.paths {
		if h := w.observe(p, errs[i], now); h {
			healed = append(healed, p)
		}
	}
	allDown := true
	for _, p := range w.paths {
		allDown = allDown && p.down
	}
	switch {
	case allDown && !w.outage:
		// Unreachable since the last path began to fail.
		w.outage, w.outageSince, w.pages = true, time.Time{}, 0
		w.nextPage = now
		for _, p := range w.paths {
			p.fullOutage = true
			if p.downSince.After(w.outageSince) {
				w.outageSince = p.downSince
			}
		}
		w.logger.Error("every path to the bot is down", "reasons", w.reasons())
	case !allDown && w.outage:
		w.outage = false
		w.recovered(ctx, now, healed)
		healed = nil // the recovery said it
	}
	if w.outage && w.pages < w.cfg.MaxPages && !now.Before(w.nextPage) {
		w.page(ctx, now)
	}
	for _, p := range healed {
		w.summarise(ctx, p, now)
	}
}

// observe records one result of p and reports whether p just healed.
func (w *Watchdog) observe(p *pathState, err error, now time.Time) bool {
	if err == nil {
		p.fails = 0
		if !p.down {
			return false
		}
		p.down = false
		w.logger.Info("path to the bot is back", "path", p.Name, "url", p.URL, "down_for", now.Sub(p.downSince).String())
		return true
	}
	if p.fails == 0 {
		p.downSince = now
	}
	p.fails++
	p.lastErr = err
	if !p.down && p.fails >= w.cfg.FailAfter {
		p.down = true
		p.fullOutage = w.outage
		w.logger.Warn("path to the bot is down", "path", p.Name, "url", p.URL, "err", err)
	}
	return false
}

// page tells the operators, on their phones, that no path reaches the
// bot; later pages of the same outage back off.
func (w *Watchdog) page(ctx context.Context, now time.Time) {
	text := fmt.Sprintf("🚨 Nomos is unreachable over every path: %s.", w.reasons())
	if w.pages > 0 {
		text = fmt.Sprintf("🚨 Nomos is still unreachable, for %s now: %s.", humantime.Duration(now.Sub(w.outageSince)), w.reasons())
	}
	if err := w.cfg.Pager.Send(ctx, Message{Text: text, Page: true}); err != nil {
		// The homeserver may be what is down: try again next check,
		// without counting the page.
		w.logger.Error("page the operators", "err", err)
		return
	}
	w.pages++
	w.nextPage = now.Add(w.cfg.RepageAfter << (w.pages - 1))
	w.logger.Info("paged the operators", "page", w.pages, "of", w.cfg.MaxPages)
}

// recovered announces, once, that a path reaches the bot again.
func (w *Watchdog) recovered(ctx context.Context, now time.Time, healed []*pathState) {
	var names []string
	for _, p := range healed {
		names = append(names, p.Name)
	}
	text := fmt.Sprintf("✅ Nomos answers again over the %s path, after %s unreachable.", strings.Join(names, " and "), humantime.Duration(now.Sub(w.outageSince)))
	if down := w.downPaths(); len(down) > 0 {
		text += fmt.Sprintf(" The %s path is still down.", strings.Join(down, " and "))
	}
	w.logger.Info("the bot is reachable again", "outage", now.Sub(w.outageSince).String(), "pages", w.pages)
	if w.pages == 0 {
		// Nobody was paged (the homeserver did not take it): nothing to
		// take back.
		return
	}
	w.sendNotice(ctx, text)
}

// summarise sums up a path that healed while another held.
func (w *Watchdog) summarise(ctx context.Context, p *pathState, now time.Time) {
	if p.fullOutage {
		// It was down with every other path: the recovery was announced
		// when the first came back.
		p.fullOutage = false
		w.sendNotice(ctx, fmt.Sprintf("The %s path is back too, after %s down.", p.Name, humantime.Duration(now.Sub(p.downSince))))
		return
	}
	var held []string
	for _, o := range w.paths {
		if o != p && !o.down {
			held = append(held, o.Name)
		}
	}
	text := fmt.Sprintf("The %s path was down %s (%s); the %s path held.", p.Name, humantime.Duration(now.Sub(p.downSince)), errText(p.lastErr), strings.Join(held, " and "))
	w.sendNotice(ctx, text)
}

func (w *Watchdog) sendNotice(ctx context.Context, text string) {
	if err := w.cfg.Pager.Send(ctx, Message{Text: text}); err != nil {
		w.logger.Error("send to the watchdog's room", "err", err)
	}
}

// reasons names why each path is down.
func (w *Watchdog) reasons() string {
	var parts []string
	for _, p := range w.paths {
		parts = append(parts, fmt.Sprintf("%s (%s) %s", p.Name, p.URL, errText(p.lastErr)))
	}
	return strings.Join(parts, "; ")
}

func (w *Watchdog) downPaths() []string {
	var out []string
	for _, p := range w.paths {
		if p.down {
			out = append(out, p.Name)
		}
	}
	return out
}

func errText(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// readyBody is the part of /readyz the watchdog reads.
type readyBody struct {
	Status         string            `json:"status"`
	Checks         map[string]string `json:"checks"`
	LastSyncAgeSec *float64          `json:"last_sync_age_seconds"`
}

// probe asks one path: /healthz must answer 200, /readyz 200 with status
// ok, and a bot that reports its last sync must have synced within
// MaxSyncAge. The error says what failed, in words for the room.
func (w *Watchdog) probe(ctx context.Context, p *pathState) error {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	if status, _, err := w.get(ctx, p.healthz); err != nil {
		return fmt.Errorf("/healthz does not answer: %w", err)
	} else if status != http.StatusOK {
		return fmt.Errorf("/healthz answers %d", status)
	}
	status, body, err := w.get(ctx, p.readyz)
	if err != nil {
		return fmt.Errorf("/readyz does not answer: %w", err)
	}
	var r readyBody
	if err := json.Unmarshal(body, &r); err != nil || r.Status == "" {
		return fmt.Errorf("/readyz answers %d, and not with the bot's JSON", status)
	}
	if status != http.StatusOK || r.Status != "ok" {
		var failing []string
		for name, state := range r.Checks {
			if state == "unavailable" {
				failing = append(failing, name)
			}
		}
		slices.Sort(failing)
		return fmt.Errorf("/readyz answers %d: %s unavailable", status, strings.Join(failing, ", "))
	}
	if r.LastSyncAgeSec != nil {
		if age := time.Duration(*r.LastSyncAgeSec * float64(time.Second)); age > w.cfg.MaxSyncAge {
			return fmt.Errorf("the bot last synced with the homeserver %s ago", humantime.Duration(age))
		}
	}
	return nil
}

// get fetches target and returns its status and the start of its body.
func (w *Watchdog) get(ctx context.Context, target string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := w.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, body, err
}
