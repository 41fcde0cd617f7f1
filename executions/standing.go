package executions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

// A maintenance window holds back the alerts of its targets while it is
// open. Its standing approval, when one is asked for and an operator has
// typed its phrase, approves plans on exactly those targets (the entities
// they resolved to when the window opened), up to a risk class that is
// never destructive, for as long as the window is open. Only two kinds of
// request run under one:
//   - an operator's own command or runbook in the room (not the agent's,
//     not on anyone's behalf);
//   - a schedule from the config that names the window (standing:) and
//     was listed in the standing approval when it was asked for.
//
// A plan asked for by the agent or over MCP (whatever its token's scope)
// never does: text a model read, or a token, must not ride on a blanket
// approval. Free-form shell never does either, whatever it classifies as.

// MaxWindow bounds how long a window opened in the room may last.
const MaxWindow = 7 * 24 * time.Hour

// ErrStandingRefused refuses a window's standing approval: it would cover
// destructive plans, or a class that is not one.
var ErrStandingRefused = errors.New("standing approval refused")

// ErrNoStanding answers a phrase that matches no standing approval
// waiting in an open window.
var ErrNoStanding = errors.New("no standing approval waits for that phrase")

// WindowRequest opens a maintenance window.
type WindowRequest struct {
	// Name names the window: a config window's name; empty for one opened
	// in the room, which is then named by a short code.
	Name string
	// Targets name the entities it covers, each resolving to exactly one.
	Targets []string
	Reason  string
	// By is who opens it: an operator, or "schedule:<name>" for a config
	// window.
	By       string
	RoomID   string
	StartsAt time.Time
	Duration time.Duration
	// Allow, when not empty, asks for a standing approval up to this risk
	// class; destructive is refused.
	Allow string
	// Schedules are the schedules that may run under the standing
	// approval.
	Schedules []string
}

// OpenWindow validates and records a maintenance window and, when asked,
// its standing approval, which waits for an operator's phrase. An
// occurrence of a config window that is already recorded is returned
// with opened false.
func (s *Service) OpenWindow(ctx context.Context, r WindowRequest) (w store.Window, opened bool, err error) {
	switch {
	case r.Duration <= 0:
		return store.Window{}, false, fmt.Errorf("%w: a window needs a duration, such as 2h", policy.ErrInvalidParams)
	case r.Duration > MaxWindow:
		return store.Window{}, false, fmt.Errorf("%w: a window lasts at most %s, got %s", policy.ErrInvalidParams, MaxWindow, r.Duration)
	case len(r.Targets) == 0:
		return store.Window{}, false, fmt.Errorf("%w: a window needs at least one target", policy.ErrInvalidParams)
	case strings.TrimSpace(r.Reason) == "":
		return store.Window{}, false, fmt.Errorf("%w: a window needs a reason", policy.ErrInvalidParams)
	}
	var standing *store.NewStanding
	if r.Allow != "" {
		class, err := policy.ParseClass(r.Allow)
		if err != nil {
			return store.Window{}, false, fmt.Errorf("%w: %q is not a risk class (read_only, reversible_low or config_mutation)", ErrStandingRefused, r.Allow)
		}
		if class == policy.Destructive {
			return store.Window{}, false, fmt.Errorf("%w: %w", ErrStandingRefused, store.ErrDestructiveStanding)
		}
		standing = &store.NewStanding{MaxClass: class.String(), Schedules: r.Schedules, Quorum: s.cfg.DestructiveQuorum}
	}
	n := store.NewWindow{Name: r.Name, Reason: cleanReason(r.Reason), OpenedBy: r.By, RoomID: r.RoomID,
		StartsAt: r.StartsAt, EndsAt: r.StartsAt.Add(r.Duration), Standing: standing}
	for _, ref := range r.Targets {
		matches, err := s.store.ResolveTargets(ctx, ref)
		if err != nil {
			return store.Window{}, false, err
		}
		switch len(matches) {
		case 0:
			return store.Window{}, false, fmt.Errorf("%w: nothing is called %q", ErrUnknownTarget, ref)
		case 1:
		default:
			cands := make([]string, len(matches))
			for i, m := range matches {
				cands[i] = m.Slug
			}
			return store.Window{}, false, &AmbiguousTargetError{Ref: ref, Candidates: cands}
		}
		if !slices.Contains(n.TargetIDs, matches[0].ID) {
			n.TargetIDs = append(n.TargetIDs, matches[0].ID)
			n.TargetSlugs = append(n.TargetSlugs, matches[0].Slug)
		}
	}
	if n.Name == "" {
		n.Name = "w-" + windowCode(uuid.Must(uuid.NewV7()).String())
	}
	if standing != nil {
		code, err := policy.PlanCode(windowKey(n))
		if err != nil {
			return store.Window{}, false, err
		}
		standing.Code = code
	}
	return s.store.OpenWindow(ctx, n)
}

// windowCode is a short code derived from key, in the plan-code alphabet.
func windowCode(key string) string {
	sum := sha256.Sum256([]byte(key))
	code, _ := policy.PlanCode(hex.EncodeToString(sum[:]))
	return code
}

// windowKey is what a standing approval's code derives from: the window
// and what it would approve, so no two windows share a phrase.
func windowKey(n store.NewWindow) string {
	sum := sha256.Sum256([]byte(n.Name + "\x00" + n.StartsAt.UTC().Format(time.RFC3339Nano) + "\x00" +
		n.Standing.MaxClass + "\x00" + strings.Join(n.TargetSlugs, " ")))
	return hex.EncodeToString(sum[:])
}

// StandingPhrase is what an operator types to grant a window's standing
// approval: "allow <class> <target> … <code>", such as "allow
// reversible_low service:jellyfin k7q2".
func StandingPhrase(w store.Window) string {
	if w.Standing == nil {
		return ""
	}
	return strings.Join(append(append([]string{"allow", w.Standing.MaxClass}, w.TargetSlugs...), w.Standing.Code), " ")
}

// GrantStanding counts an operator's typed phrase toward the standing
// approval of an open window whose phrase it is. With
// approvals.self_approval off, whoever opened the window cannot grant it;
// the configured quorum of different operators must type it.
func (s *Service) GrantStanding(ctx context.Context, phrase, by, eventID string) (store.Window, store.StandingVote, error) {
	if !s.cfg.Rules.IsOperator(by) {
		s.auditStandingRefusal(ctx, by, phrase, policy.ErrNotOperator)
		return store.Window{}, store.StandingVote{}, fmt.Errorf("%w: %s", policy.ErrNotOperator, by)
	}
	now := s.now()
	open, err := s.store.OpenWindows(ctx, now)
	if err != nil {
		return store.Window{}, store.StandingVote{}, err
	}
	for _, w := range open {
		if w.Standing == nil || w.Standing.ApprovedAt != nil || !policy.MatchPhrase(phrase, StandingPhrase(w)) {
			continue
		}
		if s.cfg.ForbidSelfApproval && w.Standing.RequestedBy == by {
			err := fmt.Errorf("%w: %s asked for this standing approval, and another operator must grant it", ErrSelfApproval, by)
			s.auditStandingRefusal(ctx, by, phrase, err)
			return w, store.StandingVote{}, err
		}
		vote, err := s.store.VoteStanding(ctx, w.Standing.ID, by, eventID, now)
		if err != nil {
			return w, vote, err
		}
		w.Standing = &vote.Approval
		return w, vote, nil
	}
	return store.Window{}, store.StandingVote{}, ErrNoStanding
}

func (s *Service) auditStandingRefusal(ctx context.Context, by, phrase string, cause error) {
	if err := s.store.AppendAudit(ctx, store.AuditEntry{Actor: by, Action: "standing.refused",
		Detail: map[string]any{"phrase": phrase, "reason": cause.Error()}}); err != nil {
		s.logger.Error("audit a refused standing approval", "by", by, "err", err)
	}
}

// standingFor finds the standing approval a request runs under, if any:
// see the rule at the top of this file. class is the plan's (its highest
// step's).
func (s *Service) standingFor(ctx context.Context, r Request, built []builtStep, class policy.Class, now time.Time) (*standingUse, error) {
	if class == policy.Destructive || !class.Valid() {
		return nil, nil
	}
	switch r.Via {
	case ViaChat, ViaRunbook:
		if r.OnBehalfOf != "" || !s.cfg.Rules.IsOperator(r.RequestedBy) {
			return nil, nil
		}
	case ViaSchedule:
		if r.Schedule == "" || r.Standing == "" {
			return nil, nil
		}
	default:
		return nil, nil
	}
	for _, b := range built {
		if b.spec.FreeForm {
			return nil, nil
		}
	}
	open, err := s.store.OpenWindows(ctx, now)
	if err != nil {
		return nil, err
	}
	for _, w := range open {
		sa := w.Standing
		if sa == nil || !sa.Holds(now) || !w.Open(now) {
			continue
		}
		max, err := policy.ParseClass(sa.MaxClass)
		if err != nil || max == policy.Destructive || class > max {
			continue
		}
		if r.Via == ViaSchedule && (w.Name != r.Standing || !slices.Contains(sa.Schedules, r.Schedule)) {
			continue
		}
		covered := true
		for _, b := range built {
			covered = covered && slices.Contains(sa.TargetIDs, b.entity.ID)
		}
		if covered {
			return &standingUse{window: w, approval: *sa}, nil
		}
	}
	return nil, nil
}

// standingUse is the standing approval a plan runs under, with its window.
type standingUse struct {
	window   store.Window
	approval store.StandingApproval
}

// standingApproval is the approval a plan is created with under u.
func standingApproval(actor string, u *standingUse, planHash string, now time.Time) *store.Approval {
	id := u.approval.ID
	return &store.Approval{Decision: "approved", DecidedBy: actor, Method: MethodStanding, PlanHash: planHash, DecidedAt: now, StandingID: &id}
}

// MethodStanding is the approval method of a plan that ran under a
// standing approval.
const MethodStanding = "standing"
