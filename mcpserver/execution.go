package mcpserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/humantime"
	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// Requested is the structured part of a request_execution result, so a
// caller (the bot's agent) can link the execution without parsing text.
// For a plan of several steps it names the first step, which carries the
// plan's card and decision, and lists every step.
type Requested struct {
	ExecutionID string `json:"execution_id" jsonschema:"the execution id (a UUID); get_execution explains it"`
	Action      string `json:"action" jsonschema:"the catalogue action"`
	Target      string `json:"target" jsonschema:"the slug of the entity it acts on"`
	State       string `json:"state" jsonschema:"awaiting_approval until an operator decides; a probe is already running or done"`
	RiskClass   string `json:"risk_class" jsonschema:"the gate's class: read_only, reversible_low, config_mutation or destructive"`
	RoomID      string `json:"room_id,omitempty" jsonschema:"the Matrix room where its card is"`
	// Steps lists the steps of a plan of several, in order.
	Steps []RequestedStep `json:"steps,omitempty" jsonschema:"the steps of a plan of several, in order"`
	// AlreadyQueued says nothing new was queued: the execution named is
	// an earlier plan for the same change, still awaiting a decision.
	AlreadyQueued bool `json:"already_queued,omitempty" jsonschema:"nothing new was queued: this is an earlier plan for the same change, still awaiting a decision"`
}

// RequestedStep is one step of a requested plan of several steps.
type RequestedStep struct {
	ExecutionID string `json:"execution_id"`
	Action      string `json:"action"`
	Target      string `json:"target"`
	State       string `json:"state"`
	RiskClass   string `json:"risk_class"`
}

func (s *Server) requestExecution(ctx context.Context, a requestArgs) (*mcp.CallToolResult, error) {
	action := strings.TrimSpace(a.Action)
	target := strings.TrimSpace(a.Target)
	reason := oneLine(a.Reason, 500)
	steps, err := stepsArg(a.Steps)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	switch {
	case len(steps) > 0 && action != "":
		return mcp.NewToolResultError("request_execution takes either an action or a list of steps, not both"), nil
	case len(steps) == 0 && (action == "" || target == ""):
		return mcp.NewToolResultError("request_execution needs an action and a target, or a list of steps"), nil
	}
	if reason == "" {
		return mcp.NewToolResultError("request_execution needs a reason: one sentence on why, for the audit log and the operator"), nil
	}
	params, err := paramsArg(a.Params)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	c := s.caller(ctx)
	if c.RoomID == "" {
		return mcp.NewToolResultError("nothing was queued: no ops room is configured (matrix.ops_room) for requests from outside a room for plans, so no operator could approve it"), nil
	}
	if refused := s.allowRequest(ctx, "request_execution", c); refused != nil {
		return refused, nil
	}
	by, behalf := s.identity(c)
	p, err := s.exec.Request(ctx, executions.Request{
		Action: action, Target: target, Params: params, Steps: steps,
		RequestedBy: by, OnBehalfOf: behalf, Via: c.Via, Reason: reason, RoomID: c.RoomID, Session: c.Session,
	})
	var waiting *executions.AlreadyWaitingError
	if errors.As(err, &waiting) {
		return alreadyWaiting(waiting.Waiting, c), nil
	}
	if err != nil {
		return s.requestError(ctx, err), nil
	}
	x := p.Execution
	text := requestedText(p, c)
	if len(p.Steps) > 0 {
		return s.requestedPlan(ctx, p, text), nil
	}
	if x.State == store.StateApproved || x.State == store.StateDispatched || x.State == store.StateRunning {
		// A read_only step approved itself and is on its way: wait for it
		// a little, so a quick look (an apt audit, a df) answers in this
		// turn instead of the next.
		if done, err := s.waitTerminal(ctx, x); err == nil {
			x = done
		}
		text = ranText(x, s.describeExecution(x))
	}
	return mcp.NewToolResultStructured(Requested{
		ExecutionID: x.ID.String(), Action: x.Action, Target: x.TargetSlug, State: string(x.State),
		RiskClass: x.RiskClass, RoomID: x.RoomID,
	}, text), nil
}

// requestedPlan answers a request for a plan of several steps. A plan
// that approved itself (named read-only steps only) is waited for, up to
// its last step, like a single read-only step.
func (s *Server) requestedPlan(ctx context.Context, p executions.Planned, text string) *mcp.CallToolResult {
	xs := make([]store.Execution, len(p.Steps))
	for i, st := range p.Steps {
		xs[i] = st.Execution
	}
	head := xs[0]
	if head.State == store.StateApproved || head.State == store.StateDispatched || head.State == store.StateRunning {
		if _, err := s.waitTerminal(ctx, xs[len(xs)-1]); err == nil {
			if cur, err := s.store.PlanSteps(ctx, head.ID); err == nil {
				xs = cur
			}
		}
		var b strings.Builder
		for _, x := range xs {
			b.WriteString(s.describeExecution(x) + "\n")
		}
		last := xs[len(xs)-1]
		text = ranText(last, strings.TrimRight(b.String(), "\n"))
		head = xs[0]
	}
	out := Requested{ExecutionID: head.ID.String(), Action: head.Action, Target: head.TargetSlug, State: string(head.State),
		RiskClass: head.GateClass(), RoomID: head.RoomID}
	for _, x := range xs {
		out.Steps = append(out.Steps, RequestedStep{ExecutionID: x.ID.String(), Action: x.Action, Target: x.TargetSlug, State: string(x.State), RiskClass: x.RiskClass})
	}
	return mcp.NewToolResultStructured(out, text)
}

// identity is who a request is recorded as asked by: the agent itself,
// on behalf of the operator it acts for, or the external client, on
// behalf of the person its token was made for.
func (s *Server) identity(c Caller) (by, onBehalfOf string) {
	if c.Via != ViaAgent {
		return c.RequestedBy, c.Owner
	}
	if c.RequestedBy == s.cfg.AgentActor {
		return s.cfg.AgentActor, ""
	}
	return s.cfg.AgentActor, c.RequestedBy
}

// maxStepsArg bounds what stepsArg reads before the gate checks the plan.
const maxStepsArg = 2 * policy.MaxPlanSteps

// stepsArg reads the steps argument: a list of {action, target, params}.
// A model sometimes sends the list as a JSON string; that is accepted too.
func stepsArg(v any) ([]executions.Step, error) {
	const shape = `steps must be a list such as [{"action": "pct_stop", "target": "lxc:131"}, {"action": "pct_destroy", "target": "lxc:131"}]`
	if str, ok := v.(string); ok {
		str = strings.TrimSpace(str)
		if str == "" {
			return nil, nil
		}
		if err := json.Unmarshal([]byte(str), &v); err != nil {
			return nil, errors.New(shape)
		}
	}
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, errors.New(shape)
	}
	if len(list) > maxStepsArg {
		return nil, fmt.Errorf("a plan has at most %d steps, got %d", policy.MaxPlanSteps, len(list))
	}
	out := make([]executions.Step, 0, len(list))
	for i, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("step %d: %s", i+1, shape)
		}
		action, _ := m["action"].(string)
		target, _ := m["target"].(string)
		if strings.TrimSpace(action) == "" {
			return nil, fmt.Errorf("step %d needs an action", i+1)
		}
		params, err := paramsArg(m["params"])
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i+1, err)
		}
		out = append(out, executions.Step{Action: strings.TrimSpace(action), Target: strings.TrimSpace(target), Params: params})
	}
	return out, nil
}

// paramsArg turns the params argument into the JSON the gate parses. A
// model sometimes sends the object as a JSON string; that is accepted too.
func paramsArg(v any) (json.RawMessage, error) {
	switch p := v.(type) {
	case nil:
		return nil, nil
	case string:
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, nil
		}
		if !json.Valid([]byte(p)) || !strings.HasPrefix(p, "{") {
			return nil, fmt.Errorf("params must be an object such as {\"command\": \"df -h\"}, got %q", oneLine(p, 80))
		}
		return json.RawMessage(p), nil
	case map[string]any:
		return json.Marshal(p)
	}
	return nil, fmt.Errorf("params must be an object such as {\"command\": \"df -h\"}")
}

// requestError turns the gate's refusal into the sentence the model needs
// to correct itself.
func (s *Server) requestError(ctx context.Context, err error) *mcp.CallToolResult {
	var amb *executions.AmbiguousTargetError
	switch {
	case errors.As(err, &amb):
		return mcp.NewToolResultError(fmt.Sprintf("nothing was queued: %q matches %d entities: %s; call again with one of these slugs as the target",
			amb.Ref, len(amb.Candidates), strings.Join(amb.Candidates, ", ")))
	case errors.Is(err, executions.ErrUnknownTarget):
		return mcp.NewToolResultError("nothing was queued: " + err.Error() + "; list_lxcs or list_entities shows the slugs")
	case errors.Is(err, policy.ErrUnknownAction), errors.Is(err, policy.ErrInvalidParams), errors.Is(err, policy.ErrInvalidTarget):
		return mcp.NewToolResultError("nothing was queued: " + err.Error())
	}
	return s.internal(ctx, "request_execution", err, "nothing was queued: the request could not be recorded just now; try again shortly")
}

// alreadyWaiting answers a request for a change whose plan still awaits
// a decision: nothing new was queued, and the answer names that plan.
func alreadyWaiting(x store.Execution, c Caller) *mcp.CallToolResult {
	text := fmt.Sprintf("already queued: nothing new was queued, because execution %s (plan %s: %s on %s) asks for the same change and still awaits the operator's decision.",
		x.ID, x.PlanCode, x.Action, x.TargetSlug)
	if c.Via == ViaAgent {
		text += " Do not ask again; end your turn now."
	} else {
		text += fmt.Sprintf(" get_execution %s shows where it stands.", x.ID)
	}
	return mcp.NewToolResultStructured(Requested{
		ExecutionID: x.ID.String(), Action: x.Action, Target: x.TargetSlug, State: string(x.State),
		RiskClass: x.GateClass(), RoomID: x.RoomID, AlreadyQueued: true,
	}, text)
}

func requestedText(p executions.Planned, c Caller) string {
	if len(p.Steps) > 0 {
		return requestedPlanText(p, c)
	}
	x := p.Execution
	var b strings.Builder
	switch x.State {
	case store.StateAwaitingApproval:
		fmt.Fprintf(&b, "queued for approval: execution %s (%s): %s on %s.", x.ID, x.RiskClass, x.Action, x.TargetSlug)
		if p.Phrase != "" {
			b.WriteString(" It is destructive: the operator must type its confirmation phrase in the room.")
		} else if c.toOpsRoom {
			b.WriteString(" This room takes no plans: its card is posted in the ops room, where an operator approves it.")
		} else {
			b.WriteString(" The operator approves it in the room.")
		}
		if c.Via == ViaAgent {
			b.WriteString(" End your turn now; you are re-invoked with the result when it finishes.")
		} else {
			fmt.Fprintf(&b, " Its card is posted in the ops room; get_execution %s shows where it stands.", x.ID)
		}
	default:
		fmt.Fprintf(&b, "execution %s (%s on %s) is %s: %s", x.ID, x.Action, x.TargetSlug, x.State, cmp.Or(redact.String(x.Error), "no detail"))
	}
	if reasons := p.Risk.Reasons; len(reasons) > 0 {
		b.WriteString("\nrisk: " + strings.Join(reasons[:min(len(reasons), 3)], "; "))
	}
	if len(p.Blast) > 0 {
		names := make([]string, 0, 8)
		for i, a := range p.Blast {
			if i == 8 {
				names = append(names, fmt.Sprintf("%d more", len(p.Blast)-i))
				break
			}
			names = append(names, a.Slug)
		}
		b.WriteString("\nalso affects: " + strings.Join(names, ", "))
	}
	if len(x.Steps) > 0 {
		b.WriteString("\nsteps: " + oneLine(strings.Join(x.Steps, " ; "), 400))
	}
	return b.String()
}

func requestedPlanText(p executions.Planned, c Caller) string {
	x := p.Execution
	var b strings.Builder
	switch x.State {
	case store.StateAwaitingApproval:
		fmt.Fprintf(&b, "queued for approval: a plan of %d steps (%s), execution %s. One approval covers every step; they run in order, "+
			"each only once the one before it succeeded, and the rest are skipped after a failure.", len(p.Steps), x.GateClass(), x.ID)
		if p.Phrase != "" {
			b.WriteString(" It has a destructive step: the operator must type its confirmation phrase in the room.")
		}
		if c.toOpsRoom {
			b.WriteString(" This room takes no plans: its card is posted in the ops room, where an operator decides it.")
		}
		if c.Via == ViaAgent {
			b.WriteString(" End your turn now; you are re-invoked when the plan finishes or stops at a step that failed.")
		} else {
			fmt.Fprintf(&b, " Its card is posted in the ops room; get_execution %s shows where it stands.", x.ID)
		}
	default:
		fmt.Fprintf(&b, "plan %s of %d steps is %s", x.ID, len(p.Steps), x.State)
	}
	for i, st := range p.Steps {
		fmt.Fprintf(&b, "\nstep %d: %s on %s (%s), execution %s: %s", i+1, st.Execution.Action, st.Execution.TargetSlug,
			st.Execution.RiskClass, st.Execution.ID, oneLine(strings.Join(st.Execution.Steps, " ; "), 300))
	}
	if reasons := p.Risk.Reasons; len(reasons) > 0 {
		b.WriteString("\nrisk: " + strings.Join(reasons[:min(len(reasons), 3)], "; "))
	}
	return b.String()
}

// ranText introduces a read_only execution that ran without an approval:
// finished, with its result, or still out.
func ranText(x store.Execution, detail string) string {
	if x.State.Terminal() {
		return fmt.Sprintf("ran at once (read_only, approved automatically) and %s:\n%s", x.State, detail)
	}
	return fmt.Sprintf("running (read_only, approved automatically) and not finished yet: execution %s is %s; "+
		"get_execution %s shows the result when it ends.\n%s", x.ID, x.State, x.ID, detail)
}

// outputTail bounds the output shown for one execution.
const outputTail = 2000

func (s *Server) getExecution(ctx context.Context, a executionArgs) (*mcp.CallToolResult, error) {
	id, err := parseID(a.ID)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	x, err := s.store.GetExecution(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return mcp.NewToolResultError(fmt.Sprintf("no execution has id %s", id)), nil
	}
	if err != nil {
		return s.internal(ctx, "get_execution", err, "could not read the execution just now; try again shortly"), nil
	}
	return mcp.NewToolResultStructured(executionStatus(x), s.describeExecution(x)), nil
}

func (s *Server) describeExecution(x store.Execution) string {
	now := s.now()
	var b strings.Builder
	fmt.Fprintf(&b, "execution %s: %s on %s — %s (%s)\n", x.ID, x.Action, x.TargetSlug, x.State, x.RiskClass)
	if x.Plan != nil && x.PlanID != nil {
		fmt.Fprintf(&b, "step %d of %d of plan %s (%s; approved as one)\n", x.Position, x.Plan.Steps, x.PlanID, x.Plan.RiskClass)
	}
	fmt.Fprintf(&b, "requested by %s via %s", x.RequestedBy, x.RequestedVia)
	if x.OnBehalfOf != "" {
		fmt.Fprintf(&b, " for %s", x.OnBehalfOf)
	}
	fmt.Fprintf(&b, " %s (%s)", stamp(x.CreatedAt), humantime.Ago(now, x.CreatedAt))
	if a := x.Approval; a != nil {
		fmt.Fprintf(&b, "; %s by %s (%s) %s", a.Decision, a.DecidedBy, a.Method, humantime.Ago(now, a.DecidedAt))
	} else if x.State == store.StateAwaitingApproval {
		fmt.Fprintf(&b, "; awaiting approval, expires %s", humantime.Ago(now, x.ExpiresAt))
	}
	b.WriteString("\n")
	if x.Reason != "" {
		b.WriteString("reason: " + oneLine(redact.String(x.Reason), 500) + "\n")
	}
	// Params and steps are what runs, so they are shown exactly: never
	// redacted, reflowed or cut here (the result cap still applies).
	if len(x.Params) > 0 && string(x.Params) != "{}" {
		b.WriteString("params: " + string(x.Params) + "\n")
	}
	for i, st := range x.Steps {
		fmt.Fprintf(&b, "step %d: %s\n", i+1, st)
	}
	var r tasks.Result
	if len(x.Result) > 0 && json.Unmarshal(x.Result, &r) == nil {
		line := fmt.Sprintf("result: %s, exit %d", r.Status, r.ExitCode)
		if !r.StartedAt.IsZero() && !r.FinishedAt.IsZero() {
			line += ", took " + r.FinishedAt.Sub(r.StartedAt).Round(10*time.Millisecond).String()
		}
		if r.FailedPhase != "" {
			line += ", failed in " + r.FailedPhase
		}
		if r.Snapshot != "" {
			line += ", snapshot " + r.Snapshot + " (pct_rollback can restore it)"
		}
		b.WriteString(line + "\n")
		if len(r.Phases) > 0 {
			ps := make([]string, len(r.Phases))
			for i, p := range r.Phases {
				ps[i] = fmt.Sprintf("%s %s", p.Name, p.Status)
				if p.Status != tasks.StatusSucceeded {
					ps[i] += " exit " + strconv.Itoa(p.ExitCode)
				}
				if p.Note != "" {
					ps[i] += " (" + oneLine(redact.String(p.Note), 100) + ")"
				}
			}
			b.WriteString("phases: " + strings.Join(ps, "; ") + "\n")
		}
		for _, n := range r.Notes {
			b.WriteString("note: " + oneLine(redact.String(n), 300) + "\n")
		}
	}
	if x.Error != "" {
		b.WriteString("error: " + oneLine(redact.String(x.Error), 600) + "\n")
	}
	// Redact the whole output before cutting it, so a cut never splits a
	// secret into halves the rules no longer recognise.
	if out := strings.TrimSpace(redact.String(x.ProgressTail)); out != "" {
		t, cut := tail(out, outputTail)
		if cut {
			fmt.Fprintf(&b, "output (last %d bytes):\n", outputTail)
		} else {
			b.WriteString("output:\n")
		}
		b.WriteString(t + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

func (s *Server) lxcState(ctx context.Context, a containerArgs) (*mcp.CallToolResult, error) {
	return s.guestState(ctx, "get_lxc_state", a.Container, "lxc")
}

func (s *Server) vmState(ctx context.Context, a vmArgs) (*mcp.CallToolResult, error) {
	return s.guestState(ctx, "get_vm_state", a.VM, "vm")
}

// guestState answers get_lxc_state and get_vm_state: pct_status, a probe
// that approves itself, on one guest of kind, and what it answered.
func (s *Server) guestState(ctx context.Context, tool, ref, kind string) (*mcp.CallToolResult, error) {
	e, bad := s.resolve(ctx, tool, ref, kind)
	if bad != nil {
		return bad, nil
	}
	vmid, host := e.AttrInt("vmid"), attrText(e, "host")
	if policy.ValidateVMID(vmid) != nil || host == "" {
		return mcp.NewToolResultError(fmt.Sprintf("%s has no vmid or host in the fleet data, so it cannot be probed", e.Slug)), nil
	}
	command := "pct status " + strconv.Itoa(vmid)
	if kind == "vm" {
		command = "qm status " + strconv.Itoa(vmid)
	}
	c := s.caller(ctx)
	if refused := s.allowRequest(ctx, tool, c); refused != nil {
		return refused, nil
	}
	// pct_status is a probe: it takes nothing but the container, so it
	// approves itself whoever asks. No room: a probe is a tool call, not a
	// plan to show on a card.
	by, behalf := s.identity(c)
	p, err := s.exec.Request(ctx, executions.Request{
		Action: string(policy.ActionPctStatus), Target: e.Slug,
		RequestedBy: by, OnBehalfOf: behalf, Via: c.Via,
	})
	var waiting *executions.AlreadyWaitingError
	if errors.As(err, &waiting) {
		p.Execution, err = waiting.Waiting, nil // held back by the unattended limit a moment ago
	}
	if err != nil {
		return s.internal(ctx, tool, err, "the live probe could not be started; "+listTool(kind)+" has the latest checked state"), nil
	}
	x := p.Execution
	if x.State == store.StateAwaitingApproval {
		return mcp.NewToolResultText(fmt.Sprintf("the probe needs an approval here: execution %s awaits an operator; %s has the latest checked state", x.ID, listTool(kind))), nil
	}
	started := time.Now()
	x, err = s.waitTerminal(ctx, x)
	if err != nil {
		return s.internal(ctx, tool, err, fmt.Sprintf("lost track of the probe (execution %s); get_execution shows it", x.ID)), nil
	}
	took := time.Since(started).Round(100 * time.Millisecond)
	switch {
	case !x.State.Terminal():
		return mcp.NewToolResultText(fmt.Sprintf("%s (%s) on %s: the live probe is still %s after %s; execution %s, get_execution shows the answer when it arrives",
			e.Slug, e.Name, host, x.State, took, x.ID)), nil
	case x.State != store.StateSucceeded:
		return mcp.NewToolResultText(fmt.Sprintf("%s (%s) on %s: the live probe %s: %s (execution %s)",
			e.Slug, e.Name, host, x.State, oneLine(redact.String(cmp.Or(x.Error, x.ProgressTail, "no detail")), 300), x.ID)), nil
	}
	status, ok := pctStatus(x.ProgressTail)
	if !ok {
		return mcp.NewToolResultText(fmt.Sprintf("%s (%s) on %s: `%s` gave no status line: %s (execution %s)",
			e.Slug, e.Name, host, command, oneLine(redact.String(x.ProgressTail), 300), x.ID)), nil
	}
	s.recordObservation(ctx, e, vmid, status, kind)
	return mcp.NewToolResultText(fmt.Sprintf("%s (%s) on %s: %s — live `%s`, %s, execution %s",
		e.Slug, e.Name, host, status, command, took, x.ID)), nil
}

// listTool is the bulk tool that lists guests of kind.
func listTool(kind string) string {
	if kind == "vm" {
		return "list_vms"
	}
	return "list_lxcs"
}

// tailLog reads the tail of a service's or a container's journal through
// tail_log, a probe: it takes the target and a bounded number only, so it
// runs at once whoever asks, and like get_lxc_state it needs a token that
// may request (it runs a command on a node).
func (s *Server) tailLog(ctx context.Context, a tailLogArgs) (*mcp.CallToolResult, error) {
	e, bad := s.resolve(ctx, "tail_log", a.Target, "service", "lxc")
	if bad != nil {
		return bad, nil
	}
	lines := a.Lines
	if lines < 1 || lines > policy.MaxLogLines {
		return mcp.NewToolResultError(fmt.Sprintf("lines must be from 1 to %d, got %d", policy.MaxLogLines, lines)), nil
	}
	c := s.caller(ctx)
	if refused := s.allowRequest(ctx, "tail_log", c); refused != nil {
		return refused, nil
	}
	by, behalf := s.identity(c)
	p, err := s.exec.Request(ctx, executions.Request{
		Action: string(policy.ActionTailLog), Target: e.Slug, Params: json.RawMessage(fmt.Sprintf(`{"lines":%d}`, lines)),
		RequestedBy: by, OnBehalfOf: behalf, Via: c.Via,
	})
	var waiting *executions.AlreadyWaitingError
	if errors.As(err, &waiting) {
		p.Execution, err = waiting.Waiting, nil
	}
	if err != nil {
		return s.requestError(ctx, err), nil
	}
	x := p.Execution
	if x.State == store.StateAwaitingApproval {
		return mcp.NewToolResultText(fmt.Sprintf("reading the journal needs an approval here: execution %s awaits an operator", x.ID)), nil
	}
	if x, err = s.waitTerminal(ctx, x); err != nil {
		return s.internal(ctx, "tail_log", err, fmt.Sprintf("lost track of the read (execution %s); get_execution shows it", x.ID)), nil
	}
	if x.State != store.StateSucceeded {
		return mcp.NewToolResultText(fmt.Sprintf("%s: the journal read is %s: %s (execution %s)",
			e.Slug, x.State, oneLine(redact.String(cmp.Or(x.Error, x.ProgressTail, "no detail yet")), 300), x.ID)), nil
	}
	var out []string
	for line := range strings.Lines(redact.String(x.ProgressTail)) {
		if !strings.HasPrefix(line, "== ") {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	return mcp.NewToolResultText(fmt.Sprintf("the last %d lines of %s's journal (execution %s):\n%s", lines, e.Slug, x.ID, strings.Join(out, "\n"))), nil
}

// pctStatus finds the answer of `pct status` in an execution's output,
// which also carries the actuator's phase headers ("== run").
func pctStatus(out string) (string, bool) {
	status, ok := "", false
	for line := range strings.Lines(out) {
		if v, found := strings.CutPrefix(strings.TrimSpace(line), "status:"); found {
			status, ok = strings.TrimSpace(v), true
		}
	}
	return status, ok
}

// waitTerminal polls an execution until it ends, LiveWait passes or ctx
// ends; it returns the last state seen.
func (s *Server) waitTerminal(ctx context.Context, x store.Execution) (store.Execution, error) {
	deadline := time.NewTimer(s.cfg.LiveWait)
	defer deadline.Stop()
	tick := time.NewTicker(s.cfg.PollInterval)
	defer tick.Stop()
	for !x.State.Terminal() {
		select {
		case <-ctx.Done():
			return x, nil
		case <-deadline.C:
			return x, nil
		case <-tick.C:
		}
		cur, err := s.store.GetExecution(ctx, x.ID)
		if err != nil {
			return x, err
		}
		x = cur
	}
	return x, nil
}

// recordObservation writes what the live probe saw to the guest's status,
// as the pct_status check would, so list_lxcs and list_vms are as fresh
// as it.
func (s *Server) recordObservation(ctx context.Context, e store.Entity, vmid int, status, kind string) {
	noun := "container"
	if kind == "vm" {
		noun = "VM"
	}
	health, detail := "unhealthy", fmt.Sprintf("%s %d is %s", noun, vmid, cmp.Or(status, "in an unknown state"))
	if status == "running" {
		health = "healthy"
	}
	err := s.store.RecordCheck(ctx, store.CheckObservation{TargetID: e.ID.String(), Health: health, Detail: detail, At: s.now()})
	if err != nil {
		s.log.WarnContext(ctx, "could not record a live container status", "entity", e.Slug, "err", err)
	}
}

func (s *Server) agentActivity(ctx context.Context, args activityArgs) (*mcp.CallToolResult, error) {
	since, err := parseSince(args.Since, 24*time.Hour)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	limit := args.Limit
	now := s.now()
	a, err := s.store.AgentActivitySince(ctx, now.Add(-since), limit)
	if err != nil {
		return s.internal(ctx, "get_agent_activity", err, "could not read the agent's activity just now; try again shortly"), nil
	}
	xs, err := s.store.ExecutionsVia(ctx, []string{ViaAgent, ViaMCP}, limit)
	if err != nil {
		return s.internal(ctx, "get_agent_activity", err, "could not read the agent's activity just now; try again shortly"), nil
	}
	var b strings.Builder
	msgs := 0
	for _, n := range a.Messages {
		msgs += n
	}
	fmt.Fprintf(&b, "Agent activity in the last %s: %d of %d sessions active, %d messages", humantime.Duration(since), a.Active, a.Sessions, msgs)
	if msgs > 0 {
		b.WriteString(" (" + countLine(a.Messages) + ")")
	}
	fmt.Fprintf(&b, ", %d tool calls, %d continuations after results\n", a.ToolCalls, a.Continuations)
	if len(a.Recent) > 0 {
		b.WriteString("recent sessions:\n")
		for _, x := range a.Recent {
			where := x.RoomID
			if x.ThreadID != "" {
				where += " thread " + x.ThreadID
			}
			fmt.Fprintf(&b, "  %s %s %q — %d messages, updated %s\n", x.ID, where, cmp.Or(x.Title, "untitled"), x.Messages, humantime.Ago(now, x.UpdatedAt))
		}
	}
	if len(xs) == 0 {
		b.WriteString("no executions requested via agent or mcp yet")
	} else {
		b.WriteString("latest executions via agent or mcp:\n")
		for _, x := range xs {
			fmt.Fprintf(&b, "  %s %s %s: %s (%s), by %s via %s, %s\n", x.ID, x.Action, x.TargetSlug, x.State, x.RiskClass,
				x.RequestedBy, x.RequestedVia, humantime.Ago(now, x.CreatedAt))
		}
	}
	return mcp.NewToolResultText(strings.TrimRight(b.String(), "\n")), nil
}
