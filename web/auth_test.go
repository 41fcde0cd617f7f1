package web_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/web"
)

func TestStatusPageAsksForItsPassword(t *testing.T) {
	t.Parallel()
	auth := &web.BasicAuth{User: "ops", Password: "correct horse battery"}
	h := web.RequireAuth(auth, &web.Handler{Store: testenv.Store(t), Logger: testenv.Logger(t)})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, c := range []struct {
		name, user, pass string
		basic            bool
		want             int
	}{
		{"no credentials", "", "", false, http.StatusUnauthorized},
		{"wrong password", "ops", "correct horse", true, http.StatusUnauthorized},
		{"wrong user", "root", "correct horse battery", true, http.StatusUnauthorized},
		{"empty user and password", "", "", true, http.StatusUnauthorized},
		{"right", "ops", "correct horse battery", true, http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
		if c.basic {
			req.SetBasicAuth(c.user, c.pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.want)
		}
		if c.want == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") != `Basic realm="nomos", charset="UTF-8"` {
			t.Errorf("%s: WWW-Authenticate %q, want a Basic challenge", c.name, resp.Header.Get("WWW-Authenticate"))
		}
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
