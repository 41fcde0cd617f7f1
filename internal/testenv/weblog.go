package testenv

import (
	"io"
	"net/http"
	"sync"
)

// WebLog is a web server that answers every request with Body and records
// each path asked of it: what an agent's http_get reached.
type WebLog struct {
	Body  string
	mu    sync.Mutex
	paths []string
}

func (f *WebLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.paths = append(f.paths, r.URL.Path)
	f.mu.Unlock()
	_, _ = io.WriteString(w, f.Body) // a client gone is nothing to report
}

// Got lists the paths asked so far, in order.
func (f *WebLog) Got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.paths...)
}
