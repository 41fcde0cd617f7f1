package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/nomoshq/nomos/internal/metrics"
	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/store"
)

// Tools is the part of an MCP client the agent uses; mcp-go's in-process
// client is one.
type Tools interface {
	ListTools(ctx context.Context, req mcp.ListToolsRequest) (*mcp.ListToolsResult, error)
	CallTool(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error)
}

// Config configures an Agent.
type Config struct {
	Store *store.Store
	// Tools reaches the MCP registry. Required.
	Tools Tools
	// BaseURL, APIKey, Model and Headers address the LLM.
	BaseURL string
	APIKey  string
	Model   string
	Headers map[string]string
	// MaxIterations bounds the model calls of one turn. Default 8.
	MaxIterations int
	// MaxTokens bounds one completion. Default 1024.
	MaxTokens int
	// MaxToolResultBytes caps a tool result handed to the model. Default 16 KiB.
	MaxToolResultBytes int
	// HistoryBudget is the most bytes of replayed history before older
	// turns are summarised. Default 48 KiB (about 12k tokens).
	HistoryBudget int
	// ContinuationWindow: a finished step re-invokes the session only this
	// soon after an operator approved something in it. Default 30m.
	ContinuationWindow time.Duration
	// MaxChain bounds automatic continuations in a row. Default 6.
	MaxChain int
	// Metrics records each model request and the tokens it used; nil
	// records nothing.
	Metrics *metrics.Metrics
	// CallTimeout bounds one model call. Default 90s.
	CallTimeout time.Duration
	Logger      *slog.Logger
	Clock       func() time.Time
}

// Agent runs turns for sessions.
type Agent struct {
	cfg Config
	// llm is the one service of the OpenAI client the agent calls. Holding
	// the whole client would link every service of the API into the
	// binary: the bot's types reach the agent's through interfaces, and
	// text/template's reflection keeps each exported method of such types,
	// which cost both roles megabytes of resident code.
	llm    openai.ChatCompletionService
	store  *store.Store
	logger *slog.Logger
	now    func() time.Time
	turns  sessionLocks
}

// New validates cfg and builds an Agent.
func New(cfg Config) (*Agent, error) {
	switch {
	case cfg.Store == nil || cfg.Tools == nil:
		return nil, errors.New("agent: Store and Tools are required")
	case cfg.Model == "":
		return nil, errors.New("agent: Model is required")
	}
	cfg.BaseURL = cmp.Or(cfg.BaseURL, "https://openrouter.ai/api/v1")
	cfg.MaxIterations = cmp.Or(cfg.MaxIterations, 8)
	cfg.MaxTokens = cmp.Or(cfg.MaxTokens, 1024)
	cfg.MaxToolResultBytes = cmp.Or(cfg.MaxToolResultBytes, 16<<10)
	cfg.HistoryBudget = cmp.Or(cfg.HistoryBudget, 48<<10)
	cfg.ContinuationWindow = cmp.Or(cfg.ContinuationWindow, 30*time.Minute)
	cfg.MaxChain = cmp.Or(cfg.MaxChain, 6)
	cfg.CallTimeout = cmp.Or(cfg.CallTimeout, 90*time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	opts := []option.RequestOption{option.WithBaseURL(cfg.BaseURL), option.WithAPIKey(cmp.Or(cfg.APIKey, "none")), option.WithMaxRetries(1),
		option.WithMiddleware(timeRequests(cfg.Metrics))}
	for k, v := range cfg.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	return &Agent{cfg: cfg, llm: openai.NewClient(opts...).Chat.Completions, store: cfg.Store, logger: cfg.Logger, now: cfg.Clock}, nil
}

// Reply is what a turn says back to the room.
type Reply struct {
	Text string
	// Requested lists the executions the turn asked for.
	Requested []uuid.UUID
}

// ErrLLM wraps a failure of the model endpoint; the turn ended without an
// answer, and the caller shows a clear notice.
var ErrLLM = errors.New("the language model did not answer")

// Message runs a turn for an operator's message.
func (a *Agent) Message(ctx context.Context, roomID, threadID, sender, text string) (Reply, error) {
	if sender == "" {
		// What the turn asks for is on the sender's behalf; a turn for
		// nobody would hold nobody to approvals.self_approval.
		return Reply{}, errors.New("agent: a message needs its sender")
	}
	sess, err := a.store.EnsureAgentSession(ctx, roomID, threadID)
	if err != nil {
		return Reply{}, err
	}
	if sess.Title == "" {
		if err := a.store.SetAgentSessionTitle(ctx, sess.ID, title(text)); err != nil {
			a.logger.Warn("set session title", "session_id", sess.ID, "err", err)
		}
	}
	unlock, err := a.turns.lock(ctx, sess.ID)
	if err != nil {
		return Reply{}, err
	}
	defer unlock()
	in := store.AgentMessage{Role: store.AgentRoleUser, Content: fmt.Sprintf("%s: %s", sender, text)}
	return a.turn(ctx, sess, sender, in, 0)
}

// NoteApproval records that an operator approved a step the agent asked
// for, which opens the continuation window of its session.
func (a *Agent) NoteApproval(ctx context.Context, executionID uuid.UUID) error {
	link, err := a.store.ExecutionLink(ctx, executionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return a.store.RecordOperatorApproval(ctx, link.SessionID, a.now())
}

// Continue re-invokes the session that requested executionID, now that it
// has finished. It runs at most once per execution (the claim is taken
// before the turn), only within ContinuationWindow of an operator approval
// in the session, and only MaxChain times in a row. ok is false when no
// turn ran.
func (a *Agent) Continue(ctx context.Context, x store.Execution) (reply Reply, roomID, threadID string, ok bool, err error) {
	link, err := a.store.ExecutionLink(ctx, x.ID)
	if errors.Is(err, store.ErrNotFound) {
		a.logger.Debug("execution was not requested by the agent", "execution_id", x.ID)
		return Reply{}, "", "", false, nil
	}
	if err != nil {
		return Reply{}, "", "", false, err
	}
	// Wait for a turn still running in the session: it may have seen this
	// result inline and claimed it.
	unlock, err := a.turns.lock(ctx, link.SessionID)
	if err != nil {
		return Reply{}, "", "", false, err
	}
	defer unlock()
	sess, err := a.store.AgentSession(ctx, link.SessionID)
	if err != nil {
		return Reply{}, "", "", false, err
	}
	if x.PlanID != nil && x.Plan != nil {
		switch {
		case x.IsFollower() && x.State != store.StateSucceeded && x.State != store.StateFailed && x.State != store.StateOutcomeUnknown:
			// Skipped, or decided with the plan: the step that stopped
			// the plan, or its first step, re-invokes the session.
			_, _, err := a.store.ClaimContinuation(ctx, x.ID)
			return Reply{}, "", "", false, err
		case x.State == store.StateSucceeded && x.Position < x.Plan.Steps:
			// The plan carries on by itself: the model hears of the step
			// in its history, and is re-invoked when the plan ends.
			if _, claimed, err := a.store.ClaimContinuation(ctx, x.ID); err != nil || !claimed {
				return Reply{}, "", "", false, err
			}
			note := store.AgentMessage{Role: store.AgentRoleNote, Content: resultNote(x, a.cfg.MaxToolResultBytes), ToolCallID: resultCallID(x.ID)}
			_, err := a.store.AppendAgentMessages(ctx, sess.ID, note)
			return Reply{}, "", "", false, err
		}
	}
	if link.ChainDepth >= a.cfg.MaxChain {
		a.logger.Info("continuation chain is at its limit", "execution_id", x.ID, "chain_depth", link.ChainDepth)
		return Reply{}, "", "", false, nil
	}
	if sess.LastOperatorApprovalAt == nil || a.now().Sub(*sess.LastOperatorApprovalAt) > a.cfg.ContinuationWindow {
		a.logger.Debug("no operator approval in the continuation window", "execution_id", x.ID, "session_id", sess.ID)
		return Reply{}, "", "", false, nil
	}
	// The continuation acts for the person whose message started the
	// chain, as recorded on the step, never for a name in the session's
	// text; a step recorded for nobody carries no one's rules on.
	sender := actingFor(x)
	if sender == "" {
		a.logger.Warn("a finished step names no operator the agent acted for; no continuation", "execution_id", x.ID)
		return Reply{}, "", "", false, nil
	}
	if _, claimed, err := a.store.ClaimContinuation(ctx, x.ID); err != nil || !claimed {
		a.logger.Debug("continuation already claimed", "execution_id", x.ID, "err", err)
		return Reply{}, "", "", false, err
	}
	// The result is shown as the answer to a synthetic execution_result
	// call (see noteMessages), never as the operator or the system.
	note := store.AgentMessage{Role: store.AgentRoleNote, Content: resultNote(x, a.cfg.MaxToolResultBytes), ToolCallID: resultCallID(x.ID)}
	reply, err = a.turn(ctx, sess, sender, note, link.ChainDepth+1)
	return reply, sess.RoomID, sess.ThreadID, true, err
}

// actingFor is the operator the agent acted for when it asked for x, so
// the steps it asks for next are held to the same approval rules.
func actingFor(x store.Execution) string {
	if x.OnBehalfOf != "" {
		return x.OnBehalfOf
	}
	if x.RequestedVia == mcpserver.ViaAgent && x.RequestedBy != "agent" {
		return x.RequestedBy // recorded before on_behalf_of existed
	}
	return ""
}

// turn runs the model with the session's history plus in, calling tools
// until it answers in text, and persists everything it says and sees.
func (a *Agent) turn(ctx context.Context, sess store.AgentSession, sender string, in store.AgentMessage, chainDepth int) (Reply, error) {
	if _, err := a.store.AppendAgentMessages(ctx, sess.ID, in); err != nil {
		return Reply{}, err
	}
	tools, err := a.tools(ctx)
	if err != nil {
		return Reply{}, err
	}
	caller := mcpserver.Caller{Via: mcpserver.ViaAgent, RequestedBy: cmp.Or(sender, "agent"), RoomID: sess.RoomID,
		Session: &store.SessionLink{SessionID: sess.ID, ChainDepth: chainDepth}}
	st := turnState{
		toolCtx: mcpserver.WithCaller(ctx, caller),
		// A turn that starts from an execution's result has read host
		// output before its first call.
		sawOthersText: in.Role == store.AgentRoleNote,
	}
	for range a.cfg.MaxIterations {
		offer := tools
		if st.queued {
			offer = nil // a step waits for approval: the model answers in text
		}
		msg, err := a.complete(ctx, &sess, offer)
		if err != nil {
			return st.reply, err
		}
		if len(msg.ToolCalls) == 0 || st.queued {
			text := cmp.Or(strings.TrimSpace(msg.Content), "(no answer)")
			if _, err := a.store.AppendAgentMessages(ctx, sess.ID, store.AgentMessage{Role: store.AgentRoleAssistant, Content: text}); err != nil {
				return st.reply, err
			}
			st.reply.Text = text
			return st.reply, nil
		}
		calls, err := json.Marshal(msg.ToolCalls)
		if err != nil {
			return st.reply, err
		}
		out := []store.AgentMessage{{Role: store.AgentRoleAssistant, Content: msg.Content, ToolCalls: calls}}
		for _, tc := range msg.ToolCalls {
			out = append(out, a.runToolCall(ctx, sess.ID, tc, &st))
		}
		if _, err := a.store.AppendAgentMessages(ctx, sess.ID, out...); err != nil {
			return st.reply, err
		}
	}
	st.reply.Text = fmt.Sprintf("I stopped after %d steps without finishing. Tell me how to go on, or ask something narrower.", a.cfg.MaxIterations)
	_, err = a.store.AppendAgentMessages(ctx, sess.ID, store.AgentMessage{Role: store.AgentRoleAssistant, Content: st.reply.Text})
	return st.reply, err
}

// turnState is what one turn carries from a model call to the next.
type turnState struct {
	toolCtx context.Context // carries the MCP caller
	reply   Reply
	// queued: a step waits for approval or is still running, so the turn
	// ends with the model's next text and the result re-invokes the
	// session.
	queued bool
	// sawOthersText: the turn has read text from a host or an alert
	// (closesHTTPGet); http_get is refused from then on.
	sawOthersText bool
}

// complete sends the session's history, freshly read and summarised when
// too long, to the model with the tools offered, and returns its message.
// sess is re-read, for its summary. The reads after compact are
// independent and run at once: they sit between a result and the model.
func (a *Agent) complete(ctx context.Context, sess *store.AgentSession, tools []openai.ChatCompletionToolUnionParam) (openai.ChatCompletionMessage, error) {
	history, unchanged, err := a.compact(ctx, sess.ID)
	if err != nil {
		a.logger.Warn("summarise history", "session_id", sess.ID, "err", err)
	}
	var (
		wg               sync.WaitGroup
		cur              store.AgentSession
		system           string
		hErr, sErr, pErr error
	)
	wg.Add(2)
	go func() { defer wg.Done(); cur, sErr = a.store.AgentSession(ctx, sess.ID) }()
	go func() { defer wg.Done(); system, pErr = a.systemPrompt(ctx) }()
	if !unchanged {
		history, hErr = a.store.AgentMessages(ctx, sess.ID)
	}
	wg.Wait()
	if err := cmp.Or(hErr, sErr, pErr); err != nil {
		return openai.ChatCompletionMessage{}, err
	}
	*sess = cur
	messages := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system)}
	messages = append(messages, summaryMessages(sess.Summary)...)
	params := openai.ChatCompletionNewParams{
		Model:     a.cfg.Model,
		Messages:  append(messages, replay(history)...),
		MaxTokens: openai.Int(int64(a.cfg.MaxTokens)),
		Tools:     tools,
	}
	callCtx, cancel := context.WithTimeout(ctx, a.cfg.CallTimeout)
	resp, err := a.llm.New(callCtx, params)
	cancel()
	if err != nil {
		a.logger.Warn("llm call failed", "session_id", sess.ID, "err", err)
		return openai.ChatCompletionMessage{}, fmt.Errorf("%w: %v", ErrLLM, err)
	}
	a.countTokens(resp)
	if len(resp.Choices) == 0 {
		return openai.ChatCompletionMessage{}, fmt.Errorf("%w: an empty response", ErrLLM)
	}
	return resp.Choices[0].Message, nil
}

// runToolCall runs one tool call of the model's and returns its result
// message. A request_execution that created an execution is added to the
// reply; one still waiting ends the turn (st.queued).
func (a *Agent) runToolCall(ctx context.Context, sessID uuid.UUID, tc openai.ChatCompletionMessageToolCallUnion, st *turnState) store.AgentMessage {
	name := tc.Function.Name
	var result string
	var res *mcp.CallToolResult
	if name == httpGetTool && st.sawOthersText {
		a.logger.Info("http_get refused after text from a host or an alert", "session_id", sessID)
		result = httpGetRefused
	} else {
		result, res = a.callTool(st.toolCtx, name, tc.Function.Arguments) //nolint:contextcheck // toolCtx is the turn's ctx with the MCP caller (runTurn)
	}
	st.sawOthersText = st.sawOthersText || closesHTTPGet[name]
	msg := store.AgentMessage{Role: store.AgentRoleTool, Content: result, ToolCallID: tc.ID}
	if name != "request_execution" {
		return msg
	}
	a.logger.Debug("request_execution result", "result", firstLine(result, 300))
	req, ok := requested(res)
	if !ok {
		return msg
	}
	st.reply.Requested = append(st.reply.Requested, req.id)
	if !req.done {
		st.queued = true
		return msg
	}
	// Only a probe the gate approves by itself (pct_status) can have ended
	// already: the model has its result, so the result arriving later must
	// not re-invoke the session.
	for _, id := range req.all {
		if _, _, err := a.store.ClaimContinuation(ctx, id); err != nil {
			a.logger.Warn("mark an inline result as continued", "execution_id", id, "err", err)
		}
	}
	return msg
}

// callTool runs one MCP tool and returns its text, fenced as untrusted
// data and capped, with the raw result (nil when the call failed). A
// malformed call becomes an error result the model can read and correct.
func (a *Agent) callTool(ctx context.Context, name, rawArgs string) (string, *mcp.CallToolResult) {
	var args map[string]any
	if strings.TrimSpace(rawArgs) == "" {
		args = map[string]any{}
	} else if err := json.Unmarshal([]byte(rawArgs), &args); err != nil {
		return fmt.Sprintf("error: the arguments for %s are not a JSON object (%v); call it again with valid JSON", name, err), nil
	}
	res, err := a.cfg.Tools.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
	if err != nil {
		return fmt.Sprintf("error: %s failed: %v", name, err), nil
	}
	var parts []string
	for _, c := range res.Content {
		if t, ok := mcp.AsTextContent(c); ok {
			parts = append(parts, t.Text)
		}
	}
	return fencedToolResult(name, strings.Join(parts, "\n"), res.IsError, a.cfg.MaxToolResultBytes), res
}

type requestedExecution struct {
	id uuid.UUID
	// done: the execution, or every step of the plan, has ended.
	done bool
	// all are the execution's id, or every step's of a plan.
	all []uuid.UUID
}

// requested reads which execution a request_execution call created, and
// in what state, from the tool's structured result.
func requested(res *mcp.CallToolResult) (requestedExecution, bool) {
	if res == nil || res.IsError || res.StructuredContent == nil {
		return requestedExecution{}, false
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return requestedExecution{}, false
	}
	var r mcpserver.Requested
	if err := json.Unmarshal(raw, &r); err != nil {
		return requestedExecution{}, false
	}
	id, err := uuid.Parse(r.ExecutionID)
	if err != nil {
		return requestedExecution{}, false
	}
	req := requestedExecution{id: id, done: store.ExecutionState(r.State).Terminal(), all: []uuid.UUID{id}}
	if len(r.Steps) > 0 {
		req.all = req.all[:0]
		for _, st := range r.Steps {
			sid, err := uuid.Parse(st.ExecutionID)
			if err != nil {
				return requestedExecution{}, false
			}
			req.all = append(req.all, sid)
			req.done = req.done && store.ExecutionState(st.State).Terminal()
		}
	}
	return req, true
}

// tools lists the MCP tools as OpenAI function tools.
func (a *Agent) tools(ctx context.Context) ([]openai.ChatCompletionToolUnionParam, error) {
	res, err := a.cfg.Tools.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, fmt.Errorf("list tools: %w", err)
	}
	out := make([]openai.ChatCompletionToolUnionParam, 0, len(res.Tools))
	for _, t := range res.Tools {
		schema := map[string]any{}
		raw := t.RawInputSchema
		if len(raw) == 0 {
			raw, _ = json.Marshal(t.InputSchema)
		}
		_ = json.Unmarshal(raw, &schema)
		out = append(out, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t.Name, Description: openai.String(t.Description), Parameters: shared.FunctionParameters(schema),
		}))
	}
	return out, nil
}

// replay turns stored messages into the model's history: tool calls with
// their results in pairs, and notes (execution results) as the results of
// synthetic calls. Only the operator's own messages are user messages, and
// nothing from the history becomes a system message.
func replay(msgs []store.AgentMessage) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	pending := map[string]bool{}
	for _, m := range msgs {
		switch m.Role {
		case store.AgentRoleUser:
			out = append(out, openai.UserMessage(m.Content))
		case store.AgentRoleNote, store.AgentRoleSystem:
			out = append(out, noteMessages(m)...)
		case store.AgentRoleAssistant:
			var calls []openai.ChatCompletionMessageToolCallUnion
			if len(m.ToolCalls) > 0 {
				_ = json.Unmarshal(m.ToolCalls, &calls)
			}
			p := openai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" {
				p.Content.OfString = openai.String(m.Content)
			}
			for _, c := range calls {
				pending[c.ID] = true
				p.ToolCalls = append(p.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       c.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Function.Name, Arguments: c.Function.Arguments},
					},
				})
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &p})
		case store.AgentRoleTool:
			if !pending[m.ToolCallID] {
				continue // its call was summarised away; a lone result confuses models
			}
			out = append(out, openai.ToolMessage(m.Content, m.ToolCallID))
		}
	}
	return out
}

func title(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	if len(text) > 60 {
		text = text[:60] + "…"
	}
	return text
}

func tailBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
