package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// LeaderLock is a session-level Postgres advisory lock held on a
// connection of its own, outside the pool: Postgres releases it when that
// connection ends, so a process that dies, however it dies, lets another
// take the lock. A LeaderLock is used by one goroutine at a time.
type LeaderLock struct {
	url  string
	name int32
	conn *pgx.Conn
}

// leaderLockClass is the first key of every Nomos leader lock: "NM".
const leaderLockClass = 0x4e4d

// LeaderLockBot names the bot's leader lock.
const LeaderLockBot int32 = 1

// NewLeaderLock prepares the lock named name on the database at url. It
// connects on the first TryAcquire.
func NewLeaderLock(url string, name int32) *LeaderLock {
	return &LeaderLock{url: url, name: name}
}

// TryAcquire takes the lock if it is free, connecting first if need be.
// It never waits for the lock.
func (l *LeaderLock) TryAcquire(ctx context.Context) (bool, error) {
	if l.conn == nil || l.conn.IsClosed() {
		conn, err := pgx.Connect(ctx, l.url)
		if err != nil {
			return false, fmt.Errorf("connect for the leader lock: %w", err)
		}
		l.conn = conn
	}
	var ok bool
	if err := l.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, leaderLockClass, l.name).Scan(&ok); err != nil {
		l.Release()
		return false, fmt.Errorf("try the leader lock: %w", err)
	}
	return ok, nil
}

// ErrLeaderLockLost is Held's answer when the lock's connection answers
// but no longer holds the lock.
var ErrLeaderLockLost = errors.New("the leader lock is no longer held")

// Held asks Postgres, on the lock's own connection, whether it still
// holds the lock. Any error means it may not: a dead connection has lost
// it already, or will as soon as Postgres notices.
func (l *LeaderLock) Held(ctx context.Context) error {
	if l.conn == nil || l.conn.IsClosed() {
		return ErrLeaderLockLost
	}
	var held bool
	err := l.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
		WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
		AND classid = $1 AND objid = $2 AND objsubid = 2)`, leaderLockClass, l.name).Scan(&held)
	switch {
	case err != nil:
		return fmt.Errorf("check the leader lock: %w", err)
	case !held:
		return ErrLeaderLockLost
	}
	return nil
}

// Release gives the lock up and closes its connection.
//
//nolint:contextcheck // it runs when the holder's context has ended, bounded by its own timeout.
func (l *LeaderLock) Release() {
	if l.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// Unlock first: a closed connection's backend frees the lock only as
	// it exits, a moment later, and a release must be over on return.
	_, _ = l.conn.Exec(ctx, `SELECT pg_advisory_unlock_all()`)
	_ = l.conn.Close(ctx)
	l.conn = nil
}
