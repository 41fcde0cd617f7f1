package policy

import (
	"slices"
	"strings"
)

// addSystemdRules adds the rules of the systemd commands.
func addSystemdRules(rules map[string]rule, modelsPaths map[string]bool) {
	rules["systemctl"] = ruleSystemctl
	rules["journalctl"] = func(_ *analyzer, args []word, _ int) (Class, string) {
		return denyOpts("journalctl", args, "", "vacuum-size", "vacuum-time", "vacuum-files", "rotate", "flush",
			"sync", "relinquish-var", "smart-relinquish-var", "setup-keys", "update-catalog", "cursor-file")
	}
	for name, c := range ctlTools {
		rules[name] = ruleCtl(name, c)
	}
	rules["killall5"] = func(a *analyzer, _ []word, _ int) (Class, string) { return a.power("killall5 kills every process") }
	for _, n := range []string{"shutdown", "poweroff", "halt", "reboot"} {
		rules[n] = rulePower(n)
	}
	rules["init"] = ruleInit
	rules["telinit"] = ruleInit
	rules["kill"] = ruleKill
}

var systemctlRO = set(
	"status", "is-active", "is-enabled", "is-failed", "is-system-running", "show",
	"cat", "list-units", "list-unit-files", "list-sockets", "list-timers",
	"list-dependencies", "list-jobs", "list-machines", "list-automounts",
	"list-paths", "show-environment", "get-default", "help",
)

var systemctlPower = set(
	"poweroff", "reboot", "halt", "kexec", "suspend", "hibernate", "hybrid-sleep",
	"suspend-then-hibernate", "rescue", "emergency", "soft-reboot", "isolate",
	"switch-root", "default", "exit",
)

var systemctlOpts = set(
	"--no-pager", "-l", "--full", "-a", "--all", "--no-legend", "--plain", "-q",
	"--quiet", "--value", "-r", "--recursive", "--reverse", "--before", "--after",
	"--failed", "--system", "--user", "--no-ask-password", "--show-types",
	"--with-dependencies", "-t", "--type", "--state", "-p", "--property", "-P",
	"-n", "--lines", "-o", "--output", "-H", "--host", "-M", "--machine",
	"--version", "-h", "--help",
)

func ruleSystemctl(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "tpPnoHM", []string{"type", "state", "property", "lines", "output", "host", "machine", "root"}, true)
	_, known := p.onlyOpts(systemctlOpts)
	// With an option the table does not know (an abbreviation such as
	// --prop, say), any word may be the verb.
	verbs := p.operands[:min(len(p.operands), 1)]
	if !known {
		verbs = args
	}
	for _, v := range verbs {
		if systemctlPower[v.val] {
			return a.power("systemctl " + v.val + " takes the machine down")
		}
		if !v.static() {
			return a.power("systemctl with a verb only known at run time may take the machine down")
		}
	}
	sub := ""
	if len(p.operands) > 0 {
		sub = p.operands[0].val
	}
	if p.dynamic {
		return notLiteral("systemctl")
	}
	if o, ok := p.onlyOpts(systemctlOpts); !ok {
		return cfgf("systemctl option %s is not on the read-only list", o)
	}
	switch sub {
	case "show-environment":
		a.secret("systemctl show-environment")
	case "show":
		// A unit's Environment= often carries a password.
		shows := true
		all := parseOpts(args, "tpPnoHM", []string{"type", "state", "property", "lines", "output", "host", "machine", "root"}, false)
		if ps := all.values("-p", "--property", "-P"); len(ps) > 0 {
			shows = slices.ContainsFunc(ps, func(o opt) bool { return strings.Contains(o.val, "Environment") })
		}
		if shows {
			a.secret("systemctl show prints a unit's Environment=")
		}
	}
	if sub == "" || systemctlRO[sub] {
		return ReadOnly, ""
	}
	return cfgf("systemctl %s changes state", sub)
}

// ctlTool is the option table and read-only verbs of one systemd *ctl tool.
type ctlTool struct {
	spec spec
	// ro are verbs that only show state; a query verb shows with at most
	// the given number of arguments and sets with more.
	ro     map[string]bool
	query  map[string]int
	noVerb bool // no verb means status
}

var ctlCommon = "-h --help --version --no-pager --no-legend --no-ask-password"

func ctlSpec(flags, values string) spec {
	return newSpec(ctlCommon+" "+flags, "-H --host -M --machine "+values)
}

var ctlTools = map[string]ctlTool{
	"hostnamectl": {
		spec:   ctlSpec("--transient --static --pretty -j", "--json"),
		ro:     set("status"),
		query:  map[string]int{"hostname": 0, "icon-name": 0, "chassis": 0, "deployment": 0, "location": 0},
		noVerb: true,
	},
	"timedatectl": {
		spec:   ctlSpec("--adjust-system-clock --monitor -a --all --value", "-p --property"),
		ro:     set("status", "show", "list-timezones", "timesync-status", "show-timesync"),
		query:  map[string]int{"ntp-servers": 1},
		noVerb: true,
	},
	"networkctl": {
		spec:   ctlSpec("-a --all -s --stats -l --full", "-n --lines --json"),
		ro:     set("list", "status", "lldp", "label", "cat"),
		noVerb: true,
	},
	"loginctl": {
		spec: ctlSpec("--value -a --all -l --full -j", "-p --property -P -n --lines -o --output --json"),
		ro: set("list-sessions", "session-status", "show-session", "list-users", "user-status",
			"show-user", "list-seats", "seat-status", "show-seat"),
		noVerb: true,
	},
	"localectl": {
		spec: ctlSpec("--no-convert", ""),
		ro: set("status", "list-locales", "list-keymaps", "list-x11-keymap-models",
			"list-x11-keymap-layouts", "list-x11-keymap-variants", "list-x11-keymap-options"),
		noVerb: true,
	},
	"resolvectl": {
		spec: ctlSpec("-4 -6 -j",
			"-i --interface -p --protocol -t --type -c --class --service-address --service-txt --cname "+
				"--validate --synthesize --cache --zone --trust-anchor --network --search --raw --json "+
				"--legend --stale-data --relax-single-label"),
		ro: set("status", "query", "statistics", "show-cache", "show-server-state", "service", "openpgp", "tlsa"),
		query: map[string]int{"dns": 1, "domain": 1, "llmnr": 1, "mdns": 1, "dnssec": 1, "dnsovertls": 1,
			"default-route": 1, "log-level": 0},
		noVerb: true,
	},
}

// ruleCtl reads a systemd *ctl tool's options with its own table, so an
// option's value is never taken for the verb: timedatectl -p status
// set-time ... is set-time.
func ruleCtl(name string, t ctlTool) rule {
	return func(_ *analyzer, args []word, _ int) (Class, string) {
		p := t.spec.parse(args, true)
		switch {
		case len(p.unknown) > 0:
			return cfgf("%s option %s is not on the read-only list", name, p.unknown[0])
		case p.bad:
			return cfgf("%s option without its value", name)
		case p.dynamic:
			return notLiteral(name)
		}
		if len(p.operands) == 0 {
			if t.noVerb {
				return ReadOnly, ""
			}
			return cfgf("%s without a verb", name)
		}
		verb := p.operands[0].val
		rest := p.operands[1:]
		if slices.ContainsFunc(rest, func(w word) bool { return strings.HasPrefix(w.val, "-") }) {
			// Options after the verb: parse them too, so the verb's own
			// arguments are counted right.
			q := t.spec.parse(rest, false)
			if len(q.unknown) > 0 || q.bad {
				return cfgf("%s option %v is not on the read-only list", name, q.unknown)
			}
			rest = q.operands
		}
		if t.ro[verb] {
			return ReadOnly, ""
		}
		if n, ok := t.query[verb]; ok && len(rest) <= n {
			return ReadOnly, ""
		}
		return cfgf("%s %s changes settings", name, verb)
	}
}

func rulePower(name string) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		if name == "shutdown" && (hasShort(args, "c") || hasLong(args, "cancel")) {
			return cfgf("shutdown -c cancels a pending shutdown")
		}
		return a.power(name + " takes the machine down")
	}
}

func ruleInit(a *analyzer, args []word, _ int) (Class, string) {
	if len(args) > 0 {
		switch args[0].val {
		case "0", "6", "1", "s", "S":
			return a.power("init " + args[0].val + " changes the runlevel")
		}
		if !args[0].static() {
			return a.power("init with a runlevel only known at run time")
		}
	}
	return cfgf("init changes the runlevel")
}

func ruleKill(a *analyzer, args []word, _ int) (Class, string) {
	i := 0
	if i < len(args) && strings.HasPrefix(args[i].val, "-") && args[i].val != "--" {
		switch args[i].val {
		case "-l", "-L", "--list", "--table":
			return ReadOnly, ""
		case "-s", "-n", "--signal":
			i += 2
		default:
			i++
		}
	}
	if i < len(args) && args[i].val == "--" {
		i++
	}
	for _, w := range args[min(i, len(args)):] {
		if w.val == "1" || w.val == "-1" || w.expands {
			return a.power("kill of init or every process")
		}
	}
	return cfgf("kill stops processes")
}
