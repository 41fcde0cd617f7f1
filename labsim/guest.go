package labsim

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file holds the programs that run inside a container: systemd, apt,
// name resolution and the network tools an operator reaches for.

var (
	errDNSTimeout = errors.New("temporary failure in name resolution")
	errNXDOMAIN   = errors.New("name or service not known")
)

func (c *call) netDown() bool {
	return c.ct.addr() == "" || c.env.faults.inContainer(FaultNetDown, c.ct.VMID)
}

// dnsOK reports whether the container can resolve names. Its own resolver
// dies under dns_dead; a public one keeps answering unless the whole
// network is down.
func (c *call) dnsOK() bool {
	if c.netDown() {
		return false
	}
	dead := c.env.faults.inContainer(FaultDNSDead, c.ct.VMID)
	for _, ns := range nameservers(c.ct.Guest.Files["/etc/resolv.conf"]) {
		if publicResolvers[ns] || !dead {
			return true
		}
	}
	return false
}

func nameservers(resolv string) []string {
	var out []string
	for _, l := range lines(resolv) {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == "nameserver" {
			if _, err := netip.ParseAddr(f[1]); err == nil {
				out = append(out, f[1])
			}
		}
	}
	return out
}

// lookup resolves name as getent, ping and curl do: /etc/hosts first, then
// DNS.
func (c *call) lookup(name string) (string, error) {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if a, err := netip.ParseAddr(name); err == nil {
		return a.String(), nil
	}
	if name == "localhost" {
		return "127.0.0.1", nil
	}
	for _, l := range lines(c.ct.Guest.Files["/etc/hosts"]) {
		f := strings.Fields(l)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		for _, n := range f[1:] {
			if strings.EqualFold(n, name) {
				if a, err := netip.ParseAddr(f[0]); err == nil && a.Is4() {
					return f[0], nil
				}
			}
		}
	}
	return c.query(name)
}

// query asks the container's resolver, as dig, host and nslookup do. DNS
// knows every container by hostname and gives any other dotted name an
// address from a documentation range.
func (c *call) query(name string) (string, error) {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if a, err := netip.ParseAddr(name); err == nil {
		return a.String(), nil
	}
	if !c.dnsOK() {
		return "", errDNSTimeout
	}
	short := strings.TrimSuffix(name, ".lan")
	for _, ct := range c.st.all() {
		if strings.EqualFold(ct.Conf.Hostname, short) && ct.addr() != "" {
			return ct.addr(), nil
		}
	}
	if !strings.Contains(name, ".") || !hostnameRE.MatchString(name) {
		return "", errNXDOMAIN
	}
	return fmt.Sprintf("203.0.113.%d", hashString(name)%254+1), nil
}

// localName reports whether name was answered by a container on the LAN,
// which nslookup shows as an authoritative answer.
func (c *call) localName(name string) bool {
	short := strings.TrimSuffix(strings.ToLower(name), ".lan")
	return slices.ContainsFunc(c.st.all(), func(ct *ctState) bool { return strings.EqualFold(ct.Conf.Hostname, short) })
}

func (c *call) resolver() string {
	if ns := nameservers(c.ct.Guest.Files["/etc/resolv.conf"]); len(ns) > 0 {
		return ns[0]
	}
	return "127.0.0.1"
}

// peer is who answers at ip from inside this container.
type peer struct {
	ct        *ctState // nil for anything not simulated
	reachable bool
}

func (c *call) peerAt(ip string) peer {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return peer{}
	}
	if a.IsLoopback() || ip == c.ct.addr() {
		return peer{ct: c.ct, reachable: true}
	}
	if c.netDown() {
		return peer{}
	}
	for _, ct := range c.st.all() {
		if ct.addr() == ip {
			return peer{ct: ct, reachable: ct.running() && !c.env.faults.inContainer(FaultNetDown, ct.VMID)}
		}
	}
	for _, ct := range c.st.all() {
		if ct.Conf.Gateway == ip {
			return peer{reachable: true}
		}
	}
	return peer{reachable: !a.IsPrivate()}
}

func getentCmd(c *call) int {
	if len(c.args) < 1 {
		c.errf("getent: wrong number of arguments\nTry `getent --help' or `getent --usage' for more information.\n")
		return 1
	}
	switch c.args[0] {
	case "hosts", "ahosts", "ahostsv4":
	default:
		c.errf("Unknown database: %s\nTry `getent --help' or `getent --usage' for more information.\n", c.args[0])
		return 1
	}
	if len(c.args) < 2 {
		return 0
	}
	code := 0
	for _, name := range c.args[1:] {
		ip, err := c.lookup(name)
		if err != nil {
			code = 2
			continue
		}
		if c.args[0] == "hosts" {
			c.outf("%-15s %s\n", ip, name)
		} else {
			c.outf("%-15s STREAM %s\n%-15s DGRAM  \n%-15s RAW    \n", ip, name, ip, ip)
		}
	}
	return code
}

func nslookupCmd(c *call) int {
	names := operands(c.args)
	if len(names) == 0 {
		c.errf("labsim: interactive nslookup is not simulated\n")
		return 1
	}
	name := names[0]
	ip, err := c.query(name)
	switch {
	case errors.Is(err, errDNSTimeout):
		c.outf(";; connection timed out; no servers could be reached\n\n")
		return 1
	case errors.Is(err, errNXDOMAIN):
		ns := c.resolver()
		c.outf("Server:\t\t%s\nAddress:\t%s#53\n\n** server can't find %s: NXDOMAIN\n\n", ns, ns, name)
		return 1
	}
	ns := c.resolver()
	c.outf("Server:\t\t%s\nAddress:\t%s#53\n\n", ns, ns)
	if !c.localName(name) {
		c.outf("Non-authoritative answer:\n")
	}
	c.outf("Name:\t%s\nAddress: %s\n\n", name, ip)
	return 0
}

func hostCmd(c *call) int {
	names := operands(c.args, "t", "W")
	if len(names) == 0 {
		c.errf("Usage: host [-aCdilrTvVw] [-c class] [-N ndots] [-t type] [-W time]\n            [-R number] [-m flag] [-p port] hostname [server]\n")
		return 1
	}
	ip, err := c.query(names[0])
	switch {
	case errors.Is(err, errDNSTimeout):
		c.outf(";; connection timed out; no servers could be reached\n")
		return 1
	case errors.Is(err, errNXDOMAIN):
		c.outf("Host %s not found: 3(NXDOMAIN)\n", names[0])
		return 1
	}
	c.outf("%s has address %s\n", names[0], ip)
	return 0
}

func digCmd(c *call) int {
	short := slices.Contains(c.args, "+short")
	var name string
	for _, a := range c.args {
		if !strings.HasPrefix(a, "+") && !strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "@") && a != "A" && a != "IN" {
			name = a
			break
		}
	}
	if name == "" {
		name = "."
	}
	ip, err := c.query(name)
	if errors.Is(err, errDNSTimeout) {
		c.outf(";; communications error to %s#53: timed out\n;; communications error to %s#53: timed out\n;; communications error to %s#53: timed out\n\n; <<>> DiG 9.18.33-1~deb12u2-Debian <<>> %s\n;; global options: +cmd\n;; no servers could be reached\n", c.resolver(), c.resolver(), c.resolver(), strings.Join(c.args, " "))
		return 9
	}
	if short {
		if err == nil {
			c.outf("%s\n", ip)
		}
		return 0
	}
	status, answers := "NOERROR", 1
	if err != nil {
		status, answers = "NXDOMAIN", 0
	}
	fqdn := strings.TrimSuffix(name, ".") + "."
	c.outf("\n; <<>> DiG 9.18.33-1~deb12u2-Debian <<>> %s\n;; global options: +cmd\n;; Got answer:\n", strings.Join(c.args, " "))
	c.outf(";; ->>HEADER<<- opcode: QUERY, status: %s, id: %d\n;; flags: qr rd ra; QUERY: 1, ANSWER: %d, AUTHORITY: 0, ADDITIONAL: 1\n\n", status, hashString(name)%65536, answers)
	c.outf(";; QUESTION SECTION:\n;%s\t\t\tIN\tA\n\n", fqdn)
	if err == nil {
		c.outf(";; ANSWER SECTION:\n%s\t\t300\tIN\tA\t%s\n\n", fqdn, ip)
	}
	c.outf(";; Query time: 12 msec\n;; SERVER: %s#53(%s) (UDP)\n;; WHEN: %s\n;; MSG SIZE  rcvd: 59\n\n", c.resolver(), c.resolver(), c.now.UTC().Format("Mon Jan 02 15:04:05 MST 2006"))
	return 0
}

func pingCmd(c *call) int {
	count := -1
	var target string
	for i := 0; i < len(c.args); i++ {
		a := c.args[i]
		switch {
		case a == "-c" && i+1 < len(c.args):
			n, err := strconv.Atoi(c.args[i+1])
			if err != nil || n < 1 {
				c.errf("ping: invalid argument: '%s': out of range: 1 <= value <= 9223372036854775807\n", c.args[i+1])
				return 1
			}
			count = n
			i++
		case strings.HasPrefix(a, "-c") && len(a) > 2:
			n, err := strconv.Atoi(a[2:])
			if err != nil || n < 1 {
				c.errf("ping: invalid argument: '%s'\n", a[2:])
				return 1
			}
			count = n
		case slices.Contains([]string{"-W", "-w", "-i", "-s", "-t", "-I"}, a):
			i++
		case strings.HasPrefix(a, "-"):
		default:
			target = a
		}
	}
	if target == "" {
		c.errf("ping: usage error: Destination address required\n")
		return 1
	}
	ip, err := c.lookup(target)
	switch {
	case errors.Is(err, errDNSTimeout):
		c.errf("ping: %s: Temporary failure in name resolution\n", target)
		return 2
	case err != nil:
		c.errf("ping: %s: Name or service not known\n", target)
		return 2
	}
	c.outf("PING %s (%s) 56(84) bytes of data.\n", target, ip)
	if count < 0 || count > 1000 {
		c.block = true // runs until interrupted, or long enough that it might as well
		return 0
	}
	p := c.peerAt(ip)
	received := 0
	var times []float64
	for seq := 1; seq <= count; seq++ {
		if !p.reachable {
			continue
		}
		received++
		ms := 0.03
		if p.ct == nil {
			ms = 8 + float64(hashString(fmt.Sprint(ip, seq))%900)/100
		} else if p.ct != c.ct {
			ms = 0.04 + float64(hashString(fmt.Sprint(ip, seq))%30)/1000
		}
		times = append(times, ms)
		ttl := 57
		if p.ct != nil {
			ttl = 64
		}
		c.outf("64 bytes from %s: icmp_seq=%d ttl=%d time=%.3g ms\n", ip, seq, ttl, ms)
	}
	loss := 100 * (count - received) / count
	c.outf("\n--- %s ping statistics ---\n%d packets transmitted, %d received, %d%% packet loss, time %dms\n", target, count, received, loss, (count-1)*1001)
	if received == 0 {
		return 1
	}
	lo, hi, sum := times[0], times[0], 0.0
	for _, t := range times {
		lo, hi, sum = min(lo, t), max(hi, t), sum+t
	}
	c.outf("rtt min/avg/max/mdev = %.3f/%.3f/%.3f/%.3f ms\n", lo, sum/float64(len(times)), hi, (hi-lo)/2)
	return 0
}

func curlCmd(c *call) int {
	var (
		silent, showErr, head bool
		output, writeOut, raw string
	)
	withArg := "owmXHdAuexr"
	for i := 0; i < len(c.args); i++ {
		a := c.args[i]
		switch {
		case strings.HasPrefix(a, "--"):
			switch a {
			case "--silent":
				silent = true
			case "--show-error":
				showErr = true
			case "--head":
				head = true
			case "--output", "--write-out", "--max-time", "--connect-timeout", "--retry", "--retry-delay",
				"--retry-max-time", "--request", "--header", "--data", "--data-raw", "--user-agent", "--user", "--resolve", "--cacert":
				if i+1 >= len(c.args) {
					c.errf("curl: option %s: requires parameter\ncurl: try 'curl --help' or 'curl --manual' for more information\n", a)
					return 2
				}
				switch a {
				case "--output":
					output = c.args[i+1]
				case "--write-out":
					writeOut = c.args[i+1]
				}
				i++
			}
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				ch := a[j]
				if strings.IndexByte(withArg, ch) >= 0 {
					val := a[j+1:]
					if val == "" {
						if i+1 >= len(c.args) {
							c.errf("curl: option -%c: requires parameter\ncurl: try 'curl --help' or 'curl --manual' for more information\n", ch)
							return 2
						}
						val = c.args[i+1]
						i++
					}
					switch ch {
					case 'o':
						output = val
					case 'w':
						writeOut = val
					}
					break
				}
				switch ch {
				case 's':
					silent = true
				case 'S':
					showErr = true
				case 'I':
					head = true
				}
			}
		default:
			if raw == "" {
				raw = a
			}
		}
	}
	if raw == "" {
		c.errf("curl: try 'curl --help' or 'curl --manual' for more information\n")
		return 2
	}
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	code, status, body, ip := c.fetch(raw, silent && !showErr)
	if code == 0 {
		switch {
		case head:
			c.outf("HTTP/1.1 %d OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\n\r\n", status, len(body))
		case output == "" || output == "-":
			c.out.WriteString(body)
		case output != "/dev/null":
			c.ct.Guest.Files[cleanPath(output)] = body
			c.dirty = true
		}
	}
	if writeOut != "" {
		httpCode := "000"
		if code == 0 {
			httpCode = strconv.Itoa(status)
		}
		r := strings.NewReplacer(`%{http_code}`, httpCode, `%{response_code}`, httpCode,
			`%{time_total}`, "0.004211", `%{url_effective}`, raw, `%{remote_ip}`, ip,
			`%{size_download}`, strconv.Itoa(len(body)), `\n`, "\n", `\t`, "\t")
		c.out.WriteString(r.Replace(writeOut))
	}
	return code
}

// fetch answers an HTTP GET from inside the container. It returns curl's
// exit code, the HTTP status and the body.
func (c *call) fetch(raw string, quiet bool) (code, status int, body, ip string) {
	fail := func(code int, format string, a ...any) (int, int, string, string) {
		if !quiet {
			c.errf("curl: (%d) %s\n", code, fmt.Sprintf(format, a...))
		}
		return code, 0, "", ip
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return fail(3, "URL rejected: Malformed input to a URL function")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fail(1, "Protocol \"%s\" not supported", u.Scheme)
	}
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		port, err = strconv.Atoi(p)
		if err != nil {
			return fail(3, "URL rejected: Port number was not a decimal number between 0 and 65535")
		}
	}
	host := u.Hostname()
	ip, err = c.lookup(host)
	if err != nil {
		return fail(6, "Could not resolve host: %s", host)
	}
	p := c.peerAt(ip)
	if !p.reachable {
		return fail(7, "Failed to connect to %s port %d after 3071 ms: Couldn't connect to server", host, port)
	}
	if p.ct == nil {
		return 0, 200, fmt.Sprintf("<!doctype html>\n<html><head><title>%s</title></head><body>%s</body></html>\n", host, host), ip
	}
	for _, s := range p.ct.Guest.Services {
		if s.Port != port || !s.Active {
			continue
		}
		if s.HealthPath != "" && u.Path == s.HealthPath {
			return 0, 200, "Healthy", ip
		}
		return 0, 200, fmt.Sprintf("<!DOCTYPE html>\n<html><head><title>%s</title></head><body><h1>%s</h1><p>%s is running on %s.</p></body></html>\n", s.Name, s.Name, unitDescription(s), p.ct.Conf.Hostname), ip
	}
	return fail(7, "Failed to connect to %s port %d after 0 ms: Couldn't connect to server", host, port)
}

func journalctlCmd(c *call) int {
	var units []string
	n := -1
	follow := false
	for i := 0; i < len(c.args); i++ {
		a := c.args[i]
		switch {
		case (a == "-u" || a == "--unit") && i+1 < len(c.args):
			units = append(units, unitName(c.args[i+1]))
			i++
		case strings.HasPrefix(a, "--unit="):
			units = append(units, unitName(strings.TrimPrefix(a, "--unit=")))
		case strings.HasPrefix(a, "-u") && len(a) > 2:
			units = append(units, unitName(a[2:]))
		case (a == "-n" || a == "--lines") && i+1 < len(c.args):
			n, _ = strconv.Atoi(c.args[i+1])
			i++
		case strings.HasPrefix(a, "--lines="):
			n, _ = strconv.Atoi(strings.TrimPrefix(a, "--lines="))
		case strings.HasPrefix(a, "-n") && len(a) > 2:
			n, _ = strconv.Atoi(a[2:])
		case a == "-f" || a == "--follow":
			follow = true
		case a == "-e":
			n = 1000
		}
	}
	var sel []journalLine
	for _, l := range c.ct.Journal {
		if len(units) == 0 || slices.Contains(units, l.Unit) {
			sel = append(sel, l)
		}
	}
	if follow && n < 0 {
		n = 10
	}
	if n >= 0 && len(sel) > n {
		sel = sel[len(sel)-n:]
	}
	if len(sel) == 0 {
		c.outf("-- No entries --\n")
	}
	for _, l := range sel {
		c.outf("%s\n", c.journalLine(l))
	}
	c.block = follow
	return 0
}

func (c *call) journalLine(l journalLine) string {
	return fmt.Sprintf("%s %s %s: %s", l.Time.UTC().Format("Jan 02 15:04:05"), c.ct.Conf.Hostname, l.Ident, l.Msg)
}

func ssCmd(c *call) int {
	// Every simulated listener is TCP, so -t and -u change nothing.
	var listening, procs bool
	for _, a := range c.args {
		if !strings.HasPrefix(a, "-") || strings.HasPrefix(a, "--") {
			continue
		}
		listening = listening || strings.ContainsAny(a, "la")
		procs = procs || strings.Contains(a, "p")
	}
	c.outf("%-6s %-6s %-6s %20s %20s %s\n", "State", "Recv-Q", "Send-Q", "Local Address:Port", "Peer Address:Port", "Process")
	if !listening {
		return 0
	}
	svcs := slices.Collect(maps.Values(c.ct.Guest.Services))
	slices.SortFunc(svcs, func(a, b svcState) int { return a.Port - b.Port })
	for _, s := range svcs {
		if !s.Active || s.Port == 0 {
			continue
		}
		proc := ""
		if procs {
			proc = fmt.Sprintf("users:((\"%s\",pid=%d,fd=3))", s.Name, s.PID)
		}
		c.outf("%-6s %-6d %-6d %20s %20s %s\n", "LISTEN", 0, 4096, fmt.Sprintf("0.0.0.0:%d", s.Port), "0.0.0.0:*", proc)
	}
	return 0
}

// systemd

func (c *call) unit(name string) (svcState, bool) {
	s, ok := c.ct.Guest.Services[unitName(name)]
	return s, ok
}

func systemctlCmd(c *call) int {
	var verb string
	var units []string
	quiet, now, all := false, false, false
	for _, a := range c.args {
		switch {
		case a == "-q" || a == "--quiet":
			quiet = true
		case a == "--now":
			now = true
		case a == "-a" || a == "--all":
			all = true
		case strings.HasPrefix(a, "-"):
		case verb == "":
			verb = a
		default:
			units = append(units, unitName(a))
		}
	}
	switch verb {
	case "", "list-units":
		return c.listUnits(all)
	case "daemon-reload", "daemon-reexec":
		return 0
	case "status":
		if len(units) == 0 {
			c.outf("● %s\n    State: running\n    Units: %d loaded (incl. loaded aliases)\n     Jobs: 0 queued\n   Failed: 0 units\n    Since: %s\n  systemd: 252.31-1~deb12u1\n",
				c.ct.Conf.Hostname, 180+len(c.ct.Guest.Services), systemdTime(c.ct.StartedAt, c.now))
			return 0
		}
		return c.unitStatus(units)
	}
	if len(units) == 0 {
		c.errf("Too few arguments.\n")
		return 1
	}
	switch verb {
	case "is-active", "is-failed":
		code := 3
		if verb == "is-failed" {
			code = 1
		}
		for _, u := range units {
			s, _ := c.unit(u)
			state := "inactive"
			if s.Active {
				state = "active"
				if verb == "is-active" {
					code = 0
				}
			}
			if !quiet {
				c.outf("%s\n", state)
			}
		}
		return code
	case "is-enabled":
		code := 1
		for _, u := range units {
			s, ok := c.unit(u)
			switch {
			case !ok:
				c.errf("Failed to get unit file state for %s: No such file or directory\n", u)
			case s.Enabled:
				code = 0
				if !quiet {
					c.outf("enabled\n")
				}
			default:
				if !quiet {
					c.outf("disabled\n")
				}
			}
		}
		return code
	case "start", "stop", "restart", "try-restart", "reload", "reload-or-restart", "force-reload":
		for _, u := range units {
			if code := c.unitJob(verb, u); code != 0 {
				return code
			}
		}
		return 0
	case "enable", "disable":
		for _, u := range units {
			s, ok := c.unit(u)
			if !ok {
				c.errf("Failed to %s unit: Unit file %s does not exist.\n", verb, u)
				return 1
			}
			if verb == "enable" && !s.Enabled {
				c.errf("Created symlink /etc/systemd/system/multi-user.target.wants/%s → /lib/systemd/system/%s.\n", u, u)
			}
			if verb == "disable" && s.Enabled {
				c.errf("Removed \"/etc/systemd/system/multi-user.target.wants/%s\".\n", u)
			}
			s.Enabled = verb == "enable"
			c.ct.Guest.Services[u] = s
			c.dirty = true
			if now {
				job := map[string]string{"enable": "start", "disable": "stop"}[verb]
				if code := c.unitJob(job, u); code != 0 {
					return code
				}
			}
		}
		return 0
	}
	c.errf("Unknown command verb %s.\n", verb)
	return 1
}

// unitJob runs a start, stop or restart job with systemctl's errors.
func (c *call) unitJob(verb, u string) int {
	s, ok := c.unit(u)
	if !ok {
		if verb == "stop" {
			c.errf("Failed to stop %s: Unit %s not loaded.\n", u, u)
		} else {
			c.errf("Failed to %s %s: Unit %s not found.\n", strings.ReplaceAll(verb, "-", " "), u, u)
		}
		return 5
	}
	switch verb {
	case "start":
		if !s.Active {
			c.ct.startService(c.now, u)
		}
	case "stop":
		if s.Active {
			c.ct.stopService(c.now, u)
		}
	case "restart", "reload-or-restart", "force-reload":
		if s.Active {
			c.ct.stopService(c.now, u)
		}
		c.ct.startService(c.now, u)
	case "try-restart":
		if s.Active {
			c.ct.stopService(c.now, u)
			c.ct.startService(c.now, u)
		}
	case "reload":
		if !s.Active {
			c.errf("%s is not active, cannot reload.\n", u)
			return 1
		}
		c.ct.journal(c.now, u, "systemd[1]", fmt.Sprintf("Reloading %s - %s...", u, unitDescription(s)))
		c.ct.journal(c.now, u, "systemd[1]", fmt.Sprintf("Reloaded %s - %s.", u, unitDescription(s)))
	}
	c.dirty = true
	return 0
}

func (c *call) unitStatus(units []string) int {
	code := 0
	for i, u := range units {
		s, ok := c.unit(u)
		if !ok {
			c.errf("Unit %s could not be found.\n", u)
			code = 4
			continue
		}
		if i > 0 {
			c.outf("\n")
		}
		dot, active := "○", "inactive (dead)"
		if s.Active {
			dot, active = "●", "active (running)"
		} else if code == 0 {
			code = 3
		}
		enabled := "disabled"
		if s.Enabled {
			enabled = "enabled"
		}
		c.outf("%s %s - %s\n", dot, u, unitDescription(s))
		c.outf("     Loaded: loaded (/lib/systemd/system/%s; %s; preset: enabled)\n", u, enabled)
		if s.Since.IsZero() {
			c.outf("     Active: %s\n", active)
		} else {
			c.outf("     Active: %s since %s\n", active, systemdTime(s.Since, c.now))
		}
		if s.Active {
			mem := 4 + hashString(u)%180
			c.outf("   Main PID: %d (%s)\n      Tasks: %d (limit: 38329)\n     Memory: %d.%dM\n        CPU: %dms\n",
				s.PID, s.Name, 1+hashString(u)%20, mem, hashString(u)%10, 20+c.now.Sub(s.Since).Milliseconds()/900)
			c.outf("     CGroup: /system.slice/%s\n             └─%d /usr/bin/%s\n", u, s.PID, s.Name)
		}
		var tail []journalLine
		for _, l := range c.ct.Journal {
			if l.Unit == u {
				tail = append(tail, l)
			}
		}
		if len(tail) > 10 {
			tail = tail[len(tail)-10:]
		}
		if len(tail) > 0 {
			c.outf("\n")
		}
		for _, l := range tail {
			c.outf("%s\n", c.journalLine(l))
		}
	}
	return code
}

// systemdTime formats a timestamp as systemctl status does:
// "Sat 2024-11-30 10:11:12 UTC; 2h 3min ago".
func systemdTime(t, now time.Time) string {
	d := now.Sub(t)
	var rel string
	switch {
	case d < time.Minute:
		rel = fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		rel = fmt.Sprintf("%dmin %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		rel = fmt.Sprintf("%dh %dmin", int(d.Hours()), int(d.Minutes())%60)
	default:
		days := int(d.Hours()) / 24
		rel = fmt.Sprintf("%d day%s %dh", days, plural(days), int(d.Hours())%24)
	}
	return fmt.Sprintf("%s; %s ago", t.UTC().Format("Mon 2006-01-02 15:04:05 MST"), rel)
}

func (c *call) listUnits(all bool) int {
	c.outf("  %-40s %-6s %-8s %-7s %s\n", "UNIT", "LOAD", "ACTIVE", "SUB", "DESCRIPTION")
	n := 0
	for _, u := range slices.Sorted(maps.Keys(c.ct.Guest.Services)) {
		s := c.ct.Guest.Services[u]
		if !s.Active && !all {
			continue
		}
		active, sub := "inactive", "dead"
		if s.Active {
			active, sub = "active", "running"
		}
		c.outf("  %-40s %-6s %-8s %-7s %s\n", u, "loaded", active, sub, unitDescription(s))
		n++
	}
	c.outf("\nLOAD   = Reflects whether the unit definition was properly loaded.\nACTIVE = The high-level unit activation state, i.e. generalization of SUB.\nSUB    = The low-level unit activation state, values depend on unit type.\n%d loaded units listed.\n", n)
	return 0
}

// serviceCmd is the sysvinit wrapper: service nginx restart.
func serviceCmd(c *call) int {
	if len(c.args) < 2 {
		c.errf("Usage: service < option > | --status-all | [ service_name [ command | --full-restart ] ]\n")
		return 1
	}
	name, verb := c.args[0], c.args[1]
	if _, ok := c.unit(name); !ok {
		c.errf("%s: unrecognized service\n", name)
		return 1
	}
	c.args = []string{verb, name}
	return systemctlCmd(c)
}

// apt and dpkg

func aptCmd(c *call) int {
	if c.name == "apt" {
		c.errf("\nWARNING: apt does not have a stable CLI interface. Use with caution in scripts.\n\n")
	}
	var verb string
	var pkgs []string
	yes := false
	for i := 0; i < len(c.args); i++ {
		a := c.args[i]
		switch {
		case a == "-o" || a == "-c" || a == "-t" || a == "--target-release":
			i++
		case a == "-y" || a == "--yes" || a == "--assume-yes" || strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "y"):
			yes = true
		case strings.HasPrefix(a, "-"):
		case verb == "":
			verb = a
		default:
			pkgs = append(pkgs, a)
		}
	}
	tpl := templates[c.ct.Conf.Template]
	switch verb {
	case "update":
		return c.aptUpdate(tpl)
	case "install", "reinstall":
		return c.aptInstall(tpl, pkgs, yes)
	case "remove", "purge":
		return c.aptRemove(pkgs, yes)
	case "upgrade", "dist-upgrade", "full-upgrade", "autoremove":
		c.outf("Reading package lists...\nBuilding dependency tree...\nReading state information...\n")
		if verb != "autoremove" {
			c.outf("Calculating upgrade...\n")
		}
		c.outf("0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\n")
		return 0
	case "clean", "autoclean":
		return 0
	case "":
		c.errf("E: No operation specified\n")
		return 100
	}
	c.errf("E: Invalid operation %s\n", verb)
	return 100
}

func (c *call) aptUpdate(tpl ctTemplate) int {
	mirrorHost, mirror := tpl.mirror()
	secHost, sec := "security.debian.org", "http://security.debian.org"
	if tpl.distro == "ubuntu" {
		secHost, sec = "security.ubuntu.com", "http://security.ubuntu.com/ubuntu"
	}
	sources := []struct{ host, url, suite string }{
		{mirrorHost, mirror, tpl.codename},
		{mirrorHost, mirror, tpl.codename + "-updates"},
		{secHost, sec, tpl.codename + "-security"},
	}
	if c.dnsOK() {
		for i, s := range sources {
			c.outf("Hit:%d %s %s InRelease\n", i+1, s.url, s.suite)
		}
		c.outf("Reading package lists...\n")
		return 0
	}
	for i, s := range sources {
		c.outf("Err:%d %s %s InRelease\n  Temporary failure resolving '%s'\n", i+1, s.url, s.suite, s.host)
	}
	c.outf("Reading package lists...\n")
	for _, s := range sources {
		c.errf("W: Failed to fetch %s/dists/%s/InRelease  Temporary failure resolving '%s'\n", s.url, s.suite, s.host)
	}
	c.errf("E: Some index files failed to download. They have been ignored, or old ones used instead.\n")
	return 100
}

func debName(name string, p pkgInfo) string {
	return fmt.Sprintf("%s_%s_%s.deb", name, strings.ReplaceAll(p.Version, ":", "%3a"), cmp.Or(p.Arch, "amd64"))
}

func plainVersion(v string) string {
	if _, after, ok := strings.Cut(v, ":"); ok {
		return after
	}
	return v
}

func (c *call) aptInstall(tpl ctTemplate, names []string, yes bool) int {
	c.outf("Reading package lists...\nBuilding dependency tree...\nReading state information...\n")
	var want []string
	for _, n := range names {
		n, _, _ = strings.Cut(n, "=")
		n, _, _ = strings.Cut(n, "/")
		if _, ok := packages[n]; !ok {
			c.errf("E: Unable to locate package %s\n", n)
			return 100
		}
		want = append(want, n)
	}
	var todo, extra []string
	for _, n := range want {
		if v, ok := c.ct.Guest.Packages[n]; ok {
			c.outf("%s is already the newest version (%s).\n", n, plainVersion(v))
			continue
		}
		for _, d := range packages[n].Deps {
			if _, ok := c.ct.Guest.Packages[d]; !ok && !slices.Contains(todo, d) && !slices.Contains(want, d) {
				todo = append(todo, d)
				extra = append(extra, d)
			}
		}
		if !slices.Contains(todo, n) {
			todo = append(todo, n)
		}
	}
	if len(todo) == 0 {
		c.outf("0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\n")
		return 0
	}
	if len(extra) > 0 {
		c.outf("The following additional packages will be installed:\n  %s\n", strings.Join(extra, " "))
	}
	c.outf("The following NEW packages will be installed:\n  %s\n", strings.Join(slices.Sorted(slices.Values(todo)), " "))
	size := 0
	for _, n := range todo {
		size += packages[n].SizeKB
	}
	c.outf("0 upgraded, %d newly installed, 0 to remove and 0 not upgraded.\n", len(todo))
	c.outf("Need to get %s kB of archives.\nAfter this operation, %s kB of additional disk space will be used.\n", thousands(size), thousands(size*3))
	if !yes {
		c.outf("Do you want to continue? [Y/n] Abort.\n")
		return 1
	}
	mirrorHost, mirror := tpl.mirror()
	if !c.dnsOK() {
		for i, n := range todo {
			p := packages[n]
			c.outf("Err:%d %s %s/main amd64 %s %s %s\n  Temporary failure resolving '%s'\n", i+1, mirror, tpl.codename, n, cmp.Or(p.Arch, "amd64"), plainVersion(p.Version), mirrorHost)
		}
		for _, n := range todo {
			c.errf("E: Failed to fetch %s/pool/main/%s/%s/%s  Temporary failure resolving '%s'\n", mirror, n[:1], n, debName(n, packages[n]), mirrorHost)
		}
		c.errf("E: Unable to fetch some archives, maybe run apt-get update or try with --fix-missing?\n")
		return 100
	}
	for i, n := range todo {
		p := packages[n]
		c.outf("Get:%d %s %s/main amd64 %s %s %s [%s kB]\n", i+1, mirror, tpl.codename, n, cmp.Or(p.Arch, "amd64"), plainVersion(p.Version), thousands(p.SizeKB))
	}
	c.outf("debconf: delaying package configuration, since apt-utils is not installed\nFetched %s kB in 1s (%s kB/s)\n", thousands(size), thousands(size*9/10))
	files := 18452
	for _, n := range todo {
		p := packages[n]
		c.outf("Selecting previously unselected package %s.\n(Reading database ... %d files and directories currently installed.)\n", n, files)
		c.outf("Preparing to unpack .../%s ...\nUnpacking %s (%s) ...\n", debName(n, p), n, plainVersion(p.Version))
		files += 3 + p.SizeKB/40
	}
	if c.env.faults.inContainer(FaultAptFail, c.ct.VMID) {
		n := todo[len(todo)-1]
		c.outf("Setting up %s (%s) ...\n", n, plainVersion(packages[n].Version))
		c.errf("dpkg: error processing package %s (--configure):\n installed %s package post-installation script subprocess returned error exit status 1\n", n, n)
		c.outf("Errors were encountered while processing:\n %s\n", n)
		c.errf("E: Sub-process /usr/bin/dpkg returned an error code (1)\n")
		return 100
	}
	for _, n := range todo {
		p := packages[n]
		c.outf("Setting up %s (%s) ...\n", n, plainVersion(p.Version))
		c.ct.Guest.Packages[n] = p.Version
		if p.Unit == "" {
			continue
		}
		s, ok := c.ct.Guest.Services[p.Unit]
		if !ok {
			s = svcState{Unit: p.Unit, Name: strings.TrimSuffix(p.Unit, ".service"), Description: p.Description, Port: p.Port}
			c.outf("Created symlink /etc/systemd/system/multi-user.target.wants/%s → /lib/systemd/system/%s.\n", p.Unit, p.Unit)
		}
		s.Enabled = true
		c.ct.Guest.Services[p.Unit] = s
		if !s.Active {
			c.ct.startService(c.now, p.Unit)
		}
	}
	c.outf("Processing triggers for man-db (2.11.2-2) ...\n")
	c.dirty = true
	return 0
}

func (c *call) aptRemove(names []string, yes bool) int {
	c.outf("Reading package lists...\nBuilding dependency tree...\nReading state information...\n")
	var todo []string
	for _, n := range names {
		if _, ok := packages[n]; !ok {
			c.errf("E: Unable to locate package %s\n", n)
			return 100
		}
		if _, ok := c.ct.Guest.Packages[n]; !ok {
			c.outf("Package '%s' is not installed, so not removed\n", n)
			continue
		}
		todo = append(todo, n)
	}
	if len(todo) == 0 {
		c.outf("0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\n")
		return 0
	}
	c.outf("The following packages will be REMOVED:\n  %s\n0 upgraded, 0 newly installed, %d to remove and 0 not upgraded.\n", strings.Join(todo, " "), len(todo))
	if !yes {
		c.outf("Do you want to continue? [Y/n] Abort.\n")
		return 1
	}
	c.outf("(Reading database ... 18452 files and directories currently installed.)\n")
	for _, n := range todo {
		p := packages[n]
		c.outf("Removing %s (%s) ...\n", n, plainVersion(p.Version))
		if s, ok := c.ct.Guest.Services[p.Unit]; ok && p.Unit != "" {
			if s.Active {
				c.ct.stopService(c.now, p.Unit)
			}
			delete(c.ct.Guest.Services, p.Unit)
		}
		delete(c.ct.Guest.Packages, n)
	}
	c.dirty = true
	return 0
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func dpkgCmd(c *call) int {
	if len(c.args) == 0 {
		c.errf("dpkg: error: need an action option\n\nType dpkg --help for help about installing and deinstalling packages [*];\n")
		return 2
	}
	names := c.args[1:]
	switch c.args[0] {
	case "-s", "--status":
		code := 0
		for _, n := range names {
			v, ok := c.ct.Guest.Packages[n]
			if !ok {
				c.errf("dpkg-query: package '%s' is not installed and no information is available\nUse dpkg --info (= dpkg-deb --info) to examine archive files.\n", n)
				code = 1
				continue
			}
			p := packages[n]
			c.outf("Package: %s\nStatus: install ok installed\nArchitecture: %s\nVersion: %s\n", n, cmp.Or(p.Arch, "amd64"), v)
			if p.Description != "" {
				c.outf("Description: %s\n", p.Description)
			}
		}
		return code
	case "-l", "--list":
		sel := slices.Sorted(maps.Keys(c.ct.Guest.Packages))
		if len(names) > 0 {
			var keep []string
			for _, n := range names {
				if _, ok := c.ct.Guest.Packages[n]; !ok {
					c.errf("dpkg-query: no packages found matching %s\n", n)
					continue
				}
				keep = append(keep, n)
			}
			if len(keep) < len(names) {
				return 1
			}
			sel = keep
		}
		c.outf("Desired=Unknown/Install/Remove/Purge/Hold\n| Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend\n|/ Err?=(none)/Reinst-required (Status,Err: uppercase=bad)\n")
		c.outf("||/ %-24s %-24s %-12s %s\n", "Name", "Version", "Architecture", "Description")
		c.outf("+++-%s-%s-%s-%s\n", strings.Repeat("=", 24), strings.Repeat("=", 24), strings.Repeat("=", 12), strings.Repeat("=", 40))
		for _, n := range sel {
			p := packages[n]
			c.outf("ii  %-24s %-24s %-12s %s\n", n, plainVersion(c.ct.Guest.Packages[n]), cmp.Or(p.Arch, "amd64"), cmp.Or(p.Description, n))
		}
		return 0
	}
	c.errf("dpkg: error: unknown option %s\n", c.args[0])
	return 2
}
