package bot

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/nomoshq/nomos/policy"
)

// codeAlphabet is policy's plan-code alphabet.
const codeAlphabet = "23456789abcdefghjkmnpqrstuvwxyz"

func isPlanCode(s string) bool {
	if len(s) != policy.PlanCodeLen {
		return false
	}
	for _, r := range strings.ToLower(s) {
		if !strings.ContainsRune(codeAlphabet, r) {
			return false
		}
	}
	return true
}

// verbActions maps each catalogue verb to its action.
var verbActions = func() map[string]policy.Action {
	m := map[string]policy.Action{}
	for _, s := range policy.Catalogue() {
		m[s.Verb] = s.Action
	}
	return m
}()

// parseConfirm recognises a confirmation phrase, "<verb> <slug> … <code>":
// one verb and slug for each destructive step of a plan, then its code
// (see policy.PlanPhrase). It tolerates surrounding punctuation in the
// recognition so that a near miss is never read as a new request;
// c.Phrase keeps the text as typed for policy.MatchPhrase, and c.Action
// and c.Target are the first step's.
func parseConfirm(c *Command, body string) bool {
	toks := tokenize(body)
	if len(toks) < 3 || len(toks)%2 == 0 || len(toks) > 2*policy.MaxPlanSteps+1 || !isPlanCode(toks[len(toks)-1].norm) {
		return false
	}
	var first policy.Action
	var firstSlug string
	for i := 0; i+1 < len(toks)-1; i += 2 {
		a, ok := verbActions[toks[i].norm]
		if !ok {
			return false
		}
		slug := normSlug(toks[i+1].raw)
		if _, _, err := policy.ParseSlug(slug); err != nil {
			return false
		}
		if i == 0 {
			first, firstSlug = a, slug
		}
	}
	c.Kind, c.Action, c.Target, c.Phrase = CmdConfirm, first, firstSlug, body
	if first == policy.ActionPctRollback && len(toks) == 3 {
		// The code's place is also where a snapshot name goes.
		c.Params = map[string]any{"name": toks[2].raw}
	}
	return true
}

// grammarVerb is one verb of the command grammar: the first words that
// select it, the catalogue actions it may ask for (none for a read), and
// its parser. The table is the grammar; help and the near-miss
// suggestions are checked against it.
type grammarVerb struct {
	words   []string
	actions []policy.Action
	// parse reads the message whose first word is verb, toks[0]; when the
	// verb is known but the rest is not, it returns a usage hint.
	parse func(c *Command, verb, body string, toks []token) (hint string, ok bool)
}

// grammar is every verb of the command grammar.
var grammar = []grammarVerb{
	{words: []string{"history", "log", "recent"}, parse: func(c *Command, _, _ string, toks []token) (string, bool) {
		return parseHistory(c, toks[1:])
	}},
	{words: []string{"show", "info", "describe", "details", "inspect", "status", "check"}, actions: []policy.Action{policy.ActionAptUpgrade},
		parse: func(c *Command, verb, _ string, toks []token) (string, bool) {
			args := toks[1:]
			if verb == "check" && (hasWords(args, "updates") || hasWords(args, "for", "updates")) {
				if args[0].norm == "for" {
					args = args[1:]
				}
				return parseUpdates(c, args[1:])
			}
			return parseShow(c, verb, args)
		}},
	{words: []string{"approve", "deny", "reject", "cancel", "confirm"}, parse: func(c *Command, verb, _ string, toks []token) (string, bool) {
		return parseDecision(c, verb, toks[1:])
	}},
	{words: []string{"resolve", "reconcile", "resolved", "reconciled"}, parse: func(c *Command, _, body string, toks []token) (string, bool) {
		return parseResolve(c, body, argFields(body, toks[0].raw))
	}},
	{words: []string{"exec", "execute"}, actions: []policy.Action{policy.ActionPctExec}, parse: func(c *Command, _, body string, toks []token) (string, bool) {
		return parseExec(c, body, argFields(body, toks[0].raw))
	}},
	{words: []string{"run"}, actions: []policy.Action{policy.ActionRun}, parse: func(c *Command, _, body string, toks []token) (string, bool) {
		return parseRun(c, body, argFields(body, toks[0].raw))
	}},
	{words: []string{"restart", "bounce"}, actions: []policy.Action{policy.ActionRestart, policy.ActionPctReboot, policy.ActionNodeReboot},
		parse: func(c *Command, _, _ string, toks []token) (string, bool) {
			return targetAction(c, toks[1:], "usage: restart <service>, e.g. restart jellyfin", restartAction)
		}},
	{words: []string{"reload", "enable", "disable"}, actions: []policy.Action{policy.ActionSystemctl},
		parse: func(c *Command, verb, _ string, toks []token) (string, bool) {
			return targetAction(c, toks[1:], "usage: "+verb+" <service>, e.g. "+verb+" caddy", unitAction(policy.SystemctlVerb(verb)))
		}},
	{words: []string{"upgrade"}, actions: []policy.Action{policy.ActionAptUpgrade}, parse: func(c *Command, _, _ string, toks []token) (string, bool) {
		return targetAction(c, toks[1:], "usage: upgrade <lxc> or upgrade host <host>, e.g. upgrade 102 (check updates on 102 only lists them)", aptAction(policy.AptUpgrade))
	}},
	{words: []string{"start", "stop", "shutdown", "shut"}, actions: []policy.Action{policy.ActionPctStart, policy.ActionPctStop, policy.ActionGuestShutdown, policy.ActionSystemctl},
		parse: func(c *Command, verb, _ string, toks []token) (string, bool) {
			return parsePower(c, verb, toks[1:])
		}},
	{words: []string{"reboot"}, actions: []policy.Action{policy.ActionPctReboot, policy.ActionRestart, policy.ActionNodeReboot},
		parse: func(c *Command, _, _ string, toks []token) (string, bool) {
			return targetAction(c, toks[1:], "usage: reboot <lxc> or reboot host <host>, e.g. reboot 101", rebootAction)
		}},
	{words: []string{"destroy"}, actions: []policy.Action{policy.ActionPctDestroy}, parse: func(c *Command, _, _ string, toks []token) (string, bool) {
		return targetAction(c, toks[1:], "usage: destroy <lxc>, e.g. destroy lxc:131", destroyAction)
	}},
	{words: []string{"snapshot", "snap"}, actions: []policy.Action{policy.ActionPctSnapshot}, parse: func(c *Command, _, _ string, toks []token) (string, bool) {
		return parseSnapshot(c, toks[1:])
	}},
	{words: []string{"snapshots", "snaps"}, parse: func(c *Command, _, _ string, toks []token) (string, bool) {
		return parseSnapshots(c, toks[1:])
	}},
	{words: []string{"logs", "journal", "tail"}, actions: []policy.Action{policy.ActionTailLog}, parse: func(c *Command, _, _ string, toks []token) (string, bool) {
		return parseLogs(c, toks[1:])
	}},
	{words: []string{"probe"}, actions: []policy.Action{policy.ActionPctStatus}, parse: func(c *Command, _, _ string, toks []token) (string, bool) {
		return targetAction(c, toks[1:], "usage: probe <lxc|vm>, e.g. probe 101", func(typ string) (policy.Action, map[string]any, bool) {
			return policy.ActionPctStatus, map[string]any{}, typ == "" || isGuestWord(typ)
		})
	}},
	{words: []string{"forget"}, parse: func(c *Command, _, _ string, toks []token) (string, bool) {
		return parseForget(c, toks[1:])
	}},
	{words: []string{"windows"}, parse: func(c *Command, _, _ string, toks []token) (string, bool) {
		return parseWindows(c, toks[1:])
	}},
	{words: []string{"window"}, parse: func(c *Command, _, _ string, toks []token) (string, bool) {
		return parseWindow(c, toks[1:])
	}},
	{words: []string{"end"}, parse: func(c *Command, _, _ string, toks []token) (string, bool) {
		return parseEndWindow(c, toks[1:])
	}},
	{words: []string{"allow"}, parse: func(c *Command, _, _ string, toks []token) (string, bool) {
		return parseAllow(c, toks[1:])
	}},
	{words: []string{"brief", "daily", "weekly"}, parse: func(c *Command, verb, _ string, toks []token) (string, bool) {
		return parseBrief(c, verb, toks[1:])
	}},
	{words: []string{"list", "audit"}, actions: []policy.Action{policy.ActionAptUpgrade}, parse: func(c *Command, verb, _ string, toks []token) (string, bool) {
		args := toks[1:]
		if verb == "list" && (hasWords(args, "snapshots") || hasWords(args, "snaps")) {
			return parseSnapshots(c, args[1:])
		}
		if hasWords(args, "updates") {
			return parseUpdates(c, args[1:])
		}
		return "", false
	}},
	{words: []string{"take", "make", "create", "provision", "new"}, actions: []policy.Action{policy.ActionPctSnapshot, policy.ActionPctCreate},
		parse: func(c *Command, verb, _ string, toks []token) (string, bool) {
			args := toks[1:]
			if hasWords(args, "a", "snapshot") || hasWords(args, "snapshot") {
				for args[0].norm != "snapshot" {
					args = args[1:]
				}
				return parseSnapshot(c, args[1:])
			}
			if verb != "take" {
				return parseCreate(c, args)
			}
			return "", false
		}},
	{words: []string{"rollback", "revert", "restore", "roll"}, actions: []policy.Action{policy.ActionPctRollback},
		parse: func(c *Command, verb, _ string, toks []token) (string, bool) {
			args := toks[1:]
			if verb == "roll" {
				if !hasWords(args, "back") {
					return "", false
				}
				args = args[1:]
			}
			return parseRollback(c, args)
		}},
}

// grammarByWord finds a verb of the grammar by any of its words.
var grammarByWord = func() map[string]*grammarVerb {
	m := map[string]*grammarVerb{}
	for i := range grammar {
		for _, w := range grammar[i].words {
			m[w] = &grammar[i]
		}
	}
	return m
}()

// grammarWords are the words of every verb, in the grammar's order: what a
// misspelt first word is matched against.
var grammarWords = func() []string {
	var out []string
	for _, v := range grammar {
		out = append(out, v.words...)
	}
	return out
}()

// parseGrammar reads the fixed command grammar. When the verb is known but
// the rest is not, it returns a usage hint.
func parseGrammar(c *Command, body string, toks []token) (hint string, ok bool) {
	words := norms(toks)
	if kind, ok := fixedPhrase(words); ok {
		c.Kind = kind
		if kind == CmdHelp && words[0] == "help" && len(toks) == 2 {
			c.Target = toks[1].norm // help <verb>
		}
		if kind == CmdListContainers {
			c.Target = listedKind(words)
		}
		return "", true
	}
	if v, ok := grammarByWord[words[0]]; ok {
		return v.parse(c, words[0], body, toks)
	}
	return "", false
}

// fixedPhrase matches the whole message against the phrases that need no
// target: help, status, pending and the container list.
func fixedPhrase(words []string) (CommandKind, bool) {
	phrase := strings.Join(words, " ")
	switch {
	case slices.Contains(helpPhrases, phrase) || words[0] == "help":
		return CmdHelp, true
	case slices.Contains(statusPhrases, phrase):
		return CmdStatus, true
	case slices.Contains(pendingPhrases, phrase):
		return CmdPending, true
	case slices.Contains(problemPhrases, phrase):
		return CmdProblems, true
	case isListCommand(words):
		return CmdListContainers, true
	}
	return CmdUnknown, false
}

// parseHistory reads "history [of] [name]".
func parseHistory(c *Command, args []token) (string, bool) {
	c.Kind = CmdHistory
	if len(args) == 0 || (len(args) == 1 && historyNouns[args[0].norm]) {
		return "", true
	}
	if ref, _, rest, ok := targetArg(args, "of", "for", "on"); ok && len(rest) == 0 {
		c.Target = ref
		return "", true
	}
	return "usage: history [name]", false
}

// showWords are the lone words after "show" that name a listing, not an
// entity: "show status", "show pending".
var showWords = map[string]CommandKind{
	"history": CmdHistory, "log": CmdHistory,
	"status": CmdStatus, "fleet": CmdStatus, "everything": CmdStatus, "all": CmdStatus,
	"pending": CmdPending, "plans": CmdPending,
	"help": CmdHelp,
}

// parseShow reads "show [me] [the] <name>", "show history of <name>" and
// the listings in showWords.
func parseShow(c *Command, verb string, args []token) (string, bool) {
	if hasWords(args, "me") {
		args = args[1:]
	}
	if len(args) > 1 && (args[0].norm == "snapshots" || args[0].norm == "snaps") {
		return parseSnapshots(c, args[1:])
	}
	for len(args) > 1 && (articles[args[0].norm] || args[0].norm == "of") {
		args = args[1:]
	}
	if len(args) == 1 {
		if kind, ok := showWords[args[0].norm]; ok {
			c.Kind = kind
			return "", true
		}
	}
	if verb == "show" && len(args) > 1 && (args[0].norm == "history" || args[0].norm == "log") {
		if ref, _, rest, ok := targetArg(args[1:], "of", "for", "on"); ok && len(rest) == 0 {
			c.Kind, c.Target = CmdHistory, ref
			return "", true
		}
	}
	if ref, _, rest, ok := targetArg(args, "of", "on", "for", "about"); ok && len(rest) == 0 {
		c.Kind, c.Target = CmdShow, ref
		return "", true
	}
	return "usage: show <name>, e.g. show jellyfin or show lxc:101", false
}

// createUsage is the usage of create, with every option.
const createUsage = "usage: create lxc <name> on <host> [cores N] [memory 2G|512M] [disk 20G] [ip 10.0.0.5/24 gw 10.0.0.1] " +
	"[template debian-13|ubuntu-24.04|alpine-3.20|<volume id>] [storage ID], e.g. create lxc wiki on hubris cores 2 memory 2G"

// parseCreate reads "create [a|new] lxc|container|ct [called|named] <name>
// on <host>" and its options, as pct_create's parameters; the gate and the
// card check them as for any request.
func parseCreate(c *Command, args []token) (string, bool) {
	for len(args) > 0 && (articles[args[0].norm] || args[0].norm == "an" || args[0].norm == "new") {
		args = args[1:]
	}
	if len(args) == 0 || typeWords[args[0].norm] != "lxc" {
		return "", false // not a container: "create" alone is not ours
	}
	args = args[1:]
	if len(args) > 0 && (args[0].norm == "called" || args[0].norm == "named") {
		args = args[1:]
	}
	if len(args) < 3 || args[1].norm != "on" || !isRef(args[0].raw) || !isRef(args[2].raw) {
		return createUsage, false
	}
	params := map[string]any{"hostname": args[0].norm}
	host := args[2].raw
	for rest := args[3:]; len(rest) > 0; rest = rest[2:] {
		if len(rest) < 2 {
			return createUsage, false
		}
		key, val := rest[0].norm, rest[1].raw
		var err error
		switch key {
		case "cores", "cpus", "cpu":
			params["cores"], err = strconv.Atoi(val)
		case "memory", "mem", "ram":
			params["memory"], err = sizeMB(val)
		case "disk", "size":
			v := strings.TrimSuffix(strings.ToUpper(val), "B")
			if _, plain := strconv.Atoi(v); plain == nil {
				v += "G" // a disk is sized in gigabytes
			}
			var mb int
			mb, err = sizeMB(v)
			params["disk_gb"] = mb / 1024
			if err == nil && (mb%1024 != 0 || mb == 0) {
				err = fmt.Errorf("want whole gigabytes")
			}
		case "ip":
			params["ip"] = val
		case "gw", "gateway":
			params["gw"] = val
		case "template":
			if !strings.Contains(val, ":") {
				val = strings.ToLower(val) // a family: debian-13, ubuntu-24.04
			}
			params["template"] = val
		case "storage":
			params["storage"] = val
		default:
			return createUsage, false
		}
		if err != nil {
			return fmt.Sprintf("%s: %s %q: %v", createUsage, key, val, err), false
		}
	}
	c.Kind, c.Target, c.Action, c.Params = CmdAction, host, policy.ActionPctCreate, params
	return "", true
}

// sizeMB reads a size in megabytes: 512, 512M, 2G or 1T.
func sizeMB(s string) (int, error) {
	unit := 1
	switch {
	case strings.HasSuffix(strings.ToUpper(s), "T"):
		unit, s = 1<<20, s[:len(s)-1]
	case strings.HasSuffix(strings.ToUpper(s), "G"):
		unit, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(strings.ToUpper(s), "M"):
		s = s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("want a size such as 512M or 2G")
	}
	return n * unit, nil
}

// parseSnapshots reads "snapshots [of|on|for] <lxc>", and "list
// snapshots …" and "show snapshots …".
func parseSnapshots(c *Command, args []token) (string, bool) {
	const usage = "usage: snapshots <lxc|vm>, e.g. snapshots 101"
	ref, typ, rest, ok := targetArg(args, "of", "on", "for", "in")
	if !ok || len(rest) > 0 || (typ != "" && !isGuestWord(typ)) {
		return usage, false
	}
	c.Kind, c.Target = CmdSnapshots, ref
	return "", true
}

// parseDecision reads "approve|deny [plan] [code]" and "approve it".
func parseDecision(c *Command, verb string, args []token) (string, bool) {
	kind := CmdDeny
	if verb == "approve" || verb == "confirm" {
		kind = CmdApprove
	}
	if onlyPronouns(args) {
		c.Kind = kind
		return "", true
	}
	if ref, _, rest, ok := targetArg(args, "plan"); ok && len(rest) == 0 {
		c.Kind, c.Target = kind, ref
		return "", true
	}
	return "usage: " + verb + " [plan code], e.g. " + verb + " k7q2", false
}

// parsePower reads "start|stop|shutdown|shut down <lxc or service>"; "stop
// it" is a refusal of the plan in question.
func parsePower(c *Command, verb string, args []token) (string, bool) {
	if verb == "stop" && onlyPronouns(args) {
		// "stop it", "stop that": a refusal, not a container.
		c.Kind = CmdDeny
		return "", true
	}
	if verb == "shut" {
		if !hasWords(args, "down") {
			return "usage: stop <lxc|vm>", false
		}
		verb, args = "shutdown", args[1:]
	}
	usage := "usage: " + verb + " <lxc|vm>, e.g. " + verb + " 101"
	timeout := 0
	if verb == "shutdown" {
		usage = "usage: shutdown <lxc|vm> [within <seconds>], e.g. shutdown opnsense within 120s"
		var ok bool
		if args, timeout, ok = shutdownTimeout(args); !ok {
			return usage, false
		}
	}
	return targetAction(c, args, usage, func(typ string) (policy.Action, map[string]any, bool) {
		switch typ {
		case "service":
			v := policy.VerbStart
			if verb != "start" {
				v = policy.VerbStop
			}
			return policy.ActionSystemctl, map[string]any{"verb": string(v)}, true
		case "host":
			return "", nil, false
		}
		switch verb {
		case "start":
			return policy.ActionPctStart, map[string]any{}, true
		case "shutdown":
			// A request the guest may refuse; stop is the one that
			// makes it stop.
			params := map[string]any{}
			if timeout > 0 {
				params["timeout"] = timeout
			}
			return policy.ActionGuestShutdown, params, true
		}
		return policy.ActionPctStop, map[string]any{}, true
	})
}

// shutdownSecondsRE is a shutdown's bound: 90, 90s, 90sec.
var shutdownSecondsRE = regexp.MustCompile(`^([0-9]{1,4})(s|sec|secs|seconds?)?$`)

// shutdownTimeout takes a trailing "within N [s]" or "timeout N [s]" off
// a shutdown's words: how long the guest has to power off (its
// --timeout). It returns 0 when there is none, and false when the words
// name a bound that is not a number of seconds.
func shutdownTimeout(args []token) ([]token, int, bool) {
	i := slices.IndexFunc(args, func(t token) bool { return t.norm == "within" || t.norm == "timeout" })
	if i < 0 {
		return args, 0, true
	}
	rest := args[i+1:]
	if len(rest) == 2 && slices.Contains([]string{"s", "sec", "secs", "second", "seconds"}, rest[1].norm) {
		rest = rest[:1] // "within 90 s"
	}
	if len(rest) != 1 {
		return args, 0, false
	}
	m := shutdownSecondsRE.FindStringSubmatch(rest[0].norm)
	if m == nil {
		return args, 0, false
	}
	n, _ := strconv.Atoi(m[1])
	return args[:i], n, true
}

// restartAction restarts a service, reboots a container named as one,
// or a node named as one.
func restartAction(typ string) (policy.Action, map[string]any, bool) {
	switch typ {
	case "lxc", "vm":
		return policy.ActionPctReboot, map[string]any{}, true
	case "host":
		return policy.ActionNodeReboot, map[string]any{}, true
	}
	return policy.ActionRestart, map[string]any{}, true
}

// parseUpdates reads what follows "check updates": "[on|of|for|in] <lxc>".
// It lists the pending upgrades and installs nothing.
func parseUpdates(c *Command, args []token) (string, bool) {
	if isEveryContainer(args) {
		c.Kind, c.Action, c.Params = CmdReadAll, policy.ActionAptUpgrade, map[string]any{"mode": string(policy.AptAudit)}
		return "", true
	}
	return targetAction(c, args, "usage: check updates on <lxc>, on host <host> or on all, e.g. check updates on 102", aptAction(policy.AptAudit))
}

// isEveryContainer matches what names every running container: "[on|in]
// all [containers]", "every container", "everything".
func isEveryContainer(args []token) bool {
	words := norms(args)
	for len(words) > 0 && (words[0] == "on" || words[0] == "in" || words[0] == "of" || words[0] == "for" || articles[words[0]]) {
		words = words[1:]
	}
	switch strings.Join(words, " ") {
	case "all", "all containers", "all lxcs", "all cts", "all guests", "every container", "each container", "everything":
		return true
	}
	return false
}

// unitAction runs one systemctl verb on a service's unit.
func unitAction(verb policy.SystemctlVerb) func(typ string) (policy.Action, map[string]any, bool) {
	return func(typ string) (policy.Action, map[string]any, bool) {
		return policy.ActionSystemctl, map[string]any{"verb": string(verb)}, typ == "" || typ == "service"
	}
}

// aptAction audits or applies the package upgrades of a container or a
// node.
func aptAction(mode policy.AptMode) func(typ string) (policy.Action, map[string]any, bool) {
	return func(typ string) (policy.Action, map[string]any, bool) {
		return policy.ActionAptUpgrade, map[string]any{"mode": string(mode)}, typ != "service"
	}
}

// rebootAction reboots a container, a node named as one ("reboot host
// strong"), or restarts a service named as one.
func rebootAction(typ string) (policy.Action, map[string]any, bool) {
	switch typ {
	case "service":
		return policy.ActionRestart, map[string]any{}, true
	case "host":
		return policy.ActionNodeReboot, map[string]any{}, true
	}
	return policy.ActionPctReboot, map[string]any{}, true
}

// destroyAction destroys a container or VM and nothing else.
func destroyAction(typ string) (policy.Action, map[string]any, bool) {
	return policy.ActionPctDestroy, map[string]any{}, typ == "" || isGuestWord(typ)
}

// isGuestWord reports whether a type word names a Proxmox guest.
func isGuestWord(typ string) bool { return policy.IsGuest(policy.TargetType(typ)) }

// onlyPronouns reports whether args name nothing but the plan in
// question: "it", "this plan", "that one".
func onlyPronouns(args []token) bool {
	for _, t := range args {
		switch t.norm {
		case "it", "this", "that", "the", "plan", "one":
		default:
			return false
		}
	}
	return true
}

var historyNouns = map[string]bool{"executions": true, "runs": true, "plans": true, "actions": true, "changes": true}

var (
	helpPhrases = []string{
		"h", "commands", "usage", "what can you do", "how do i use you", "how does this work", "man",
	}
	statusPhrases = []string{
		"status", "fleet", "fleet status", "overview", "health", "summary", "status report",
		"how is everything", "how is the fleet", "how are things", "what is up", "sitrep", "hosts",
		"list hosts", "show hosts", "nodes",
	}
	problemPhrases = []string{
		"problems", "show problems", "list problems", "any problems", "issues", "alerts", "attention",
		"what is wrong", "whats wrong", "what is broken", "what is unhealthy", "what is down", "what needs attention",
		"anything wrong", "is anything wrong", "is anything broken", "is anything down", "unhealthy",
	}
	pendingPhrases = []string{
		"pending", "show pending", "list pending", "what is pending", "pending plans", "plans",
		"show plans", "list plans", "open plans", "waiting", "what is waiting", "queue",
		"approvals", "pending approvals",
	}
)

// isListCommand matches "list containers", "ls", "containers", "show all
// lxcs" and the like.
func isListCommand(words []string) bool {
	rest := words
	if rest[0] == "list" || rest[0] == "ls" || rest[0] == "show" || rest[0] == "pct" {
		if rest[0] == "show" && len(rest) == 1 {
			return false
		}
		if rest[0] == "pct" {
			return len(rest) == 2 && rest[1] == "list"
		}
		rest = rest[1:]
	}
	noun := false
	for _, w := range rest {
		switch w {
		case "all", "the", "my", "list":
		case "containers", "lxcs", "lxc", "cts", "ct", "services", "guests", "vms", "vm", "qemu":
			noun = true
		default:
			return false
		}
	}
	return noun || ((words[0] == "list" || words[0] == "ls") && len(rest) == 0)
}

// listedKind is what a list command lists: "vm" for "list vms", "guests"
// for "list guests" (containers and VMs), "" for the containers.
func listedKind(words []string) string {
	switch {
	case slices.Contains(words, "guests"):
		return "guests"
	case slices.Contains(words, "vms") || slices.Contains(words, "vm") || slices.Contains(words, "qemu"):
		return "vm"
	}
	return ""
}

// targetAction completes a one-target action. pick maps the type named by
// the words ("lxc", "service", "host" or "") to the action and params.
func targetAction(c *Command, args []token, usage string, pick func(typ string) (policy.Action, map[string]any, bool)) (string, bool) {
	ref, typ, rest, ok := targetArg(args, "on", "in")
	if !ok || len(rest) != 0 {
		return usage, false
	}
	a, params, ok := pick(typ)
	if !ok {
		return usage, false
	}
	c.Kind, c.Target, c.Action, c.Params = CmdAction, ref, a, params
	return "", true
}

func parseSnapshot(c *Command, args []token) (string, bool) {
	const usage = "usage: snapshot <lxc> [name], e.g. snapshot 101 before-upgrade"
	ref, typ, rest, ok := targetArg(args, "of", "on")
	if !ok || (typ != "" && !isGuestWord(typ)) {
		return usage, false
	}
	params := map[string]any{}
	if len(rest) > 0 && slices.Contains([]string{"named", "called", "as", "name"}, rest[0].norm) {
		rest = rest[1:]
	}
	switch {
	case len(rest) == 1 && rest[0].raw != "":
		params["name"] = rest[0].raw
	case len(rest) != 0:
		return usage, false
	}
	c.Kind, c.Target, c.Action, c.Params = CmdAction, ref, policy.ActionPctSnapshot, params
	return "", true
}

func parseRollback(c *Command, args []token) (string, bool) {
	const usage = "usage: rollback <lxc> <snapshot>, e.g. rollback lxc:101 nomos-20260706-101500"
	ref, typ, rest, ok := targetArg(args)
	if !ok || (typ != "" && !isGuestWord(typ)) {
		return usage, false
	}
	for len(rest) > 1 && (rest[0].norm == "to" || rest[0].norm == "snapshot" || rest[0].norm == "the") {
		rest = rest[1:]
	}
	if len(rest) != 1 || rest[0].raw == "" {
		return usage, false
	}
	c.Kind, c.Target, c.Action = CmdAction, ref, policy.ActionPctRollback
	c.Params = map[string]any{"name": rest[0].raw}
	return "", true
}

// rawField is one whitespace-separated word of a message and its offset, so
// the rest of the line can be taken verbatim.
type rawField struct {
	text  string
	start int
}

func rawFields(s string) []rawField {
	var out []rawField
	start := -1
	for i, r := range s {
		if unicode.IsSpace(r) {
			if start >= 0 {
				out = append(out, rawField{s[start:i], start})
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, rawField{s[start:], start})
	}
	return out
}

// argFields returns the fields after the verb: after the first field that
// is verb, ignoring case and punctuation.
func argFields(body, verb string) []rawField {
	fs := rawFields(body)
	for i, f := range fs {
		if strings.EqualFold(strings.Trim(f.text, ",.:;!?"), verb) {
			return fs[i+1:]
		}
	}
	return nil
}

// parseExec reads "exec [in] [container] <lxc> [--] <command...>"; the
// command is the rest of the line as typed, unwrapped from Markdown code
// marks (`...` or ```...```) that chat clients add.
func parseExec(c *Command, body string, fs []rawField) (string, bool) {
	return parseShell(c, body, fs, "lxc", policy.ActionPctExec, "usage: exec <lxc|vm> <command>, e.g. exec 101 df -h")
}

// parseRun reads "run [on] [host] <host> [--] <command...>": a shell on
// the node itself, which the host gate refuses unless its rules allow it.
func parseRun(c *Command, body string, fs []rawField) (string, bool) {
	return parseShell(c, body, fs, "host", policy.ActionRun, "usage: run <host> <command>, e.g. run strong uptime")
}

// takesType reports whether a shell verb for typ may name a target of
// type t: exec takes any guest (a VM through its guest agent), run only a
// host.
func takesType(typ, t string) bool {
	return t == typ || (typ == "lxc" && isGuestWord(t))
}

// parseShell reads a target of type typ and the free-form command after
// it, for action.
func parseShell(c *Command, body string, fs []rawField, typ string, action policy.Action, usage string) (string, bool) {
	for len(fs) > 0 {
		w := strings.ToLower(fs[0].text)
		if w == "in" || w == "on" || articles[w] {
			fs = fs[1:]
			continue
		}
		if t, ok := typeWords[w]; ok && takesType(typ, t) && len(fs) > 1 {
			fs = fs[1:]
		}
		break
	}
	if len(fs) < 2 {
		return usage, false
	}
	ref := normSlug(strings.TrimRight(fs[0].text, ":,"))
	if !isRef(ref) {
		return usage, false
	}
	if t, _, isSlug := strings.Cut(ref, ":"); isSlug && !takesType(typ, t) {
		return usage, false
	}
	fs = fs[1:]
	if fs[0].text == "--" {
		fs = fs[1:]
	}
	if len(fs) == 0 {
		return usage, false
	}
	cmd := unwrapCode(strings.TrimSpace(body[fs[0].start:]))
	if strings.TrimSpace(cmd) == "" {
		return usage, false
	}
	c.Kind, c.Target, c.Action = CmdAction, ref, action
	c.Params = map[string]any{"command": cmd}
	return "", true
}

// parseLogs reads "logs [of|for] <service|lxc> [last] [N] [lines]": the
// tail of a service's unit journal, or of a container's whole journal.
func parseLogs(c *Command, args []token) (string, bool) {
	usage := fmt.Sprintf("usage: logs <service|lxc> [N lines], e.g. logs jellyfin 100 lines (%d by default, at most %d)", policy.DefaultLogLines, policy.MaxLogLines)
	ref, typ, rest, ok := targetArg(args, "of", "for", "from", "on", "in")
	if !ok || typ == "host" {
		return usage, false
	}
	params := map[string]any{}
	if len(rest) > 0 && (rest[0].norm == "last" || rest[0].norm == "n") {
		rest = rest[1:]
	}
	if len(rest) > 0 {
		n, err := strconv.Atoi(rest[0].norm)
		if err != nil || n < 1 || n > policy.MaxLogLines {
			return usage, false
		}
		params["lines"], rest = n, rest[1:]
		if len(rest) > 0 && (rest[0].norm == "lines" || rest[0].norm == "line") {
			rest = rest[1:]
		}
	}
	if len(rest) != 0 {
		return usage, false
	}
	c.Kind, c.Target, c.Action, c.Params = CmdAction, ref, policy.ActionTailLog, params
	return "", true
}

// unwrapCode removes Markdown code marks around a whole command: a chat
// client's `df -h` means the text df -h, not a shell command substitution.
func unwrapCode(s string) string {
	if inner, ok := strings.CutPrefix(s, "```"); ok {
		if inner, ok := strings.CutSuffix(inner, "```"); ok && !strings.Contains(inner, "```") {
			// Drop a language tag on the opening line: ```sh\n...
			if first, rest, ok := strings.Cut(inner, "\n"); ok && !strings.ContainsFunc(first, unicode.IsSpace) {
				inner = rest
			}
			return strings.TrimSpace(inner)
		}
		return s
	}
	if len(s) >= 2 && s[0] == '`' && s[len(s)-1] == '`' && strings.Count(s, "`") == 2 {
		return strings.TrimSpace(s[1 : len(s)-1])
	}
	return s
}

// parseResolve reads "resolve <code> <note...>", the note verbatim.
func parseResolve(c *Command, body string, fs []rawField) (string, bool) {
	const usage = "usage: resolve <plan code> <what really happened>, e.g. resolve k7q2 it did restart"
	if len(fs) > 0 && strings.EqualFold(fs[0].text, "plan") {
		fs = fs[1:]
	}
	if len(fs) < 2 {
		return usage, false
	}
	ref := strings.TrimRight(fs[0].text, ":,")
	if !isRef(ref) {
		return usage, false
	}
	c.Kind, c.Target = CmdResolve, ref
	c.Params = map[string]any{"note": strings.TrimSpace(body[fs[1].start:])}
	return "", true
}
