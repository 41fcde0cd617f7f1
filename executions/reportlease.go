package executions

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/internal/lease"
	"github.com/nomoshq/nomos/tasks"
)

// resentFor is how long a report put back as a copy stays marked, so that
// asynq's recoverer, which gives the original back a minute or two later,
// finds it marked even after a long stop of every bot.
const resentFor = 24 * time.Hour

// putBack reports whether t is a report that a bot already put back as a
// copy (tasks.ReportResent), given back now by asynq's own recoverer
// after its consumer died: the copy stands for it, and it is dropped.
func (h *ResultsHandler) putBack(ctx context.Context, t *asynq.Task) bool {
	// Only a task asynq gave back, which counts as a retry, can be one;
	// the others skip the look.
	if n, _ := asynq.GetRetryCount(ctx); n == 0 {
		return false
	}
	id, _ := asynq.GetTaskID(ctx)
	copyID, err := h.Lease.Redis.Get(ctx, tasks.ReportResent(id)).Result()
	if err != nil {
		return false
	}
	h.Service.logger.Info("a report put back as a copy came back; the copy stands for it", "type", t.Type(), "task_id", id, "copy", copyID)
	return true
}

// appliedBeforeDeath reports whether t is a copy SweepReports put back
// and every refusal of it is a replay: the killed consumer had applied the
// report and died before it could tell asynq. The refusals are in the
// audit log; the operators are not warned of a replay from Redis, which
// this is not.
func (h *ResultsHandler) appliedBeforeDeath(ctx context.Context, t *asynq.Task, refused []*RefusedReportError) bool {
	for _, r := range refused {
		if r.Reason != RefusedReplayed {
			return false
		}
	}
	id, _ := asynq.GetTaskID(ctx)
	i := strings.LastIndex(id, resentTag)
	if i < 0 {
		return false
	}
	if mark, err := h.Lease.Redis.Get(ctx, tasks.ReportResent(id[:i])).Result(); err != nil || mark != id {
		return false
	}
	h.Service.logger.Info("a report put back had been applied by the consumer that died holding it", "type", t.Type(), "task_id", id)
	return true
}

// resentTag joins a report's task id and its copy's time in the copy's
// task id.
const resentTag = ":resent:"

// SweepReports puts back, within seconds, the reports of the results
// queue that a consumer took and was killed holding: asynq shows them
// taken and their lease (tasks.ReportLease) has lapsed. Each goes back
// as a copy of the same signed bytes under a task id of its own, and the
// original is marked (tasks.ReportResent) so that it is dropped when
// asynq's own recoverer gives it back. A copy of a report the dead bot
// had applied before it died is refused as a replay and changes nothing,
// and the operators are not warned of it (appliedBeforeDeath).
// It needs h.Lease.Redis; it sweeps until ctx ends.
func (h *ResultsHandler) SweepReports(ctx context.Context, inspector *asynq.Inspector) {
	s := &lease.Sweeper{
		Config:    h.Lease,
		Inspector: inspector,
		Queue:     tasks.QueueResults,
		Key:       func(ti *asynq.TaskInfo) string { return tasks.ReportLease(ti.ID) },
		Resend: func(ctx context.Context, ti *asynq.TaskInfo) error {
			copyID := ti.ID + resentTag + strconv.FormatInt(h.Service.now().UnixNano(), 36)
			task := asynq.NewTask(ti.Type, ti.Payload, asynq.Queue(tasks.QueueResults), asynq.TaskID(copyID),
				asynq.MaxRetry(ti.MaxRetry), asynq.Retention(tasks.RunRetention))
			if _, err := h.Service.cfg.Queue.EnqueueContext(ctx, task); err != nil {
				return err
			}
			h.Service.logger.Warn("a report a killed consumer took is put back", "type", ti.Type, "task_id", ti.ID, "copy", copyID)
			// Unmarked, the original is applied again when asynq gives it
			// back, and refused then as a replay: late, never lost.
			if err := h.Lease.Redis.Set(ctx, tasks.ReportResent(ti.ID), copyID, resentFor).Err(); err != nil {
				h.Service.logger.Warn("could not mark a report put back", "task_id", ti.ID, "err", err)
			}
			return nil
		},
	}
	s.Run(ctx)
}
