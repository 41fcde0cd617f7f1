package policy

import (
	"strings"
)

// addPackageRules adds the rules of the package commands.
func addPackageRules(rules map[string]rule, modelsPaths map[string]bool) {
	rules["apt"] = ruleApt("apt", set("list", "show", "policy", "search", "depends", "rdepends", "showsrc", "madison", "changelog", "help"))
	rules["apt-get"] = ruleApt("apt-get", set("changelog", "indextargets", "help"))
	rules["apt-cache"] = ruleApt("apt-cache", set("policy", "show", "showpkg", "showsrc", "search", "depends", "rdepends", "madison", "pkgnames", "stats", "dump", "dumpavail", "unmet", "showauto"))
	rules["dpkg"] = ruleDpkg
}

// aptFlags are the options that only change what apt prints.
var aptFlags = set(
	"-q", "-qq", "--quiet", "-h", "--help", "-v", "--version", "--installed",
	"--upgradable", "--all-versions", "-a", "--verbose", "--names-only", "-n",
	"--full", "-f", "--no-all-versions", "--recurse", "--important",
	"--no-pre-depends", "--no-depends", "--no-recommends", "--no-suggests",
	"--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances",
	"--manual-installed", "-i", "--print-uris", "--color", "--no-color",
)

// aptSimulate are apt-get's options that make it only print what it
// would do: no package is fetched, unpacked or configured, and no lock is
// taken (apt-get(8), -s).
var aptSimulate = set("-s", "--simulate", "--just-print", "--dry-run", "--recon", "--no-act")

// aptSimulated are the subcommands whose simulation is read-only: they
// read the package lists as they are. update is not among them, since it
// fetches lists whatever -s says, nor download or source, which write
// files.
var aptSimulated = set("upgrade", "dist-upgrade", "full-upgrade")

// aptRunners are configuration items that make apt run a program, or run
// as root what it would otherwise run unprivileged.
var aptRunners = []string{
	"invoke", "proxy-auto-detect", "sandbox", "dpkg::", "dir::bin", "dir::etc",
	"methods", "hook", "pager", "scripts", "debsig", "gpgv", "binary::",
}

// aptSetting is one -o (an item=value) or -c (a file) on apt's command line.
type aptSetting struct {
	file  bool // -c FILE rather than -o ITEM=VALUE
	value string
	word  word
}

// ruleApt: apt's -o, -c, --option and --config-file set any configuration
// item, including ones that write files as root or run programs, so they
// are never read-only and destructive when they name a critical path or a
// program to run. Removing packages from a host can take Proxmox with it.
func ruleApt(name string, ro map[string]bool) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		var verb, unknown string
		var settings []aptSetting
		dynamic, simulate := false, false
		next := func(i int) (string, word, int) {
			if i+1 < len(args) {
				return args[i+1].val, args[i+1], i + 1
			}
			return "", word{}, i
		}
		for i := 0; i < len(args); i++ {
			w := args[i]
			v := w.val
			if !w.static() {
				dynamic = true
			}
			switch {
			case strings.HasPrefix(v, "--") && len(v) > 2:
				n, val, has := strings.Cut(v, "=")
				// APT takes no abbreviations, but judge them as if it did.
				isOpt := len(n) > 3 && strings.HasPrefix("--option", n)
				isCfg := len(n) > 3 && strings.HasPrefix("--config-file", n)
				if isOpt || isCfg {
					vw := sub(w, val)
					if !has {
						val, vw, i = next(i)
					}
					settings = append(settings, aptSetting{file: isCfg, value: val, word: vw})
					continue
				}
				switch {
				case name == "apt-get" && aptSimulate[n]:
					simulate = true
				case !aptFlags[n] && unknown == "":
					unknown = n
				}
			case strings.HasPrefix(v, "-") && len(v) > 1:
				// A cluster: -qq, -oItem=v, -qc/tmp/apt.conf.
				for j := 1; j < len(v); j++ {
					c := v[j]
					if c != 'o' && c != 'c' {
						switch {
						case name == "apt-get" && aptSimulate["-"+string(c)]:
							simulate = true
						case !aptFlags["-"+string(c)] && unknown == "":
							unknown = "-" + string(c)
						}
						continue
					}
					val, vw := v[j+1:], sub(w, v[j+1:])
					if val == "" {
						val, vw, i = next(i)
					}
					settings = append(settings, aptSetting{file: c == 'c', value: val, word: vw})
					break
				}
			case verb == "":
				verb = v
			}
		}
		if len(settings) > 0 {
			return aptConfig(a, name, settings)
		}
		// Any word may be the subcommand when an option takes a value.
		for _, w := range args {
			switch w.val {
			case "remove", "purge", "autoremove", "autopurge":
				if a.onHost {
					return Destructive, name + " " + w.val + " can remove packages the host needs"
				}
			}
		}
		switch {
		case dynamic:
			return notLiteral(name)
		case verb == "":
			return cfgf("%s without a subcommand", name)
		case unknown != "":
			return cfgf("%s option %s is not on the read-only list", name, unknown)
		case ro[verb]:
			return ReadOnly, ""
		case simulate && aptSimulated[verb]:
			return ReadOnly, ""
		}
		return cfgf("%s %s changes packages", name, verb)
	}
}

func aptConfig(a *analyzer, name string, settings []aptSetting) (Class, string) {
	for _, s := range settings {
		if !s.word.static() {
			return Destructive, name + " with a configuration only known at run time"
		}
		if s.file {
			// A configuration file (or /dev/stdin) can set anything.
			return a.opaqueClass(name + " -c " + s.value + " reads configuration the classifier cannot see")
		}
		v := strings.ToLower(s.value)
		for _, r := range aptRunners {
			if strings.Contains(v, r) {
				return Destructive, name + " -o " + s.value + " can run programs or change what runs as root"
			}
		}
		if _, val, ok := strings.Cut(s.value, "="); ok {
			val = strings.Trim(val, `"'`)
			w := word{val: val, raw: val}
			if _, crit, ok := a.criticalWord(w); ok || criticalPath(val) {
				if crit == "" {
					crit = "a system directory"
				}
				return Destructive, name + " -o " + s.value + " points apt at " + crit
			}
		}
	}
	return cfgf("%s -o and -c change apt's configuration, which can write files as root", name)
}

var dpkgRO = set(
	"-l", "--list", "-L", "--listfiles", "-s", "--status", "-S", "--search", "-p",
	"--print-avail", "--get-selections", "--print-architecture",
	"--print-foreign-architectures", "--compare-versions", "--version", "-V",
	"--verify", "-C", "--audit", "--help", "--no-pager",
)

func ruleDpkg(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "", nil, false)
	if p.has("-r", "--remove", "-P", "--purge") && a.onHost {
		return Destructive, "dpkg --remove can remove packages the host needs"
	}
	if anyDynamic(args) {
		return notLiteral("dpkg")
	}
	if len(p.opts) == 0 {
		return cfgf("dpkg without an action")
	}
	if o, ok := p.onlyOpts(dpkgRO); !ok {
		return cfgf("dpkg %s changes packages", o)
	}
	return ReadOnly, ""
}
