package bot_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/bot/agent"
	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

func TestAgentAnswersFleetQuestionWithOneBulkCall(t *testing.T) {
	t.Parallel()
	llm := testenv.NewScriptedLLM(t)
	llm.Script(
		testenv.ToolCall("list_lxcs", `{}`),
		testenv.Reply("All containers are healthy except teddycloud (131), which is stopped."),
	)
	b := setup(t, withLLM(llm))
	b.say(t, b.operator, "Which containers are unhealthy?", "")
	b.waitFor(t, b.botSays("teddycloud (131), which is stopped"))

	reqs := llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model was called %d times, want 2", len(reqs))
	}
	first := reqs[0]
	if !slices.Contains(first.ToolNames(), "list_lxcs") || !slices.Contains(first.ToolNames(), "request_execution") {
		t.Errorf("tools offered: %v", first.ToolNames())
	}
	sys := first.System()
	if !strings.Contains(sys, "request_execution") || !strings.Contains(sys, "Right now") || !strings.Contains(sys, "lxcs: 15") {
		t.Errorf("system prompt lacks the persona or the fleet snapshot:\n%s", sys)
	}
	if last := first.Last(); last.Role != "user" || !strings.Contains(last.Content, "Which containers are unhealthy?") {
		t.Errorf("last message = %+v", last)
	}
	result := reqs[1].Last()
	if result.Role != "tool" {
		t.Fatalf("second call's last message is %s, want the tool result", result.Role)
	}
	for _, name := range []string{"jellyfin", "gitea", "teddycloud", "nextcloud"} {
		if !strings.Contains(result.Content, name) {
			t.Errorf("list_lxcs result lacks %s:\n%s", name, result.Content)
		}
	}
	calls := 0
	for _, r := range reqs {
		calls += len(r.Reply.ToolCalls)
	}
	if calls != 1 {
		t.Errorf("%d tool calls for a fleet-wide question, want 1", calls)
	}
}

func TestAgentReplaysToolPairsAndCapsStoredMessages(t *testing.T) {
	t.Parallel()
	llm := testenv.NewScriptedLLM(t)
	llm.Script(
		testenv.ToolCall("search_knowledge", `{"query":"dns resolver"}`),
		testenv.Reply("The static-IP resolver story is in static-ip-dead-resolver."),
		testenv.Reply("You asked about DNS before.").When(testenv.LastMessage("user", "what did I ask")),
	)
	b := setup(t, withLLM(llm))
	b.say(t, b.operator, "what do we know about dns resolvers?", "")
	b.waitFor(t, b.botSays("static-ip-dead-resolver"))
	b.say(t, b.operator, "what did I ask before?", "")
	b.waitFor(t, b.botSays("You asked about DNS before"))

	reqs := llm.Requests()
	third := reqs[len(reqs)-1]
	var callID string
	for _, m := range third.Messages {
		if m.Role == "assistant" && len(m.ToolCalls) == 1 && m.ToolCalls[0].Name == "search_knowledge" {
			callID = m.ToolCalls[0].ID
		}
	}
	if callID == "" {
		t.Fatalf("the next turn does not replay the earlier tool call: %+v", third.Messages)
	}
	paired := false
	for _, m := range third.Messages {
		if m.Role == "tool" && m.ToolCallID == callID && strings.Contains(m.Content, "static-ip-dead-resolver") {
			paired = true
		}
	}
	if !paired {
		t.Errorf("the replayed tool call has no result with id %s", callID)
	}
	var over int
	if err := b.storeQuery(t, `SELECT count(*) FROM agent_messages WHERE octet_length(content) > 16384`, &over); err != nil {
		t.Fatal(err)
	}
	if over != 0 {
		t.Errorf("%d stored agent messages exceed 16 KB", over)
	}
}

func TestAgentLLMFailureEndsTurnWithNotice(t *testing.T) {
	t.Parallel()
	llm := testenv.NewScriptedLLM(t)
	llm.Script(
		testenv.HTTPError(503, "upstream overloaded").Times(2),
		testenv.Reply("Back again: everything looks fine."),
	)
	b := setup(t, withLLM(llm))
	b.say(t, b.operator, "anything odd since yesterday?", "")
	b.waitFor(t, b.botSays("language model did not answer"))
	// The runbook path works without the model.
	b.say(t, b.operator, "restart jellyfin", "")
	b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval"))
	// And the next free-form message works again.
	b.say(t, b.operator, "and now?", "")
	b.waitFor(t, b.botSays("Back again"))
}

// TestAgentCarriesOnAfterEachStep replays the seed's failure: a static-IP
// container whose resolver is dead. The agent provisions it, is
// re-invoked by each result without an operator message in between,
// proposes the next step, and ends by verifying the service answers. The
// check is free-form shell, so it waits for the operator like every other
// step the agent asks for, even though it classifies read_only.
func TestAgentCarriesOnAfterEachStep(t *testing.T) {
	t.Parallel()
	llm := testenv.NewScriptedLLM(t)
	llm.Script(
		testenv.ToolCall("request_execution", `{"action":"pct_create","target":"host:strong","params":{"hostname":"web","ip":"10.40.0.150/24","gw":"10.40.0.1","services":["nginx"],"post_install":"curl -fsS http://localhost/"},"reason":"a web server for the operator"}`).
			When(testenv.LastMessage("user", "web server")),
		testenv.Reply("I have asked to create the container; approve the card and I will carry on."),
		testenv.ToolCall("request_execution", `{"action":"systemctl","target":"lxc:108","params":{"verb":"restart","unit":"nginx"},"reason":"pick up the new config"}`).
			When(lastNote("pct_create on host:strong", "succeeded")),
		testenv.Reply("The container is up; I asked to restart nginx so it starts clean."),
		testenv.ToolCall("request_execution", `{"action":"pct_exec","target":"lxc:108","params":{"command":"curl -fsS http://localhost/"},"reason":"verify"}`).
			When(lastNote("systemctl on lxc:strong/108", "succeeded")),
		testenv.Reply("I asked to check that nginx answers; approve it and I will confirm."),
		testenv.Reply("Verified: nginx answers on web (CT 108).").When(lastNote("pct_exec on lxc:strong/108", "succeeded")),
	)
	b := setup(t, withLLM(llm))
	if err := b.fleet.Sim.Inject(labsim.Fault{Kind: labsim.FaultDNSDead, Target: "108"}); err != nil {
		t.Fatal(err)
	}
	b.say(t, b.operator, "set up a web server with nginx at 10.40.0.150", "")
	create := b.waitFor(t, b.botSays("create strong", "config_mutation", "awaiting approval"))
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, create.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.cardEdited(create.ID, "succeeded"))
	restart := b.waitFor(t, b.botSays("systemctl", "lxc:strong/108", "awaiting approval"))
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, restart.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	verify := b.waitFor(t, b.botSays("Why: verify", "read_only", "awaiting approval"))
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, verify.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.botSays("Verified: nginx answers"))

	x := b.execFor(t, create.ID)
	if !strings.Contains(string(x.Result), "1.1.1.1") {
		t.Errorf("the create result does not say the resolver was replaced: %s", x.Result)
	}
	// The results arrived as fenced tool results, never as the operator or
	// the system speaking.
	results := 0
	for _, r := range llm.Requests() {
		for _, m := range r.Messages {
			if !strings.Contains(m.Content, "which you asked for, finished:") {
				continue
			}
			if m.Role != "tool" || !strings.Contains(m.Content, "<untrusted-output>") {
				t.Errorf("a result was shown to the model as %s, not as fenced tool data: %q", m.Role, m.Content)
			}
			results++
		}
	}
	if results == 0 {
		t.Error("no execution result reached the model")
	}
	// Only the first message came from the operator.
	var operatorMsgs int
	if err := b.storeQuery(t, `SELECT count(*) FROM agent_messages WHERE role = 'user'`, &operatorMsgs); err != nil {
		t.Fatal(err)
	}
	if operatorMsgs != 1 {
		t.Errorf("%d operator messages in the session, want 1", operatorMsgs)
	}
	// Each of the three results re-invoked the session once.
	var notes, unclaimed int
	if err := b.storeQuery(t, `SELECT count(*) FROM agent_messages WHERE role = 'note'`, &notes); err != nil {
		t.Fatal(err)
	}
	if notes != 3 {
		t.Errorf("%d result notes in the session, want 3, one per step", notes)
	}
	if err := b.storeQuery(t, `SELECT count(*) FROM plan_executions WHERE continued_at IS NULL`, &unclaimed); err != nil {
		t.Fatal(err)
	}
	if unclaimed != 0 {
		t.Errorf("%d of the session's executions were never claimed as continued", unclaimed)
	}
	cmds := strings.Join(b.fleet.Commands(t), "\n")
	for _, want := range []string{"pct create 108", "nameserver 1.1.1.1", "systemctl restart nginx.service", "curl -fsS http://localhost/"} {
		if !strings.Contains(cmds, want) {
			t.Errorf("labsim never ran %q", want)
		}
	}
}

func TestMCPOverHTTP(t *testing.T) {
	t.Parallel()
	llm := testenv.NewScriptedLLM(t)
	b := setup(t, withLLM(llm))
	srv := httptest.NewServer(b.mcp.HTTPHandler())
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: status %d, want 401", resp.StatusCode)
	}

	c, err := mcpclient.NewStreamableHttpClient(srv.URL+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + mcpToken}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.LATEST_PROTOCOL_VERSION, ClientInfo: mcp.Implementation{Name: "test", Version: "1"}}}); err != nil {
		t.Fatal(err)
	}
	remote, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	local, err := b.mcp.InProcessClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inproc, err := local.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	names := func(ts []mcp.Tool) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		slices.Sort(out)
		return out
	}
	// A request token is offered the agent's tools and delete_session,
	// which is not for the agent.
	want := append(names(inproc.Tools), "delete_session")
	slices.Sort(want)
	if !slices.Equal(names(remote.Tools), want) {
		t.Errorf("HTTP tools %v differ from the in-process tools and delete_session %v", names(remote.Tools), want)
	}
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "request_execution",
		Arguments: map[string]any{"action": "restart", "target": "gitea", "reason": "external check"}}})
	if err != nil || res.IsError {
		t.Fatalf("request_execution over MCP: %v %+v", err, res)
	}
	// The operator sees why the client asked, and who it was.
	card := b.waitFor(t, b.botSays("restart gitea", "awaiting approval", "Why: external check (asked by mcp:"))
	x := b.execFor(t, card.ID)
	if x.RequestedVia != "mcp" || x.State != store.StateAwaitingApproval {
		t.Errorf("execution via %s in %s, want mcp awaiting_approval", x.RequestedVia, x.State)
	}
}

// lastNote matches a model request whose last message is an execution's
// result: the tool-role answer to a synthetic execution_result call.
func lastNote(parts ...string) testenv.Matcher {
	return testenv.Match("last message is an execution_result mentioning "+strings.Join(parts, ", "), func(r testenv.LLMRequest) bool {
		if len(r.Messages) < 2 {
			return false
		}
		last, call := r.Messages[len(r.Messages)-1], r.Messages[len(r.Messages)-2]
		if last.Role != "tool" || call.Role != "assistant" || len(call.ToolCalls) != 1 ||
			call.ToolCalls[0].Name != "execution_result" || call.ToolCalls[0].ID != last.ToolCallID {
			return false
		}
		for _, p := range parts {
			if !strings.Contains(last.Content, p) {
				return false
			}
		}
		return true
	})
}

func TestAgentMalformedToolCallIsAnsweredNotFatal(t *testing.T) {
	t.Parallel()
	llm := testenv.NewScriptedLLM(t)
	llm.Script(
		testenv.MalformedToolCall("get_entity"),
		testenv.Reply("Sorry, let me read that properly: jellyfin runs in CT 101.").When(testenv.LastToolResult("not a JSON object")),
	)
	b := setup(t, withLLM(llm))
	b.say(t, b.operator, "where does jellyfin run?", "")
	b.waitFor(t, b.botSays("jellyfin runs in CT 101"))
}

func TestAgentSummarisesLongHistory(t *testing.T) {
	t.Parallel()
	llm := testenv.NewScriptedLLM(t)
	long := strings.Repeat("the fleet is fine and every service answers its health check. ", 12)
	summarising := testenv.AnyMessage("system", "Summarise the transcript")
	llm.Script(
		testenv.Reply("SUMMARY: the operator asked twice about the fleet; all was well.").When(summarising).Times(5),
		testenv.Reply("first: "+long).When(testenv.LastMessage("user", "first question")),
		testenv.Reply("second: "+long).When(testenv.LastMessage("user", "second question")),
		testenv.Reply("third answer").When(testenv.LastMessage("user", "third question")),
	)
	b := setup(t, withLLM(llm), withAgent(func(c *agent.Config) { c.HistoryBudget = 1200 }))
	b.say(t, b.operator, "first question", "")
	b.waitFor(t, b.botSays("first: "))
	b.say(t, b.operator, "second question", "")
	b.waitFor(t, b.botSays("second: "))
	b.say(t, b.operator, "third question", "")
	b.waitFor(t, b.botSays("third answer"))

	var third testenv.LLMRequest
	for _, r := range llm.Requests() {
		if strings.Contains(r.Last().Content, "third question") {
			third = r
		}
	}
	// The summary is the model's own words written from tool output: it
	// comes back as fenced data, never in the system prompt.
	if strings.Contains(third.System(), "SUMMARY") {
		t.Errorf("the summary is in the system prompt:\n%s", third.System())
	}
	summarised := false
	for i, m := range third.Messages {
		if m.Role == "tool" && strings.Contains(m.Content, "<untrusted-output>\nSUMMARY: the operator asked twice") {
			call := third.Messages[i-1]
			summarised = call.Role == "assistant" && len(call.ToolCalls) == 1 && call.ToolCalls[0].Name == "conversation_summary" && call.ToolCalls[0].ID == m.ToolCallID
		}
	}
	if !summarised {
		t.Errorf("the third turn does not replay the summary as the result of a conversation_summary call: %+v", third.Messages)
	}
	// The summariser reads the transcript as fenced tool data too.
	for _, r := range llm.Requests() {
		if !strings.Contains(r.System(), "Summarise the transcript") {
			continue
		}
		for _, m := range r.Messages {
			if m.Role == "user" {
				t.Errorf("the summariser was given a user message: %.200q", m.Content)
			}
		}
		if last := r.Last(); last.Role != "tool" || !strings.Contains(last.Content, "<untrusted-output>") || !strings.Contains(last.Content, "first question") {
			t.Errorf("the summariser's transcript is not fenced tool data: %+v", last)
		}
	}
	for _, m := range third.Messages {
		if strings.Contains(m.Content, "first question") {
			t.Errorf("the summarised first question is still replayed")
		}
	}
}

// TestTypingWhileWorkingAndReadReceiptWhenDone: while a slow answer is
// being worked out the room sees the bot typing; then the typing stops and
// the bot's read receipt marks the operator's message as handled.
func TestTypingWhileWorkingAndReadReceiptWhenDone(t *testing.T) {
	t.Parallel()
	llm := testenv.NewScriptedLLM(t)
	llm.Script(testenv.Reply("Thought it over: all is well.").Delay(1500 * time.Millisecond))
	b := setup(t, withLLM(llm))

	// The guest's client follows the room's ephemeral events.
	var mu sync.Mutex
	var typing []bool // each typing update: is the bot among those typing?
	receipts := map[id.EventID]bool{}
	syncer := b.guest.Client.Syncer.(*mautrix.DefaultSyncer)
	syncer.OnEventType(event.EphemeralEventTyping, func(_ context.Context, e *event.Event) {
		mu.Lock()
		defer mu.Unlock()
		typing = append(typing, slices.Contains(e.Content.AsTyping().UserIDs, b.botUser.UserID))
	})
	syncer.OnEventType(event.EphemeralEventReceipt, func(_ context.Context, e *event.Event) {
		mu.Lock()
		defer mu.Unlock()
		for evtID, rs := range *e.Content.AsReceipt() {
			if _, ok := rs[event.ReceiptTypeRead][b.botUser.UserID]; ok {
				receipts[evtID] = true
			}
		}
	})
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = b.guest.Client.SyncWithContext(ctx) }()
	defer func() { cancel(); <-done }()

	msg := b.say(t, b.operator, "think it over: is all well?", "")
	b.waitFor(t, b.botSays("Thought it over"))
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		started := slices.Contains(typing, true)
		stopped := started && !typing[len(typing)-1]
		read := receipts[msg]
		seen := fmt.Sprintf("typing updates %v, bot read %v", typing, read)
		mu.Unlock()
		if started && stopped && read {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("want the bot seen typing, then not, and its read receipt on the message; got %s", seen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestReactionsAreHandledWhileTheAgentThinks: an agent turn runs beside the
// sync loop, so an approval given meanwhile is acted on at once, not after
// the model answers.
func TestReactionsAreHandledWhileTheAgentThinks(t *testing.T) {
	t.Parallel()
	llm := testenv.NewScriptedLLM(t)
	llm.Script(testenv.Reply("Slow thoughts, done at last.").Delay(8 * time.Second))
	b := setup(t, withLLM(llm))
	b.say(t, b.operator, "restart gitea", "")
	card := b.waitFor(t, b.botSays("restart gitea", "awaiting approval"))

	b.say(t, b.operator, "think slowly about the fleet", "")
	if _, err := llm.AwaitRequests(b.ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.cardEdited(card.ID, "succeeded"))
	if n := countContaining(b.botBodies(t), "Slow thoughts"); n != 0 {
		t.Error("the approval waited for the agent's turn to end")
	}
	b.waitFor(t, b.botSays("Slow thoughts, done at last."))
}
