package bot

import (
	"slices"
	"strings"
	"unicode"

	"github.com/nomoshq/nomos/internal/typo"
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
	// CmdHelp asks for Help, or for HelpFor(Target) when a verb follows.
	CmdHelp
	// CmdStatus asks for the fleet at a glance.
	CmdStatus
	// CmdListContainers asks for the containers and the services in them;
	// with Target "vm" for the VMs instead, with "guests" for both.
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
	// CmdProblems lists what needs attention: open signals, then the
	// unhealthy, degraded and stale targets, worst first.
	CmdProblems
	// CmdSnapshots lists the snapshots of the container named by Target.
	CmdSnapshots
	// CmdBrief posts the daily brief now, or the weekly report when
	// Target is "weekly".
	CmdBrief
	// CmdForgetSession deletes the agent session whose id is Target.
	CmdForgetSession
	// CmdWindows lists the open maintenance windows and those just ended.
	CmdWindows
	// CmdWindow opens a maintenance window on Target now: Params
	// "duration" (a Go duration or days, "2h", "1d"), "reason", and
	// "allow" (a risk class) when it asks for a standing approval.
	CmdWindow
	// CmdEndWindow ends the open window named by Target (its name or a
	// target it covers), or the one open window when Target is empty.
	CmdEndWindow
	// CmdAllow is a standing approval's typed phrase ("allow
	// reversible_low service:jellyfin k7q2"); Phrase holds it.
	CmdAllow
	// CmdReadAll runs the catalogue read Action with Params on every
	// running container at once and answers with one summary.
	CmdReadAll
)

var kindNames = [...]string{
	CmdUnknown: "unknown", CmdHelp: "help", CmdStatus: "status", CmdListContainers: "list_containers",
	CmdShow: "show", CmdAction: "action", CmdApprove: "approve", CmdDeny: "deny", CmdConfirm: "confirm",
	CmdPending: "pending", CmdHistory: "history", CmdResolve: "resolve", CmdProblems: "problems", CmdSnapshots: "snapshots",
	CmdBrief: "brief", CmdForgetSession: "forget_session", CmdWindows: "windows", CmdWindow: "window", CmdEndWindow: "end_window", CmdAllow: "allow",
	CmdReadAll: "read_all",
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
	// Suggestion is, for a CmdUnknown whose first word is a verb of the
	// grammar misspelt, the message with it spelt right, when that is
	// understood: "restart jellyfin" for "restrat jellyfin". It is only
	// said, never acted on.
	Suggestion string
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
	if runbookFirst[toks[0].norm] && matchRunbooks(&c, toks, runbooks) {
		// The operator's own runbook for the verb wins over the grammar's.
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
	if hint == "" {
		c.Suggestion = suggestVerb(body, toks, runbooks)
	}
	return c
}

// suggestVerb returns body with its first word replaced by the verb of the
// grammar it is a letter or two from, when the result is understood; ""
// otherwise.
func suggestVerb(body string, toks []token, runbooks []store.Runbook) string {
	first := toks[0].norm
	verb, ok := typo.Nearest(first, grammarWords, typo.Near(len(first)))
	if !ok {
		return ""
	}
	fs := rawFields(body)
	for i, f := range fs {
		if strings.EqualFold(strings.Trim(f.text, ",.:;!?"), toks[0].raw) {
			fixed := verb
			if i+1 < len(fs) {
				fixed += " " + strings.TrimSpace(body[fs[i+1].start:])
			}
			if c := ParseCommand(fixed, runbooks); c.Kind != CmdUnknown {
				return fixed
			}
			return ""
		}
	}
	return ""
}

// runbookFirst are the verbs the grammar takes only when no runbook does:
// a homelab's runbook for "upgrade 102" (upgrade, then reboot, say) is
// what its operators mean by it.
var runbookFirst = map[string]bool{"upgrade": true, "reload": true, "enable": true, "disable": true, "check": true, "audit": true}

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
	return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == ':' || r == '-' || r == '_' || r == '/' || r == '\''
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
		"vm": "vm", "qemu": "vm", "kvm": "vm",
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
		ok := r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r) || (i > 0 && strings.ContainsRune("._:-/", r)))
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
