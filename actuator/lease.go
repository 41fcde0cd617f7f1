package actuator

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/tasks"
)

// holdLease takes the order lease of execution id (tasks.OrderLease) and
// renews it every third of OrderLease until the returned func is called,
// which lets it go. A lease that cannot be written is logged and the
// order goes on: the lease only speeds up recovery, the journal is what
// keeps an order from running twice.
func (a *Actuator) holdLease(id string) (release func()) {
	key := tasks.OrderLease(a.cfg.Site, id)
	ctx, cancel := context.WithCancel(a.reportCtx)
	renew := func() {
		if err := a.rdb.Set(ctx, key, a.cfg.Name, a.cfg.OrderLease).Err(); err != nil && ctx.Err() == nil {
			a.log.Warn("could not renew an order's lease", "execution_id", id, "err", err)
		}
	}
	renew()
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(a.cfg.OrderLease / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				renew()
			}
		}
	}()
	return func() {
		cancel()
		<-done
		del, stop := context.WithTimeout(context.WithoutCancel(ctx), enqueueTimeout)
		defer stop()
		a.rdb.Del(del, key)
	}
}

// resendOrphans looks, every third of OrderLease, for orders of this
// site that asynq shows as taken but whose lease has lapsed: an actuator
// took them and died before it began them. One this actuator's journal
// has never seen is put back on the queue at once, as a copy of the same
// signed order under a task id of its own (asynq keeps the original as
// taken until its own recoverer, a minute or more later, archives it).
// One the journal has seen is left alone: recover reports it, and the
// journal refuses a copy.
func (a *Actuator) resendOrphans(ctx context.Context) {
	queue := tasks.OrderQueue(a.cfg.Site)
	t := time.NewTicker(a.cfg.OrderLease / 3)
	defer t.Stop()
	o := orphans{resent: map[string]bool{}, suspects: map[string]bool{}}
	for {
		if err := a.resendOrphansOnce(ctx, queue, &o); err != nil && ctx.Err() == nil {
			a.log.Warn("could not look for orders a dead actuator took", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// orphans remembers, by asynq task id, the orders resent, and those seen
// taken without a lease by the last look.
type orphans struct{ resent, suspects map[string]bool }

func (a *Actuator) resendOrphansOnce(ctx context.Context, queue string, o *orphans) error {
	active, err := a.inspector.ListActiveTasks(queue, asynq.PageSize(1000))
	if errors.Is(err, asynq.ErrQueueNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	suspects := map[string]bool{}
	for _, ti := range active {
		id := tasks.Claimed(ti.Payload).ExecutionID
		if o.resent[ti.ID] || !validExecutionID(id) || a.journal.Seen(id) {
			continue
		}
		n, err := a.rdb.Exists(ctx, tasks.OrderLease(a.cfg.Site, id)).Result()
		if err != nil {
			return err
		}
		if n > 0 {
			continue
		}
		// asynq marks a task active just before its handler starts and
		// takes the lease: only one seen without a lease twice, a third
		// of OrderLease apart, is taken to be dead.
		if !ti.IsOrphaned && !o.suspects[ti.ID] {
			suspects[ti.ID] = true
			continue
		}
		copyID := id + ":resent:" + strconv.FormatInt(a.now().UnixNano(), 36)
		if err := a.enqueue(ctx, tasks.NewRunTask(a.cfg.Site, copyID, ti.Payload)); err != nil {
			return err
		}
		o.resent[ti.ID] = true
		a.log.Warn("an order an actuator took and never began is sent again", "execution_id", id, "task_id", ti.ID, "copy", copyID)
	}
	o.suspects = suspects
	return nil
}
