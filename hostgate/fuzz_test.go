package hostgate_test

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/nomoshq/nomos/hostgate"
	"github.com/nomoshq/nomos/policy"
)

// FuzzGate feeds the gate arbitrary commands, seeded with everything the
// actuator sends, every refusal above, the reviewed hostile commands and
// every string in policy's tests, each also wrapped as a guest command and
// as a shell script on the host and in a container. Whatever the gate lets
// through must satisfy mayRun, written separately from the allowlist; must
// be what bash itself would make of the words (mvdan's expander, not the
// gate's quote removal); and must read back the same after Quote.
func FuzzGate(f *testing.F) {
	var seeds []string
	for _, p := range renderedPlans {
		steps, _ := policy.Render(p.params, p.target)
		for _, s := range steps {
			seeds = append(seeds, fill(s))
		}
	}
	seeds = append(seeds, actuatorCommands...)
	for _, r := range refusals {
		seeds = append(seeds, r.cmd)
	}
	for _, s := range append(hostileCommands(f), policyTestStrings(f)...) {
		seeds = append(seeds, s, "pct exec 101 -- "+s, "sh -c "+policy.ShellQuote(s), "pct exec 101 -- sh -c "+policy.ShellQuote(s))
	}
	for _, s := range seeds {
		f.Add(s, false, false, false)
		f.Add(s, true, true, true)
	}
	f.Fuzz(func(t *testing.T, cmd string, hostShell, privileged, units bool) {
		rules := hostgate.Rules{HostShell: hostShell, PrivilegedContainers: privileged}
		if units {
			rules.HostUnits = listed
		}
		argv, err := hostgate.Check(cmd, rules)
		if err != nil {
			if !errors.Is(err, hostgate.ErrRefused) || strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("%q: the refusal %q must wrap ErrRefused and fit on one line", cmd, err)
			}
			return
		}
		if why := mayRun(argv, rules); why != "" {
			t.Fatalf("%q (%+v) passed as %q, which must never run: %s", cmd, rules, argv, why)
		}
		if want := bashFields(t, cmd); !slices.Equal(want, argv) {
			t.Fatalf("%q passed as %q, but a shell reads it as %q", cmd, argv, want)
		}
		back, err := hostgate.Check(hostgate.Quote(argv), rules)
		if err != nil || !slices.Equal(back, argv) {
			t.Fatalf("%q passed as %q; Quote gives %q, which reads back as %q, %v", cmd, argv, hostgate.Quote(argv), back, err)
		}
	})
}

// bashFields expands the words of a one-command script with mvdan's
// expander: no environment, no globbing, no command substitution.
func bashFields(t *testing.T, cmd string) []string {
	file, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), "")
	if err != nil || len(file.Stmts) != 1 {
		t.Fatalf("%q passed the gate, but does not parse as one statement: %v", cmd, err)
	}
	call, ok := file.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok {
		t.Fatalf("%q passed the gate, but is a %T", cmd, file.Stmts[0].Cmd)
	}
	fields, err := expand.Fields(&expand.Config{Env: expand.ListEnviron(), NoUnset: true}, call.Args...)
	if err != nil {
		t.Fatalf("%q passed the gate, but does not expand: %v", cmd, err)
	}
	return fields
}

// urlRE is an http URL without blanks, quotes, shell syntax or curl's
// {} globs.
var urlRE = regexp.MustCompile(`^https?://[A-Za-z0-9._~!&()*+,;=:@%/?\[\]-]+$`)

// plainRE is a word that means the same to a shell and to a program's own
// option parser as it reads: no blank, quote, shell metacharacter, glob or
// brace (a systemd unit's \xHH escape aside).
var plainRE = regexp.MustCompile(`^[A-Za-z0-9@%+=:,./_\\-]+$`)

// mayRun is the allowlist stated as invariants, independently of the
// gate's own tables: which programs may run on the host, which in a
// container, and that no word but an approved sh -c script carries shell
// syntax. It returns why argv must not run, or "" if it may.
func mayRun(argv []string, rules hostgate.Rules) string {
	if len(argv) == 0 {
		return "empty"
	}
	script := -1 // the index of the one word allowed to carry shell syntax
	shell := func(at int) string {
		rest := argv[min(at, len(argv)):]
		switch {
		case len(rest) == 2 && rest[0] == "-c":
			script = at + 1
		case len(rest) == 3 && rest[0] == "-e" && rest[1] == "-c":
			script = at + 2
		default:
			return "a shell run other than as sh -c SCRIPT"
		}
		return ""
	}
	why := ""
	switch argv[0] {
	case "sh":
		if !rules.HostShell {
			return "a shell on the host without host_shell"
		}
		why = shell(1)
	case "pct":
		why = mayRunPct(argv, shell)
		if why == "" && argv[1] == "create" && !rules.PrivilegedContainers && !unprivileged(argv) {
			why = "a privileged container without privileged_containers"
		}
		if why == "" && argv[1] == "create" {
			var ok bool
			if script, ok = descriptionAt(argv); !ok {
				why = "a description that is not one line of plain text"
			}
		}
	case "qm":
		why = mayRunQm(argv, shell)
	case "pvesh":
		if len(argv) < 3 || argv[1] != "get" || !strings.HasPrefix(argv[2], "/") || strings.Contains(argv[2], "..") ||
			!(strings.HasPrefix(argv[2], "/cluster/") || strings.HasPrefix(argv[2], "/nodes") || argv[2] == "/version") ||
			strings.Contains(argv[2], "access") || strings.Contains(argv[2], "file-restore") || strings.Contains(argv[2], "log") {
			why = "pvesh other than get of the inventory"
		}
	case "pveam":
		if len(argv) != 3 || argv[1] != "list" {
			why = "pveam other than list"
		}
	case "pvesm":
		backups := false
		if len(argv) == 7 && argv[1] == "list" && policy.ValidateStorage(argv[2]) == nil {
			opts := []string{argv[3] + " " + argv[4], argv[5] + " " + argv[6]}
			slices.Sort(opts)
			backups = opts[0] == "--content backup" && strings.HasPrefix(opts[1], "--vmid ")
		}
		if len(argv) == 5 && argv[1] == "list" && policy.ValidateStorage(argv[2]) == nil {
			backups = argv[3] == "--content" && argv[4] == "backup"
		}
		if !slices.Equal(argv, []string{"pvesm", "status"}) && !slices.Equal(argv, []string{"pvesm", "status", "--content", "vztmpl"}) && !backups {
			why = "pvesm other than status of all storages or of the template storages, or the backups on a storage"
		}
	case "curl":
		fixed := []string{"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10"}
		if len(argv) != len(fixed)+1 || !slices.Equal(argv[:len(fixed)], fixed) || !urlRE.MatchString(argv[len(fixed)]) {
			why = "curl other than the http probe"
		}
		// The URL is checked above, and %{http_code} is curl's own syntax.
		return why
	case "ping":
		if len(argv) != 6 || !slices.Equal(argv[:5], []string{"ping", "-c", "3", "-W", "2"}) {
			why = "ping other than the probe"
		}
	case "systemctl":
		why = mayRunOnTheNode(argv, rules)
	case "shutdown":
		if !slices.Equal(argv, []string{"shutdown", "-r", "+1"}) {
			why = "shutdown other than a reboot in a minute"
		}
	case "apt-get", "apt":
		if !slices.Equal(argv, []string{"apt-get", "-q", "-o", "Acquire::Retries=3", "update"}) && !slices.Equal(argv, []string{"apt", "list", "--upgradable"}) {
			why = "apt on the node other than update or list --upgradable"
		}
	case "env":
		if !slices.Equal(argv, []string{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-q", "-y", "-o", "Acquire::Retries=3",
			"-o", "Dpkg::Options::=--force-confold", "dist-upgrade"}) {
			why = "env on the node other than the dist-upgrade"
		}
	default:
		why = mayRunEither(argv)
	}
	if why != "" {
		return why
	}
	for i, w := range argv {
		switch {
		case i == script:
		case !plainRE.MatchString(w):
			return "word " + w + " is not plain"
		case slices.Contains(hostReaching, w) || regexp.MustCompile(`^--(mp|dev|unused)[0-9]+$`).MatchString(w):
			return "option " + w + " reaches the host's files, devices or locks"
		}
	}
	return ""
}

// unprivileged reports whether a pct create VMID TEMPLATE --name value …
// asks for an unprivileged container: --unprivileged 1 as an option pair,
// not as some option's value.
func unprivileged(argv []string) bool {
	for i := 4; i+1 < len(argv); i += 2 {
		if argv[i] == "--unprivileged" && argv[i+1] == "1" {
			return true
		}
	}
	return false
}

// descriptionRE is a description as pct_create writes it: letters,
// digits, spaces and punctuation that neither a shell, Markdown nor HTML
// reads, not an option, at most 512 bytes (checked apart).
var descriptionRE = regexp.MustCompile(`^[\p{L}\p{N}.,;:!?'"()/@#%&+=_*][\p{L}\p{N} .,;:!?'"()/@#%&+=_*-]*$`)

// descriptionAt finds the value of a pct create's --description option
// pair, returning its index (-1 without one) and whether it is plain
// text. Another word holding the description's text is not exempt.
func descriptionAt(argv []string) (int, bool) {
	for i := 4; i+1 < len(argv); i += 2 {
		if argv[i] == "--description" {
			d := argv[i+1]
			return i + 1, len(d) <= 512 && descriptionRE.MatchString(d) && !strings.Contains(d, "  ") && !strings.HasSuffix(d, " ")
		}
	}
	return -1, true
}

// hostReaching are pct options that would reach past a container or its
// lock (and mount points, devices and unused disks, numbered).
var hostReaching = []string{"--skiplock", "--hookscript", "--lxc", "--ssh-public-keys", "--password", "--keep-env", "--force"}

func mayRunPct(argv []string, shell func(int) string) string {
	subs := []string{"list", "status", "start", "stop", "shutdown", "reboot", "config", "listsnapshot", "snapshot", "rollback", "delsnapshot", "destroy", "create", "exec"}
	if len(argv) < 2 || !slices.Contains(subs, argv[1]) {
		return "a pct subcommand Nomos does not send"
	}
	if argv[1] == "list" {
		if len(argv) != 2 {
			return "pct list with arguments"
		}
		return ""
	}
	if len(argv) < 3 || !regexp.MustCompile(`^[1-9][0-9]{2,8}$`).MatchString(argv[2]) {
		return "pct without a vmid"
	}
	if argv[1] != "exec" {
		return ""
	}
	if len(argv) < 5 || argv[3] != "--" {
		return "pct exec without --"
	}
	guest := argv[4:]
	switch guest[0] {
	case "sh":
		return shell(5)
	case "env":
		if len(guest) < 4 || guest[1] != "DEBIAN_FRONTEND=noninteractive" || guest[2] != "apt-get" {
			return "env other than for apt-get"
		}
		return ""
	case "apt-get", "apt":
		return ""
	case "cat":
		if !slices.Equal(guest, []string{"cat", "/etc/resolv.conf"}) {
			return "cat other than resolv.conf"
		}
		return ""
	}
	return mayRunEither(guest)
}

// mayRunQm: qm only with the subcommands a VM action, probe or the
// inventory sends, never with --skiplock or --forceStop, and in a guest
// only sh -c SCRIPT through the agent.
func mayRunQm(argv []string, shell func(int) string) string {
	subs := []string{"list", "status", "config", "listsnapshot", "start", "shutdown", "reboot", "stop", "snapshot", "rollback", "delsnapshot", "destroy", "guest"}
	if len(argv) < 2 || !slices.Contains(subs, argv[1]) {
		return "a qm subcommand Nomos does not send"
	}
	if slices.Contains(argv, "--skiplock") || slices.Contains(argv, "--forceStop") {
		return "qm overriding a lock or forcing a stop"
	}
	if argv[1] == "list" {
		if len(argv) != 2 {
			return "qm list with arguments"
		}
		return ""
	}
	vmidAt := 2
	if argv[1] == "guest" {
		if len(argv) < 4 || (argv[2] != "cmd" && argv[2] != "exec") {
			return "qm guest other than cmd or exec"
		}
		vmidAt = 3
	}
	if !regexp.MustCompile(`^[1-9][0-9]{2,8}$`).MatchString(argv[vmidAt]) {
		return "qm without a vmid"
	}
	switch {
	case argv[1] == "guest" && argv[2] == "cmd":
		if len(argv) != 5 || argv[4] != "ping" {
			return "a guest agent command other than ping"
		}
	case argv[1] == "guest":
		if len(argv) < 6 || argv[4] != "--" || argv[5] != "sh" {
			return "qm guest exec other than sh"
		}
		return shell(6)
	case argv[1] == "destroy":
		if !slices.Equal(argv[3:], []string{"--purge", "1"}) {
			return "qm destroy other than with --purge 1"
		}
	}
	return ""
}

// mayRunOnTheNode covers systemctl on the node itself: a question of any
// unit but a .target, or a change the rules list for that very unit.
func mayRunOnTheNode(argv []string, rules hostgate.Rules) string {
	if len(argv) != 3 || strings.HasPrefix(argv[2], "-") {
		return "systemctl other than a verb on a unit"
	}
	unit := policy.NormalizeUnit(argv[2])
	if strings.HasSuffix(unit, ".target") {
		return "systemctl of a .target on the node"
	}
	if argv[1] == "is-active" || argv[1] == "status" {
		return ""
	}
	for _, u := range rules.HostUnits {
		if u.Unit == unit && slices.Contains(u.Verbs, argv[1]) && !strings.HasSuffix(u.Unit, ".target") {
			return ""
		}
	}
	return "systemctl " + argv[1] + " of a unit on the node that host_units does not list with that verb"
}

// mayRunEither covers the probes on a host or in a guest, and systemctl
// in a guest.
func mayRunEither(argv []string) string {
	switch argv[0] {
	case "systemctl":
		if len(argv) != 3 || !slices.Contains([]string{"start", "stop", "restart", "reload", "enable", "disable", "is-active"}, argv[1]) || strings.HasPrefix(argv[2], "-") {
			return "systemctl other than a verb on a unit"
		}
	case "ss":
		if !slices.Equal(argv, []string{"ss", "-ltn"}) {
			return "ss other than -ltn"
		}
	case "df":
		if len(argv) != 3 || argv[1] != "-P" || !strings.HasPrefix(argv[2], "/") {
			return "df other than -P PATH"
		}
	case "getent":
		if len(argv) != 3 || argv[1] != "hosts" || strings.HasPrefix(argv[2], "-") {
			return "getent other than hosts NAME"
		}
	case "journalctl":
		rest := argv[1:]
		if len(rest) == 5 && rest[0] == "-u" && !strings.HasPrefix(rest[1], "-") && !strings.ContainsAny(rest[1], "*?[") {
			rest = rest[2:]
		}
		if len(rest) != 3 || rest[0] != "-n" || rest[2] != "--no-pager" || !regexp.MustCompile(`^[1-9][0-9]?$|^100$`).MatchString(rest[1]) {
			return "journalctl other than a bounded read of one unit or the journal"
		}
	default:
		return "program " + argv[0] + " is not one Nomos runs"
	}
	return ""
}
