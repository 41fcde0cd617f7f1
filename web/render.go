package web

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nomoshq/nomos/internal/humantime"
	"github.com/nomoshq/nomos/internal/redact"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// base is what the layout needs from every page.
type base struct {
	Title string
	// Active names the nav entry to mark.
	Active string
	Now    time.Time
}

var funcs = template.FuncMap{
	"redact":    redact.String,
	"ago":       humantime.Ago,
	"utc":       func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"iso":       func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"short":     func(s string) string { return shorten(s, 8) },
	"cut":       shorten,
	"json":      detailJSON,
	"bytes":     byteSize,
	"rank":      healthRank,
	"snippet":   snippet,
	"expiresIn": expiresIn,
	"dict": func(kv ...any) map[string]any {
		m := make(map[string]any, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			m[fmt.Sprint(kv[i])] = kv[i+1]
		}
		return m
	},
}

// pages holds each page's template: the layout with the page's content.
// They are parsed when a page is first shown, not at start-up: every
// process runs this package's initialisation, only the bot serves the
// page, and it may go days without a visitor. TestPagesParse keeps a
// template that does not parse from reaching a build.
var pages = sync.OnceValues(func() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := make(map[string]*template.Template, len(names))
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		if pages[name], err = template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n); err != nil {
			return nil, fmt.Errorf("parse template %s: %w", n, err)
		}
	}
	return pages, nil
})

// render executes a page into a buffer first, so a failure half way shows
// a clean error rather than half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, page string, data any) {
	buf := s.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer s.bufs.Put(buf)
	pages, err := pages()
	if err == nil {
		err = pages[page].ExecuteTemplate(buf, "layout", data)
	}
	if err != nil {
		s.logger.Error("render page", "page", page, "err", err)
		http.Error(w, "The status page could not show this page.", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(buf.Bytes())
	}
}

func (s *Server) base(title, active string) base {
	return base{Title: title, Active: active, Now: s.now()}
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// detailJSON renders an audit detail or tool arguments as compact JSON,
// redacted, at most max bytes.
func detailJSON(v any, max int) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return shorten(redact.String(string(b)), max)
}

func byteSize(n int) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// Health states from best to worst, as the grid colours them. Stale is
// worse than degraded: it means nobody knows, and it must never pass for
// healthy. Stopped (a container stopped on purpose) is at rest, and
// makes its host look no worse.
var healthOrder = map[string]int{"healthy": 0, "stopped": 0, "unknown": 1, "degraded": 2, "stale": 3, "unhealthy": 4}

func healthRank(h string) int {
	if r, ok := healthOrder[h]; ok {
		return r
	}
	return 1
}

func worse(a, b string) string {
	if healthRank(b) > healthRank(a) {
		return b
	}
	return a
}

// snippetPart is a run of a search snippet, matched or not.
type snippetPart struct {
	Text  string
	Match bool
}

// snippet splits ts_headline's «marked» output into runs the template
// escapes one by one, so a document can never smuggle markup through a
// highlight.
func snippet(s string) []snippetPart {
	s = redact.String(s)
	var out []snippetPart
	for s != "" {
		i := strings.Index(s, "«")
		if i < 0 {
			out = append(out, snippetPart{Text: s})
			break
		}
		if i > 0 {
			out = append(out, snippetPart{Text: s[:i]})
		}
		s = s[i+len("«"):]
		j := strings.Index(s, "»")
		if j < 0 {
			out = append(out, snippetPart{Text: s, Match: true})
			break
		}
		out = append(out, snippetPart{Text: s[:j], Match: true})
		s = s[j+len("»"):]
	}
	return out
}

// sparkline draws values as an SVG polyline, on the server. Only numbers
// this function formats reach the markup.
func sparkline(values []float64, width, height int) template.HTML {
	if len(values) == 0 {
		return ""
	}
	lo, hi := values[0], values[0]
	for _, v := range values {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	span := hi - lo
	if span == 0 {
		span = 1
	}
	var pts strings.Builder
	for i, v := range values {
		x := 0.0
		if len(values) > 1 {
			x = float64(i) * float64(width) / float64(len(values)-1)
		}
		y := float64(height) - 1 - (v-lo)/span*float64(height-2)
		if math.IsNaN(y) || math.IsInf(y, 0) {
			y = float64(height) / 2
		}
		fmt.Fprintf(&pts, "%.1f,%.1f ", x, y)
	}
	//nolint:gosec // G203: only numbers are formatted into it
	return template.HTML(fmt.Sprintf(`<svg class="spark" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-hidden="true"><polyline fill="none" stroke="currentColor" stroke-width="1.5" points="%s"/></svg>`,
		width, height, width, height, strings.TrimSpace(pts.String())))
}

// static serves the embedded CSS and script.
func (s *Server) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	data, err := staticFS.ReadFile("static/" + name)
	if err != nil {
		s.notFound(w, r)
		return
	}
	switch {
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".svg"):
		w.Header().Set("Content-Type", "image/svg+xml")
	default:
		s.notFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
}
