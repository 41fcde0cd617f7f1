package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nomoshq/nomos/store"
)

// plural counts things: "1 host", "2 hosts".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// stamp is a compact absolute time in UTC.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04Z") }

// num prints a measurement with at most two decimals and no trailing zeros.
func num(v float64) string {
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

// maxSince bounds every window a tool accepts.
const maxSince = 90 * 24 * time.Hour

// parseSince reads a window such as 30m, 6h or 7d; empty means def.
func parseSince(s string, def time.Duration) (time.Duration, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "" {
		return def, nil
	}
	var d time.Duration
	var err error
	switch {
	case strings.HasSuffix(s, "d"):
		var n float64
		n, err = strconv.ParseFloat(strings.TrimSuffix(s, "d"), 64)
		d = time.Duration(n * float64(24*time.Hour))
	case strings.HasSuffix(s, "w"):
		var n float64
		n, err = strconv.ParseFloat(strings.TrimSuffix(s, "w"), 64)
		d = time.Duration(n * float64(7*24*time.Hour))
	default:
		d, err = time.ParseDuration(s)
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("since %q: want a duration such as 30m, 6h or 7d", s)
	}
	return min(d, maxSince), nil
}

// attrText shows attribute key for a tool result: a string as it is, a
// number as num shows it, anything else as fmt prints it.
func attrText(e store.Entity, key string) string {
	switch v := e.Attrs[key].(type) {
	case string:
		return v
	case float64:
		return num(v)
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// healthFilter reports whether health passes a health= argument; "" and
// "all" pass everything, "attention" everything but healthy and stopped
// (a container stopped on purpose).
func healthFilter(want, health string) bool {
	switch want {
	case "", "all", "any":
		return true
	case "attention", "not_healthy":
		return health != "healthy" && health != "stopped"
	}
	return want == health
}

// healthOrder sorts the worst first.
var healthOrder = map[string]int{"unhealthy": 0, "degraded": 1, "stale": 2, "unknown": 3, "healthy": 4, "stopped": 5}

// countLine renders health counts worst first: "1 unhealthy, 11 healthy".
func countLine(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		oi, ok := healthOrder[keys[i]]
		if !ok {
			oi = 5
		}
		oj, ok := healthOrder[keys[j]]
		if !ok {
			oj = 5
		}
		if oi != oj {
			return oi < oj
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", counts[k], k)
	}
	return strings.Join(parts, ", ")
}

// oneLine flattens text to a single line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// tail keeps the last n bytes of s, from a line start when one is near.
func tail(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	cut := len(s) - n
	for cut < len(s) && (s[cut]&0xC0) == 0x80 {
		cut++
	}
	if nl := strings.IndexByte(s[cut:], '\n'); nl >= 0 && nl < n/4 {
		cut += nl + 1
	}
	return s[cut:], true
}

// resolve finds the one entity ref names, or returns the tool error that
// says why not: nothing matches, or several do (listing them).
func (s *Server) resolve(ctx context.Context, tool, ref string, types ...string) (store.Entity, *mcp.CallToolResult) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return store.Entity{}, mcp.NewToolResultError("name an entity: a slug such as service:postgres, a name, a vmid or a hostname")
	}
	if strings.HasPrefix(ref, "check:") && len(types) == 0 {
		e, err := s.store.EntityBySlug(ctx, ref)
		if err == nil {
			return e, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return store.Entity{}, s.internal(ctx, tool, err, "could not read the fleet graph just now; try again shortly")
		}
	}
	matches, err := s.store.ResolveTargets(ctx, ref, types...)
	if err != nil {
		return store.Entity{}, s.internal(ctx, tool, err, "could not read the fleet graph just now; try again shortly")
	}
	kind := "entity"
	if len(types) > 0 {
		kind = strings.Join(types, " or ")
	}
	switch len(matches) {
	case 0:
		return store.Entity{}, mcp.NewToolResultError(fmt.Sprintf("no %s is called %q; list_lxcs or list_entities shows the slugs", kind, ref))
	case 1:
		return matches[0], nil
	}
	slugs := make([]string, len(matches))
	for i, m := range matches {
		slugs[i] = m.Slug
	}
	return store.Entity{}, mcp.NewToolResultError(fmt.Sprintf("%q matches %d entities: %s; call again with one of these slugs",
		ref, len(matches), strings.Join(slugs, ", ")))
}
