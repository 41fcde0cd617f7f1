package executions

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/internal/metrics"
	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// Enqueuer puts tasks on a queue; *asynq.Client is one.
type Enqueuer interface {
	EnqueueContext(ctx context.Context, task *asynq.Task, opts ...asynq.Option) (*asynq.TaskInfo, error)
}

var _ Enqueuer = (*asynq.Client)(nil)

// TaskInspector reads and deletes a queued task: an *asynq.Inspector.
type TaskInspector interface {
	GetTaskInfo(queue, id string) (*asynq.TaskInfo, error)
	DeleteTask(queue, id string) error
}

var _ TaskInspector = (*asynq.Inspector)(nil)

// Config configures a Service.
type Config struct {
	// Store is the source of truth. Required.
	Store *store.Store
	// Queue carries signed orders to the actuator. Required.
	Queue Enqueuer
	// Inspector lets a resend replace an order asynq archived: one the
	// actuator took and died holding, which asynq will not retry. Without
	// it such an order waits out its TTL and ends outcome_unknown.
	// Optional.
	Inspector TaskInspector
	// SigningKey signs orders and probe requests; the actuator holds its
	// public half. Required.
	SigningKey ed25519.PrivateKey
	// ReportVerifyKey is the public half of the actuator's report key.
	// Every progress report, result and probe result must verify against
	// it. Without it every report is refused, which suits only a Service
	// that never consumes the results queue.
	ReportVerifyKey ed25519.PublicKey
	// PreviousReportVerifyKey is the actuator's report key being rotated
	// out. While it is set, reports signed with it are applied too, so the
	// actuator can switch keys without a gap; drop it once the results
	// queue holds nothing the actuator signed before it switched.
	// Optional.
	PreviousReportVerifyKey ed25519.PublicKey
	// Actuator names the actuator that orders and probes are addressed to
	// and that reports must come from. Default tasks.DefaultActuator.
	Actuator string
	// Rules say who approves what, how, and for how long. Required.
	Rules *policy.Rules
	// OrderTTL bounds how long a dispatched order stays valid. Default
	// 15m, at most tasks.MaxOrderTTL.
	OrderTTL time.Duration
	// AckTimeout is how long a dispatched order may go without the
	// actuator's first progress before the reconciler sends it again.
	// Default 30s.
	AckTimeout time.Duration
	// HeartbeatTimeout is how long a running execution may go silent before
	// it is marked outcome_unknown. Default 2m.
	HeartbeatTimeout time.Duration
	// ReconcileInterval is how often Reconcile runs in RunReconciler.
	// Default 1m.
	ReconcileInterval time.Duration
	// UnattendedLimit bounds how many automatically approved executions
	// may be in flight at once; past it a plan that would approve itself
	// waits for a person, so unattended reads never take every actuator
	// slot. Default 2.
	UnattendedLimit int
	// ProbeInterval is how often RunProber looks for due checks. A
	// check's own interval (at least 5s) says how often it runs; this is
	// only the granularity, and so the most a probe runs late by it.
	// Default 500ms.
	ProbeInterval time.Duration
	// ForbidSelfApproval refuses an approval from whoever asked for the
	// plan, or from the operator an agent asked for it on behalf of
	// (approvals.self_approval: false). Off by default: in a one-person
	// homelab the operator approves their own plans.
	ForbidSelfApproval bool
	// DestructiveQuorum is how many different operators must type a
	// destructive plan's phrase before it is approved. Default 1; at most
	// the number of operators.
	DestructiveQuorum int
	// ProbeWait bounds how long ContainerState waits for the host's
	// answer. Default 20s.
	ProbeWait time.Duration
	// InventoryInterval is how often each host's inventory is taken for
	// fleet discovery (RunDiscovery); a host's run states go stale after
	// three of them without an answer. Default 5m.
	InventoryInterval time.Duration
	// InventoryTick is how often RunDiscovery looks for hosts due and
	// runs asked for with `nomos discover`. Default 5s.
	InventoryTick time.Duration
	// SnapshotKeep is how many of its own snapshots the actuator leaves
	// on a container after a change it snapshotted first, deleting the
	// oldest (snapshots.keep). Default 3.
	SnapshotKeep int
	// RequireSnapshot refuses, before approval, a plan that needs a
	// snapshot first on a container that cannot be snapshotted (a bind
	// mount, a raw disk on dir storage) (snapshots.require). Off by
	// default: the card says there will be none, and the operator decides.
	RequireSnapshot bool
	// LockWait bounds how long the actuator waits for a lock on the
	// container (a backup's) to clear before a step Proxmox would refuse
	// while it holds. Default tasks.DefaultLockWait, at most
	// tasks.MaxLockWait.
	LockWait time.Duration
	// Metrics records approval and execution latency; nil records
	// nothing.
	Metrics *metrics.Metrics
	// Actor is the name the service records for its own decisions.
	// Default "nomos".
	Actor  string
	Logger *slog.Logger
	Clock  func() time.Time
}

// Service runs the execution lifecycle.
type Service struct {
	cfg    Config
	store  *store.Store
	logger *slog.Logger
	now    func() time.Time

	// reportKeys verify what the actuator reports: its key and, during a
	// rotation, its previous one.
	reportKeys tasks.VerifyKeys

	// The prober's copy of the fleet (probeTargets).
	probeMu   sync.Mutex
	probeByID map[uuid.UUID]probeTarget
	probeAt   time.Time
}

// New validates cfg and returns a Service.
func New(cfg Config) (*Service, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("executions: Store is required")
	case cfg.Queue == nil:
		return nil, errors.New("executions: Queue is required")
	case len(cfg.SigningKey) != ed25519.PrivateKeySize:
		return nil, errors.New("executions: SigningKey must be an Ed25519 private key")
	case cfg.Rules == nil:
		return nil, errors.New("executions: Rules are required")
	case len(cfg.ReportVerifyKey) != 0 && len(cfg.ReportVerifyKey) != ed25519.PublicKeySize:
		return nil, errors.New("executions: ReportVerifyKey must be an Ed25519 public key")
	case len(cfg.PreviousReportVerifyKey) != 0 && len(cfg.ReportVerifyKey) == 0:
		return nil, errors.New("executions: PreviousReportVerifyKey needs a ReportVerifyKey beside it")
	case len(cfg.PreviousReportVerifyKey) != 0 && len(cfg.PreviousReportVerifyKey) != ed25519.PublicKeySize:
		return nil, errors.New("executions: PreviousReportVerifyKey must be an Ed25519 public key")
	case len(cfg.PreviousReportVerifyKey) != 0 && cfg.PreviousReportVerifyKey.Equal(cfg.ReportVerifyKey):
		return nil, errors.New("executions: PreviousReportVerifyKey is ReportVerifyKey itself; set it to the key being rotated out, or leave it out")
	case cfg.OrderTTL > tasks.MaxOrderTTL:
		return nil, fmt.Errorf("executions: OrderTTL %s is longer than the %s an actuator accepts", cfg.OrderTTL, tasks.MaxOrderTTL)
	case cfg.SnapshotKeep < 0:
		return nil, fmt.Errorf("executions: SnapshotKeep must be at least 1, got %d", cfg.SnapshotKeep)
	case cfg.LockWait < 0 || cfg.LockWait > tasks.MaxLockWait:
		return nil, fmt.Errorf("executions: LockWait %s must be from 0 to %s", cfg.LockWait, tasks.MaxLockWait)
	case cfg.DestructiveQuorum < 0:
		return nil, fmt.Errorf("executions: DestructiveQuorum must be at least 1, got %d", cfg.DestructiveQuorum)
	case cfg.DestructiveQuorum > len(cfg.Rules.Operators()):
		return nil, fmt.Errorf("executions: DestructiveQuorum %d needs more operators than the %d configured, so no destructive plan could ever be approved",
			cfg.DestructiveQuorum, len(cfg.Rules.Operators()))
	}
	cfg.DestructiveQuorum = cmp.Or(cfg.DestructiveQuorum, 1)
	cfg.SnapshotKeep = cmp.Or(cfg.SnapshotKeep, 3)
	cfg.LockWait = cmp.Or(cfg.LockWait, tasks.DefaultLockWait)
	cfg.ProbeWait = cmp.Or(cfg.ProbeWait, 20*time.Second)
	cfg.Actuator = cmp.Or(cfg.Actuator, tasks.DefaultActuator)
	if err := tasks.ValidateActuatorName(cfg.Actuator); err != nil {
		return nil, fmt.Errorf("executions: %w", err)
	}
	cfg.OrderTTL = cmp.Or(cfg.OrderTTL, 15*time.Minute)
	cfg.AckTimeout = cmp.Or(cfg.AckTimeout, 30*time.Second)
	cfg.HeartbeatTimeout = cmp.Or(cfg.HeartbeatTimeout, 2*time.Minute)
	cfg.ProbeInterval = cmp.Or(cfg.ProbeInterval, 500*time.Millisecond)
	cfg.UnattendedLimit = cmp.Or(cfg.UnattendedLimit, 2)
	cfg.InventoryInterval = cmp.Or(cfg.InventoryInterval, 5*time.Minute)
	cfg.InventoryTick = cmp.Or(cfg.InventoryTick, 5*time.Second)
	cfg.ReconcileInterval = cmp.Or(cfg.ReconcileInterval, time.Minute)
	cfg.Actor = cmp.Or(cfg.Actor, "nomos")
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Service{cfg: cfg, store: cfg.Store, logger: cfg.Logger, now: cfg.Clock,
		reportKeys: tasks.RotatingKeys(cfg.ReportVerifyKey, cfg.PreviousReportVerifyKey)}, nil
}

// Routes a request can take, as executions record them (requested_via).
const (
	// ViaChat is an operator's own command in the room.
	ViaChat = "chat"
	// ViaRunbook is a runbook an operator triggered in the room.
	ViaRunbook = "runbook"
	// ViaAgent is the bot's agent, acting on an operator's message.
	ViaAgent = "agent"
	// ViaMCP is an external MCP client.
	ViaMCP = "mcp"
	// ViaSchedule is a schedule from the config, at its cron time;
	// Request.Schedule names it.
	ViaSchedule = "schedule"
)

// Request asks for a plan: one action on one target, or Steps run in
// order.
type Request struct {
	Action string
	// Target names the entity: a slug (service:jellyfin), a name
	// (jellyfin), a container's vmid (101) or hostname.
	Target string
	// Params are the action's parameters as JSON; empty means none.
	Params json.RawMessage
	// Steps, when set, make a plan of several steps that run in order,
	// each only once the one before it has succeeded, under one approval.
	// Action and Params must then be empty; a step without a Target acts
	// on Target. One step is the same as Action, Target and Params.
	Steps []Step
	// RequestedBy is the Matrix user or client that asked; for the agent,
	// the agent itself.
	RequestedBy string
	// OnBehalfOf is the operator the agent acts for; empty otherwise.
	OnBehalfOf string
	// Via is one of the Via constants.
	Via string
	// Reason is why the asker wants it, shown on the card; empty for an
	// operator's own command.
	Reason string
	RoomID string
	// Session is the agent session that asked, if any; its result then
	// re-invokes that session.
	Session *store.SessionLink
	// Schedule names the schedule that asked (Via ViaSchedule).
	Schedule string
	// Standing names the window whose standing approval a schedule runs
	// under (the schedule's standing:); empty means none. An operator's
	// own plan in the room needs no name: any standing approval that
	// covers it applies.
	Standing string
}

// Step is one action of a plan of several steps.
type Step struct {
	Action string
	// Target names the entity; empty means the Request's Target.
	Target string
	Params json.RawMessage
}

// Planned is a persisted plan with what a front end needs to show it.
type Planned struct {
	// Execution is the plan's execution, or for a plan of several steps its
	// first step's, which carries the card and the decision.
	Execution store.Execution
	// Risk is the plan's: for several steps, the highest step's class with
	// every step's reasons.
	Risk policy.Risk
	// Blast lists who else is affected, nearest first.
	Blast []policy.Affected
	// Phrase is the typed confirmation a destructive plan needs.
	Phrase string
	Target store.Entity
	// Steps are the steps of a plan of several, in order; nil for a plan
	// of one step.
	Steps []PlannedStep
	// Snapshot says the actuator snapshots the container before the step
	// runs (a config_mutation inside a container), for a plan of one step.
	Snapshot bool
	// Facts are what Proxmox says of the container that the card shows:
	// its lock, HA, the snapshots a rollback deletes, why it cannot be
	// snapshotted; for a plan of one step.
	Facts GuestFacts
}

// Quorum is how many different operators must approve a plan of class c.
func (s *Service) Quorum(c policy.Class) int {
	if c == policy.Destructive {
		return s.cfg.DestructiveQuorum
	}
	return 1
}

// PlannedStep is one step of a plan of several steps.
type PlannedStep struct {
	Execution store.Execution
	Risk      policy.Risk
	Target    store.Entity
	// Snapshot says the actuator snapshots the step's container before it
	// runs (a config_mutation inside a container).
	Snapshot bool
	// Facts are what Proxmox says of the step's container.
	Facts GuestFacts
}

// builtStep is a step validated, resolved, rendered and classified.
type builtStep struct {
	spec      policy.Spec
	entity    store.Entity
	plan      policy.Plan
	hash      string
	risk      policy.Risk
	canonical json.RawMessage
	facts     GuestFacts
	// asked is what the step asks for, as its request key sees it: the
	// action, the resolved target as the plan runs on it and the
	// parameters as given, before Nomos names a snapshot or writes a
	// description.
	asked string
}

// requestKey identifies the change a plan asks for: its steps' actions,
// targets and parameters as given. Two requests with the same key ask for
// the same change.
func requestKey(built []builtStep) string {
	h := sha256.New()
	for _, b := range built {
		h.Write([]byte(b.asked))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// persist runs create. When a plan for the same change (key) already
// waits for a decision, it creates nothing and returns
// *AlreadyWaitingError naming that plan; a waiting plan whose window has
// closed is expired first, and one decided meanwhile no longer counts.
// The database's unique index decides between two requests at once.
func (s *Service) persist(ctx context.Context, key string, now time.Time, create func() ([]store.Execution, error)) ([]store.Execution, error) {
	for range 3 {
		xs, err := create()
		if !errors.Is(err, store.ErrAlreadyWaiting) {
			return xs, err
		}
		x, err := s.store.WaitingByRequestKey(ctx, key)
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue
		case err != nil:
			return nil, err
		case !now.Before(x.ExpiresAt):
			if _, err := s.expire(ctx, x.ID); err != nil && !isConflict(err) {
				return nil, err
			}
			continue
		}
		return nil, &AlreadyWaitingError{Waiting: x}
	}
	return nil, fmt.Errorf("request %s: a plan for the same change kept appearing and going", key)
}

// Request validates, resolves and classifies r, and persists the plan. A
// plan that policy lets approve itself (named read-only actions only;
// never free-form shell, see policy.Rules.AutoApproves) is dispatched at
// once; anything else waits for an operator. Of a plan of several steps
// only the first is dispatched; each later one goes out once the one
// before it has succeeded.
func (s *Service) Request(ctx context.Context, r Request) (Planned, error) {
	steps, err := r.steps()
	if err != nil {
		return Planned{}, err
	}
	// Every edge and override, but of the entities only each step's
	// target and its neighbours, read as build resolves it: decoding the
	// whole fleet's attributes was most of a request's CPU.
	g, err := s.loadEdges(ctx)
	if err != nil {
		return Planned{}, err
	}
	now := s.now()
	r.Reason = cleanReason(r.Reason)
	// Each step's id is chosen first, so what it renders can name it.
	ids := make([]uuid.UUID, len(steps))
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7())
	}
	built := make([]builtStep, len(steps))
	for i, st := range steps {
		b, err := s.build(ctx, g, st, now, origin{r: r, id: ids[i]})
		if err != nil {
			if len(steps) > 1 {
				return Planned{}, fmt.Errorf("step %d (%s): %w", i+1, st.Action, err)
			}
			return Planned{}, err
		}
		built[i] = b
	}
	var all []string
	for _, b := range built {
		all = append(all, b.plan.Steps...)
	}
	if err := checkShown(all, r.Via); err != nil {
		return Planned{}, err
	}
	// Only a person's own command counts as not the agent's; a route this
	// build does not know is held to the agent's rules.
	byAgent := !(r.Via == ViaChat || r.Via == ViaRunbook || r.Via == ViaMCP || r.Via == ViaSchedule)
	if len(built) > 1 {
		return s.requestPlan(ctx, r, g, built, ids, now, byAgent)
	}
	b := built[0]
	id := ids[0]
	code, err := policy.PlanCode(phraseKey(id, b.hash))
	if err != nil {
		return Planned{}, err
	}
	n := store.NewExecution{
		Request: store.Request{
			ID: id, Action: string(b.spec.Action), TargetID: &b.entity.ID, TargetSlug: b.entity.Slug,
			Params: b.canonical, Steps: b.plan.Steps, RiskClass: b.risk.Class.String(), PlanHash: b.hash,
			PlanCode: code, State: store.StateAwaitingApproval, RequestedBy: r.RequestedBy,
			OnBehalfOf: r.OnBehalfOf, RequestedVia: r.Via, Reason: r.Reason, RoomID: r.RoomID,
			ExpiresAt: s.cfg.Rules.ExpiresAt(b.risk.Class, now),
		},
		Session: r.Session, UnattendedLimit: s.cfg.UnattendedLimit,
	}
	n.RequestKey = requestKey(built)
	var auto *store.Approval
	if s.cfg.Rules.AutoApproves(b.spec.Action, b.risk.Class, byAgent, false) {
		n.State = store.StateApproved
		auto = &store.Approval{Decision: "approved", DecidedBy: s.cfg.Actor, Method: string(policy.MethodAuto), PlanHash: b.hash, DecidedAt: now}
	} else if sa, err := s.standingFor(ctx, r, built, b.risk.Class, now); err != nil {
		return Planned{}, err
	} else if sa != nil {
		n.State = store.StateApproved
		auto = standingApproval(s.cfg.Actor, sa, b.hash, now)
	}
	xs, err := s.persist(ctx, n.RequestKey, now, func() ([]store.Execution, error) {
		x, err := s.store.CreateExecution(ctx, n, auto)
		return []store.Execution{x}, err
	})
	if err != nil {
		return Planned{}, err
	}
	x := xs[0]
	p := Planned{Execution: x, Risk: b.risk, Blast: policy.PlanBlastRadius(b.spec.Action, g.edges, b.entity.Slug), Target: b.entity,
		Snapshot: policy.NeedsSnapshot(b.plan.Params, b.plan.Target, b.risk.Class), Facts: b.facts}
	if b.risk.Class == policy.Destructive {
		if p.Phrase, err = policy.ConfirmationPhrase(b.spec.Action, b.entity.Slug, phraseKey(id, b.hash)); err != nil {
			return Planned{}, err
		}
	}
	s.logger.Info("execution requested", "execution_id", id, "action", b.spec.Action, "target", b.entity.Slug,
		"risk_class", b.risk.Class, "state", x.State, "requested_by", r.RequestedBy)
	s.requestPreview(ctx, g, x, b.entity)
	if x.State == store.StateApproved {
		if x, err = s.Dispatch(ctx, x.ID); err != nil {
			s.logger.Warn("dispatch failed; the reconciler will retry", "execution_id", id, "err", err)
		} else {
			p.Execution = x
		}
	}
	return p, nil
}

// steps returns what r asks for as a list of steps.
func (r Request) steps() ([]Step, error) {
	if len(r.Steps) == 0 {
		return []Step{{Action: r.Action, Target: r.Target, Params: r.Params}}, nil
	}
	if r.Action != "" || len(r.Params) > 0 {
		return nil, fmt.Errorf("%w: give either an action or a list of steps, not both", policy.ErrInvalidParams)
	}
	if len(r.Steps) > policy.MaxPlanSteps {
		return nil, fmt.Errorf("%w: a plan has at most %d steps, got %d", policy.ErrInvalidParams, policy.MaxPlanSteps, len(r.Steps))
	}
	out := make([]Step, len(r.Steps))
	for i, st := range r.Steps {
		st.Target = cmp.Or(strings.TrimSpace(st.Target), r.Target)
		out[i] = st
	}
	return out, nil
}

// origin is who asks for a step and the id its execution will have.
type origin struct {
	r  Request
	id uuid.UUID
}

// build validates, resolves, renders and classifies one step.
func (s *Service) build(ctx context.Context, g *graph, st Step, now time.Time, o origin) (builtStep, error) {
	spec, err := policy.Lookup(policy.Action(st.Action))
	if err != nil {
		return builtStep{}, err
	}
	params, err := policy.ParseParams(spec.Action, st.Params)
	if err != nil {
		return builtStep{}, err
	}
	asked, err := policy.MarshalParams(params)
	if err != nil {
		return builtStep{}, err
	}
	if p, ok := params.(policy.PctSnapshotParams); ok && p.Name == "" {
		// Named now, so the card and the hash show the name that runs.
		p.Name = policy.SnapshotName(now)
		params = p
	}
	if p, ok := params.(policy.PctCreateParams); ok {
		if p.Description != "" {
			return builtStep{}, fmt.Errorf("%w: params.description: is written by Nomos (who asked, the execution and the reason); give the reason instead", policy.ErrInvalidParams)
		}
		// Written now, so the card and the hash show the notes Proxmox
		// will keep with the container.
		p.Description = policy.CreateDescription(o.r.RequestedBy, o.r.OnBehalfOf, o.id.String(), o.r.Reason)
		if _, secret := redact.Find(p.Description); secret {
			// What is left of a redacted reason could still read as one.
			p.Description = policy.CreateDescription(o.r.RequestedBy, o.r.OnBehalfOf, o.id.String(), "")
		}
		params = p
	}
	types := make([]string, len(spec.Targets))
	for i, t := range spec.Targets {
		types[i] = string(t)
	}
	matches, err := s.store.ResolveTargets(ctx, st.Target, types...)
	if err != nil {
		return builtStep{}, err
	}
	switch len(matches) {
	case 0:
		return builtStep{}, fmt.Errorf("%w: %s takes a %s, and nothing of that kind is called %q", ErrUnknownTarget, spec.Action, joinTypes(spec.Targets), st.Target)
	case 1:
	default:
		cands := make([]string, len(matches))
		for i, m := range matches {
			cands[i] = m.Slug
		}
		return builtStep{}, &AmbiguousTargetError{Ref: st.Target, Candidates: cands}
	}
	entity := matches[0]
	ents, _, err := s.neighbourhood(ctx, entity)
	if err != nil {
		return builtStep{}, err
	}
	for _, e := range ents {
		g.entities[e.Slug] = e
	}
	if params, err = adapt(params, entity, g.guestOf(entity)); err != nil {
		return builtStep{}, err
	}
	target := g.policyTarget(entity)
	plan, err := policy.NewPlan(params, target)
	if err != nil {
		return builtStep{}, err
	}
	risk, err := policy.Classify(plan.Params, target, g.overrides)
	if err != nil {
		return builtStep{}, err
	}
	if t := g.planTarget(entity, plan.Params, risk.Class); t.SnapshotBlocker != "" {
		if err := s.checkSnapshot(t); err != nil {
			return builtStep{}, err
		}
		if plan, err = policy.NewPlan(plan.Params, t); err != nil {
			return builtStep{}, err
		}
	}
	if err := checkNoSecrets(plan.Steps); err != nil {
		return builtStep{}, err
	}
	hash, err := policy.PlanHash(plan)
	if err != nil {
		return builtStep{}, err
	}
	canonical, err := policy.MarshalParams(plan.Params)
	if err != nil {
		return builtStep{}, err
	}
	// The target as the plan runs on it: one that has moved, or that
	// now cannot be snapshotted, is another change.
	where, err := json.Marshal(plan.Target)
	if err != nil {
		return builtStep{}, err
	}
	return builtStep{spec: spec, entity: entity, plan: plan, hash: hash, risk: risk, canonical: canonical,
		facts: s.guestFacts(g, entity, plan.Params, plan.Target),
		asked: string(spec.Action) + "\x00" + string(where) + "\x00" + string(asked)}, nil
}

// requestPlan persists a plan of several steps: one execution per step,
// the first awaiting the plan's one decision, the others waiting for the
// step before them. The decision is taken on the plan's class, its
// highest step's, and bound to the hash over every step.
func (s *Service) requestPlan(ctx context.Context, r Request, g *graph, built []builtStep, ids []uuid.UUID, now time.Time, byAgent bool) (Planned, error) {
	hashes := make([]string, len(built))
	refs := make([]stepRef, len(built))
	class := policy.ReadOnly
	auto := true
	for i, b := range built {
		hashes[i] = b.hash
		refs[i] = stepRef{action: b.spec.Action, slug: b.entity.Slug, class: b.risk.Class}
		class = max(class, b.risk.Class)
		auto = auto && s.cfg.Rules.AutoApproves(b.spec.Action, b.risk.Class, byAgent, false)
	}
	planHash, err := policy.StepsHash(hashes)
	if err != nil {
		return Planned{}, err
	}
	headID := ids[0]
	code, err := policy.PlanCode(phraseKey(headID, planHash))
	if err != nil {
		return Planned{}, err
	}
	expires := s.cfg.Rules.ExpiresAt(class, now)
	news := make([]store.NewExecution, len(built))
	for i, b := range built {
		id := ids[i]
		news[i] = store.NewExecution{
			Request: store.Request{
				ID: id, Action: string(b.spec.Action), TargetID: &b.entity.ID, TargetSlug: b.entity.Slug,
				Params: b.canonical, Steps: b.plan.Steps, RiskClass: b.risk.Class.String(), PlanHash: b.hash,
				PlanCode: code, State: store.StateAwaitingApproval, RequestedBy: r.RequestedBy,
				OnBehalfOf: r.OnBehalfOf, RequestedVia: r.Via, Reason: r.Reason, RoomID: r.RoomID,
				ExpiresAt: expires,
			},
			Session: r.Session, UnattendedLimit: s.cfg.UnattendedLimit,
		}
	}
	news[0].RequestKey = requestKey(built)
	var approval *store.Approval
	if auto {
		news[0].State = store.StateApproved
		approval = &store.Approval{Decision: "approved", DecidedBy: s.cfg.Actor, Method: string(policy.MethodAuto), PlanHash: planHash, DecidedAt: now}
	} else if sa, err := s.standingFor(ctx, r, built, class, now); err != nil {
		return Planned{}, err
	} else if sa != nil {
		news[0].State = store.StateApproved
		approval = standingApproval(s.cfg.Actor, sa, planHash, now)
	}
	xs, err := s.persist(ctx, news[0].RequestKey, now, func() ([]store.Execution, error) {
		return s.store.CreatePlan(ctx, store.NewPlan{Hash: planHash, RiskClass: class.String(), Steps: news}, approval)
	})
	if err != nil {
		return Planned{}, err
	}
	p := Planned{Execution: xs[0], Target: built[0].entity}
	for i, b := range built {
		p.Steps = append(p.Steps, PlannedStep{Execution: xs[i], Risk: b.risk, Target: b.entity,
			Snapshot: policy.NeedsSnapshot(b.plan.Params, b.plan.Target, b.risk.Class), Facts: b.facts})
	}
	p.Risk, p.Blast = planRisk(p.Steps, g, class)
	if class == policy.Destructive {
		if p.Phrase, err = planPhrase(headID, planHash, refs); err != nil {
			return Planned{}, err
		}
	}
	s.logger.Info("plan requested", "execution_id", headID, "steps", len(built), "risk_class", class,
		"state", xs[0].State, "requested_by", r.RequestedBy)
	if xs[0].State == store.StateAwaitingApproval {
		for i, b := range built {
			s.requestPreview(ctx, g, xs[i], b.entity)
		}
	}
	if xs[0].State == store.StateApproved {
		if x, err := s.Dispatch(ctx, headID); err != nil {
			s.logger.Warn("dispatch failed; the reconciler will retry", "execution_id", headID, "err", err)
		} else {
			p.Execution, p.Steps[0].Execution = x, x
		}
	}
	return p, nil
}

// stepRef is what a plan's phrase is derived from, per step.
type stepRef struct {
	action policy.Action
	slug   string
	class  policy.Class
}

// planPhrase is the typed phrase of a destructive plan of several steps:
// the verb and target of every destructive step, in order, and the plan's
// code, such as "rollback lxc:strong/102 destroy lxc:strong/101 k7q2"
// for a plan that rolls one container back, then stops and destroys
// another (see policy.PlanPhrase).
func planPhrase(headID uuid.UUID, planHash string, steps []stepRef) (string, error) {
	var named []policy.PhraseStep
	for _, st := range steps {
		if st.class == policy.Destructive {
			named = append(named, policy.PhraseStep{Action: st.action, Slug: st.slug})
		}
	}
	if len(named) == 0 {
		return "", fmt.Errorf("%w: the plan has no destructive step", policy.ErrInvalidPlan)
	}
	return policy.PlanPhrase(named, phraseKey(headID, planHash))
}

// planRisk is a plan's risk, class given, with every step's reasons, and
// its blast radius: every step's, each entity once.
func planRisk(steps []PlannedStep, g *graph, class policy.Class) (policy.Risk, []policy.Affected) {
	r := policy.Risk{Class: class}
	var blast []policy.Affected
	seen := map[string]bool{}
	for i, st := range steps {
		for _, why := range st.Risk.Reasons {
			r.Reasons = append(r.Reasons, fmt.Sprintf("step %d: %s", i+1, why))
		}
		r.Secrets = append(r.Secrets, st.Risk.Secrets...)
		for _, a := range policy.PlanBlastRadius(policy.Action(st.Execution.Action), g.edges, st.Target.Slug) {
			if !seen[a.Slug] {
				seen[a.Slug] = true
				blast = append(blast, a)
			}
		}
	}
	return r, blast
}

// Describe rebuilds the presentation of an existing execution: its risk
// reasons, blast radius and phrase, for a card or a tool result. For a
// step of a plan of several it describes the whole plan.
func (s *Service) Describe(ctx context.Context, x store.Execution) (Planned, error) {
	if x.PlanID != nil {
		return s.describePlan(ctx, *x.PlanID)
	}
	p := Planned{Execution: x}
	if x.TargetID == nil {
		return p, nil
	}
	entity, err := s.store.EntityByID(ctx, *x.TargetID)
	if err != nil {
		return p, err
	}
	p.Target = entity
	g, err := s.loadGraph(ctx)
	if err != nil {
		return p, err
	}
	p.Blast = policy.PlanBlastRadius(policy.Action(x.Action), g.edges, entity.Slug)
	class, _ := policy.ParseClass(x.RiskClass)
	if params, err := policy.ParseParams(policy.Action(x.Action), x.Params); err == nil {
		if risk, err := policy.Classify(params, g.policyTarget(entity), g.overrides); err == nil {
			p.Risk = risk
		}
		target := g.planTarget(entity, params, class)
		p.Snapshot = policy.NeedsSnapshot(params, target, class)
		p.Facts = s.guestFacts(g, entity, params, target)
	}
	p.Risk.Class = class
	if class == policy.Destructive {
		p.Phrase, _ = policy.ConfirmationPhrase(policy.Action(x.Action), x.TargetSlug, phraseKey(x.ID, x.PlanHash))
	}
	return p, nil
}

func (s *Service) describePlan(ctx context.Context, planID uuid.UUID) (Planned, error) {
	xs, err := s.store.PlanSteps(ctx, planID)
	if err != nil {
		return Planned{}, err
	}
	g, err := s.loadGraph(ctx)
	if err != nil {
		return Planned{Execution: xs[0]}, err
	}
	p := Planned{Execution: xs[0]}
	refs := make([]stepRef, len(xs))
	for i, x := range xs {
		st := PlannedStep{Execution: x}
		class, _ := policy.ParseClass(x.RiskClass)
		if x.TargetID != nil {
			for _, e := range g.entities {
				if e.ID == *x.TargetID {
					st.Target = e
				}
			}
		}
		if st.Target.Slug != "" {
			if params, err := policy.ParseParams(policy.Action(x.Action), x.Params); err == nil {
				target := g.planTarget(st.Target, params, class)
				if risk, err := policy.Classify(params, target, g.overrides); err == nil {
					st.Risk = risk
				}
				st.Snapshot = policy.NeedsSnapshot(params, target, class)
				st.Facts = s.guestFacts(g, st.Target, params, target)
			}
		}
		st.Risk.Class = class
		refs[i] = stepRef{action: policy.Action(x.Action), slug: x.TargetSlug, class: class}
		p.Steps = append(p.Steps, st)
	}
	p.Target = p.Steps[0].Target
	class, _ := policy.ParseClass(xs[0].GateClass())
	p.Risk, p.Blast = planRisk(p.Steps, g, class)
	if class == policy.Destructive && xs[0].Plan != nil {
		p.Phrase, _ = planPhrase(planID, xs[0].Plan.Hash, refs)
	}
	return p, nil
}

// phraseKey is what a plan's short code and typed phrase derive from: the
// plan hash and the execution id, so two identical plans pending at once
// still have different phrases and one can never confirm the other.
func phraseKey(id uuid.UUID, planHash string) string {
	sum := sha256.Sum256([]byte(planHash + ":" + id.String()))
	return hex.EncodeToString(sum[:])
}

func joinTypes(ts []policy.TargetType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, " or ")
}

// graph is the part of the store a plan is computed from.
type graph struct {
	edges     []policy.Edge
	overrides []policy.Override
	entities  map[string]store.Entity
}

func (s *Service) loadGraph(ctx context.Context) (*graph, error) {
	// Three independent reads, on three connections at once.
	var (
		wg   sync.WaitGroup
		ents []store.Entity
		err  error
	)
	wg.Go(func() { ents, err = s.store.ListEntities(ctx, "") })
	g, gErr := s.loadEdges(ctx)
	wg.Wait()
	if err := cmp.Or(gErr, err); err != nil {
		return nil, err
	}
	for _, e := range ents {
		g.entities[e.Slug] = e
	}
	return g, nil
}

// loadEdges is the graph's every edge and policy override, without its
// entities: a request adds those of each step's target as it resolves it.
// The two reads go on two connections at once: they sit on the path from
// an operator's message to the plan card.
func (s *Service) loadEdges(ctx context.Context) (*graph, error) {
	var (
		wg   sync.WaitGroup
		ovs  []store.PolicyOverride
		oErr error
	)
	wg.Go(func() { ovs, oErr = s.store.PolicyOverrides(ctx) })
	rels, relErr := s.store.Relationships(ctx)
	wg.Wait()
	if err := cmp.Or(relErr, oErr); err != nil {
		return nil, err
	}
	g := newGraph(nil, rels)
	for _, o := range ovs {
		c, err := policy.ParseClass(o.RiskClass)
		if err != nil {
			return nil, fmt.Errorf("policy override for %s: %w", o.Slug, err)
		}
		ov := policy.Override{Target: o.Slug, MinClass: c, MaxClass: c}
		if o.Action != "*" {
			ov.Action = policy.Action(o.Action)
		}
		g.overrides = append(g.overrides, ov)
	}
	return g, nil
}

// loadNeighbourhood is the part of the graph an order for e needs: e, the
// entities one edge away (its container, its services), its host, and
// the edges that touch e. Dispatch reads this instead of the whole fleet,
// which cost a few milliseconds of CPU per order at 200 containers and
// made a burst of approvals queue for the CPU.
func (s *Service) loadNeighbourhood(ctx context.Context, e store.Entity) (*graph, error) {
	ents, rels, err := s.neighbourhood(ctx, e)
	if err != nil {
		return nil, err
	}
	return newGraph(ents, rels), nil
}

// neighbourhood is e, the entities one edge away, its host, and the
// edges that touch e.
func (s *Service) neighbourhood(ctx context.Context, e store.Entity) ([]store.Entity, []store.Relationship, error) {
	host := e.AttrString("host")
	if e.Type == "host" {
		host = e.Name
	}
	return s.store.Neighbourhood(ctx, e.ID, "host:"+host)
}

// newGraph is the graph of ents, by slug, and the edges rels.
func newGraph(ents []store.Entity, rels []store.Relationship) *graph {
	g := &graph{entities: make(map[string]store.Entity, len(ents))}
	for _, e := range ents {
		g.entities[e.Slug] = e
	}
	for _, r := range rels {
		g.edges = append(g.edges, policy.Edge{From: r.From, To: r.To, Type: policy.EdgeType(r.Type)})
	}
	return g
}

// policyTarget maps an entity to the target policy hashes and classifies.
func (g *graph) policyTarget(e store.Entity) policy.Target {
	t := policy.Target{Type: policy.TargetType(e.Type), ID: e.ID.String(), Slug: e.Slug, Host: e.AttrString("host")}
	switch e.Type {
	case "host":
		t.Host = e.Name
	case "vm":
		t.VMID = e.AttrInt("vmid")
	case "lxc":
		t.VMID = e.AttrInt("vmid")
		for _, edge := range g.edges {
			if edge.From == e.Slug && edge.Type == policy.EdgeRuns {
				if svc, ok := g.entities[edge.To]; ok {
					t.Services = append(t.Services, svc.Name)
				}
			}
		}
		slices.Sort(t.Services)
	case "service":
		t.VMID = e.AttrInt("vmid")
		t.Unit = e.AttrString("unit")
	}
	return t
}

// site is the site of e's host, whose actuator alone may act on e.
func (g *graph) site(e store.Entity) string {
	if e.Type != "host" {
		e = g.entities["host:"+g.policyTarget(e).Host]
	}
	return cmp.Or(e.Site, tasks.DefaultSite)
}

// orderTarget is the resolved target the actuator needs, including where
// to reach the host.
func (g *graph) orderTarget(e store.Entity) tasks.Target {
	pt := g.policyTarget(e)
	t := tasks.Target{
		ID: pt.ID, Slug: pt.Slug, Type: string(pt.Type), Host: pt.Host, VMID: pt.VMID, Unit: pt.Unit,
		Services: pt.Services, Hostname: e.AttrString("hostname"),
		Port: e.AttrInt("port"), HealthPath: e.AttrString("health_path"),
	}
	if host, ok := g.entities["host:"+pt.Host]; ok {
		t.HostAddr = host.AttrString("ssh")
		if node := host.AttrString("node"); node != host.Name {
			t.Node = node
		}
	}
	guest := e
	if e.Type == "service" {
		guest = g.guestOf(e)
	}
	if guest.Type == "vm" {
		t.Hostname = cmp.Or(t.Hostname, guest.Name)
		t.Agent = attrBool(guest, "agent")
	}
	if policy.IsGuest(policy.TargetType(guest.Type)) {
		t.Hostname = cmp.Or(t.Hostname, guest.AttrString("hostname"))
		ip, _, _ := strings.Cut(guest.AttrString("ip"), "/")
		if _, err := netip.ParseAddr(ip); err == nil {
			t.IP = ip // not "dhcp": then the host name has to do
		}
	}
	return t
}
