// Package zerobridge routes zerolog, the logger mautrix and its crypto
// helper write to, into slog, so Matrix and encryption log lines land in
// the process's one log with its level, format and fields.
package zerobridge

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"time"

	"github.com/rs/zerolog"
)

// Logger returns a zerolog.Logger whose events become records of l:
// trace and debug at slog's debug, info at info, warn at warn, and error,
// fatal and panic at error. zerolog's "error" field is named "err", the
// key every Nomos log line uses for an error, and mautrix's "component"
// is "mautrix" (client when it names none); request bodies are dropped.
// Events below l's level are not even built.
//
//nolint:contextcheck // zerolog's writer has no context to pass on; the bridge asks slog with none.
func Logger(l *slog.Logger) zerolog.Logger {
	level := zerolog.InfoLevel
	if l.Enabled(context.Background(), slog.LevelDebug) {
		level = zerolog.TraceLevel
	}
	return zerolog.New(writer{h: l.Handler()}).Level(level)
}

// writer decodes each zerolog JSON event and hands it to h.
type writer struct{ h slog.Handler }

var _ zerolog.LevelWriter = writer{}

func (w writer) Write(p []byte) (int, error) { return w.WriteLevel(zerolog.NoLevel, p) }

// WriteLevel never fails: a line it cannot decode is logged as it came.
func (w writer) WriteLevel(zl zerolog.Level, p []byte) (int, error) {
	level := slogLevel(zl)
	ctx := context.Background()
	if !w.h.Enabled(ctx, level) {
		return len(p), nil
	}
	var fields map[string]any
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil {
		r := slog.NewRecord(time.Now(), level, string(bytes.TrimSpace(p)), 0)
		return len(p), w.h.Handle(ctx, r)
	}
	msg, _ := fields[zerolog.MessageFieldName].(string)
	delete(fields, zerolog.MessageFieldName)
	delete(fields, zerolog.LevelFieldName)
	delete(fields, zerolog.TimestampFieldName)
	// mautrix logs what it sends at debug: the bot's messages are in the
	// room already, and a log must not keep a second copy of them.
	delete(fields, "req_body")
	r := slog.NewRecord(time.Now(), level, msg, 0)
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// The logger's own component names the Nomos part; mautrix's names
	// its part under the key mautrix.
	part := "client"
	if c, ok := fields["component"].(string); ok {
		part = c
		delete(fields, "component")
		keys = slices.DeleteFunc(keys, func(k string) bool { return k == "component" })
	}
	r.AddAttrs(slog.String("mautrix", part))
	for _, k := range keys {
		name := k
		if k == zerolog.ErrorFieldName {
			name = "err"
		}
		r.AddAttrs(slog.Any(name, fields[k]))
	}
	return len(p), w.h.Handle(ctx, r)
}

func slogLevel(l zerolog.Level) slog.Level {
	switch l {
	case zerolog.TraceLevel, zerolog.DebugLevel:
		return slog.LevelDebug
	case zerolog.WarnLevel:
		return slog.LevelWarn
	case zerolog.ErrorLevel, zerolog.FatalLevel, zerolog.PanicLevel:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}
