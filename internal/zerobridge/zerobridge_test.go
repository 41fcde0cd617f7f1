package zerobridge_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/internal/zerobridge"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// recorder is a slog handler that keeps every record.
type recorder struct {
	level slog.Level
	mu    sync.Mutex
	recs  []slog.Record
}

func (r *recorder) Enabled(_ context.Context, l slog.Level) bool { return l >= r.level }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) find(msg string) (slog.Record, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.recs {
		if rec.Message == msg {
			return rec, true
		}
	}
	return slog.Record{}, false
}

func attrs(rec slog.Record) map[string]string {
	out := map[string]string{}
	rec.Attrs(func(a slog.Attr) bool { out[a.Key] = a.Value.String(); return true })
	return out
}

// TestMautrixClientLogReachesSlog: a request of a real mautrix client to
// a real homeserver is logged through slog, at debug, with its fields, and
// without the request body.
func TestMautrixClientLogReachesSlog(t *testing.T) {
	hs := testenv.Homeserver(t)
	rec := &recorder{level: slog.LevelDebug}
	cli, err := mautrix.NewClient(hs.URL(), id.UserID("@nobody:localhost"), "not-a-token")
	if err != nil {
		t.Fatal(err)
	}
	cli.Log = zerobridge.Logger(slog.New(rec))
	if _, err := cli.Versions(testenv.Context(t)); err != nil {
		t.Fatalf("versions: %v", err)
	}
	got, ok := rec.find("Request completed")
	if !ok {
		t.Fatalf("no \"Request completed\" record reached slog; got %d records", len(rec.recs))
	}
	if got.Level != slog.LevelDebug {
		t.Errorf("level = %v, want debug", got.Level)
	}
	a := attrs(got)
	if a["method"] != "GET" || !strings.Contains(a["url"], "/_matrix/client/versions") || a["status_code"] != "200" || a["mautrix"] != "client" {
		t.Errorf("attrs = %v, want method GET, the versions url, status_code 200 and mautrix client", a)
	}
	// A request nothing answers logs at error with the one error key.
	down, err := mautrix.NewClient(fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t)), "", "")
	if err != nil {
		t.Fatal(err)
	}
	down.DefaultHTTPRetries = 0
	down.Log = zerobridge.Logger(slog.New(rec))
	if _, err := down.Versions(testenv.Context(t)); err == nil {
		t.Fatal("a request to a closed port succeeded")
	}
	failed, ok := rec.find("Request failed")
	if !ok {
		t.Fatal("no \"Request failed\" record reached slog")
	}
	if a := attrs(failed); failed.Level != slog.LevelError || a["err"] == "" || a["error"] != "" {
		t.Errorf("failed request: level %v attrs %v, want error level with err set and no error key", failed.Level, a)
	}
	if _, ok := attrs(failed)["req_body"]; ok {
		t.Error("the request body reached the log")
	}
}

func TestLevelsMapAndQuietLevelsAreNotBuilt(t *testing.T) {
	rec := &recorder{level: slog.LevelInfo}
	z := zerobridge.Logger(slog.New(rec))
	z.Trace().Msg("trace line")
	z.Debug().Msg("debug line")
	z.Info().Str("room_id", "!r").Str("component", "crypto").Msg("info line")
	z.Warn().Msg("warn line")
	z.Error().Err(errors.New("boom")).Msg("error line")
	for _, quiet := range []string{"trace line", "debug line"} {
		if _, ok := rec.find(quiet); ok {
			t.Errorf("%q reached an info handler", quiet)
		}
	}
	for msg, want := range map[string]slog.Level{"info line": slog.LevelInfo, "warn line": slog.LevelWarn, "error line": slog.LevelError} {
		got, ok := rec.find(msg)
		if !ok || got.Level != want {
			t.Errorf("%q: found %v at %v, want %v", msg, ok, got.Level, want)
		}
	}
	if got, _ := rec.find("info line"); attrs(got)["room_id"] != "!r" || attrs(got)["mautrix"] != "crypto" || attrs(got)["component"] != "" {
		t.Errorf("info line attrs = %v, want room_id !r and mautrix crypto, no component", attrs(got))
	}
	if got, _ := rec.find("error line"); attrs(got)["err"] != "boom" {
		t.Errorf("error line attrs = %v, want err boom", attrs(got))
	}
}

// TestUndecodableLineIsKept: what is not JSON is logged as it came.
func TestUndecodableLineIsKept(t *testing.T) {
	rec := &recorder{level: slog.LevelDebug}
	z := zerobridge.Logger(slog.New(rec))
	if _, err := z.Write([]byte("not json\n")); err != nil {
		t.Fatal(err)
	}
	if _, ok := rec.find("not json"); !ok {
		t.Error("a line that is not JSON was lost")
	}
}

// TestHostileValuesStayValues: what a room member controls (a room name,
// an event's body) reaches mautrix's log fields. It stays one field's
// value: it cannot change the line's level or message, add a field, or
// start a line of its own.
func TestHostileValuesStayValues(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	h := slog.NewTextHandler(writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return buf.WriteString(string(p)) }), nil)
	rec := &recorder{level: slog.LevelDebug}
	hostile := "x\",\"level\":\"error\",\"message\":\"forged\",\"err\":\"owned\"}\nlevel=ERROR msg=forged"
	for _, l := range []*slog.Logger{slog.New(rec), slog.New(h)} {
		z := zerobridge.Logger(l)
		z.Info().Str("room_name", hostile).Msg("joined")
	}
	got, ok := rec.find("joined")
	if !ok || got.Level != slog.LevelInfo {
		t.Fatalf("the line is %v at %v, want \"joined\" at info", ok, got.Level)
	}
	a := attrs(got)
	if a["room_name"] != hostile || a["err"] != "" || len(a) != 2 {
		t.Errorf("attrs = %q, want mautrix and room_name holding the hostile text whole", a)
	}
	if lines := strings.Count(strings.TrimSpace(buf.String()), "\n"); lines != 0 {
		t.Errorf("the text handler wrote %d lines for one record:\n%s", lines+1, buf.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
