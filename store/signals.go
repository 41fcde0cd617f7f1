package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Signal is something about an entity that needs attention: a failing
// check (kind check:<slug>, raised as its result is recorded) or a firing
// Alertmanager alert (kind ExternalKindPrefix and the alert's name).
type Signal struct {
	ID         uuid.UUID
	EntitySlug string
	Kind       string
	Severity   string // info, warning or critical
	State      string // raised, acknowledged, acting, resolved or muted
	Summary    string
	RaisedAt   time.Time
	ResolvedAt *time.Time
	// AcknowledgedBy is the operator who acknowledged it; empty if none.
	AcknowledgedBy string
	// MutedUntil, when set, is until when no new alert of this kind on
	// this entity is announced; MutedBy asked for it.
	MutedUntil *time.Time
	MutedBy    string
}

// Muted reports whether the signal's mute still holds at now.
func (s Signal) Muted(now time.Time) bool {
	return s.MutedUntil != nil && now.Before(*s.MutedUntil)
}

// Open reports whether the signal still needs attention.
func (s Signal) Open() bool {
	return s.State == "raised" || s.State == "acknowledged" || s.State == "acting"
}

const signalColumns = `g.id, e.slug, g.kind, g.severity, g.state, g.summary, g.raised_at, g.resolved_at,
	coalesce(g.acknowledged_by, ''), g.muted_until, coalesce(g.muted_by, '')`

func (g *Signal) scanTargets() []any {
	return []any{&g.ID, &g.EntitySlug, &g.Kind, &g.Severity, &g.State, &g.Summary, &g.RaisedAt, &g.ResolvedAt,
		&g.AcknowledgedBy, &g.MutedUntil, &g.MutedBy}
}

func scanSignal(row pgx.Row) (Signal, error) {
	var g Signal
	err := row.Scan(g.scanTargets()...)
	return g, interpretError(err)
}

// SignalFilter selects signals for ListSignals.
type SignalFilter struct {
	// EntityID keeps one entity's signals; nil means every entity.
	EntityID *uuid.UUID
	// Since also keeps closed signals raised or resolved at or after it;
	// zero keeps open signals only.
	Since time.Time
	// Limit bounds the result; 0 means 100.
	Limit int
}

// ListSignals returns the open signals, then the closed ones the filter
// keeps: open first, then by severity (critical first), newest first.
func (s *Store) ListSignals(ctx context.Context, f SignalFilter) ([]Signal, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	var since *time.Time
	if !f.Since.IsZero() {
		since = &f.Since
	}
	rows, err := s.pool.Query(ctx, `SELECT `+signalColumns+`
		FROM signals g JOIN entities e ON e.id = g.entity_id
		WHERE ($1::uuid IS NULL OR g.entity_id = $1)
		  AND (g.state IN ('raised', 'acknowledged', 'acting')
		       OR ($2::timestamptz IS NOT NULL AND (g.raised_at >= $2 OR g.resolved_at >= $2)))
		ORDER BY g.state IN ('raised', 'acknowledged', 'acting') DESC,
		         array_position(ARRAY['critical', 'warning', 'info'], g.severity),
		         g.raised_at DESC
		LIMIT $3`, f.EntityID, since, limit)
	if err != nil {
		return nil, fmt.Errorf("list signals: %w", err)
	}
	defer rows.Close()
	var out []Signal
	for rows.Next() {
		g, err := scanSignal(rows)
		if err != nil {
			return nil, fmt.Errorf("list signals: %w", err)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// NewSignal is a signal to raise.
type NewSignal struct {
	EntityID uuid.UUID
	Kind     string
	Severity string
	Summary  string
	// At is when it was observed; zero means now.
	At time.Time
}

// RaiseSignal opens a signal. An entity has at most one open signal of a
// kind: raising it again returns the open one and false.
func (s *Store) RaiseSignal(ctx context.Context, n NewSignal) (Signal, bool, error) {
	at := n.At
	if at.IsZero() {
		at = s.now()
	}
	id := newID()
	tag, err := s.pool.Exec(ctx, `INSERT INTO signals (id, entity_id, kind, severity, summary, raised_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (entity_id, kind) WHERE state IN ('raised', 'acknowledged', 'acting') DO NOTHING`,
		id, n.EntityID, n.Kind, n.Severity, n.Summary, at)
	if err != nil {
		return Signal{}, false, fmt.Errorf("raise %s signal on %s: %w", n.Kind, n.EntityID, err)
	}
	g, err := scanSignal(s.pool.QueryRow(ctx, `SELECT `+signalColumns+`
		FROM signals g JOIN entities e ON e.id = g.entity_id
		WHERE g.entity_id = $1 AND g.kind = $2 AND g.state IN ('raised', 'acknowledged', 'acting')`, n.EntityID, n.Kind))
	if err != nil {
		return Signal{}, false, fmt.Errorf("raise %s signal on %s: %w", n.Kind, n.EntityID, err)
	}
	return g, tag.RowsAffected() == 1, nil
}

// ResolveSignal closes an entity's open signal of a kind. It returns
// ErrNotFound when none is open.
func (s *Store) ResolveSignal(ctx context.Context, entityID uuid.UUID, kind string, at time.Time) error {
	if at.IsZero() {
		at = s.now()
	}
	tag, err := s.pool.Exec(ctx, `UPDATE signals SET state = 'resolved', resolved_at = $3
		WHERE entity_id = $1 AND kind = $2 AND state IN ('raised', 'acknowledged', 'acting')`, entityID, kind, at)
	if err != nil {
		return fmt.Errorf("resolve %s signal on %s: %w", kind, entityID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("resolve %s signal on %s: %w", kind, entityID, ErrNotFound)
	}
	return nil
}

// SignalAlert is a signal with what the bot posted about it.
type SignalAlert struct {
	Signal
	EntityID uuid.UUID
	RoomID   string
	EventID  string
}

const signalAlertColumns = signalColumns + `, g.entity_id, coalesce(g.alert_room_id, ''), coalesce(g.alert_event_id, '')`

func scanSignalAlert(row pgx.Row) (SignalAlert, error) {
	var a SignalAlert
	err := row.Scan(append(a.scanTargets(), &a.EntityID, &a.RoomID, &a.EventID)...)
	return a, interpretError(err)
}

// SignalsToAnnounce lists what the bot has yet to say: open warning and
// critical signals never announced, raised at or before raisedBy, whose
// entity and kind no operator has muted past now (and, for an external
// signal, whose entity has no announced open signal of Nomos's own), and
// announced signals that have since resolved without a note. Oldest first.
func (s *Store) SignalsToAnnounce(ctx context.Context, raisedBy time.Time) ([]SignalAlert, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+signalAlertColumns+`
		FROM signals g JOIN entities e ON e.id = g.entity_id
		WHERE (g.state = 'raised' AND g.severity IN ('warning', 'critical') AND g.alerted_at IS NULL AND g.raised_at <= $1
		       AND NOT EXISTS (SELECT 1 FROM signals m WHERE m.entity_id = g.entity_id AND m.kind = g.kind
		                       AND m.muted_until IS NOT NULL AND m.muted_until > $2)
		       AND NOT (starts_with(g.kind, $3) AND EXISTS (SELECT 1 FROM signals o
		                       WHERE o.entity_id = g.entity_id AND NOT starts_with(o.kind, $3)
		                         AND o.state IN ('raised', 'acknowledged', 'acting') AND o.alert_event_id IS NOT NULL)))
		   OR (g.state = 'resolved' AND g.alert_event_id IS NOT NULL AND g.resolve_noted_at IS NULL)
		ORDER BY coalesce(g.resolved_at, g.raised_at), g.id
		LIMIT 100`, raisedBy, s.now(), ExternalKindPrefix)
	if err != nil {
		return nil, fmt.Errorf("signals to announce: %w", err)
	}
	defer rows.Close()
	var out []SignalAlert
	for rows.Next() {
		a, err := scanSignalAlert(rows)
		if err != nil {
			return nil, fmt.Errorf("signals to announce: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// ClaimSignalAlert marks a signal as announced; only the first caller gets
// true. Claim before posting, so a restart never announces it twice.
func (s *Store) ClaimSignalAlert(ctx context.Context, id uuid.UUID) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE signals SET alerted_at = $2 WHERE id = $1 AND alerted_at IS NULL`, id, s.now())
	if err != nil {
		return false, fmt.Errorf("claim alert of signal %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// UnclaimSignalAlert takes back a claim whose message could not be posted,
// so the next pass tries again: a lost alert is worse than a late one.
func (s *Store) UnclaimSignalAlert(ctx context.Context, id uuid.UUID) error {
	_, err := s.pool.Exec(ctx, `UPDATE signals SET alerted_at = NULL WHERE id = $1 AND alert_event_id IS NULL`, id)
	if err != nil {
		return fmt.Errorf("unclaim alert of signal %s: %w", id, err)
	}
	return nil
}

// UnclaimResolveNote takes back a claimed resolve note that could not be
// posted.
func (s *Store) UnclaimResolveNote(ctx context.Context, id uuid.UUID) error {
	_, err := s.pool.Exec(ctx, `UPDATE signals SET resolve_noted_at = NULL WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("unclaim resolve note of signal %s: %w", id, err)
	}
	return nil
}

// SetSignalAlertEvent records the message that announced a signal.
func (s *Store) SetSignalAlertEvent(ctx context.Context, id uuid.UUID, roomID, eventID string) error {
	_, err := s.pool.Exec(ctx, `UPDATE signals SET alert_room_id = $2, alert_event_id = $3 WHERE id = $1`, id, roomID, eventID)
	if err != nil {
		return fmt.Errorf("record alert of signal %s: %w", id, err)
	}
	return nil
}

// ClaimResolveNote marks an announced signal's resolution as noted; only
// the first caller gets true.
func (s *Store) ClaimResolveNote(ctx context.Context, id uuid.UUID) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE signals SET resolve_noted_at = $2
		WHERE id = $1 AND state = 'resolved' AND resolve_noted_at IS NULL`, id, s.now())
	if err != nil {
		return false, fmt.Errorf("claim resolve note of signal %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// AnnouncedSince reports whether another signal of the same kind on the
// same entity was announced at or after since: a check that flaps is
// announced once per window, not at every swing.
func (s *Store) AnnouncedSince(ctx context.Context, a SignalAlert, since time.Time) (bool, error) {
	var found bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM signals
		WHERE entity_id = $1 AND kind = $2 AND id <> $3 AND alert_event_id IS NOT NULL AND alerted_at >= $4)`,
		a.EntityID, a.Kind, a.ID, since).Scan(&found)
	if err != nil {
		return false, fmt.Errorf("earlier alerts of %s on %s: %w", a.Kind, a.EntitySlug, err)
	}
	return found, nil
}

// SignalByAlert finds the signal whose announcement is eventID in roomID.
// It returns ErrNotFound for any other message.
func (s *Store) SignalByAlert(ctx context.Context, roomID, eventID string) (SignalAlert, error) {
	a, err := scanSignalAlert(s.pool.QueryRow(ctx, `SELECT `+signalAlertColumns+`
		FROM signals g JOIN entities e ON e.id = g.entity_id
		WHERE g.alert_room_id = $1 AND g.alert_event_id = $2`, roomID, eventID))
	if err != nil {
		return SignalAlert{}, fmt.Errorf("signal announced as %s: %w", eventID, err)
	}
	return a, nil
}

// AcknowledgeSignal moves a raised signal to acknowledged, recording by
// whom, and audits it. It reports false, changing nothing, when the signal
// is not raised (already acknowledged, or resolved).
func (s *Store) AcknowledgeSignal(ctx context.Context, id uuid.UUID, by string) (bool, error) {
	changed := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var entity uuid.UUID
		err := tx.QueryRow(ctx, `UPDATE signals SET state = 'acknowledged', acknowledged_by = $2, acknowledged_at = $3
			WHERE id = $1 AND state = 'raised' RETURNING entity_id`, id, by, s.now()).Scan(&entity)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		changed = true
		return audit(ctx, tx, AuditEntry{Actor: by, Action: "signal.acknowledged", EntityID: &entity, Detail: map[string]any{"signal_id": id.String()}})
	})
	if err != nil {
		return false, fmt.Errorf("acknowledge signal %s: %w", id, err)
	}
	return changed, nil
}

// MuteSignal records that no new alert of the signal's kind on its entity
// is to be announced before until, and audits it. A later mute replaces
// an earlier one, so an operator can also shorten a mute.
func (s *Store) MuteSignal(ctx context.Context, id uuid.UUID, by string, until time.Time) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var entity uuid.UUID
		err := tx.QueryRow(ctx, `UPDATE signals SET muted_until = $2, muted_by = $3 WHERE id = $1 RETURNING entity_id`, id, until, by).Scan(&entity)
		if err != nil {
			return interpretError(err)
		}
		return audit(ctx, tx, AuditEntry{Actor: by, Action: "signal.muted", EntityID: &entity,
			Detail: map[string]any{"signal_id": id.String(), "muted_until": until.UTC().Format(time.RFC3339)}})
	})
	if err != nil {
		return fmt.Errorf("mute signal %s: %w", id, err)
	}
	return nil
}
