package tasks

import (
	"fmt"
	"log/slog"

	"github.com/hibiken/asynq"
)

// Logger routes asynq's own logs through l, marked with source=asynq, for
// the bot's and the actuator's queue servers alike.
func Logger(l *slog.Logger) asynq.Logger { return asynqLogger{l} }

type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...), "source", "asynq") }
func (a asynqLogger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...), "source", "asynq") }
func (a asynqLogger) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...), "source", "asynq") }
func (a asynqLogger) Error(args ...any) { a.l.Error(fmt.Sprint(args...), "source", "asynq") }

// Fatal logs at error level and leaves the process running: asynq never
// calls it, and a queue library must not end the process on its own.
func (a asynqLogger) Fatal(args ...any) { a.l.Error(fmt.Sprint(args...), "source", "asynq") }
