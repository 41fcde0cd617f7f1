package web_test

import (
	"errors"
	"net/http"
	"net/netip"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/nomoshq/nomos/web"
)

func TestStatusPageAsksForItsPassword(t *testing.T) {
	t.Parallel()
	hash, err := bcrypt.GenerateFromPassword([]byte("correct horse battery"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	for name, auth := range map[string]*web.BasicAuth{
		"plain":  {User: "ops", Password: "correct horse battery"},
		"bcrypt": {User: "ops", PasswordHash: hash},
	} {
		b := setup(t, func(c *web.Config) { c.Auth = auth })
		for _, c := range []struct {
			name, path, user, pass string
			basic                  bool
			want                   int
		}{
			{"no credentials", "/", "", "", false, http.StatusUnauthorized},
			{"wrong password", "/", "ops", "correct horse", true, http.StatusUnauthorized},
			{"wrong user", "/", "root", "correct horse battery", true, http.StatusUnauthorized},
			{"empty user and password", "/", "", "", true, http.StatusUnauthorized},
			{"the hash as the password", "/", "ops", string(hash), true, http.StatusUnauthorized},
			{"right", "/", "ops", "correct horse battery", true, http.StatusOK},
			{"metrics without credentials", "/metrics", "", "", false, http.StatusUnauthorized},
			{"live stream without credentials", "/events", "", "", false, http.StatusUnauthorized},
			{"an entity without credentials", "/e/host:strong", "", "", false, http.StatusUnauthorized},
			{"healthz stays open for probes", "/healthz", "", "", false, http.StatusOK},
			{"readyz stays open for probes", "/readyz", "", "", false, http.StatusOK},
		} {
			req, _ := http.NewRequest(http.MethodGet, b.http.URL+c.path, nil)
			if c.basic {
				req.SetBasicAuth(c.user, c.pass)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("%s, %s: status %d, want %d", name, c.name, resp.StatusCode, c.want)
			}
			if c.want == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") != `Basic realm="nomos", charset="UTF-8"` {
				t.Errorf("%s, %s: WWW-Authenticate %q, want a Basic challenge", name, c.name, resp.Header.Get("WWW-Authenticate"))
			}
		}
	}
}

// TestForwardAuthTrustsOnlyItsProxy: the Remote-User header is believed
// from the proxy's address and nowhere else, so a client that reaches the
// page directly cannot name itself.
func TestForwardAuthTrustsOnlyItsProxy(t *testing.T) {
	t.Parallel()
	proxies, err := web.ParseProxies([]string{"10.0.0.5", "192.168.10.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	fallback := &web.BasicAuth{User: "ops", Password: "correct horse battery"}
	for _, c := range []struct {
		name, remote, header string
		fallback             bool
		basic                bool
		want                 bool
	}{
		{"the proxy names a user", "10.0.0.5:40000", "alice", false, false, true},
		{"a proxy in the prefix", "192.168.10.77:40000", "alice", false, false, true},
		{"an IPv4-mapped proxy address", "[::ffff:10.0.0.5]:40000", "alice", false, false, true},
		{"the proxy names nobody", "10.0.0.5:40000", "", false, false, false},
		{"a header with a line break", "10.0.0.5:40000", "alice\r\nX-Evil: 1", false, false, false},
		{"a direct client forges the header", "10.0.0.6:40000", "alice", false, false, false},
		{"a direct client forges it from loopback", "127.0.0.1:40000", "admin", false, false, false},
		{"a direct client with the fallback password", "10.0.0.6:40000", "", true, true, true},
		{"a direct client forges the header beside the fallback", "10.0.0.6:40000", "alice", true, false, false},
	} {
		f := &web.ForwardAuth{Proxies: proxies}
		if c.fallback {
			f.Fallback = fallback
		}
		req, _ := http.NewRequest(http.MethodGet, "http://nomos/", nil)
		req.RemoteAddr = c.remote
		if c.header != "" {
			req.Header["Remote-User"] = []string{c.header}
		}
		if c.basic {
			req.SetBasicAuth("ops", "correct horse battery")
		}
		user, ok := f.Authenticate(req)
		if ok != c.want {
			t.Errorf("%s: authenticated %v (user %q), want %v", c.name, ok, user, c.want)
		}
	}
	for _, bad := range []string{"not-an-ip", "10.0.0.0/33", ""} {
		if _, err := web.ParseProxies([]string{bad}); err == nil {
			t.Errorf("ParseProxies(%q) accepted it", bad)
		}
	}
	if p, _ := web.ParseProxies([]string{"10.0.0.9/24"}); p[0] != netip.MustParsePrefix("10.0.0.0/24") {
		t.Errorf("ParseProxies masks prefixes: got %v", p)
	}
}

func TestListenRefusesAnOpenAddressWithoutAuth(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", ":0"} {
		ln, err := web.Listen(addr, nil)
		if !errors.Is(err, web.ErrNeedsAuth) {
			if ln != nil {
				ln.Close()
			}
			t.Errorf("Listen(%s, no auth) = %v, want ErrNeedsAuth", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		ln, err := web.Listen(addr, nil)
		if err != nil {
			t.Errorf("Listen(%s, no auth) = %v, want a loopback listener", addr, err)
			continue
		}
		ln.Close()
	}
	ln, err := web.Listen("0.0.0.0:0", &web.BasicAuth{User: "ops", Password: "correct horse battery"})
	if err != nil {
		t.Fatalf("Listen(0.0.0.0, auth) = %v, want a listener", err)
	}
	ln.Close()

	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.1.2.3:8080": true, "[::1]:8080": true, "localhost:8080": true,
		"0.0.0.0:8080": false, ":8080": false, "[::]:8080": false, "192.168.1.5:8080": false,
		"nomos.lan:8080": false, "[::ffff:127.0.0.1]:8080": true, "8080": false,
	} {
		if got := web.LoopbackListen(addr); got != want {
			t.Errorf("LoopbackListen(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestLoopbackPageRefusesOtherHosts: without web.auth the page answers only
// to a loopback Host, so a site that rebinds its own name to 127.0.0.1
// cannot read it through a browser on this machine.
func TestLoopbackPageRefusesOtherHosts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for host, want := range map[string]int{
		"":                      http.StatusOK, // the test server's own 127.0.0.1:port
		"localhost:8080":        http.StatusOK,
		"[::1]:8080":            http.StatusOK,
		"evil.example:8080":     http.StatusMisdirectedRequest,
		"127.0.0.1.nip.io:8080": http.StatusMisdirectedRequest,
		"192.168.1.5:8080":      http.StatusMisdirectedRequest,
	} {
		req, err := http.NewRequest(http.MethodGet, b.http.URL+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %q: status %d, want %d", host, resp.StatusCode, want)
		}
	}
}
