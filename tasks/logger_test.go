package tasks_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/nomoshq/nomos/tasks"
)

// TestLoggerKeepsOneOriginKey: asynq's lines keep the component of the
// logger they go through, say asynq in their message, and add no source
// key, which is slog's own for the caller's file and line.
func TestLoggerKeepsOneOriginKey(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{AddSource: true})).With("component", "actuator")
	tasks.Logger(l).Warn("lease lost for ", "nomos:actuator")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	if got, want := line["msg"], "asynq: lease lost for nomos:actuator"; got != want {
		t.Errorf("msg = %q, want %q", got, want)
	}
	if got := line["component"]; got != "actuator" {
		t.Errorf("component = %v, want actuator", got)
	}
	// With AddSource, source is slog's: an object naming a file.
	if src, ok := line["source"].(map[string]any); !ok || src["file"] == nil {
		t.Errorf("source = %v, want slog's caller object", line["source"])
	}
}
