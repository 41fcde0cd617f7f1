package executions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// PreviewWait is how long a card waits for its plan's preview: past it,
// the card says the preview is unavailable. The actuator gives up on its
// reads after tasks.PreviewTimeout; the rest is the queue's way there and
// back.
const PreviewWait = 30 * time.Second

// HasHostPreview says whether the actuator reads action's preview from
// the host.
func HasHostPreview(action string) bool {
	return slices.Contains(tasks.PreviewActions, policy.Action(action))
}

// requestPreview asks the actuator for the preview of a plan's step
// awaiting its decision (or, in a plan of several steps, waiting for the
// one before it), and records that it did, so the card says it is
// coming. It never holds up the plan: a preview that cannot be asked for
// is logged, and the card says it is unavailable once PreviewWait has
// passed.
func (s *Service) requestPreview(ctx context.Context, g *graph, x store.Execution, entity store.Entity) {
	if (x.State != store.StateAwaitingApproval && x.State != store.StateWaiting) || !HasHostPreview(x.Action) {
		return
	}
	log := s.logger.With("execution_id", x.ID, "action", x.Action)
	now := s.now()
	if err := s.store.RequestPreview(ctx, x.ID, now); err != nil {
		log.Warn("preview not asked for", "err", err)
		return
	}
	target := g.orderTarget(entity)
	task, err := tasks.NewPreviewRunTask(s.cfg.SigningKey, tasks.PreviewRun{
		ExecutionID: x.ID.String(), Actuator: s.cfg.Actuator, Site: g.site(entity), Action: x.Action,
		Target: target, IssuedAt: now, ExpiresAt: now.Add(PreviewWait),
	})
	if err == nil {
		_, err = s.cfg.Queue.EnqueueContext(ctx, task)
	}
	if err != nil {
		log.Warn("preview not sent; the card will say it is unavailable", "err", err)
	}
}

// applyPreview records a verified preview for the execution that asked
// for it, once. A preview nobody asked for, or a second one, is refused.
func (s *Service) applyPreview(ctx context.Context, r tasks.PreviewResult) error {
	ref := RefusedReportError{Type: tasks.TypePreviewResult, ExecutionID: r.ExecutionID, Actuator: r.Actuator}
	id, err := uuid.Parse(r.ExecutionID)
	if err != nil {
		ref.Reason, ref.Detail = RefusedMalformed, "the execution id is not a uuid"
		return s.refuse(ctx, ref)
	}
	x, err := s.store.GetExecution(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		ref.Reason, ref.Detail = RefusedNotDispatched, "there is no such execution"
		return s.refuse(ctx, ref)
	case err != nil:
		return err
	case x.Action != r.Action:
		ref.Reason, ref.Detail = RefusedWrongOrder, fmt.Sprintf("a preview of %s for a plan of %s", r.Action, x.Action)
		return s.refuse(ctx, ref)
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	detail := map[string]any{"packages": len(r.Packages), "snapshots": len(r.Snapshots)}
	if r.Error != "" {
		detail["error"] = r.Error
	}
	err = s.store.ApplyPreview(ctx, id, raw, store.AuditEntry{Actor: "actuator", Action: "execution.preview", Detail: detail})
	switch {
	case errors.Is(err, store.ErrNotFound):
		ref.Reason, ref.Detail = RefusedNotDispatched, "no preview was asked for"
		return s.refuse(ctx, ref)
	case errors.Is(err, store.ErrPreviewApplied):
		ref.Reason, ref.Detail = RefusedReplayed, "a preview was already applied"
		return s.refuse(ctx, ref)
	}
	return err
}
