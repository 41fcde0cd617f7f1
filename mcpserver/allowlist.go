package mcpserver

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// allowlist is the set of hosts http_get may fetch: each domain allows
// itself and its subdomains, each address only itself.
type allowlist struct {
	domains []string
	addrs   []netip.Addr
}

var domainName = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// parseAllowlist normalises Config.HTTPAllow and refuses what is not a
// bare domain name or address (a URL, a port, a wildcard), since such an
// entry would silently allow nothing.
func parseAllowlist(entries []string) (allowlist, error) {
	var l allowlist
	for _, e := range entries {
		name := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(e)), ".")
		if a, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
			l.addrs = append(l.addrs, a.Unmap())
			continue
		}
		if len(name) > 253 || !domainName.MatchString(name) {
			return allowlist{}, fmt.Errorf("mcpserver: HTTPAllow entry %q is not a domain name such as github.com (no scheme, port, path or wildcard; a name already allows its subdomains)", e)
		}
		l.domains = append(l.domains, name)
	}
	return l, nil
}

// allows reports whether http_get may fetch from host, as a URL names it.
func (l allowlist) allows(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap().WithZone("")
		for _, x := range l.addrs {
			if x == a {
				return true
			}
		}
		return false
	}
	for _, d := range l.domains {
		if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}

func (l allowlist) empty() bool { return len(l.domains) == 0 && len(l.addrs) == 0 }

// String lists the entries, for messages.
func (l allowlist) String() string {
	out := append([]string(nil), l.domains...)
	for _, a := range l.addrs {
		out = append(out, a.String())
	}
	return strings.Join(out, ", ")
}

// refusal says why host is not fetched and how an operator allows it.
func (l allowlist) refusal(host string) string {
	if l.empty() {
		return fmt.Sprintf("%s is not allowed: http_get fetches only the domains in llm.http_allow, and none are configured; "+
			"an operator can allow a domain (and its subdomains) by adding it to llm.http_allow", host)
	}
	return fmt.Sprintf("%s is not in llm.http_allow (%s); an operator can allow it by adding the domain to llm.http_allow", host, l)
}

// ValidAllowEntry reports whether e may be an entry of Config.HTTPAllow:
// a bare domain name or IP address.
func ValidAllowEntry(e string) bool {
	_, err := parseAllowlist([]string{e})
	return err == nil
}
