package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// RecordChecks records the results of check definitions in one
// transaction of at most eight statements, whatever their number: each
// check's latest result and signal, each target's worst latest result,
// the roll-up of the containers they touch, and every metric sample. A result
// older than the one on record does not overwrite it; of two results of
// one check, the newer counts. A result of a check that does not exist,
// or does not observe the target it names, is left out. It returns how
// many results were recorded.
func (s *Store) RecordChecks(ctx context.Context, obs []CheckObservation) (int, error) {
	batch, err := newCheckBatch(obs, s.now())
	if err != nil || len(batch.ids) == 0 {
		return 0, err
	}
	n := 0
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		n, err = batch.record(ctx, tx, s.now())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("record %d check results: %w", len(batch.ids), err)
	}
	return n, nil
}

// checkBatch is a set of check results as columns, one per check.
type checkBatch struct {
	ids, targets    []uuid.UUID
	ats             []time.Time
	health, details []string
	// samples are the metrics of every result, a superseded one's too:
	// each is a sample of its own time.
	samples []checkSamples
}

type checkSamples struct {
	check, target uuid.UUID
	at            time.Time
	metrics       map[string]float64
}

func newCheckBatch(obs []CheckObservation, now time.Time) (checkBatch, error) {
	var b checkBatch
	// A result names its check and target; one naming a target its check
	// does not observe is left out by the update, so it must not stand in
	// for the check's true result.
	type key struct{ check, target uuid.UUID }
	index := map[key]int{}
	for _, o := range obs {
		id, err := uuid.Parse(o.CheckID)
		if err != nil {
			return b, fmt.Errorf("record check: bad check id %q", o.CheckID)
		}
		target, err := uuid.Parse(o.TargetID)
		if err != nil {
			return b, fmt.Errorf("record check: bad target id %q", o.TargetID)
		}
		at := o.At
		if at.IsZero() {
			at = now
		}
		if len(o.Metrics) > 0 {
			b.samples = append(b.samples, checkSamples{id, target, at, o.Metrics})
		}
		k := key{id, target}
		if i, ok := index[k]; ok {
			if !at.Before(b.ats[i]) {
				b.ats[i], b.health[i], b.details[i] = at, o.Health, o.Detail
			}
			continue
		}
		index[k] = len(b.ids)
		b.ids, b.targets, b.ats = append(b.ids, id), append(b.targets, target), append(b.ats, at)
		b.health, b.details = append(b.health, o.Health), append(b.details, o.Detail)
	}
	return b, nil
}

func (b checkBatch) record(ctx context.Context, tx pgx.Tx, now time.Time) (int, error) {
	// Lock the checks in one order, so two batches never wait on each
	// other in a circle.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM check_defs WHERE id = ANY($1) ORDER BY id FOR UPDATE`, b.ids); err != nil {
		return 0, fmt.Errorf("lock checks: %w", err)
	}
	rows, err := tx.Query(ctx, `UPDATE check_defs c SET
			last_health = CASE WHEN c.last_result_at IS NULL OR c.last_result_at <= u.at THEN u.health ELSE c.last_health END,
			last_detail = CASE WHEN c.last_result_at IS NULL OR c.last_result_at <= u.at THEN u.detail ELSE c.last_detail END,
			last_result_at = greatest(c.last_result_at, u.at)
		FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[], $4::text[], $5::text[]) AS u(id, target_id, at, health, detail)
		WHERE c.id = u.id AND c.target_id = u.target_id
		RETURNING c.id, c.target_id, c.slug, c.last_result_at = u.at`, b.ids, b.targets, b.ats, b.health, b.details)
	if err != nil {
		return 0, fmt.Errorf("update checks: %w", err)
	}
	type recorded struct {
		slug  string
		newer bool
	}
	type key struct{ check, target uuid.UUID }
	done := map[key]recorded{}
	for rows.Next() {
		var k key
		var r recorded
		if err := rows.Scan(&k.check, &k.target, &r.slug, &r.newer); err != nil {
			return 0, fmt.Errorf("update checks: %w", err)
		}
		done[k] = r
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("update checks: %w", err)
	}

	var sig signalBatch
	var ts targetBatch
	var ms metricBatch
	for i, id := range b.ids {
		r, ok := done[key{id, b.targets[i]}]
		if !ok {
			continue
		}
		if r.newer {
			sig.add(id, b.targets[i], r.slug, b.health[i], b.details[i], b.ats[i])
		}
		ts.add(b.targets[i], b.ats[i], b.health[i], r.slug+": "+b.details[i])
	}
	for _, sm := range b.samples {
		if _, ok := done[key{sm.check, sm.target}]; !ok {
			continue
		}
		for metric, v := range sm.metrics {
			ms.entities, ms.names, ms.values, ms.ats = append(ms.entities, sm.target), append(ms.names, metric), append(ms.values, v), append(ms.ats, sm.at)
		}
	}
	if err := sig.write(ctx, tx); err != nil {
		return 0, err
	}
	if err := ts.write(ctx, tx, now); err != nil {
		return 0, err
	}
	if len(ms.entities) > 0 {
		_, err := tx.Exec(ctx, `INSERT INTO metric_samples (entity_id, metric, value, at)
			SELECT * FROM unnest($1::uuid[], $2::text[], $3::float8[], $4::timestamptz[])
			ON CONFLICT DO NOTHING`, ms.entities, ms.names, ms.values, ms.ats)
		if err != nil {
			return 0, fmt.Errorf("record metrics: %w", err)
		}
	}
	return len(done), nil
}

// signalBatch are the signals a batch raises and resolves.
type signalBatch struct {
	raiseIDs, raiseEntities, raiseChecks    []uuid.UUID
	raiseKinds, raiseSeverities, raiseTexts []string
	raiseAts                                []time.Time
	resolveEntities                         []uuid.UUID
	resolveKinds                            []string
	resolveAts                              []time.Time
}

func (c *signalBatch) add(checkID, targetID uuid.UUID, slug, health, detail string, at time.Time) {
	kind := "check:" + slug
	severity := map[string]string{"unhealthy": "critical", "degraded": "warning"}[health]
	if severity == "" {
		c.resolveEntities, c.resolveKinds, c.resolveAts = append(c.resolveEntities, targetID), append(c.resolveKinds, kind), append(c.resolveAts, at)
		return
	}
	c.raiseIDs, c.raiseEntities, c.raiseChecks = append(c.raiseIDs, newID()), append(c.raiseEntities, targetID), append(c.raiseChecks, checkID)
	c.raiseKinds, c.raiseSeverities, c.raiseTexts = append(c.raiseKinds, kind), append(c.raiseSeverities, severity), append(c.raiseTexts, slug+": "+detail)
	c.raiseAts = append(c.raiseAts, at)
}

// write opens, updates or resolves the signal of each check, as
// checkSignal does for one.
func (c *signalBatch) write(ctx context.Context, tx pgx.Tx) error {
	if len(c.resolveEntities) > 0 {
		_, err := tx.Exec(ctx, `UPDATE signals s SET state = 'resolved', resolved_at = u.at
			FROM unnest($1::uuid[], $2::text[], $3::timestamptz[]) AS u(entity_id, kind, at)
			WHERE s.entity_id = u.entity_id AND s.kind = u.kind AND s.state IN ('raised', 'acknowledged', 'acting')`,
			c.resolveEntities, c.resolveKinds, c.resolveAts)
		if err != nil {
			return fmt.Errorf("resolve signals: %w", err)
		}
	}
	if len(c.raiseIDs) > 0 {
		// A container stopped on purpose (health "stopped") fails its
		// checks, and its services theirs, because it is off: that pages
		// nobody.
		_, err := tx.Exec(ctx, `INSERT INTO signals (id, entity_id, check_id, kind, severity, summary, raised_at)
			SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::timestamptz[])
				AS u(id, entity_id, check_id, kind, severity, summary, raised_at)
			WHERE NOT EXISTS (SELECT 1 FROM entity_status st
				WHERE st.health = 'stopped' AND (st.entity_id = u.entity_id
					OR st.entity_id IN (SELECT r.from_id FROM relationships r WHERE r.to_id = u.entity_id AND r.type = 'runs')))
			ON CONFLICT (entity_id, kind) WHERE state IN ('raised', 'acknowledged', 'acting')
			DO UPDATE SET severity = excluded.severity, summary = excluded.summary`,
			c.raiseIDs, c.raiseEntities, c.raiseChecks, c.raiseKinds, c.raiseSeverities, c.raiseTexts, c.raiseAts)
		if err != nil {
			return fmt.Errorf("raise signals: %w", err)
		}
	}
	return nil
}

// targetBatch are the targets a batch touched: each with the time of
// its newest result, and that result's health and detail for a target
// that has no enabled check to speak for it.
type targetBatch struct {
	ids     []uuid.UUID
	ats     []time.Time
	health  []string
	details []string
	index   map[uuid.UUID]int
}

func (c *targetBatch) add(id uuid.UUID, at time.Time, health, detail string) {
	if c.index == nil {
		c.index = map[uuid.UUID]int{}
	}
	if i, ok := c.index[id]; ok {
		if !at.Before(c.ats[i]) {
			c.ats[i], c.health[i], c.details[i] = at, health, detail
		}
		return
	}
	c.index[id] = len(c.ids)
	c.ids, c.ats, c.health, c.details = append(c.ids, id), append(c.ats, at), append(c.health, health), append(c.details, detail)
}

// write sets each target's health to the worst latest result among its
// enabled checks, a check that went quiet counting as stale (a fresh
// healthy result of one check never hides another that stopped
// answering), then rolls up the containers it is or runs in.
func (c *targetBatch) write(ctx context.Context, tx pgx.Tx, now time.Time) error {
	if len(c.ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO entity_status (entity_id, health, detail, last_check_at, updated_at)
		SELECT t.id, coalesce(w.health, t.health), coalesce(w.detail, t.detail), t.at, t.at
		FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::text[]) AS t(id, at, health, detail)
		LEFT JOIN LATERAL (SELECT `+checkHealth("$5")+` AS health,
				CASE WHEN `+checkQuiet("$5")+` THEN `+quietDetail()+` ELSE cd.slug || ': ' || cd.last_detail END AS detail
			FROM check_defs cd
			WHERE cd.target_id = t.id AND cd.enabled AND cd.last_health IS NOT NULL
			ORDER BY array_position(ARRAY['unhealthy', 'degraded', 'stale', 'healthy'], `+checkHealth("$5")+`), cd.last_result_at DESC
			LIMIT 1) w ON true
		ORDER BY t.id
		ON CONFLICT (entity_id) DO UPDATE SET health = excluded.health, detail = excluded.detail,
			last_check_at = greatest(entity_status.last_check_at, excluded.last_check_at),
			updated_at = greatest(entity_status.updated_at, excluded.updated_at)`,
		c.ids, c.ats, c.health, c.details, now)
	if err != nil {
		return fmt.Errorf("record target health: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT id FROM entities WHERE id = ANY($1) AND type = 'lxc'
		UNION SELECT from_id FROM relationships WHERE to_id = ANY($1) AND type = 'runs'`, c.ids)
	if err != nil {
		return fmt.Errorf("containers of %d targets: %w", len(c.ids), err)
	}
	containers, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return fmt.Errorf("containers of %d targets: %w", len(c.ids), err)
	}
	slices.SortFunc(containers, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	_, err = rollUp(ctx, tx, containers, now)
	return err
}

// metricBatch are a batch's metric samples.
type metricBatch struct {
	entities []uuid.UUID
	names    []string
	values   []float64
	ats      []time.Time
}
