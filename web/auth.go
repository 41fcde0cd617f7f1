package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// Authenticator decides who a request comes from. The status page asks
// one for every page, /events and /metrics.
type Authenticator interface {
	// Authenticate returns the user behind r, or false.
	Authenticate(r *http.Request) (user string, ok bool)
	// Challenge answers a request Authenticate refused.
	Challenge(w http.ResponseWriter, r *http.Request)
}

// BasicAuth is the user and password the status page asks for. Set
// PasswordHash (bcrypt) rather than Password where you can: then the
// configuration never holds the password itself.
type BasicAuth struct {
	User     string
	Password string
	// PasswordHash is a bcrypt hash; when set, Password is ignored.
	PasswordHash []byte
}

var _ Authenticator = (*BasicAuth)(nil)

// Authenticate reports whether r carries the user and password. Digests
// are compared in constant time, so the time taken says nothing about how
// much of either was right; a bcrypt comparison is made even for a wrong
// user, for the same reason.
func (a *BasicAuth) Authenticate(r *http.Request) (string, bool) {
	user, pass, given := r.BasicAuth()
	u, wantU := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(a.User))
	userOK := subtle.ConstantTimeCompare(u[:], wantU[:])
	passOK := 0
	if len(a.PasswordHash) > 0 {
		if bcrypt.CompareHashAndPassword(a.PasswordHash, []byte(pass)) == nil {
			passOK = 1
		}
	} else {
		p, wantP := sha256.Sum256([]byte(pass)), sha256.Sum256([]byte(a.Password))
		passOK = subtle.ConstantTimeCompare(p[:], wantP[:])
	}
	return user, given && userOK&passOK == 1
}

// Challenge asks the browser for the user and password.
func (a *BasicAuth) Challenge(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("WWW-Authenticate", `Basic realm="nomos", charset="UTF-8"`)
	http.Error(w, "The status page needs its user and password.", http.StatusUnauthorized)
}

// ForwardAuth trusts the user a forward-auth proxy (Authelia, Authentik)
// names in a header, only on requests that come from one of its
// addresses. Any other request goes to Fallback, or is refused.
type ForwardAuth struct {
	// Header names the user; empty means Remote-User.
	Header string
	// Proxies are the addresses the header is accepted from.
	Proxies []netip.Prefix
	// Fallback handles requests that do not come through a proxy; nil
	// refuses them.
	Fallback Authenticator
}

var _ Authenticator = (*ForwardAuth)(nil)

func (f *ForwardAuth) header() string {
	if f.Header == "" {
		return "Remote-User"
	}
	return f.Header
}

// fromProxy reports whether the connection comes from a trusted proxy.
func (f *ForwardAuth) fromProxy(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	a := ap.Addr().Unmap()
	for _, p := range f.Proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Authenticate takes the header's user from a trusted proxy, and asks
// Fallback about everything else: a header sent by anyone else is
// ignored, never believed.
func (f *ForwardAuth) Authenticate(r *http.Request) (string, bool) {
	if f.fromProxy(r) {
		user := strings.TrimSpace(r.Header.Get(f.header()))
		if user != "" && !strings.ContainsAny(user, "\r\n") {
			return user, true
		}
	}
	if f.Fallback != nil {
		return f.Fallback.Authenticate(r)
	}
	return "", false
}

// Challenge lets Fallback ask for credentials, or refuses.
func (f *ForwardAuth) Challenge(w http.ResponseWriter, r *http.Request) {
	if f.Fallback != nil && !f.fromProxy(r) {
		f.Fallback.Challenge(w, r)
		return
	}
	http.Error(w, "The status page is reached through its login proxy.", http.StatusForbidden)
}

// ParseProxies parses web.trusted_proxies: addresses or CIDR prefixes.
func ParseProxies(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: want an address or a prefix such as 10.0.0.5 or 10.0.0.0/24", s)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// RequireAuth wraps next so that a request auth refuses gets its
// challenge. A nil auth is for a page on a loopback address: it passes a
// request only when its Host names loopback too, so a web page that
// rebinds its own domain to 127.0.0.1 cannot read the status page through
// a browser on this machine.
func RequireAuth(auth Authenticator, next http.Handler) http.Handler {
	if auth == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !loopbackHost(r.Host) {
				http.Error(w, "this status page answers only to 127.0.0.1, localhost or [::1] without web.auth; "+
					"behind a proxy, set web.auth (a password or web.trusted_proxies)", http.StatusMisdirectedRequest)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := auth.Authenticate(r); !ok {
			auth.Challenge(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// LoopbackListen reports whether a listen address (host:port) binds only
// loopback addresses: 127.0.0.0/8, ::1 or localhost. An empty host, a
// wildcard and every other name or address are reachable from elsewhere.
func LoopbackListen(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// loopbackHost reports whether a request's Host header, with or without a
// port, names a loopback address.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// ErrNeedsAuth is why Listen refuses an address other machines can reach.
var ErrNeedsAuth = errors.New("the status page would be reachable from other machines without a password: set web.auth or listen on 127.0.0.1")

// Listen opens the status page's listener. Unless auth is set it refuses
// an address that is not loopback, checked on the address actually bound,
// so a name that resolves elsewhere is caught too.
func Listen(listen string, auth Authenticator) (net.Listener, error) {
	if auth == nil && !LoopbackListen(listen) {
		return nil, fmt.Errorf("web.listen %s: %w", listen, ErrNeedsAuth)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("web.listen %s: %w", listen, err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); auth == nil && (!ok || !tcp.IP.IsLoopback()) {
		ln.Close()
		return nil, fmt.Errorf("web.listen %s bound %s: %w", listen, ln.Addr(), ErrNeedsAuth)
	}
	return ln, nil
}
