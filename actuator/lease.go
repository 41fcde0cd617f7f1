package actuator

import (
	"context"
	"strconv"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/internal/lease"
	"github.com/nomoshq/nomos/tasks"
)

// leaseConfig is how this actuator holds its order leases.
func (a *Actuator) leaseConfig() lease.Config {
	return lease.Config{Redis: a.rdb, TTL: a.cfg.OrderLease, Owner: a.cfg.Name, Logger: a.log}
}

// holdLease holds the order lease of execution id (tasks.OrderLease)
// until the returned func is called. The lease only speeds up recovery:
// the journal is what keeps an order from running twice.
func (a *Actuator) holdLease(id string) (release func()) {
	return lease.Hold(a.reportCtx, a.leaseConfig(), tasks.OrderLease(a.cfg.Site, id))
}

// resendOrphans puts back the orders of this site that asynq shows as
// taken but whose lease has lapsed: an actuator took them and died before
// it began them. One this actuator's journal has never seen is put back
// on the queue as a copy of the same signed order under a task id of its
// own (asynq keeps the original as taken until its own recoverer, a
// minute or more later, gives it back). One the journal has seen is left
// alone: recover reports it, and the journal refuses a copy.
func (a *Actuator) resendOrphans(ctx context.Context) {
	s := &lease.Sweeper{
		Config:    a.leaseConfig(),
		Inspector: a.inspector,
		Queue:     tasks.OrderQueue(a.cfg.Site),
		Key: func(ti *asynq.TaskInfo) string {
			id := tasks.Claimed(ti.Payload).ExecutionID
			if !validExecutionID(id) || a.journal.Seen(id) {
				return ""
			}
			return tasks.OrderLease(a.cfg.Site, id)
		},
		Resend: func(ctx context.Context, ti *asynq.TaskInfo) error {
			id := tasks.Claimed(ti.Payload).ExecutionID
			copyID := id + ":resent:" + strconv.FormatInt(a.now().UnixNano(), 36)
			if err := a.enqueue(ctx, tasks.NewRunTask(a.cfg.Site, copyID, ti.Payload)); err != nil {
				return err
			}
			a.log.Warn("an order an actuator took and never began is sent again", "execution_id", id, "task_id", ti.ID, "copy", copyID)
			return nil
		},
	}
	s.Run(ctx)
}
