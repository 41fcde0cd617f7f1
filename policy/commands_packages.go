package policy

import (
	"strings"
)

func init() {
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

// aptRunners are configuration items that make apt run a program, or run
// as root what it would otherwise run unprivileged.
var aptRunners = []string{
	"invoke", "proxy-auto-detect", "sandbox", "dpkg::", "dir::bin", "dir::etc",
	"methods", "hook", "changelogs", "pager", "apt::update", "scripts",
	"debsig", "gpgv", "build-", "pkgproblemresolver",
}

// ruleApt: apt's -o, -c, --option and --config-file set any configuration
// item, including ones that write files as root or run programs, so they
// are never read-only and destructive when they name a critical path or a
// program to run. Removing packages from a host can take Proxmox with it.
func ruleApt(name string, ro map[string]bool) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		var sub string
		var unknown string
		var configs []word
		dynamic := false
		for i := 0; i < len(args); i++ {
			w := args[i]
			v := w.val
			if !w.static() {
				dynamic = true
			}
			switch {
			case v == "-o" || v == "-c" || v == "--option" || v == "--config-file":
				if i+1 < len(args) {
					i++
					configs = append(configs, word{val: v + " " + args[i].val, raw: args[i].raw, dynamic: args[i].dynamic})
				} else {
					configs = append(configs, w)
				}
			case strings.HasPrefix(v, "-o") && !strings.HasPrefix(v, "--"), strings.HasPrefix(v, "-c") && !strings.HasPrefix(v, "--"),
				strings.HasPrefix(v, "--option="), strings.HasPrefix(v, "--config-file="),
				strings.HasPrefix(v, "--o") && len(v) > 3 && strings.HasPrefix("--option", strings.SplitN(v, "=", 2)[0]),
				strings.HasPrefix(v, "--c") && len(v) > 3 && strings.HasPrefix("--config-file", strings.SplitN(v, "=", 2)[0]):
				configs = append(configs, w)
			case strings.HasPrefix(v, "-") && len(v) > 1:
				n, _, _ := strings.Cut(v, "=")
				if !aptFlags[n] && unknown == "" {
					unknown = n
				}
				if len(v) > 2 && v[1] != '-' && strings.ContainsAny(v[1:], "oc") {
					configs = append(configs, w)
				}
			case sub == "":
				sub = v
			}
		}
		if len(configs) > 0 {
			return aptConfig(a, name, configs)
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
		case sub == "":
			return cfgf("%s without a subcommand", name)
		case unknown != "":
			return cfgf("%s option %s is not on the read-only list", name, unknown)
		case ro[sub]:
			return ReadOnly, ""
		}
		return cfgf("%s %s changes packages", name, sub)
	}
}

func aptConfig(a *analyzer, name string, configs []word) (Class, string) {
	for _, c := range configs {
		v := strings.ToLower(c.val)
		if c.dynamic {
			return Destructive, name + " with a configuration only known at run time"
		}
		for _, r := range aptRunners {
			if strings.Contains(v, r) {
				return Destructive, name + " " + c.val + " can run programs or change what runs as root"
			}
		}
		if strings.HasPrefix(v, "-c") || strings.HasPrefix(v, "--c") {
			// A configuration file (or /dev/stdin) can set anything.
			return a.opaqueClass(name + " " + c.val + " reads configuration the classifier cannot see")
		}
		if _, val, ok := strings.Cut(c.val, "="); ok {
			val = strings.Trim(val, `"'`)
			w := word{val: val, raw: val}
			if _, crit, ok := a.criticalWord(w); ok || criticalPath(val) {
				if crit == "" {
					crit = "a system directory"
				}
				return Destructive, name + " " + c.val + " points apt at " + crit
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
	if anyDynamic(args) {
		return notLiteral("dpkg")
	}
	p := parseOpts(args, "", nil, false)
	if len(p.opts) == 0 {
		return cfgf("dpkg without an action")
	}
	if p.has("-r", "--remove", "-P", "--purge") && a.onHost {
		return Destructive, "dpkg --remove can remove packages the host needs"
	}
	if o, ok := p.onlyOpts(dpkgRO); !ok {
		return cfgf("dpkg %s changes packages", o)
	}
	return ReadOnly, ""
}
