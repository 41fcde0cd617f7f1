package labsim

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Name resolution and the network tools, which work inside a container and,
// with the node's own always-working network, on the node itself.

var (
	errDNSTimeout = errors.New("temporary failure in name resolution")
	errNXDOMAIN   = errors.New("name or service not known")
)

// netDown reports whether the container is cut off. The node itself always
// has its network.
func (c *call) netDown() bool {
	return c.ct != nil && (c.ct.addr() == "" || c.env.faults.inContainer(FaultNetDown, c.ct.VMID))
}

// dnsOK reports whether the container can resolve names. Its own resolver
// dies under dns_dead; a public one keeps answering unless the whole
// network is down.
func (c *call) dnsOK() bool {
	if c.ct == nil {
		return true
	}
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
	hosts, _ := c.env.sim.readFileLocked(c.env, "/etc/hosts")
	for _, l := range lines(hosts) {
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
	resolv, _ := c.env.sim.readFileLocked(c.env, "/etc/resolv.conf")
	if ns := nameservers(resolv); len(ns) > 0 {
		return ns[0]
	}
	return "127.0.0.1"
}

// peer is who answers at an address.
type peer struct {
	ct        *ctState // the container there, if any
	vm        *vmState // or the VM there
	node      bool     // the Proxmox node the command runs on
	reachable bool
}

func (c *call) peerAt(ip string) peer {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return peer{}
	}
	if c.ct == nil && a.IsLoopback() {
		return peer{node: true, reachable: true}
	}
	if c.ct != nil && (a.IsLoopback() || ip == c.ct.addr()) {
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
	for _, name := range slices.Sorted(maps.Keys(c.st.Hosts)) {
		for _, vm := range c.st.Hosts[name].VMs {
			if vm.Conf.IP == ip {
				return peer{vm: vm, reachable: vm.running()}
			}
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
		c.outf("64 bytes from %s: icmp_seq=%d ttl=%d time=%s ms\n", ip, seq, ttl, pingTime(ms))
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

// pingTime prints a round trip with three significant digits, as ping does.
func pingTime(ms float64) string {
	switch {
	case ms < 1:
		return fmt.Sprintf("%.3f", ms)
	case ms < 10:
		return fmt.Sprintf("%.2f", ms)
	case ms < 100:
		return fmt.Sprintf("%.1f", ms)
	}
	return fmt.Sprintf("%.0f", ms)
}

// curlOpts is what curl was asked to do.
type curlOpts struct {
	silent, showErr, head bool
	output, writeOut, url string
}

const curlHelp = "curl: try 'curl --help' or 'curl --manual' for more information\n"

func curlCmd(c *call) int {
	o, code := parseCurl(c)
	if code != 0 {
		return code
	}
	raw := o.url
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	code, status, body, ip := c.fetch(raw, o.silent && !o.showErr)
	if code == 0 {
		switch {
		case o.head:
			c.outf("HTTP/1.1 %d OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\n\r\n", status, len(body))
		case o.output == "" || o.output == "-":
			c.out.WriteString(body)
		case o.output != "/dev/null":
			c.env.sim.filesLocked(c.env)[c.abs(o.output)] = body
			c.dirty = true
		}
	}
	if o.writeOut != "" {
		httpCode := "000"
		if code == 0 {
			httpCode = strconv.Itoa(status)
		}
		r := strings.NewReplacer(`%{http_code}`, httpCode, `%{response_code}`, httpCode,
			`%{time_total}`, "0.004211", `%{url_effective}`, raw, `%{remote_ip}`, ip,
			`%{size_download}`, strconv.Itoa(len(body)), `\n`, "\n", `\t`, "\t")
		c.out.WriteString(r.Replace(o.writeOut))
	}
	return code
}

// parseCurl reads curl's arguments; a non-zero code is a usage error.
func parseCurl(c *call) (curlOpts, int) {
	var o curlOpts
	for i := 0; i < len(c.args); i++ {
		a := c.args[i]
		var ok bool
		switch {
		case strings.HasPrefix(a, "--"):
			i, ok = o.longOption(c, i)
		case len(a) > 1 && a[0] == '-':
			i, ok = o.shortOptions(c, i)
		default:
			ok = true
			if o.url == "" {
				o.url = a
			}
		}
		if !ok {
			return o, 2
		}
	}
	if o.url == "" {
		c.errf(curlHelp)
		return o, 2
	}
	return o, 0
}

// longOption reads the --option at c.args[i] and returns where it ends.
func (o *curlOpts) longOption(c *call, i int) (int, bool) {
	switch a := c.args[i]; a {
	case "--silent":
		o.silent = true
	case "--show-error":
		o.showErr = true
	case "--head":
		o.head = true
	case "--output", "--write-out", "--max-time", "--connect-timeout", "--retry", "--retry-delay",
		"--retry-max-time", "--request", "--header", "--data", "--data-raw", "--user-agent", "--user", "--resolve", "--cacert":
		if i+1 >= len(c.args) {
			c.errf("curl: option %s: requires parameter\n"+curlHelp, a)
			return i, false
		}
		switch a {
		case "--output":
			o.output = c.args[i+1]
		case "--write-out":
			o.writeOut = c.args[i+1]
		}
		return i + 1, true
	}
	return i, true
}

// shortOptions reads the bundle of -flags at c.args[i] and returns where
// it ends: a flag that takes a value ends the bundle.
func (o *curlOpts) shortOptions(c *call, i int) (int, bool) {
	const withArg = "owmXHdAuexr"
	a := c.args[i]
	for j := 1; j < len(a); j++ {
		ch := a[j]
		if strings.IndexByte(withArg, ch) >= 0 {
			val := a[j+1:]
			if val == "" {
				if i+1 >= len(c.args) {
					c.errf("curl: option -%c: requires parameter\n"+curlHelp, ch)
					return i, false
				}
				i++
				val = c.args[i]
			}
			switch ch {
			case 'o':
				o.output = val
			case 'w':
				o.writeOut = val
			}
			return i, true
		}
		switch ch {
		case 's':
			o.silent = true
		case 'S':
			o.showErr = true
		case 'I':
			o.head = true
		}
	}
	return i, true
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
	if p.node {
		if port == 8006 {
			return 0, 200, "<!DOCTYPE html>\n<html><head><title>" + c.env.host + " - Proxmox Virtual Environment</title></head><body></body></html>\n", ip
		}
		return fail(7, "Failed to connect to %s port %d after 0 ms: Couldn't connect to server", host, port)
	}
	if p.vm != nil {
		for _, s := range p.vm.Conf.Services {
			if s.Port != port {
				continue
			}
			if s.HealthPath != "" && u.Path == s.HealthPath {
				return 0, 200, "Healthy", ip
			}
			return 0, 200, fmt.Sprintf("<!DOCTYPE html>\n<html><head><title>%s</title></head><body><h1>%s</h1></body></html>\n", s.Name, s.Name), ip
		}
		return fail(7, "Failed to connect to %s port %d after 0 ms: Couldn't connect to server", host, port)
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
