package executions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// applyCheckResults applies a batch of probe results (tasks.TypeCheckResults)
// as one write. Each result is verified and checked on its own, as a lone
// one would be; the ones refused are audited and left out, and the
// refusals are returned, joined, once the rest are stored, so a forged
// result neither holds up the batch nor goes unremarked.
func (s *Service) applyCheckResults(ctx context.Context, payload []byte) error {
	payloads, err := tasks.SplitCheckResults(payload)
	if err != nil {
		return s.refuse(ctx, RefusedReportError{Type: tasks.TypeCheckResults, Reason: RefusedMalformed, Detail: err.Error()})
	}
	var refusals []error
	refuse := func(err error) {
		refusals = append(refusals, err)
	}
	var results []tasks.CheckResult
	var ids []uuid.UUID
	for _, p := range payloads {
		c, err := tasks.VerifyCheckResult(s.reportKeys, p)
		if err != nil {
			refuse(s.refuseUnverified(ctx, tasks.TypeCheckResult, p, err))
			continue
		}
		if err := s.checkActuator(ctx, tasks.TypeCheckResult, tasks.Claims{CheckID: c.CheckID, TargetID: c.TargetID, Actuator: c.Actuator}); err != nil {
			refuse(err)
			continue
		}
		checkID, err1 := uuid.Parse(c.CheckID)
		_, err2 := uuid.Parse(c.TargetID)
		if err1 != nil || err2 != nil {
			refuse(s.refuse(ctx, RefusedReportError{Type: tasks.TypeCheckResult, CheckID: c.CheckID, TargetID: c.TargetID, Actuator: c.Actuator,
				Reason: RefusedMalformed, Detail: "the check id or target id is not a uuid"}))
			continue
		}
		results = append(results, c)
		ids = append(ids, checkID)
	}
	records, err := s.store.ChecksByID(ctx, ids)
	if err != nil {
		return err
	}
	obs := make([]store.CheckObservation, 0, len(results))
	for _, c := range results {
		if err := s.admitCheckResult(ctx, c, records); err != nil {
			refuse(err)
			continue
		}
		obs = append(obs, store.CheckObservation{
			CheckID: c.CheckID, TargetID: c.TargetID, Health: c.Health, Detail: c.Detail, Metrics: c.Metrics, At: c.At,
		})
	}
	if _, err := s.store.RecordChecks(ctx, obs); err != nil {
		return err
	}
	// A failure to audit a refusal is returned first: asynq tries the
	// batch again, and RecordChecks keeps what it stored.
	for _, err := range refusals {
		var refused *RefusedReportError
		if !errors.As(err, &refused) {
			return err
		}
	}
	return errors.Join(refusals...)
}

// admitCheckResult refuses a verified probe result of a check the bot does
// not have, for another target than the check's, or no newer than the one
// on record.
func (s *Service) admitCheckResult(ctx context.Context, c tasks.CheckResult, records map[uuid.UUID]store.CheckRecord) error {
	ref := RefusedReportError{Type: tasks.TypeCheckResult, CheckID: c.CheckID, TargetID: c.TargetID, Actuator: c.Actuator}
	rec, ok := records[uuid.MustParse(c.CheckID)]
	if !ok {
		ref.Reason, ref.Detail = RefusedNotDispatched, "there is no such check"
		return s.refuse(ctx, ref)
	}
	if rec.TargetID.String() != c.TargetID {
		ref.Reason, ref.Detail = RefusedNotDispatched, fmt.Sprintf("check %s observes %s, not %s", rec.Slug, rec.TargetID, c.TargetID)
		return s.refuse(ctx, ref)
	}
	// Postgres keeps microseconds.
	if at := c.At.Truncate(time.Microsecond); rec.LastResultAt != nil && !at.After(*rec.LastResultAt) {
		ref.Reason, ref.Detail = RefusedReplayed, fmt.Sprintf("a result of %s from %s, and one from %s is on record",
			rec.Slug, at.UTC().Format(time.RFC3339Nano), rec.LastResultAt.UTC().Format(time.RFC3339Nano))
		return s.refuse(ctx, ref)
	}
	return nil
}
