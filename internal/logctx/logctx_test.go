package logctx_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/nomoshq/nomos/internal/logctx"
)

func TestTheLoggerTravelsInTheContext(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, nil)).With("execution_id", "x1")
	ctx := logctx.With(context.Background(), l)
	logctx.From(ctx).Info("ran")
	if got := buf.String(); !strings.Contains(got, "execution_id=x1") || !strings.Contains(got, "msg=ran") {
		t.Errorf("log = %q, want the carried logger's fields", got)
	}
}

func TestWithoutALoggerFromIsTheDefault(t *testing.T) {
	if got := logctx.From(context.Background()); got != slog.Default() {
		t.Errorf("From(empty context) = %p, want slog.Default()", got)
	}
	if got := logctx.From(logctx.With(context.Background(), nil)); got != slog.Default() {
		t.Errorf("From(context with nil logger) = %p, want slog.Default()", got)
	}
}
