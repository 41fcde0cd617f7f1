package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nomoshq/nomos/internal/backoff"
)

// ListenExecutions calls fn for every ExecutionEvent committed from now
// until ctx ends. It holds one pooled connection, and reconnects after a
// lost connection (100 ms after, growing to 2 s while Postgres is away); events committed while it was reconnecting are missed,
// so callers that must not miss one re-read state after onReconnect.
func (s *Store) ListenExecutions(ctx context.Context, fn func(ExecutionEvent), onReconnect func()) error {
	first := true
	var pause backoff.Backoff
	for {
		err := s.listenOnce(ctx, fn, func() {
			pause.Reset()
			if !first && onReconnect != nil {
				onReconnect()
			}
			first = false
		})
		if ctx.Err() != nil {
			return nil
		}
		s.logger.Warn("executions listener lost its connection; retrying", "err", err)
		if !pause.Wait(ctx) {
			return nil
		}
	}
}

func (s *Store) listenOnce(ctx context.Context, fn func(ExecutionEvent), listening func()) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+ExecutionsChannel); err != nil {
		return err
	}
	defer func() {
		if conn.Conn().IsClosed() {
			return // the pool drops it
		}
		ctx := context.WithoutCancel(ctx)
		if _, err := conn.Exec(ctx, "UNLISTEN "+ExecutionsChannel); err != nil {
			// Closed, it leaves the pool rather than go back still listening.
			s.logger.Warn("unlisten execution events; closing the connection", "err", err)
			_ = conn.Conn().Close(ctx)
		}
	}()
	listening()
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var ev ExecutionEvent
		if err := json.Unmarshal([]byte(n.Payload), &ev); err != nil {
			s.logger.Warn("malformed execution event", "payload", n.Payload, "err", fmt.Sprint(err))
			continue
		}
		fn(ev)
	}
}
