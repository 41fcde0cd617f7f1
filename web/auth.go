package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
)

// BasicAuth is the user and password the status page asks for.
type BasicAuth struct {
	User     string
	Password string
}

// ok reports whether r carries the user and password. Digests are
// compared in constant time, so the time taken says nothing about how
// much of either was right.
func (a *BasicAuth) ok(r *http.Request) bool {
	user, pass, given := r.BasicAuth()
	u, wantU := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(a.User))
	p, wantP := sha256.Sum256([]byte(pass)), sha256.Sum256([]byte(a.Password))
	userOK := subtle.ConstantTimeCompare(u[:], wantU[:])
	passOK := subtle.ConstantTimeCompare(p[:], wantP[:])
	return given && userOK&passOK == 1
}

// RequireAuth wraps next so that, when auth is set, a request without its
// user and password gets 401 and a Basic challenge. A nil auth passes
// every request through, for a page on a loopback address.
func RequireAuth(auth *BasicAuth, next http.Handler) http.Handler {
	if auth == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !auth.ok(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="nomos", charset="UTF-8"`)
			http.Error(w, "The status page needs its user and password.", http.StatusUnauthorized)
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

// ErrNeedsAuth is why Listen refuses an address other machines can reach.
var ErrNeedsAuth = errors.New("the status page would be reachable from other machines without a password: set web.auth or listen on 127.0.0.1")

// Listen opens the status page's listener. Unless auth is set it refuses
// an address that is not loopback, checked on the address actually bound,
// so a name that resolves elsewhere is caught too.
func Listen(listen string, auth *BasicAuth) (net.Listener, error) {
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
