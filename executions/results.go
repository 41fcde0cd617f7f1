package executions

import (
	"context"
	"fmt"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// ResultsHandler consumes the results queue: progress, results and probe
// results. OnChange, when set, hears every execution a message changed, so
// a front end can update what it shows.
type ResultsHandler struct {
	Service  *Service
	OnChange func(context.Context, Applied)
}

var _ asynq.Handler = (*ResultsHandler)(nil)

// ProcessTask implements asynq.Handler.
func (h *ResultsHandler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	switch t.Type() {
	case tasks.TypeExecutionProgress:
		p, err := tasks.Decode[tasks.Progress](t.Payload())
		if err != nil {
			return fmt.Errorf("%w: %v", asynq.SkipRetry, err)
		}
		a, err := h.Service.ApplyProgress(ctx, p)
		if err != nil {
			return err
		}
		h.changed(ctx, a)
	case tasks.TypeExecutionResult:
		r, err := tasks.Decode[tasks.Result](t.Payload())
		if err != nil {
			return fmt.Errorf("%w: %v", asynq.SkipRetry, err)
		}
		a, err := h.Service.ApplyResult(ctx, r)
		if err != nil {
			return err
		}
		h.changed(ctx, a)
	case tasks.TypeCheckResult:
		c, err := tasks.Decode[tasks.CheckResult](t.Payload())
		if err != nil {
			return fmt.Errorf("%w: %v", asynq.SkipRetry, err)
		}
		return h.Service.ApplyCheckResult(ctx, c)
	default:
		return fmt.Errorf("%w: unknown task type %q", asynq.SkipRetry, t.Type())
	}
	return nil
}

func (h *ResultsHandler) changed(ctx context.Context, a Applied) {
	if a.Changed && h.OnChange != nil {
		h.OnChange(ctx, a)
	}
}

// ApplyCheckResult writes a probe's outcome against the entity it
// observed, never the probe's own bookkeeping entity.
func (s *Service) ApplyCheckResult(ctx context.Context, c tasks.CheckResult) error {
	return s.store.RecordCheck(ctx, store.CheckObservation{
		CheckID: c.CheckID, TargetID: c.TargetID, Health: c.Health, Detail: c.Detail, Metrics: c.Metrics, At: c.At,
	})
}
