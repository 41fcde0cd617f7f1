package bot

import (
	"slices"
	"strings"
	"unicode"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

// CommandKind is what a chat message asks for.
type CommandKind int

// The command kinds.
const (
	// CmdUnknown is anything the grammar and the runbooks do not cover; the
	// caller answers with Hint, or ShortHelp when Hint is empty.
	CmdUnknown CommandKind = iota
	// CmdHelp asks for Help.
	CmdHelp
	// CmdStatus asks for the fleet at a glance.
	CmdStatus
	// CmdListContainers asks for the containers and the services in them.
	CmdListContainers
	// CmdShow asks for one entity, named by Target.
	CmdShow
	// CmdAction requests a gated execution of Action on Target with Params.
	CmdAction
	// CmdApprove approves the one pending plan, or the plan whose code is
	// Target.
	CmdApprove
	// CmdDeny denies the one pending plan, or the plan whose code is Target.
	CmdDeny
	// CmdConfirm looks like a destructive plan's typed phrase
	// ("destroy lxc:131 k7q2"); Phrase holds it as typed.
	CmdConfirm
	// CmdPending lists the plans awaiting a decision.
	CmdPending
	// CmdHistory lists recent executions, of Target when set.
	CmdHistory
	// CmdResolve records what really happened to an outcome_unknown
	// execution: Target is its plan code, Params["note"] the operator's note.
	CmdResolve
)

var kindNames = [...]string{
	CmdUnknown: "unknown", CmdHelp: "help", CmdStatus: "status", CmdListContainers: "list_containers",
	CmdShow: "show", CmdAction: "action", CmdApprove: "approve", CmdDeny: "deny", CmdConfirm: "confirm",
	CmdPending: "pending", CmdHistory: "history", CmdResolve: "resolve",
}

// String returns the kind's snake_case name.
func (k CommandKind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "CommandKind(?)"
}

// Command is one parsed chat message.
type Command struct {
	Kind CommandKind
	// Target is the entity, plan code or filter as typed ("jellyfin",
	// "lxc:101", "101"), without surrounding punctuation. A slug's type
	// prefix is lowercased.
	Target string
	// Action is the catalogue action of a CmdAction (and of a CmdConfirm).
	Action policy.Action
	// Params are a CmdAction's parameters, never nil for one: {"command":
	// ...} for pct_exec, {"name": ...} for pct_snapshot and pct_rollback,
	// {"verb": ...} for systemctl. For CmdResolve, {"note": ...}.
	Params map[string]any
	// Runbook is the slug of the runbook that matched, if one did.
	Runbook string
	// Steps are the matched runbook's steps, "{{target}}" filled in; the
	// first is Action and Params.
	Steps []store.RunbookStep
	// Phrase is a CmdConfirm's text as typed, without a leading mention.
	// Check it with policy.MatchPhrase against each pending destructive
	// plan; never treat a CmdConfirm as a new request.
	Phrase string
	// Hint is a one-line usage for a CmdUnknown whose verb was recognised
	// but whose arguments were not, e.g. "usage: rollback <lxc> <snapshot>".
	Hint string
	// Raw is the message as received.
	Raw string
}

// maxCommandBytes bounds what ParseCommand reads: the longest exec command
// policy accepts, with room for the verb and target.
const maxCommandBytes = policy.MaxCommandLen + 256

// ParseCommand reads a chat message deterministically, with no LLM. A
// leading mention ("nomos:", "@nomos", "!nomos"), case, surrounding
// punctuation, politeness and noise words ("the", "service", "container")
// are forgiven. In order, the first that fits wins: a typed confirmation
// phrase, an assent or refusal (policy.ParseDecision), the command grammar,
// the runbooks' triggers; otherwise CmdUnknown.
func ParseCommand(text string, runbooks []store.Runbook) Command {
	c := Command{Raw: text}
	if len(text) > maxCommandBytes {
		c.Hint = "That message is too long for a command."
		return c
	}
	body := stripMention(stripReplyFallback(text))
	if body == "?" {
		c.Kind = CmdHelp
		return c
	}
	if parseConfirm(&c, body) {
		return c
	}
	if d, ok := policy.ParseDecision(body); ok {
		c.Kind = CmdApprove
		if d == policy.Deny {
			c.Kind = CmdDeny
		}
		return c
	}
	toks := trimFillers(tokenize(body))
	if len(toks) == 0 {
		return c
	}
	hint, ok := parseGrammar(&c, body, toks)
	if ok {
		return c
	}
	if matchRunbooks(&c, toks, runbooks) {
		return c
	}
	c.Hint = hint
	return c
}

// stripReplyFallback drops the "> <@user> quoted text" lines a Matrix
// reply's body starts with.
func stripReplyFallback(s string) string {
	if !strings.HasPrefix(s, "> ") && !strings.HasPrefix(s, ">\n") {
		return s
	}
	rest := s
	for strings.HasPrefix(rest, ">") {
		_, after, ok := strings.Cut(rest, "\n")
		if !ok {
			return ""
		}
		rest = after
	}
	return rest
}

// stripMention drops a leading address to the bot: "nomos:", "@nomos",
// "@nomos:example.org", "!nomos", "hey nomos,".
func stripMention(s string) string {
	s = strings.TrimSpace(s)
	first, rest := cutField(s)
	if w := strings.ToLower(strings.TrimRight(first, ",:;!.")); w == "hey" || w == "hi" || w == "hello" || w == "yo" || w == "ok" {
		if second, after := cutField(rest); isMention(second) {
			return after
		}
	}
	if isMention(first) {
		return rest
	}
	return s
}

func isMention(f string) bool {
	f = strings.ToLower(strings.TrimLeft(f, "@!/"))
	f = strings.TrimRight(f, ",:;.!")
	name, server, hasServer := strings.Cut(f, ":")
	return name == "nomos" && (!hasServer || server != "")
}

// cutField splits s at its first run of whitespace; rest is trimmed.
func cutField(s string) (first, rest string) {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	i := strings.IndexFunc(s, unicode.IsSpace)
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimSpace(s[i:])
}

// token is one word of a message: raw keeps the case as typed, norm is
// lowercased. Contractions are expanded in norm only ("what's" → "what",
// "is"), so raw is empty for the added word.
type token struct{ raw, norm string }

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == ':' || r == '-' || r == '_' || r == '\''
}

var contractions = map[string][]string{
	"can't": {"cannot"}, "cant": {"cannot"}, "won't": {"will", "not"}, "isn't": {"is", "not"},
	"doesn't": {"does", "not"}, "didn't": {"did", "not"}, "wasn't": {"was", "not"},
	"aren't": {"are", "not"}, "what's": {"what", "is"}, "how's": {"how", "is"}, "it's": {"it", "is"},
	"that's": {"that", "is"}, "i'm": {"i", "am"}, "let's": {"let", "us"},
}

// tokenize splits text into words of letters, digits and . : - _ ',
// trimming each word's leading and trailing . : - and '.
func tokenize(text string) []token {
	text = strings.Map(func(r rune) rune {
		if r == '’' || r == '‘' || r == 'ʼ' {
			return '\''
		}
		return r
	}, text)
	var out []token
	for _, w := range strings.FieldsFunc(text, func(r rune) bool { return !isWordRune(r) }) {
		w = strings.Trim(w, ".:-'")
		if w == "" {
			continue
		}
		norm := strings.ToLower(w)
		if exp, ok := contractions[norm]; ok {
			out = append(out, token{raw: w, norm: exp[0]})
			for _, e := range exp[1:] {
				out = append(out, token{norm: e})
			}
			continue
		}
		if base, ok := strings.CutSuffix(norm, "'s"); ok && base != "" {
			out = append(out, token{raw: w[:len(base)], norm: base}, token{norm: "is"})
			continue
		}
		out = append(out, token{raw: w, norm: norm})
	}
	return out
}

func norms(toks []token) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = t.norm
	}
	return out
}

func hasWords(toks []token, words ...string) bool {
	if len(toks) < len(words) {
		return false
	}
	for i, w := range words {
		if toks[i].norm != w {
			return false
		}
	}
	return true
}

var (
	leadingFillers = [][]string{
		{"please"}, {"pls"}, {"plz"}, {"kindly"}, {"hey"}, {"ok"}, {"okay"}, {"now"},
		{"can", "you"}, {"could", "you"}, {"would", "you"}, {"can", "u"}, {"will", "you"},
	}
	trailingFillers = [][]string{
		{"please"}, {"pls"}, {"plz"}, {"now"}, {"thanks"}, {"thank", "you"}, {"thx"}, {"ty"},
		{"asap"}, {"again"}, {"for", "me"}, {"nomos"},
	}
)

// trimFillers drops politeness from both ends of a message.
func trimFillers(toks []token) []token {
	for changed := true; changed; {
		changed = false
		for _, f := range leadingFillers {
			if len(toks) > len(f) && hasWords(toks, f...) {
				toks, changed = toks[len(f):], true
			}
		}
		for _, f := range trailingFillers {
			if len(toks) > len(f) && hasWords(toks[len(toks)-len(f):], f...) {
				toks, changed = toks[:len(toks)-len(f)], true
			}
		}
	}
	return toks
}

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

// parseConfirm recognises "<verb> <slug> <code>", and tolerates surrounding
// punctuation in the recognition so that a near miss is never read as a new
// request; c.Phrase keeps the text as typed for policy.MatchPhrase.
func parseConfirm(c *Command, body string) bool {
	toks := tokenize(body)
	if len(toks) != 3 {
		return false
	}
	a, ok := verbActions[toks[0].norm]
	if !ok || !isPlanCode(toks[2].norm) {
		return false
	}
	slug := normSlug(toks[1].raw)
	if _, _, err := policy.ParseSlug(slug); err != nil {
		return false
	}
	c.Kind, c.Action, c.Target, c.Phrase = CmdConfirm, a, slug, body
	if a == policy.ActionPctRollback {
		// The code's place is also where a snapshot name goes.
		c.Params = map[string]any{"name": toks[2].raw}
	}
	return true
}

// normSlug lowercases a slug's type prefix: "LXC:101" → "lxc:101".
func normSlug(s string) string {
	typ, name, ok := strings.Cut(s, ":")
	if !ok {
		return s
	}
	return strings.ToLower(typ) + ":" + name
}

var (
	// typeWords may stand before or after a target and say its type.
	typeWords = map[string]string{
		"container": "lxc", "containers": "lxc", "lxc": "lxc", "ct": "lxc", "guest": "lxc",
		"service": "service", "unit": "service", "app": "service",
		"host": "host", "node": "host", "server": "host",
	}
	// articles may stand before a target.
	articles = map[string]bool{"the": true, "my": true, "our": true, "a": true}
	// notTargets are words that never name an entity.
	notTargets = map[string]bool{
		"it": true, "this": true, "that": true, "them": true, "everything": true, "all": true,
		"something": true, "me": true, "you": true, "nomos": true, "please": true, "to": true,
		"and": true, "or": true, "on": true, "in": true, "of": true, "is": true, "not": true,
	}
)

// isRef reports whether s can name an entity, a slug or a plan code.
func isRef(s string) bool {
	if s == "" || len(s) > 128 || notTargets[strings.ToLower(s)] {
		return false
	}
	for i, r := range s {
		ok := r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r) || (i > 0 && strings.ContainsRune("._:-", r)))
		if !ok {
			return false
		}
	}
	return true
}

// targetArg reads "[the] [type] <ref> [type]" from the start of toks. It
// returns the ref, the type the words name ("" if none) and what follows.
func targetArg(toks []token, preps ...string) (ref, typ string, rest []token, ok bool) {
	for len(toks) > 0 && (articles[toks[0].norm] || slices.Contains(preps, toks[0].norm)) {
		toks = toks[1:]
	}
	if len(toks) > 1 {
		if t, isType := typeWords[toks[0].norm]; isType {
			typ, toks = t, toks[1:]
		}
	}
	if len(toks) == 0 || toks[0].raw == "" || !isRef(toks[0].raw) {
		return "", "", nil, false
	}
	if _, isType := typeWords[toks[0].norm]; isType && typ == "" {
		// A lone "service" or "container" names no entity.
		return "", "", nil, false
	}
	ref, toks = normSlug(toks[0].raw), toks[1:]
	if t, _, isSlug := strings.Cut(ref, ":"); isSlug {
		typ = t
	}
	if len(toks) > 0 {
		if t, isType := typeWords[toks[0].norm]; isType && (typ == "" || typ == t) {
			typ, toks = t, toks[1:]
		}
	}
	return ref, typ, toks, true
}

// parseGrammar reads the fixed command grammar. When the verb is known but
// the rest is not, it returns a usage hint.
func parseGrammar(c *Command, body string, toks []token) (hint string, ok bool) {
	words := norms(toks)
	phrase := strings.Join(words, " ")
	switch {
	case slices.Contains(helpPhrases, phrase) || words[0] == "help":
		c.Kind = CmdHelp
		return "", true
	case slices.Contains(statusPhrases, phrase):
		c.Kind = CmdStatus
		return "", true
	case slices.Contains(pendingPhrases, phrase):
		c.Kind = CmdPending
		return "", true
	case isListCommand(words):
		c.Kind = CmdListContainers
		return "", true
	}

	verb, args := words[0], toks[1:]
	switch verb {
	case "history", "log", "recent":
		c.Kind = CmdHistory
		if len(args) == 0 || (len(args) == 1 && historyNouns[args[0].norm]) {
			return "", true
		}
		if ref, _, rest, ok := targetArg(args, "of", "for", "on"); ok && len(rest) == 0 {
			c.Target = ref
			return "", true
		}
		return "usage: history [name]", false
	case "show", "info", "describe", "details", "inspect", "status", "check":
		if hasWords(args, "me") {
			args = args[1:]
		}
		for len(args) > 1 && (articles[args[0].norm] || args[0].norm == "of") {
			args = args[1:]
		}
		if len(args) == 1 {
			switch args[0].norm {
			case "history", "log":
				c.Kind = CmdHistory
				return "", true
			case "status", "fleet", "everything", "all":
				c.Kind = CmdStatus
				return "", true
			case "pending", "plans":
				c.Kind = CmdPending
				return "", true
			case "help":
				c.Kind = CmdHelp
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
	case "approve", "deny", "reject", "cancel", "confirm":
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
	case "resolve", "reconcile", "resolved", "reconciled":
		return parseResolve(c, body, argFields(body, toks[0].raw))
	case "exec", "execute":
		return parseExec(c, body, argFields(body, toks[0].raw))
	case "restart", "bounce":
		return targetAction(c, args, "usage: restart <service>, e.g. restart jellyfin", func(typ string) (policy.Action, map[string]any, bool) {
			switch typ {
			case "lxc":
				return policy.ActionPctReboot, map[string]any{}, true
			case "host":
				return "", nil, false
			}
			return policy.ActionRestart, map[string]any{}, true
		})
	case "start", "stop", "shutdown", "shut":
		if verb == "stop" && onlyPronouns(args) {
			// "stop it", "stop that": a refusal, not a container.
			c.Kind = CmdDeny
			return "", true
		}
		if verb == "shut" {
			if !hasWords(args, "down") {
				return "usage: stop <lxc>", false
			}
			verb, args = "shutdown", args[1:]
		}
		usage := "usage: " + verb + " <lxc>, e.g. " + verb + " 101"
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
			if verb == "start" {
				return policy.ActionPctStart, map[string]any{}, true
			}
			return policy.ActionPctStop, map[string]any{}, true
		})
	case "reboot":
		return targetAction(c, args, "usage: reboot <lxc>, e.g. reboot 101", func(typ string) (policy.Action, map[string]any, bool) {
			switch typ {
			case "service":
				return policy.ActionRestart, map[string]any{}, true
			case "host":
				return "", nil, false
			}
			return policy.ActionPctReboot, map[string]any{}, true
		})
	case "destroy":
		return targetAction(c, args, "usage: destroy <lxc>, e.g. destroy lxc:131", func(typ string) (policy.Action, map[string]any, bool) {
			return policy.ActionPctDestroy, map[string]any{}, typ == "" || typ == "lxc"
		})
	case "snapshot", "snap":
		return parseSnapshot(c, args)
	case "take", "make", "create":
		if hasWords(args, "a", "snapshot") || hasWords(args, "snapshot") {
			for args[0].norm != "snapshot" {
				args = args[1:]
			}
			return parseSnapshot(c, args[1:])
		}
		return "", false
	case "rollback", "revert", "restore", "roll":
		if verb == "roll" {
			if !hasWords(args, "back") {
				return "", false
			}
			args = args[1:]
		}
		return parseRollback(c, args)
	}
	return "", false
}

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
		case "containers", "lxcs", "lxc", "cts", "ct", "services", "guests":
			noun = true
		default:
			return false
		}
	}
	return noun || ((words[0] == "list" || words[0] == "ls") && len(rest) == 0)
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
	if !ok || (typ != "" && typ != "lxc") {
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
	if !ok || (typ != "" && typ != "lxc") {
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
	const usage = "usage: exec <lxc> <command>, e.g. exec 101 df -h"
	for len(fs) > 0 {
		w := strings.ToLower(fs[0].text)
		if w == "in" || w == "on" || articles[w] {
			fs = fs[1:]
			continue
		}
		if t, ok := typeWords[w]; ok && t == "lxc" && len(fs) > 1 {
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
	if typ, _, isSlug := strings.Cut(ref, ":"); isSlug && typ != "lxc" {
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
	c.Kind, c.Target, c.Action = CmdAction, ref, policy.ActionPctExec
	c.Params = map[string]any{"command": cmd}
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

// matchRunbooks matches the message against every trigger. The trigger
// with the most literal words wins; on a tie, the first runbook.
func matchRunbooks(c *Command, toks []token, runbooks []store.Runbook) bool {
	bestScore := -1
	var best *store.Runbook
	var bestRef string
	for i := range runbooks {
		rb := &runbooks[i]
		if len(rb.Steps) == 0 || !knownSteps(rb.Steps) {
			continue
		}
		for _, trig := range rb.Triggers {
			pat, literal := compileTrigger(trig)
			if len(pat) == 0 || literal <= bestScore {
				continue
			}
			ref, typ, ok := matchPattern(pat, toks)
			if !ok {
				continue
			}
			if ref != "" && typ != "" && rb.TargetType != "" && typ != rb.TargetType {
				continue
			}
			best, bestRef, bestScore = rb, ref, literal
		}
	}
	if best == nil {
		return false
	}
	c.Kind, c.Target, c.Runbook = CmdAction, bestRef, best.Slug
	for _, s := range best.Steps {
		c.Steps = append(c.Steps, store.RunbookStep{Action: s.Action, Params: fillTarget(s.Params, bestRef)})
	}
	c.Action, c.Params = policy.Action(c.Steps[0].Action), c.Steps[0].Params
	return true
}

func knownSteps(steps []store.RunbookStep) bool {
	for _, s := range steps {
		if _, err := policy.Lookup(policy.Action(s.Action)); err != nil {
			return false
		}
	}
	return true
}

// targetSlot marks "{target}" in a compiled trigger.
const targetSlot = "\x00target"

// compileTrigger tokenizes a trigger the way messages are, with
// "{target}" as one slot, and counts its literal words. A trigger without
// exactly one slot compiles to nothing: every runbook step needs a target.
func compileTrigger(trig string) (pat []string, literal int) {
	parts := strings.Split(trig, "{target}")
	if len(parts) != 2 {
		return nil, 0
	}
	var toks []token
	for i, part := range parts {
		if i > 0 {
			toks = append(toks, token{raw: targetSlot, norm: targetSlot})
		}
		toks = append(toks, tokenize(part)...)
	}
	pat = norms(trimFillers(toks))
	return pat, len(pat) - 1
}

// matchPattern matches the whole message against a compiled trigger. A
// slot takes "[the] [type] <ref> [type]".
func matchPattern(pat []string, toks []token) (ref, typ string, ok bool) {
	if len(pat) == 0 {
		return "", "", len(toks) == 0
	}
	if pat[0] != targetSlot {
		if len(toks) == 0 || toks[0].norm != pat[0] {
			return "", "", false
		}
		return matchPattern(pat[1:], toks[1:])
	}
	// Try every way the slot can take words: optional article, type word
	// before, the ref, optional type word after.
	for skip := 0; skip <= 2 && skip < len(toks); skip++ {
		pre := toks[:skip]
		preType := ""
		switch {
		case skip == 1 && articles[pre[0].norm]:
		case skip == 1:
			t, isType := typeWords[pre[0].norm]
			if !isType {
				continue
			}
			preType = t
		case skip == 2:
			t, isType := typeWords[pre[1].norm]
			if !articles[pre[0].norm] || !isType {
				continue
			}
			preType = t
		}
		cand := toks[skip]
		if cand.raw == "" || !isRef(cand.raw) {
			continue
		}
		if _, isType := typeWords[cand.norm]; isType && preType == "" {
			continue
		}
		r := normSlug(cand.raw)
		candType := preType
		if t, _, isSlug := strings.Cut(r, ":"); isSlug {
			if candType != "" && candType != t {
				continue
			}
			candType = t
		}
		after := toks[skip+1:]
		if _, rt, ok := matchPattern(pat[1:], after); ok && rt == "" {
			return r, candType, true
		}
		if len(after) > 0 {
			if t, isType := typeWords[after[0].norm]; isType && (candType == "" || candType == t) {
				if _, rt, ok := matchPattern(pat[1:], after[1:]); ok && rt == "" {
					return r, t, true
				}
			}
		}
	}
	return "", "", false
}

// fillTarget copies params, replacing "{{target}}" in string values.
func fillTarget(params map[string]any, ref string) map[string]any {
	out := make(map[string]any, len(params))
	for k, v := range params {
		if s, ok := v.(string); ok {
			v = strings.ReplaceAll(s, "{{target}}", ref)
		}
		out[k] = v
	}
	return out
}

// ShortHelp is the answer to a message Nomos did not understand.
func ShortHelp() string {
	return "I didn't understand that. Try: status · list containers · show <name> · restart <service> · " +
		"start|stop|reboot <lxc> · snapshot <lxc> · rollback <lxc> <snapshot> · destroy <lxc> · " +
		"exec <lxc> <command> · pending · history · help"
}

type helpEntry struct{ usage, what string }

var helpSections = []struct {
	title   string
	entries []helpEntry
}{
	{"Look", []helpEntry{
		{"status", "the fleet at a glance"},
		{"list containers", "containers and the services in them (also: ls, list lxcs)"},
		{"show <name>", "one host, container or service, e.g. show jellyfin, show lxc:101"},
		{"pending", "plans waiting for a decision"},
		{"history [name]", "recent executions"},
	}},
	{"Change (each makes a plan that waits for approval)", []helpEntry{
		{"restart <service>", "restart a service's unit, e.g. restart jellyfin"},
		{"start | stop | reboot <lxc>", "a container by vmid, slug or hostname, e.g. reboot 101"},
		{"snapshot <lxc> [name]", "take a snapshot"},
		{"rollback <lxc> <snapshot>", "roll back to a snapshot (destructive)"},
		{"destroy <lxc>", "destroy a container, stopping it first if it runs (destructive)"},
		{"exec <lxc> <command>", "run a shell command in a container, e.g. exec 101 df -h"},
	}},
	{"Decide", []helpEntry{
		{"✅ or 👍 on the plan", "approve; ❌ or 👎 deny"},
		{"go ahead / yes / lgtm", "approve the one pending plan if you asked for it yourself; no / stop / cancel deny it"},
		{"reply \"go ahead\" to a card", "approve that plan, whoever asked for it (the agent, an MCP client, another operator)"},
		{"approve <code> / deny <code>", "decide one plan by the code its card shows; the code alone approves it too"},
		{"<verb> <target> <code>", "the typed phrase a destructive plan shows; only it approves such a plan"},
		{"resolve <code> <note>", "record what really happened to an execution whose outcome is unknown"},
	}},
}

// Help is the full command reference, as plain text and HTML.
func Help() (plain, html string) {
	var p, h strings.Builder
	p.WriteString("Nomos commands. Phrases like \"jellyfin is down\" work too.\n")
	h.WriteString("<p><strong>Nomos commands.</strong> Phrases like “jellyfin is down” work too.</p>\n")
	for _, s := range helpSections {
		p.WriteString("\n" + s.title + ":\n")
		h.WriteString("<p><strong>" + escape(s.title) + "</strong></p>\n<ul>\n")
		for _, e := range s.entries {
			p.WriteString("  " + e.usage + " — " + e.what + "\n")
			h.WriteString("<li><code>" + escape(e.usage) + "</code> — " + escape(e.what) + "</li>\n")
		}
		h.WriteString("</ul>\n")
	}
	return strings.TrimRight(p.String(), "\n"), strings.TrimRight(h.String(), "\n")
}
