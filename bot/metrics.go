package bot

import (
	"net/http"
	"strings"
	"time"

	"github.com/nomoshq/nomos/internal/metrics"
)

// timeSends is a mautrix response hook that records how long the
// homeserver takes to accept each event the bot sends: cards, edits,
// replies and reactions alike.
func timeSends(m *metrics.Metrics) func(*http.Request, *http.Response, error, time.Duration) {
	return func(req *http.Request, resp *http.Response, err error, d time.Duration) {
		if req.Method != http.MethodPut || !isSend(req.URL.Path) {
			return
		}
		result := metrics.ResultOK
		if err != nil || resp == nil || resp.StatusCode >= 400 {
			result = metrics.ResultError
		}
		m.MatrixSend(result, d)
	}
}

// isSend reports whether path is /_matrix/client/*/rooms/{room}/send/{type}/{txn}.
func isSend(path string) bool {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	n := len(parts)
	return n >= 6 && parts[0] == "_matrix" && parts[1] == "client" && parts[n-5] == "rooms" && parts[n-3] == "send"
}
