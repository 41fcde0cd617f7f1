package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Window is a maintenance window: while it is open, alerts and signals
// for its targets are held back (recorded, not paged) and summed up in
// one notice when it ends.
type Window struct {
	ID uuid.UUID
	// Name is a config window's name, or a short code for one opened in
	// the room.
	Name string
	// TargetIDs are the entities it covers, resolved when it was opened;
	// TargetSlugs name them, in the same order.
	TargetIDs   []uuid.UUID
	TargetSlugs []string
	Reason      string
	OpenedBy    string
	RoomID      string
	StartsAt    time.Time
	EndsAt      time.Time
	// EndedAt is set once the window is over and closed, by time or by an
	// operator (EndedBy).
	EndedAt *time.Time
	EndedBy string
	// Standing is the window's standing approval, if one was asked for.
	Standing *StandingApproval
}

// Open reports whether the window holds at now.
func (w Window) Open(now time.Time) bool {
	return w.EndedAt == nil && !now.Before(w.StartsAt) && now.Before(w.EndsAt)
}

// Covers reports whether the window names entity id.
func (w Window) Covers(id uuid.UUID) bool { return slices.Contains(w.TargetIDs, id) }

// StandingApproval lets plans on its window's targets, up to MaxClass
// (never destructive), run without a per-plan approval while it holds:
// once Quorum operators have typed its phrase, until it expires or its
// window ends.
type StandingApproval struct {
	ID       uuid.UUID
	WindowID uuid.UUID
	// Code is the short code its phrase ends in.
	Code string
	// MaxClass is the highest risk class it approves.
	MaxClass string
	// TargetIDs are its window's targets, copied when it was asked for.
	TargetIDs []uuid.UUID
	// Schedules are the schedules that may run under it, besides
	// operators' own plans in the room.
	Schedules   []string
	RequestedBy string
	ApprovedBy  []string
	Quorum      int
	ApprovedAt  *time.Time
	ExpiresAt   time.Time
	RevokedAt   *time.Time
}

// Holds reports whether the standing approval approves plans at now.
func (a StandingApproval) Holds(now time.Time) bool {
	return a.ApprovedAt != nil && a.RevokedAt == nil && now.Before(a.ExpiresAt) && a.MaxClass != "destructive"
}

// NewWindow is a window to open.
type NewWindow struct {
	Name        string
	TargetIDs   []uuid.UUID
	TargetSlugs []string
	Reason      string
	OpenedBy    string
	RoomID      string
	StartsAt    time.Time
	EndsAt      time.Time
	// Standing, when set, asks for a standing approval over the window.
	Standing *NewStanding
}

// NewStanding asks for a standing approval with a window.
type NewStanding struct {
	Code      string
	MaxClass  string
	Schedules []string
	Quorum    int
}

// ErrDestructiveStanding refuses a standing approval for destructive
// plans: those always need their own typed phrase.
var ErrDestructiveStanding = errors.New("a standing approval never covers destructive plans")

const windowColumns = `w.id, w.name, w.target_ids, w.target_slugs, w.reason, w.opened_by, w.room_id, w.starts_at, w.ends_at,
	w.ended_at, coalesce(w.ended_by, ''),
	sa.id, sa.code, sa.max_class, sa.target_ids, sa.schedules, sa.requested_by, sa.approved_by, sa.quorum,
	sa.approved_at, sa.expires_at, sa.revoked_at`

const windowFrom = `maintenance_windows w LEFT JOIN standing_approvals sa ON sa.window_id = w.id`

func scanWindow(row pgx.Row) (Window, error) {
	var w Window
	var saID *uuid.UUID
	var code, class, reqBy *string
	var saTargets []uuid.UUID
	var schedules, approvedBy []string
	var quorum *int
	var approvedAt, expiresAt, revokedAt *time.Time
	err := row.Scan(&w.ID, &w.Name, &w.TargetIDs, &w.TargetSlugs, &w.Reason, &w.OpenedBy, &w.RoomID, &w.StartsAt, &w.EndsAt,
		&w.EndedAt, &w.EndedBy, &saID, &code, &class, &saTargets, &schedules, &reqBy, &approvedBy, &quorum,
		&approvedAt, &expiresAt, &revokedAt)
	if err != nil {
		return Window{}, interpretError(err)
	}
	if saID != nil {
		w.Standing = &StandingApproval{ID: *saID, WindowID: w.ID, Code: *code, MaxClass: *class, TargetIDs: saTargets,
			Schedules: schedules, RequestedBy: *reqBy, ApprovedBy: approvedBy, Quorum: *quorum, ApprovedAt: approvedAt,
			ExpiresAt: *expiresAt, RevokedAt: revokedAt}
	}
	return w, nil
}

func (s *Store) queryWindows(ctx context.Context, what, where string, args ...any) ([]Window, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+windowColumns+` FROM `+windowFrom+` WHERE `+where+` ORDER BY w.starts_at, w.id LIMIT 100`, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Window, error) { return scanWindow(r) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// OpenWindow records a window, and its standing approval when one is
// asked for, with an audit row. A config window's occurrence (its name
// and start) is recorded once: opened reports whether this call did.
func (s *Store) OpenWindow(ctx context.Context, n NewWindow) (w Window, opened bool, err error) {
	if n.Standing != nil && n.Standing.MaxClass == "destructive" {
		return Window{}, false, ErrDestructiveStanding
	}
	id := uuid.Must(uuid.NewV7())
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO maintenance_windows (id, name, target_ids, target_slugs, reason, opened_by, room_id, starts_at, ends_at, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (name, starts_at) DO NOTHING`,
			id, n.Name, n.TargetIDs, n.TargetSlugs, n.Reason, n.OpenedBy, n.RoomID, n.StartsAt, n.EndsAt, s.now())
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		opened = true
		detail := map[string]any{"window_id": id.String(), "name": n.Name, "targets": n.TargetSlugs, "reason": n.Reason,
			"starts_at": n.StartsAt, "ends_at": n.EndsAt}
		if n.Standing != nil {
			if _, err := tx.Exec(ctx, `INSERT INTO standing_approvals (id, window_id, code, max_class, target_ids, schedules, requested_by, quorum, expires_at, created_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
				uuid.Must(uuid.NewV7()), id, n.Standing.Code, n.Standing.MaxClass, n.TargetIDs, nonNilStrings(n.Standing.Schedules),
				n.OpenedBy, max(n.Standing.Quorum, 1), n.EndsAt, s.now()); err != nil {
				return err
			}
			detail["standing_max_class"], detail["standing_code"] = n.Standing.MaxClass, n.Standing.Code
		}
		return audit(ctx, tx, AuditEntry{Actor: n.OpenedBy, Action: "window.opened", Detail: detail})
	})
	if err != nil {
		return Window{}, false, fmt.Errorf("open window %s: %w", n.Name, err)
	}
	w, err = scanWindow(s.pool.QueryRow(ctx, `SELECT `+windowColumns+` FROM `+windowFrom+` WHERE w.name = $1 AND w.starts_at = $2`, n.Name, n.StartsAt))
	if err != nil {
		return Window{}, false, fmt.Errorf("load window %s: %w", n.Name, err)
	}
	return w, opened, nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// OpenWindows lists the windows open at now, with their standing
// approvals.
func (s *Store) OpenWindows(ctx context.Context, now time.Time) ([]Window, error) {
	return s.queryWindows(ctx, "open windows", `w.ended_at IS NULL AND w.starts_at <= $1 AND w.ends_at > $1`, now)
}

// WindowsToClose lists the windows whose time is up at now but that are
// not closed yet.
func (s *Store) WindowsToClose(ctx context.Context, now time.Time) ([]Window, error) {
	return s.queryWindows(ctx, "windows to close", `w.ended_at IS NULL AND w.ends_at <= $1`, now)
}

// WindowsToSum lists the closed windows whose summary is not posted yet.
func (s *Store) WindowsToSum(ctx context.Context) ([]Window, error) {
	return s.queryWindows(ctx, "windows to sum up", `w.ended_at IS NOT NULL AND w.summary_event_id IS NULL`)
}

// WindowByID loads one window.
func (s *Store) WindowByID(ctx context.Context, id uuid.UUID) (Window, error) {
	w, err := scanWindow(s.pool.QueryRow(ctx, `SELECT `+windowColumns+` FROM `+windowFrom+` WHERE w.id = $1`, id))
	if err != nil {
		return Window{}, fmt.Errorf("load window %s: %w", id, err)
	}
	return w, nil
}

// WindowByStanding loads the window of the standing approval id.
func (s *Store) WindowByStanding(ctx context.Context, id uuid.UUID) (Window, error) {
	w, err := scanWindow(s.pool.QueryRow(ctx, `SELECT `+windowColumns+` FROM `+windowFrom+` WHERE sa.id = $1`, id))
	if err != nil {
		return Window{}, fmt.Errorf("load the window of standing approval %s: %w", id, err)
	}
	return w, nil
}

// CloseWindow ends an open window at now (early, when an operator ends
// it) and revokes its standing approval, with an audit row. It reports
// false when the window was already closed.
func (s *Store) CloseWindow(ctx context.Context, id uuid.UUID, by string, now time.Time) (bool, error) {
	closed := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE maintenance_windows SET ended_at = $3, ended_by = $2, ends_at = least(ends_at, greatest($3, starts_at + interval '1 microsecond'))
			WHERE id = $1 AND ended_at IS NULL`, id, by, now)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		closed = true
		if _, err := tx.Exec(ctx, `UPDATE standing_approvals SET revoked_at = $2 WHERE window_id = $1 AND revoked_at IS NULL`, id, now); err != nil {
			return err
		}
		return audit(ctx, tx, AuditEntry{Actor: by, Action: "window.closed", Detail: map[string]any{"window_id": id.String()}})
	})
	if err != nil {
		return false, fmt.Errorf("close window %s: %w", id, err)
	}
	return closed, nil
}

// ClaimWindowSummary claims the posting of a closed window's summary;
// only the first caller gets true. UnclaimWindowSummary gives it back
// when it could not be posted; SetWindowSummaryEvent records it.
func (s *Store) ClaimWindowSummary(ctx context.Context, id uuid.UUID) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE maintenance_windows SET summary_event_id = '' WHERE id = $1 AND ended_at IS NOT NULL AND summary_event_id IS NULL`, id)
	if err != nil {
		return false, fmt.Errorf("claim the summary of window %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// UnclaimWindowSummary gives back a claimed summary that was not posted.
func (s *Store) UnclaimWindowSummary(ctx context.Context, id uuid.UUID) error {
	if _, err := s.pool.Exec(ctx, `UPDATE maintenance_windows SET summary_event_id = NULL WHERE id = $1 AND summary_event_id = ''`, id); err != nil {
		return fmt.Errorf("unclaim the summary of window %s: %w", id, err)
	}
	return nil
}

// SetWindowSummaryEvent records the message that summed a window up.
func (s *Store) SetWindowSummaryEvent(ctx context.Context, id uuid.UUID, eventID string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE maintenance_windows SET summary_event_id = $2 WHERE id = $1`, id, eventID); err != nil {
		return fmt.Errorf("record the summary of window %s: %w", id, err)
	}
	return nil
}

// HoldSignal records that a signal was held back by a window instead of
// announced: it counts as claimed, so it is never paged later, and the
// window's summary names it. Only the first caller gets true.
func (s *Store) HoldSignal(ctx context.Context, signal, window uuid.UUID) (bool, error) {
	held := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var entity uuid.UUID
		err := tx.QueryRow(ctx, `UPDATE signals SET alerted_at = $3, held_by_window = $2 WHERE id = $1 AND alerted_at IS NULL RETURNING entity_id`,
			signal, window, s.now()).Scan(&entity)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		held = true
		return audit(ctx, tx, AuditEntry{Actor: "nomos", Action: "signal.held", EntityID: &entity,
			Detail: map[string]any{"signal_id": signal.String(), "window_id": window.String()}})
	})
	if err != nil {
		return false, fmt.Errorf("hold signal %s: %w", signal, err)
	}
	return held, nil
}

// HeldSignals lists the signals a window held back, oldest first.
func (s *Store) HeldSignals(ctx context.Context, window uuid.UUID) ([]Signal, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+signalColumns+` FROM signals g JOIN entities e ON e.id = g.entity_id
		WHERE g.held_by_window = $1 ORDER BY g.raised_at, g.id LIMIT 100`, window)
	if err != nil {
		return nil, fmt.Errorf("signals held by window %s: %w", window, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Signal, error) { return scanSignal(r) })
	if err != nil {
		return nil, fmt.Errorf("signals held by window %s: %w", window, err)
	}
	return out, nil
}

// StandingVote is the outcome of an operator's phrase for a standing
// approval.
type StandingVote struct {
	Approval StandingApproval
	// Approved is true when this vote completed the quorum.
	Approved bool
}

// ErrStandingClosed refuses a vote on a standing approval that is
// already approved, revoked or expired, or whose window has ended.
var ErrStandingClosed = errors.New("the standing approval is no longer waiting for approval")

// ErrAlreadyApprovedStanding refuses a second vote by the same operator.
var ErrAlreadyApprovedStanding = errors.New("this operator already approved the standing approval")

// VoteStanding records an operator's typed phrase for the standing
// approval id, in one conditional write; the vote that completes its
// quorum approves it. A vote on one closed (ErrStandingClosed) or from an
// operator who already voted (ErrAlreadyApprovedStanding) changes nothing.
func (s *Store) VoteStanding(ctx context.Context, id uuid.UUID, by, eventID string, now time.Time) (StandingVote, error) {
	var out StandingVote
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var approvedBy []string
		var quorum int
		var approvedAt *time.Time
		err := tx.QueryRow(ctx, `UPDATE standing_approvals sa SET approved_by = array_append(sa.approved_by, $2),
				approved_at = CASE WHEN cardinality(sa.approved_by) + 1 >= sa.quorum THEN $3::timestamptz END
			FROM maintenance_windows w
			WHERE sa.id = $1 AND w.id = sa.window_id AND w.ended_at IS NULL AND w.ends_at > $3
			  AND sa.approved_at IS NULL AND sa.revoked_at IS NULL AND sa.expires_at > $3 AND sa.max_class <> 'destructive'
			  AND NOT ($2 = ANY (sa.approved_by))
			RETURNING sa.approved_by, sa.quorum, sa.approved_at`, id, by, now).Scan(&approvedBy, &quorum, &approvedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			var voted bool
			if err := tx.QueryRow(ctx, `SELECT $2 = ANY (approved_by) AND approved_at IS NULL FROM standing_approvals WHERE id = $1`, id, by).Scan(&voted); err == nil && voted {
				return ErrAlreadyApprovedStanding
			}
			return ErrStandingClosed
		}
		if err != nil {
			return err
		}
		out.Approved = approvedAt != nil
		action := "standing.vote"
		if out.Approved {
			action = "standing.approved"
		}
		return audit(ctx, tx, AuditEntry{Actor: by, Action: action, Detail: map[string]any{"standing_approval_id": id.String(),
			"event_id": eventID, "votes": len(approvedBy), "quorum": quorum}})
	})
	if err != nil {
		return StandingVote{}, fmt.Errorf("approve standing approval %s: %w", id, err)
	}
	w, err := scanWindow(s.pool.QueryRow(ctx, `SELECT `+windowColumns+` FROM `+windowFrom+` WHERE sa.id = $1`, id))
	if err != nil {
		return StandingVote{}, fmt.Errorf("load standing approval %s: %w", id, err)
	}
	out.Approval = *w.Standing
	return out, nil
}

// standingHolds reports, inside a transaction that creates a plan,
// whether the standing approval id still approves at now. It locks the
// row against a concurrent revocation until the plan is committed.
func standingHolds(ctx context.Context, tx pgx.Tx, id uuid.UUID, now time.Time) (bool, error) {
	var got uuid.UUID
	err := tx.QueryRow(ctx, `SELECT sa.id FROM standing_approvals sa JOIN maintenance_windows w ON w.id = sa.window_id
		WHERE sa.id = $1 AND sa.approved_at IS NOT NULL AND sa.revoked_at IS NULL AND sa.expires_at > $2
		  AND sa.max_class <> 'destructive' AND w.ended_at IS NULL AND w.starts_at <= $2 AND w.ends_at > $2
		FOR SHARE OF sa`, id, now).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// RecentWindows lists the windows that ended at or after since, or are
// open or to come, newest first, for the room's `windows`.
func (s *Store) RecentWindows(ctx context.Context, since time.Time) ([]Window, error) {
	ws, err := s.queryWindows(ctx, "recent windows", `coalesce(w.ended_at, w.ends_at) >= $1`, since)
	slices.Reverse(ws)
	return ws, err
}
