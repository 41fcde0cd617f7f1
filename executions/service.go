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
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/internal/metrics"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// Enqueuer puts tasks on a queue; *asynq.Client is one.
type Enqueuer interface {
	EnqueueContext(ctx context.Context, task *asynq.Task, opts ...asynq.Option) (*asynq.TaskInfo, error)
}

var _ Enqueuer = (*asynq.Client)(nil)

// Config configures a Service.
type Config struct {
	// Store is the source of truth. Required.
	Store *store.Store
	// Queue carries signed orders to the actuator. Required.
	Queue Enqueuer
	// SigningKey signs orders and probe requests; the actuator holds its
	// public half. Required.
	SigningKey ed25519.PrivateKey
	// ReportVerifyKey is the public half of the actuator's report key.
	// Every progress report, result and probe result must verify against
	// it. Without it every report is refused, which suits only a Service
	// that never consumes the results queue.
	ReportVerifyKey ed25519.PublicKey
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
	// only the granularity. Default 5s.
	ProbeInterval time.Duration
	// InventoryInterval is how often each host's inventory is taken for
	// fleet discovery (RunDiscovery); a host's run states go stale after
	// three of them without an answer. Default 5m.
	InventoryInterval time.Duration
	// InventoryTick is how often RunDiscovery looks for hosts due and
	// runs asked for with `nomos discover`. Default 5s.
	InventoryTick time.Duration
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
	case cfg.OrderTTL > tasks.MaxOrderTTL:
		return nil, fmt.Errorf("executions: OrderTTL %s is longer than the %s an actuator accepts", cfg.OrderTTL, tasks.MaxOrderTTL)
	}
	cfg.Actuator = cmp.Or(cfg.Actuator, tasks.DefaultActuator)
	if err := tasks.ValidateActuatorName(cfg.Actuator); err != nil {
		return nil, fmt.Errorf("executions: %w", err)
	}
	cfg.OrderTTL = cmp.Or(cfg.OrderTTL, 15*time.Minute)
	cfg.AckTimeout = cmp.Or(cfg.AckTimeout, 30*time.Second)
	cfg.HeartbeatTimeout = cmp.Or(cfg.HeartbeatTimeout, 2*time.Minute)
	cfg.ProbeInterval = cmp.Or(cfg.ProbeInterval, 5*time.Second)
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
	return &Service{cfg: cfg, store: cfg.Store, logger: cfg.Logger, now: cfg.Clock}, nil
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
)

// Request asks for one action on one target.
type Request struct {
	Action string
	// Target names the entity: a slug (service:jellyfin), a name
	// (jellyfin), a container's vmid (101) or hostname.
	Target string
	// Params are the action's parameters as JSON; empty means none.
	Params json.RawMessage
	// RequestedBy is the Matrix user or client that asked.
	RequestedBy string
	// Via is one of the Via constants.
	Via string
	// Reason is why the asker wants it, shown on the card; empty for an
	// operator's own command.
	Reason string
	RoomID string
	// Session is the agent session that asked, if any; its result then
	// re-invokes that session.
	Session *store.SessionLink
}

// Planned is a persisted plan with what a front end needs to show it.
type Planned struct {
	Execution store.Execution
	Risk      policy.Risk
	// Blast lists who else is affected, nearest first.
	Blast []policy.Affected
	// Phrase is the typed confirmation a destructive plan needs.
	Phrase string
	Target store.Entity
}

// Request validates, resolves and classifies r, and persists the plan. A
// plan that policy lets approve itself (a named read-only action; never
// free-form shell, see policy.Rules.AutoApproves) is dispatched at once;
// anything else waits for an operator.
func (s *Service) Request(ctx context.Context, r Request) (Planned, error) {
	spec, err := policy.Lookup(policy.Action(r.Action))
	if err != nil {
		return Planned{}, err
	}
	params, err := policy.ParseParams(spec.Action, r.Params)
	if err != nil {
		return Planned{}, err
	}
	types := make([]string, len(spec.Targets))
	for i, t := range spec.Targets {
		types[i] = string(t)
	}
	matches, err := s.store.ResolveTargets(ctx, r.Target, types...)
	if err != nil {
		return Planned{}, err
	}
	switch len(matches) {
	case 0:
		return Planned{}, fmt.Errorf("%w: %s takes a %s, and nothing of that kind is called %q", ErrUnknownTarget, spec.Action, joinTypes(spec.Targets), r.Target)
	case 1:
	default:
		cands := make([]string, len(matches))
		for i, m := range matches {
			cands[i] = m.Slug
		}
		return Planned{}, &AmbiguousTargetError{Ref: r.Target, Candidates: cands}
	}
	entity := matches[0]
	g, err := s.loadGraph(ctx)
	if err != nil {
		return Planned{}, err
	}
	target := g.policyTarget(entity)
	plan, err := policy.NewPlan(params, target)
	if err != nil {
		return Planned{}, err
	}
	if err := checkNoSecrets(plan.Steps); err != nil {
		return Planned{}, err
	}
	if err := checkShown(plan.Steps, r.Via); err != nil {
		return Planned{}, err
	}
	reason := cleanReason(r.Reason)
	hash, err := policy.PlanHash(plan)
	if err != nil {
		return Planned{}, err
	}
	risk, err := policy.Classify(plan.Params, target, g.overrides)
	if err != nil {
		return Planned{}, err
	}
	canonical, err := policy.MarshalParams(plan.Params)
	if err != nil {
		return Planned{}, err
	}
	now := s.now()
	id := uuid.Must(uuid.NewV7())
	code, err := policy.PlanCode(phraseKey(id, hash))
	if err != nil {
		return Planned{}, err
	}
	n := store.NewExecution{
		ID: id, Action: string(spec.Action), TargetID: &entity.ID, TargetSlug: entity.Slug,
		Params: canonical, Steps: plan.Steps, RiskClass: risk.Class.String(),
		PlanHash: hash, PlanCode: code, State: store.StateAwaitingApproval,
		RequestedBy: r.RequestedBy, RequestedVia: r.Via, Reason: reason, RoomID: r.RoomID,
		ExpiresAt: s.cfg.Rules.ExpiresAt(risk.Class, now), Session: r.Session,
		UnattendedLimit: s.cfg.UnattendedLimit,
	}
	var auto *store.Approval
	// Only a person's own command counts as not the agent's; a route this
	// build does not know is held to the agent's rules.
	byPerson := r.Via == ViaChat || r.Via == ViaRunbook || r.Via == ViaMCP
	if s.cfg.Rules.AutoApproves(spec.Action, risk.Class, !byPerson, false) {
		n.State = store.StateApproved
		auto = &store.Approval{Decision: "approved", DecidedBy: s.cfg.Actor, Method: string(policy.MethodAuto), PlanHash: hash, DecidedAt: now}
	}
	x, err := s.store.CreateExecution(ctx, n, auto)
	if err != nil {
		return Planned{}, err
	}
	p := Planned{Execution: x, Risk: risk, Blast: policy.PlanBlastRadius(spec.Action, g.edges, entity.Slug), Target: entity}
	if risk.Class == policy.Destructive {
		if p.Phrase, err = policy.ConfirmationPhrase(spec.Action, entity.Slug, phraseKey(id, hash)); err != nil {
			return Planned{}, err
		}
	}
	s.logger.Info("execution requested", "execution_id", id, "action", spec.Action, "target", entity.Slug,
		"risk_class", risk.Class, "state", x.State, "requested_by", r.RequestedBy)
	if x.State == store.StateApproved {
		if x, err = s.Dispatch(ctx, x.ID); err != nil {
			s.logger.Warn("dispatch failed; the reconciler will retry", "execution_id", id, "err", err)
		} else {
			p.Execution = x
		}
	}
	return p, nil
}

// Describe rebuilds the presentation of an existing execution: its risk
// reasons, blast radius and phrase, for a card or a tool result.
func (s *Service) Describe(ctx context.Context, x store.Execution) (Planned, error) {
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
	if params, err := policy.ParseParams(policy.Action(x.Action), x.Params); err == nil {
		if risk, err := policy.Classify(params, g.policyTarget(entity), g.overrides); err == nil {
			p.Risk = risk
		}
	}
	class, _ := policy.ParseClass(x.RiskClass)
	p.Risk.Class = class
	if class == policy.Destructive {
		p.Phrase, _ = policy.ConfirmationPhrase(policy.Action(x.Action), x.TargetSlug, phraseKey(x.ID, x.PlanHash))
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
	rels, err := s.store.Relationships(ctx)
	if err != nil {
		return nil, err
	}
	ovs, err := s.store.PolicyOverrides(ctx)
	if err != nil {
		return nil, err
	}
	ents, err := s.store.ListEntities(ctx, "")
	if err != nil {
		return nil, err
	}
	g := &graph{entities: map[string]store.Entity{}}
	for _, e := range ents {
		g.entities[e.Slug] = e
	}
	for _, r := range rels {
		g.edges = append(g.edges, policy.Edge{From: r.From, To: r.To, Type: policy.EdgeType(r.Type)})
	}
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

// policyTarget maps an entity to the target policy hashes and classifies.
func (g *graph) policyTarget(e store.Entity) policy.Target {
	t := policy.Target{Type: policy.TargetType(e.Type), ID: e.ID.String(), Slug: e.Slug, Host: attrString(e, "host")}
	switch e.Type {
	case "host":
		t.Host = e.Name
	case "lxc":
		t.VMID = attrInt(e, "vmid")
		for _, edge := range g.edges {
			if edge.From == e.Slug && edge.Type == policy.EdgeRuns {
				if svc, ok := g.entities[edge.To]; ok {
					t.Services = append(t.Services, svc.Name)
				}
			}
		}
		slices.Sort(t.Services)
	case "service":
		t.VMID = attrInt(e, "vmid")
		t.Unit = attrString(e, "unit")
	}
	return t
}

// orderTarget is the resolved target the actuator needs, including where
// to reach the host.
func (g *graph) orderTarget(e store.Entity) tasks.Target {
	pt := g.policyTarget(e)
	t := tasks.Target{
		ID: pt.ID, Slug: pt.Slug, Type: string(pt.Type), Host: pt.Host, VMID: pt.VMID, Unit: pt.Unit,
		Services: pt.Services, Hostname: attrString(e, "hostname"),
		Port: attrInt(e, "port"), HealthPath: attrString(e, "health_path"),
	}
	if host, ok := g.entities["host:"+pt.Host]; ok {
		t.HostAddr = attrString(host, "ssh")
	}
	guest := e
	if e.Type == "service" {
		guest = g.entities["lxc:"+strconv.Itoa(pt.VMID)]
	}
	if guest.Type == "lxc" {
		t.Hostname = cmp.Or(t.Hostname, attrString(guest, "hostname"))
		ip, _, _ := strings.Cut(attrString(guest, "ip"), "/")
		if _, err := netip.ParseAddr(ip); err == nil {
			t.IP = ip // not "dhcp": then the host name has to do
		}
	}
	return t
}

func attrString(e store.Entity, key string) string {
	v, _ := e.Attrs[key].(string)
	return v
}

func attrInt(e store.Entity, key string) int {
	switch v := e.Attrs[key].(type) {
	case float64:
		return int(v)
	case string:
		n, _ := strconv.Atoi(v)
		return n
	}
	return 0
}
