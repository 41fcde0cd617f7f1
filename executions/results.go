package executions

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/internal/lease"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// ResultsHandler consumes the results queue: progress, results and probe
// results, each verified against the actuator's report key before any of
// it is read. OnChange, when set, hears every execution a message changed,
// so a front end can update what it shows. OnRefused, when set, hears
// every message that was refused, once it is in the audit log, so a front
// end can warn the operators.
type ResultsHandler struct {
	Service   *Service
	OnChange  func(context.Context, Applied)
	OnRefused func(context.Context, RefusedReportError)
	// Lease, when its Redis is set, is held on each report while it is
	// applied, so that SweepReports puts back within seconds a report
	// whose consumer was killed holding it, rather than after asynq's
	// own lease of up to a minute and a half.
	Lease lease.Config
}

var _ asynq.Handler = (*ResultsHandler)(nil)

// ProcessTask implements asynq.Handler. A refused message is not retried.
func (h *ResultsHandler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	if h.Lease.Redis != nil {
		if h.putBack(ctx, t) {
			return nil
		}
		id, _ := asynq.GetTaskID(ctx)
		defer lease.Hold(ctx, h.Lease, tasks.ReportLease(id))()
	}
	a, err := h.Service.ApplyReport(ctx, t.Type(), t.Payload())
	if refused := refusedReports(err); len(refused) > 0 {
		if h.Lease.Redis != nil && h.appliedBeforeDeath(ctx, t, refused) {
			return nil
		}
		for _, r := range refused {
			if h.OnRefused != nil {
				h.OnRefused(ctx, *r)
			}
		}
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	if err != nil {
		return err
	}
	if a.Changed && h.OnChange != nil {
		h.OnChange(ctx, a)
	}
	return nil
}

// refusedReports returns the refusals err carries: one for a message, as
// many as a batch had refused.
func refusedReports(err error) []*RefusedReportError {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*RefusedReportError
		for _, e := range joined.Unwrap() {
			out = append(out, refusedReports(e)...)
		}
		return out
	}
	var refused *RefusedReportError
	if errors.As(err, &refused) {
		return []*RefusedReportError{refused}
	}
	return nil
}

// ErrReportRefused is what every *RefusedReportError wraps.
var ErrReportRefused = errors.New("report refused")

// ReportRefusal is why a message on the results queue was refused.
type ReportRefusal string

const (
	// RefusedUnsigned: the message is not a signed envelope.
	RefusedUnsigned ReportRefusal = "unsigned"
	// RefusedBadSignature: the signature does not verify against the
	// actuator's key: another key signed it, or it was changed after.
	RefusedBadSignature ReportRefusal = "bad_signature"
	// RefusedMalformed: the message cannot be read or acted on, such as
	// an unknown task type, an id that is not one, or an unknown status.
	RefusedMalformed ReportRefusal = "malformed"
	// RefusedWrongActuator: signed, but by an actuator of another name.
	RefusedWrongActuator ReportRefusal = "wrong_actuator"
	// RefusedNotDispatched: about an execution the bot never dispatched,
	// a check or an inventory it never sent.
	RefusedNotDispatched ReportRefusal = "not_dispatched"
	// RefusedReplayed: a copy of a report already applied: a progress
	// report whose number is not above the last one, a second result for
	// one execution, a probe result no newer than the one on record, or a
	// second inventory for one run.
	RefusedReplayed ReportRefusal = "replayed"
	// RefusedWrongOrder: a result for another plan than the approved one.
	RefusedWrongOrder ReportRefusal = "wrong_order"
	// RefusedCreated: a created container that the order could not have
	// made: not a pct_create, not what it asked for, or a container the
	// fleet already has.
	RefusedCreated ReportRefusal = "created_not_allowed"
	// RefusedForgedOrder: the actuator refused an order for the execution
	// that did not verify or was addressed to another actuator: something
	// other than the bot wrote it. The refusal itself is genuine, and
	// changes nothing.
	RefusedForgedOrder ReportRefusal = "forged_order"
)

// RefusedReportError is a message on the results queue that changed nothing
// because it could not be trusted. It is the error ApplyReport returns
// for it, and what ResultsHandler.OnRefused hears. Every refusal is in the
// audit log as report.refused.
type RefusedReportError struct {
	// Type is the task type the message came as.
	Type   string
	Reason ReportRefusal
	// ExecutionID, CheckID, RunID (an inventory's), TargetID (an
	// inventory's host) and Actuator are what the message claims, cut
	// short; they are verified only when the signature is.
	ExecutionID string
	CheckID     string
	RunID       string
	TargetID    string
	Actuator    string
	// RoomID is the room of the execution the message names, when there
	// is such an execution.
	RoomID string
	// TaskID is the asynq task id the message came with.
	TaskID string
	// Detail is the cause, for the log and the audit; it may quote the
	// message, so it is not for the room.
	Detail string
}

func (r RefusedReportError) Error() string {
	return fmt.Sprintf("refused %s for %s: %s: %s", r.Type, cmp.Or(r.ExecutionID, r.CheckID, r.RunID, "nothing named"), r.Reason, r.Detail)
}

func (r RefusedReportError) Unwrap() error { return ErrReportRefused }

// Warning is a fixed sentence for the operators about the refusal. It
// quotes nothing from the message.
func (r RefusedReportError) Warning() string {
	const tail = " Nothing changed; the audit log has the details (report.refused)."
	switch r.Reason {
	case RefusedUnsigned, RefusedBadSignature, RefusedMalformed:
		return "A message on the results queue was refused: it is not signed with the actuator's key, so something other than the actuator may be writing to Redis." + tail
	case RefusedWrongActuator:
		return "A message on the results queue was refused: it comes from another actuator than the one this bot works with. Check actuator.name on the bot and on the actuator." + tail
	case RefusedNotDispatched:
		return "A message on the results queue was refused: it reports on something this bot never sent to the actuator." + tail
	case RefusedReplayed:
		return "A message on the results queue was refused: it repeats a report that was already applied, as a replay from Redis would." + tail
	case RefusedWrongOrder:
		return "A message on the results queue was refused: it answers another plan than the one approved for that execution." + tail
	case RefusedCreated:
		return "A result was refused: it reports a new container that its order could not have created." + tail
	case RefusedForgedOrder:
		return "The actuator refused an order it could not verify or that was addressed to another actuator: something other than the bot may be writing orders to Redis. Nothing ran."
	}
	return "A message on the results queue was refused." + tail
}

// ApplyReport verifies one message from the results queue against the
// actuator's report key (or, during a rotation, its previous one) and
// applies it. A message that is unsigned, badly signed, from another
// actuator, about something the bot never sent, a replay, or otherwise not
// to be trusted changes nothing: the refusal is logged and audited, and
// the error is a *RefusedReportError.
func (s *Service) ApplyReport(ctx context.Context, typ string, payload []byte) (Applied, error) {
	key := s.reportKeys
	switch typ {
	case tasks.TypeExecutionProgress:
		p, err := tasks.VerifyProgress(key, payload)
		if err != nil {
			return Applied{}, s.refuseUnverified(ctx, typ, payload, err)
		}
		if err := s.checkActuator(ctx, typ, tasks.Claims{ExecutionID: p.ExecutionID, Actuator: p.Actuator}); err != nil {
			return Applied{}, err
		}
		return s.applyProgress(ctx, p)
	case tasks.TypeExecutionResult:
		r, err := tasks.VerifyResult(key, payload)
		if err != nil {
			return Applied{}, s.refuseUnverified(ctx, typ, payload, err)
		}
		if err := s.checkActuator(ctx, typ, tasks.Claims{ExecutionID: r.ExecutionID, Actuator: r.Actuator}); err != nil {
			return Applied{}, err
		}
		return s.applyResult(ctx, r)
	case tasks.TypeCheckResult:
		c, err := tasks.VerifyCheckResult(key, payload)
		if err != nil {
			return Applied{}, s.refuseUnverified(ctx, typ, payload, err)
		}
		if err := s.checkActuator(ctx, typ, tasks.Claims{CheckID: c.CheckID, TargetID: c.TargetID, Actuator: c.Actuator}); err != nil {
			return Applied{}, err
		}
		return Applied{}, s.applyCheckResult(ctx, c)
	case tasks.TypeCheckResults:
		return Applied{}, s.applyCheckResults(ctx, payload)
	case tasks.TypeInventoryResult:
		r, err := tasks.VerifyInventoryResult(key, payload)
		if err != nil {
			return Applied{}, s.refuseUnverified(ctx, typ, payload, err)
		}
		if err := s.checkActuator(ctx, typ, tasks.Claims{RunID: r.RunID, HostID: r.HostID, Actuator: r.Actuator}); err != nil {
			return Applied{}, err
		}
		return Applied{}, s.applyInventory(ctx, r)
	case tasks.TypePreviewResult:
		r, err := tasks.VerifyPreviewResult(key, payload)
		if err != nil {
			return Applied{}, s.refuseUnverified(ctx, typ, payload, err)
		}
		if err := s.checkActuator(ctx, typ, tasks.Claims{ExecutionID: r.ExecutionID, Actuator: r.Actuator}); err != nil {
			return Applied{}, err
		}
		return Applied{}, s.applyPreview(ctx, r)
	}
	return Applied{}, s.refuse(ctx, claimed(typ, payload, RefusedMalformed, "not a task type of the results queue"))
}

// refuseUnverified refuses a message whose signature or fields did not
// verify, labelled with what it claims.
func (s *Service) refuseUnverified(ctx context.Context, typ string, payload []byte, err error) error {
	why := RefusedMalformed
	switch {
	case errors.Is(err, tasks.ErrUnsigned):
		why = RefusedUnsigned
	case errors.Is(err, tasks.ErrBadSignature):
		why = RefusedBadSignature
	}
	return s.refuse(ctx, claimed(typ, payload, why, err.Error()))
}

func (s *Service) checkActuator(ctx context.Context, typ string, c tasks.Claims) error {
	if c.Actuator == s.cfg.Actuator {
		return nil
	}
	r := RefusedReportError{Type: typ, Reason: RefusedWrongActuator, ExecutionID: c.ExecutionID, CheckID: c.CheckID, RunID: c.RunID,
		TargetID: cmp.Or(c.TargetID, c.HostID), Actuator: c.Actuator,
		Detail: fmt.Sprintf("signed by actuator %q; this bot takes reports from %q", c.Actuator, s.cfg.Actuator)}
	return s.refuse(ctx, r)
}

func claimed(typ string, payload []byte, why ReportRefusal, detail string) RefusedReportError {
	c := tasks.Claimed(payload)
	return RefusedReportError{Type: typ, Reason: why, ExecutionID: c.ExecutionID, CheckID: c.CheckID, RunID: c.RunID,
		TargetID: cmp.Or(c.TargetID, c.HostID), Actuator: c.Actuator, Detail: detail}
}

// Claimed values are cut to this many bytes before they are logged or
// audited: they come from whoever wrote the message.
const (
	maxClaimBytes  = 128
	maxDetailBytes = 512
)

// refuse logs and audits a refused message and returns it as the error.
// Only a failure to audit is returned instead, so that asynq tries again
// and the refusal is on record once the database is back.
func (s *Service) refuse(ctx context.Context, r RefusedReportError) error {
	r.Type, r.Actuator = clip(r.Type, maxClaimBytes), clip(r.Actuator, maxClaimBytes)
	r.ExecutionID, r.CheckID, r.TargetID = clip(r.ExecutionID, maxClaimBytes), clip(r.CheckID, maxClaimBytes), clip(r.TargetID, maxClaimBytes)
	r.RunID = clip(r.RunID, maxClaimBytes)
	r.Detail = clip(r.Detail, maxDetailBytes)
	r.TaskID, _ = asynq.GetTaskID(ctx)
	r.TaskID = clip(r.TaskID, maxClaimBytes)
	entry := store.AuditEntry{Actor: s.cfg.Actor, Action: "report.refused", Detail: map[string]any{
		"type": r.Type, "reason": r.Reason, "detail": r.Detail, "actuator": r.Actuator, "task_id": r.TaskID,
		"execution_id": r.ExecutionID, "check_id": r.CheckID, "target_id": r.TargetID, "run_id": r.RunID,
	}}
	if id, err := uuid.Parse(r.ExecutionID); err == nil {
		entry.ExecutionID = &id
		if x, err := s.store.GetExecution(ctx, id); err == nil {
			r.RoomID = x.RoomID
		}
	}
	if id, err := uuid.Parse(r.TargetID); err == nil {
		entry.EntityID = &id
	}
	if err := s.store.AppendAudit(ctx, entry); err != nil {
		return fmt.Errorf("audit a refused %s: %w", r.Type, err)
	}
	s.logger.Warn("refused a message on the results queue", "type", r.Type, "reason", r.Reason, "execution_id", r.ExecutionID,
		"check_id", r.CheckID, "run_id", r.RunID, "actuator", r.Actuator, "task_id", r.TaskID, "detail", r.Detail)
	return &r
}

// clip cuts s to at most n bytes of valid UTF-8.
func clip(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}
