package policy

import (
	"slices"
	"strings"
)

// addNetworkRules adds the rules of the network commands.
func addNetworkRules(rules map[string]rule, modelsPaths map[string]bool) {
	rules["ss"] = func(_ *analyzer, args []word, _ int) (Class, string) {
		return denyOpts("ss", args, "KDF", "kill", "diag", "filter")
	}
	rules["iptables-save"] = func(_ *analyzer, args []word, _ int) (Class, string) {
		return denyOpts("iptables-save", args, "f", "file")
	}
	rules["ip6tables-save"] = func(_ *analyzer, args []word, _ int) (Class, string) {
		return denyOpts("ip6tables-save", args, "f", "file")
	}
	rules["ip"] = ruleIP
	rules["curl"] = ruleCurl
	rules["wget"] = ruleWget
	for _, n := range []string{"iptables", "ip6tables", "iptables-legacy", "iptables-nft", "ip6tables-legacy", "ip6tables-nft"} {
		rules[n] = ruleIptables(n)
	}
	rules["nft"] = ruleNft
	rules["ufw"] = subRule("ufw", set("status", "show", "version"), nil)
	rules["ssh"] = ruleSSH
	modelsPaths["curl"] = true
	modelsPaths["wget"] = true
}

var ipOpts = set(
	"-4", "-6", "-0", "-br", "-brief", "--brief", "-c", "-color", "--color", "-d",
	"-details", "-j", "-json", "--json", "-o", "-oneline", "-p", "-pretty", "-r",
	"-resolve", "-s", "-stats", "-statistics", "-t", "-timestamp", "-ts",
	"-tshort", "-h", "-human", "-human-readable", "-a", "-all", "-iec", "-N",
	"-numeric", "-V", "-Version",
)

var ipValueOpts = set("-n", "-netns", "-f", "-family", "-l", "-loops", "-rc", "-rcvbuf")

var ipObjects = []string{
	"address", "addrlabel", "route", "link", "neighbour", "neighbor", "rule",
	"maddress", "mroute", "tunnel", "tuntap", "monitor", "netconf", "ntable",
	"netns", "nexthop", "stats", "token", "tcp_metrics", "vrf", "help",
}

func ruleIP(a *analyzer, args []word, depth int) (Class, string) {
	for i, w := range args {
		// ip netns exec NAME CMD runs CMD, wherever it sits among words
		// only known at run time.
		if w.val == "exec" && i+2 < len(args) {
			a.argv(args[i+2:], depth)
		}
	}
	if anyDynamic(args) {
		return notLiteral("ip")
	}
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i].val, "-"); i++ {
		v := args[i].val
		switch {
		case ipOpts[v], strings.HasPrefix(v, "-color="), strings.HasPrefix(v, "--color="):
		case ipValueOpts[v]:
			i++
		default:
			return cfgf("ip option %s is not on the read-only list", v)
		}
	}
	if i >= len(args) {
		return ReadOnly, ""
	}
	obj := args[i].val
	if !slices.ContainsFunc(ipObjects, func(o string) bool { return strings.HasPrefix(o, obj) }) {
		return cfgf("ip %s is not on the read-only list", obj)
	}
	if i+1 >= len(args) {
		return ReadOnly, ""
	}
	switch sub := args[i+1].val; sub {
	case "show", "list", "lst", "ls", "get", "help":
		return ReadOnly, ""
	case "exec":
		return cfgf("ip netns exec runs a command in another network namespace")
	default:
		return cfgf("ip %s %s changes network state", obj, sub)
	}
}

var curlFlags = set(
	"-s", "--silent", "-S", "--show-error", "-f", "--fail", "--fail-with-body",
	"-L", "--location", "-I", "--head", "-i", "--include", "-v", "--verbose",
	"-k", "--insecure", "--compressed", "-4", "--ipv4", "-6", "--ipv6",
	"--http1.0", "--http1.1", "--http2", "-N", "--no-buffer", "-#",
	"--progress-bar", "-q", "--disable", "--retry-all-errors",
	"--no-progress-meter", "-g", "--globoff", "--no-keepalive", "--path-as-is",
	"-G", "--get", "--tcp-nodelay", "--raw",
)

// curlValueOpts take a value. Only those in curlSafeValues are read-only:
// the rest read or write files (-H @file, -b, -c, -K, -T, --trace, --key),
// send data, or send the request somewhere else (-x, --unix-socket,
// --resolve, --connect-to).
var curlValueOpts = set(
	"-m", "--max-time", "--connect-timeout", "-H", "--header", "-A", "--user-agent",
	"-u", "--user", "--retry", "--retry-delay", "--retry-max-time", "-w", "--write-out",
	"-o", "--output", "-x", "--proxy", "--noproxy", "-e", "--referer", "-b", "--cookie",
	"-c", "--cookie-jar", "--cacert", "--capath", "-E", "--cert", "--key", "--max-redirs",
	"--resolve", "--connect-to", "--unix-socket", "--abstract-unix-socket", "--url",
	"--interface", "--limit-rate", "-D", "--dump-header", "--oauth2-bearer", "-d", "--data",
	"--data-raw", "--data-binary", "--data-ascii", "--data-urlencode", "-F", "--form",
	"--form-string", "-K", "--config", "-T", "--upload-file", "--trace", "--trace-ascii",
	"--libcurl", "--netrc-file", "-X", "--request", "--proxy-user", "-U", "--json",
	"--url-query", "--variable", "--expand-url", "--stderr", "--output-dir", "--etag-save",
	"--etag-compare", "--hsts", "--alt-svc", "--ssl-sessions", "--proto", "--proto-redir",
	"--ciphers", "--pinnedpubkey", "--crlfile", "--doh-url", "--dns-servers",
	"-Y", "--speed-limit", "-y", "--speed-time", "-z", "--time-cond", "-r", "--range",
	"-C", "--continue-at", "-P", "--ftp-port", "-Q", "--quote", "--mail-from", "--mail-rcpt",
	"--trace-config", "--write-out",
)

// curlShortVal and curlLongVal are curlValueOpts as parseOpts takes them.
var curlShortVal, curlLongVal = func() (string, []string) {
	short := ""
	var long []string
	for k := range curlValueOpts {
		if len(k) == 2 {
			short += k[1:]
		} else {
			long = append(long, k[2:])
		}
	}
	return short, long
}()

var curlSafeValues = set(
	"-m", "--max-time", "--connect-timeout", "-H", "--header", "-A", "--user-agent",
	"-u", "--user", "--retry", "--retry-delay", "--retry-max-time", "-w", "--write-out",
	"-o", "--output", "--noproxy", "-e", "--referer", "--max-redirs", "--url",
	"--interface", "--limit-rate", "-D", "--dump-header", "--oauth2-bearer",
)

// ruleCurl allows plain GETs: only the listed options, no request method
// or body, output to stdout or /dev/null only, nothing read from a file,
// and http(s) URLs only (other schemes such as gopher:// can talk to local
// services).
func ruleCurl(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, curlShortVal, curlLongVal, false)
	if p.bad {
		return cfgf("curl option without its value")
	}
	c, why := ReadOnly, ""
	notRO := func(format string, args ...any) {
		if c == ReadOnly {
			c, why = cfgf(format, args...)
		}
	}
	for _, o := range p.opts {
		switch o.name {
		case "-o", "--output", "-D", "--dump-header", "-c", "--cookie-jar", "--trace", "--trace-ascii",
			"--libcurl", "--stderr", "--etag-save", "--hsts", "--alt-svc", "--ssl-sessions":
			if o.val != "-" && o.val != "/dev/null" {
				a.writeTo(o.word, "curl "+o.name)
				notRO("curl %s writes to %s", o.name, o.val)
			}
		case "-O", "--remote-name", "--remote-name-all", "-J", "--remote-header-name", "--output-dir", "--create-dirs":
			notRO("curl %s writes a file", o.name)
		case "-H", "--header", "-d", "--data", "--data-binary", "--data-ascii", "--data-urlencode",
			"--json", "-F", "--form", "--url-query", "--variable", "-w", "--write-out", "-K", "--config":
			if f, ok := curlFile(o.name, o.val); ok {
				a.reads(word{val: f, raw: f}, "curl "+o.name)
				notRO("curl %s reads the file %s", o.name, f)
			}
		case "-b", "--cookie":
			if !strings.Contains(o.val, "=") {
				a.reads(o.word, "curl "+o.name)
				notRO("curl %s reads the cookie file %s", o.name, o.val)
			}
		case "-T", "--upload-file", "--netrc-file", "--key", "--cert", "-E", "--cacert", "--capath", "--crlfile", "--pinnedpubkey":
			a.reads(o.word, "curl "+o.name)
			notRO("curl %s reads %s", o.name, o.val)
		}
		switch {
		case curlFlags[o.name]:
		case curlSafeValues[o.name]:
			if (o.name == "-w" || o.name == "--write-out") && strings.Contains(o.val, "%output") {
				notRO("curl --write-out %%output writes a file")
			}
			if o.name == "--url" && !httpURL(o.val) {
				notRO("curl of a non-http URL")
			}
		default:
			notRO("curl option %s may send data, read or write files, or go elsewhere", o.name)
		}
	}
	urls := p.operands
	for _, o := range p.values("--url") {
		urls = append(urls, o.word)
	}
	for _, u := range urls {
		if f, ok := strings.CutPrefix(strings.ToLower(u.val), "file://"); ok {
			a.reads(word{val: u.val[len(u.val)-len(f):], raw: u.raw, glob: true}, "curl")
		}
		if !httpURL(u.val) {
			notRO("curl of a non-http URL %s", u.val)
		}
	}
	if p.has("-K", "--config") {
		// A config file can set any option, -o onto any path included.
		if oc, r := a.opaqueClass("curl -K reads options the classifier cannot see"); oc > c {
			c, why = oc, r
		}
	}
	if c == ReadOnly && p.dynamic {
		return notLiteral("curl")
	}
	return c, why
}

// curlFile returns the file an option's value makes curl read: @file for
// headers, data and --write-out; name@file for --data-urlencode,
// --url-query and --variable; name=@file or name=<file for forms; and
// -K's value itself.
func curlFile(name, v string) (string, bool) {
	if name == "-K" || name == "--config" {
		return v, v != "-"
	}
	if f, ok := strings.CutPrefix(v, "@"); ok {
		return f, f != "" && f != "-"
	}
	var seps []string
	switch name {
	case "--data-urlencode", "--url-query", "--variable":
		seps = []string{"@"}
	case "-F", "--form":
		seps = []string{"=@", "=<"}
	}
	for _, sep := range seps {
		if i := strings.Index(v, sep); i > 0 {
			f := v[i+len(sep):]
			f, _, _ = strings.Cut(f, ";")
			return f, f != "" && f != "-"
		}
	}
	return "", false
}

func httpURL(u string) bool {
	lower := strings.ToLower(u)
	if strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") {
		return true
	}
	if strings.Contains(u, "://") || strings.HasPrefix(lower, "file:") {
		return false
	}
	// curl guesses the protocol from these host prefixes.
	for _, p := range []string{"ftp.", "dict.", "ldap.", "imap.", "smtp.", "pop3.", "telnet.", "gopher.", "mqtt."} {
		if strings.HasPrefix(lower, p) {
			return false
		}
	}
	return u != ""
}

func ruleWget(a *analyzer, args []word, _ int) (Class, string) {
	var norm []word
	for _, w := range args {
		if w.val == "-nv" {
			w.val = "--no-verbose"
		}
		norm = append(norm, w)
	}
	p := parseOpts(norm, "OTtUoaiPeB", []string{"output-document", "timeout", "tries", "header", "user-agent",
		"output-file", "append-output", "input-file", "directory-prefix", "execute", "load-cookies", "save-cookies",
		"post-file", "body-file", "certificate", "private-key", "ca-certificate", "config", "use-askpass"}, false)
	c, why := ReadOnly, ""
	raise := func(cc Class, r string) {
		if cc > c {
			c, why = cc, r
		}
	}
	stdout := false
	for _, o := range p.opts {
		switch o.name {
		case "-q", "--quiet", "--no-verbose", "-S", "--server-response", "--no-check-certificate",
			"-T", "--timeout", "-t", "--tries", "--header", "-U", "--user-agent":
		case "--spider":
			stdout = true
		case "-O", "--output-document":
			if o.val != "-" && o.val != "/dev/null" {
				a.writeTo(o.word, "wget -O")
				raise(cfgf("wget -O writes to %s", o.val))
			}
			stdout = true
		case "-o", "--output-file", "-a", "--append-output", "--save-cookies":
			a.writeTo(o.word, "wget "+o.name)
			raise(cfgf("wget %s writes to %s", o.name, o.val))
		case "-i", "--input-file", "--load-cookies", "--post-file", "--body-file", "--certificate",
			"--private-key", "--ca-certificate", "--config":
			a.reads(o.word, "wget "+o.name)
			raise(cfgf("wget %s reads %s", o.name, o.val))
		case "-e", "--execute", "--use-askpass":
			raise(a.opaqueClass("wget " + o.name + " runs commands or changes what wget does"))
		default:
			raise(cfgf("wget option %s may send data or write files", o.name))
		}
	}
	switch {
	case c > ReadOnly:
		return c, why
	case p.bad:
		return cfgf("wget option without its value")
	case p.dynamic:
		return notLiteral("wget")
	case !stdout:
		return cfgf("wget saves a file unless given -O - or --spider")
	}
	for _, u := range p.operands {
		if !httpURL(u.val) {
			return cfgf("wget of a non-http URL %s", u.val)
		}
	}
	return ReadOnly, ""
}

func ruleIptables(name string) rule {
	return func(_ *analyzer, args []word, _ int) (Class, string) {
		if anyDynamic(args) {
			return notLiteral(name)
		}
		p := parseOpts(args, "t", []string{"table"}, false)
		listing := p.has("-L", "-S", "--list", "--list-rules")
		if _, ok := p.onlyOpts(set("-L", "--list", "-S", "--list-rules", "-n", "--numeric", "-v", "--verbose", "-x", "--exact", "--line-numbers", "-t", "--table", "-w", "--wait")); !ok || !listing {
			return cfgf("%s changes firewall rules", name)
		}
		return ReadOnly, ""
	}
}

func ruleNft(_ *analyzer, args []word, _ int) (Class, string) {
	if anyDynamic(args) {
		return notLiteral("nft")
	}
	p := parseOpts(args, "", nil, false)
	if _, ok := p.onlyOpts(set("-a", "--handle", "-n", "--numeric", "-j", "--json", "-s", "--stateless", "-t", "--terse", "-N", "-S", "-y")); !ok {
		return cfgf("nft with these options changes or loads rules")
	}
	cmd := joinVals(p.operands)
	if !strings.HasPrefix(cmd, "list ") || strings.ContainsAny(cmd, ";\n") {
		return cfgf("nft changes firewall rules")
	}
	return ReadOnly, ""
}

// ruleSSH follows the remote command as if on a host, and a local command
// ssh runs for itself (-o ProxyCommand=...) as local.
func ruleSSH(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "BbcDEeFIiJLlmOoPpQRSWw", nil, true)
	for _, o := range p.values("-o") {
		k, v, _ := strings.Cut(o.val, "=")
		if v == "" {
			k, v, _ = strings.Cut(strings.TrimSpace(o.val), " ")
		}
		if strings.Contains(strings.ToLower(k), "command") {
			a.script(v, depth+1)
			a.opaque("ssh -o " + k + " runs a local command")
		}
	}
	if len(p.operands) < 2 {
		return cfgf("ssh opens a remote shell")
	}
	remote := p.operands[1:]
	if remote[0].val == "--" {
		remote = remote[1:]
	}
	saved := a.onHost
	a.onHost = true
	a.script(joinVals(remote), depth+1)
	a.onHost = saved
	if c, r := crudeClass(joinRaw(p.operands[1:]), true); c == Destructive {
		return c, r
	}
	return cfgf("ssh runs commands on another machine")
}
