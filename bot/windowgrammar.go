package bot

import (
	"strconv"
	"strings"
	"time"

	"github.com/nomoshq/nomos/policy"
)

const windowUsage = "usage: window <target> <duration> [allow <class>] <reason>, e.g. window jellyfin 2h swapping the disk"

// parseWindows reads "windows".
func parseWindows(c *Command, args []token) (string, bool) {
	if len(args) != 0 {
		return "", false
	}
	c.Kind = CmdWindows
	return "", true
}

// parseWindow reads "window <target> <duration> [allow <class>] <reason>".
func parseWindow(c *Command, args []token) (string, bool) {
	if len(args) == 1 && (args[0].norm == "list" || args[0].norm == "status") {
		c.Kind = CmdWindows
		return "", true
	}
	if len(args) < 3 || !isRef(args[0].raw) {
		return windowUsage, false
	}
	d, ok := parseWindowDuration(strings.ToLower(args[1].raw))
	if !ok {
		return windowUsage + " (a duration such as 90m, 2h or 1d)", false
	}
	params := map[string]any{"duration": d.String()}
	rest := args[2:]
	if rest[0].norm == "allow" {
		if len(rest) < 3 {
			return windowUsage, false
		}
		params["allow"] = rest[1].norm
		rest = rest[2:]
	}
	raws := make([]string, len(rest))
	for i, t := range rest {
		raws[i] = t.raw
	}
	params["reason"] = strings.Join(raws, " ")
	c.Kind, c.Target, c.Params = CmdWindow, normSlug(args[0].raw), params
	return "", true
}

// parseWindowDuration reads a Go duration ("90m", "2h30m") or whole days
// ("1d").
func parseWindowDuration(s string) (time.Duration, bool) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		return time.Duration(n) * 24 * time.Hour, err == nil && n > 0
	}
	d, err := time.ParseDuration(s)
	return d, err == nil && d > 0
}

// parseEndWindow reads "end window [name or target]".
func parseEndWindow(c *Command, args []token) (string, bool) {
	if len(args) == 0 || args[0].norm != "window" {
		return "", false
	}
	switch len(args) {
	case 1:
	case 2:
		c.Target = normSlug(args[1].raw)
	default:
		return "usage: end window [name or target]", false
	}
	c.Kind = CmdEndWindow
	return "", true
}

// parseAllow reads a standing approval's phrase, "allow <class> <target>
// … <code>"; the phrase itself is matched by the executions service.
func parseAllow(c *Command, args []token) (string, bool) {
	if len(args) < 3 || !isPlanCode(args[len(args)-1].norm) {
		return "usage: allow <class> <target> … <code>, exactly as the window's notice shows it", false
	}
	if _, err := policy.ParseClass(args[0].norm); err != nil {
		return "usage: allow <class> <target> … <code>, exactly as the window's notice shows it", false
	}
	raws := []string{"allow"}
	for _, t := range args {
		raws = append(raws, t.raw)
	}
	c.Kind, c.Phrase = CmdAllow, strings.Join(raws, " ")
	return "", true
}
