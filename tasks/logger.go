package tasks

import (
	"fmt"
	"log/slog"

	"github.com/hibiken/asynq"
)

// Logger routes asynq's own logs through l, for the bot's and the
// actuator's queue servers alike. l's component key already says which
// part of Nomos a line comes from (slog's own source key is the caller's
// file and line), so asynq's lines say so in their message: "asynq: …".
func Logger(l *slog.Logger) asynq.Logger { return asynqLogger{l} }

type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) Debug(args ...any) { a.l.Debug(message(args)) }
func (a asynqLogger) Info(args ...any)  { a.l.Info(message(args)) }
func (a asynqLogger) Warn(args ...any)  { a.l.Warn(message(args)) }
func (a asynqLogger) Error(args ...any) { a.l.Error(message(args)) }

// Fatal logs at error level and leaves the process running: asynq never
// calls it, and a queue library must not end the process on its own.
func (a asynqLogger) Fatal(args ...any) { a.l.Error(message(args)) }

func message(args []any) string { return "asynq: " + fmt.Sprint(args...) }
