package actuator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/internal/logctx"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// handleRun carries out one signed order, or refuses it.
func (a *Actuator) handleRun(_ context.Context, t *asynq.Task) error {
	defer a.enter()()
	now := a.now()
	o, err := tasks.VerifyOrder(a.orderKeys, t.Payload(), now)
	if err != nil && !errors.Is(err, tasks.ErrExpired) && !errors.Is(err, tasks.ErrTTLTooLong) {
		// The id is only a label for the refusal; nothing else of an order
		// that does not verify is trusted, and the refusal carries no plan
		// hash, so the bot does not take it for news of its own order.
		return a.refuse(tasks.Claimed(t.Payload()).ExecutionID, refusalFor(err), err, now, "")
	}
	id := o.ExecutionID
	if !validExecutionID(id) {
		return a.refuse(id, tasks.RefusedMalformed, fmt.Errorf("execution id %q is not one word of letters, digits, '.', '_', ':' and '-'", id), now, o.PlanHash)
	}
	if o.Actuator != a.cfg.Name {
		return a.refuse(id, tasks.RefusedWrongActuator, fmt.Errorf("the order is for actuator %q, and this is %q", o.Actuator, a.cfg.Name), now, "")
	}
	// Before the journal: the order is the bot's, but for another site's
	// actuator, which must stay free to run it. No plan hash, so the bot
	// does not take this refusal for the order's outcome.
	if o.Site != a.cfg.Site {
		return a.refuse(id, tasks.RefusedWrongSite, fmt.Errorf("the order is for a host of site %q, and this actuator serves %q", o.Site, a.cfg.Site), now, "")
	}
	// The journal comes before the expiry: a copy of an order that already
	// ran is a replay, whenever it turns up.
	if a.journal.Seen(id) {
		return a.refuse(id, tasks.RefusedReplay, errReplay, now, o.PlanHash)
	}
	if err != nil {
		return a.refuse(id, refusalFor(err), err, now, o.PlanHash)
	}
	plan, why, err := derivePlan(o)
	if err != nil {
		return a.refuse(id, why, err, now, o.PlanHash)
	}
	class, err := a.orderClass(o, plan)
	if err != nil {
		return a.refuse(id, tasks.RefusedMalformed, err, now, o.PlanHash)
	}
	// Ours from here: an order held without a lease looks taken by an
	// actuator that died, and is sent again.
	defer a.holdLease(id)()
	// Last before the journal: the order is the bot's and would run, so
	// ask the bot whether it still stands. A copy put back on the queue
	// after its approval was withdrawn stops here.
	if why, err := a.confirmApproved(a.workCtx, o); err != nil {
		return a.refuse(id, why, err, a.now(), o.PlanHash)
	}
	now = a.now()

	if err := a.journal.Begin(id, now); err != nil {
		if errors.Is(err, errReplay) {
			return a.refuse(id, tasks.RefusedReplay, err, now, o.PlanHash)
		}
		// Without a journal entry nothing may run.
		res := tasks.Result{
			ExecutionID: id, PlanHash: o.PlanHash, Status: tasks.StatusFailed, StartedAt: now, FinishedAt: a.now(),
			Error: "The actuator could not write its journal, so nothing ran: " + err.Error(),
		}
		if rerr := a.deliverResult(a.reportCtx, res); rerr != nil {
			a.log.Error("could not report a journal failure", "execution_id", id, "err", rerr)
		}
		return fmt.Errorf("run execution %s: %w", id, err)
	}
	a.metrics.verify(kindOrder)
	log := a.log.With("execution_id", id, "action", o.Action, "target", o.Target.Slug, "host", o.Target.Host)
	log.Info("execution started", "risk_class", class.String())

	res := a.execute(logctx.With(a.workCtx, log), o, plan, class, now)

	if err := a.deliverResult(a.reportCtx, res); err != nil {
		// The journal keeps the start without a finish, so the next start
		// reports this execution as outcome_unknown.
		log.Error("could not report a result", "status", res.Status, "err", err)
		return fmt.Errorf("run execution %s: %w", id, err)
	}
	if err := a.journal.Finish(id, res.Status); err != nil {
		log.Error("could not journal a finished execution", "status", res.Status, "err", err)
		return fmt.Errorf("run execution %s: %w", id, err)
	}
	log.Info("execution finished", "status", res.Status, "failed_phase", res.FailedPhase, "exit_code", res.ExitCode,
		"duration_ms", res.FinishedAt.Sub(res.StartedAt).Milliseconds())
	return nil
}

// orderClass is the risk class the bot signed into o. Without a valid one
// it falls back to the catalogue's own, which errs on the side of a
// snapshot.
func (a *Actuator) orderClass(o tasks.Order, plan policy.Plan) (policy.Class, error) {
	class, err := policy.ParseClass(o.RiskClass)
	if err == nil && class.Valid() {
		return class, nil
	}
	risk, err := policy.Classify(plan.Params, plan.Target, nil)
	if err != nil {
		return 0, err
	}
	a.log.Warn("order carries no valid risk class; using the catalogue's", "execution_id", o.ExecutionID, "risk_class", o.RiskClass, "class", risk.Class.String())
	return risk.Class, nil
}

// derivePlan rebuilds the plan from the order's action, parameters and
// target, and checks that it hashes to what the operator approved.
func derivePlan(o tasks.Order) (policy.Plan, tasks.Refusal, error) {
	if o.Target.HostAddr == "" {
		return policy.Plan{}, tasks.RefusedMalformed, fmt.Errorf("target %s has no host address", o.Target.Slug)
	}
	params, err := policy.ParseParams(policy.Action(o.Action), o.Params)
	if err != nil {
		return policy.Plan{}, tasks.RefusedMalformed, err
	}
	plan, err := policy.NewPlan(params, policyTarget(o.Target))
	if err != nil {
		return policy.Plan{}, tasks.RefusedMalformed, err
	}
	hash, err := policy.PlanHash(plan)
	if err != nil {
		return policy.Plan{}, tasks.RefusedMalformed, err
	}
	if hash != o.PlanHash {
		return policy.Plan{}, tasks.RefusedPlanMismatch, fmt.Errorf("derived plan hash %s, order says %s", hash, o.PlanHash)
	}
	return plan, "", nil
}

// policyTarget is the order's target as policy sees it.
func policyTarget(t tasks.Target) policy.Target {
	return policy.Target{
		Type:     policy.TargetType(t.Type),
		ID:       t.ID,
		Slug:     t.Slug,
		Host:     t.Host,
		VMID:     t.VMID,
		Unit:     t.Unit,
		Services: t.Services,

		SnapshotBlocker: t.SnapshotBlocker,
	}
}

func refusalFor(err error) tasks.Refusal {
	switch {
	case errors.Is(err, tasks.ErrBadSignature), errors.Is(err, tasks.ErrUnsigned):
		return tasks.RefusedBadSignature
	case errors.Is(err, tasks.ErrExpired):
		return tasks.RefusedExpired
	case errors.Is(err, tasks.ErrTTLTooLong):
		return tasks.RefusedTTLTooLong
	}
	return tasks.RefusedMalformed
}

// refusalSentence is what the operator reads about a refusal.
func refusalSentence(why tasks.Refusal, cause error) string {
	switch why {
	case tasks.RefusedBadSignature:
		return "Nothing ran: the order's signature does not verify against the actuator's pinned key. Something other than the bot may be writing to the queue."
	case tasks.RefusedExpired:
		return "Nothing ran: the order expired before the actuator received it (" + cause.Error() + "). Request it again."
	case tasks.RefusedReplay:
		return "Nothing ran: this execution already started once, and the actuator never runs an order twice. The first run's result stands."
	case tasks.RefusedPlanMismatch:
		return "Nothing ran: the steps the actuator derives from this order do not match the plan that was approved. Request the plan again."
	case tasks.RefusedWrongActuator:
		return "Nothing ran: the order is addressed to another actuator (" + cause.Error() + "). Check actuator.name on the bot and the actuator."
	case tasks.RefusedWrongSite:
		return "Nothing ran here: the order reached the actuator of another site (" + cause.Error() + "). Only its own site's actuator may run it."
	case tasks.RefusedNotApproved:
		return "Nothing ran: the bot says this execution is no longer approved (" + cause.Error() + "). A copy of its signed order was put back on the queue; " +
			"something other than the bot may be writing to Redis."
	case tasks.RefusedUnconfirmed:
		return "Nothing ran: the bot did not confirm that the order is still approved (" + cause.Error() + "). Request it again."
	case tasks.RefusedTTLTooLong:
		return "Nothing ran: the order claims to stay valid for longer than the actuator accepts (" + cause.Error() + "). Keep orders.ttl at 1h or less."
	}
	return "Nothing ran: the order could not be read: " + cause.Error()
}

// refuse reports an order that will not run, and returns the error that
// tells asynq never to retry it. planHash is that of the verified order the
// refusal answers; empty when no order of the bot's stands behind it.
func (a *Actuator) refuse(id string, why tasks.Refusal, cause error, now time.Time, planHash string) error {
	a.log.Warn("order refused", "execution_id", id, "refusal", string(why), "err", cause)
	a.metrics.refuse(kindOrder, why)
	err := fmt.Errorf("refuse execution %s: %s: %v: %w", id, why, cause, asynq.SkipRetry)
	if !validExecutionID(id) {
		a.log.Error("refused order has no usable execution id; nothing to report against", "refusal", string(why))
		return err
	}
	res := tasks.Result{
		ExecutionID: id,
		PlanHash:    planHash,
		Status:      tasks.StatusRefused,
		Refusal:     why,
		Error:       refusalSentence(why, cause),
		StartedAt:   now,
		FinishedAt:  now,
	}
	if rerr := a.deliverResult(a.reportCtx, res); rerr != nil {
		a.log.Error("could not report a refusal", "execution_id", id, "refusal", string(why), "err", rerr)
	}
	return err
}
