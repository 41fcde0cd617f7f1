package agent

import (
	"context"
	"sync"

	"github.com/google/uuid"
)

// sessionLocks serialises the turns of each session, so an operator's
// message and a continuation never write one history at the same time,
// and a result the running turn already saw is claimed before a
// continuation for it can look.
type sessionLocks struct {
	mu    sync.Mutex
	locks map[uuid.UUID]*sessionLock
}

type sessionLock struct {
	held chan struct{} // holds one token while a turn runs
	refs int
}

// lock waits for the session's turn; unlock must be called once.
func (l *sessionLocks) lock(ctx context.Context, id uuid.UUID) (unlock func(), err error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[uuid.UUID]*sessionLock{}
	}
	sl := l.locks[id]
	if sl == nil {
		sl = &sessionLock{held: make(chan struct{}, 1)}
		l.locks[id] = sl
	}
	sl.refs++
	l.mu.Unlock()

	release := func() {
		l.mu.Lock()
		if sl.refs--; sl.refs == 0 {
			delete(l.locks, id)
		}
		l.mu.Unlock()
	}
	select {
	case sl.held <- struct{}{}:
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
	return func() {
		<-sl.held
		release()
	}, nil
}
