package testenv_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"go.uber.org/goleak"

	"github.com/nomoshq/nomos/internal/testenv"
)

// These tests start nothing shared, so they can check for leaks directly.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// post sends a raw chat completions request and decodes the answer.
func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sk-test")
	req.Header.Set("X-Title", "nomos")
	c := &http.Client{}
	defer c.CloseIdleConnections()
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatalf("decode answer: %v", err)
	}
	return res.StatusCode, out
}

// message digs choices[0].message out of a decoded completion.
func message(t *testing.T, completion map[string]any) map[string]any {
	t.Helper()
	choices, _ := completion["choices"].([]any)
	if len(choices) != 1 {
		t.Fatalf("completion has %d choices: %v", len(choices), completion)
	}
	choice := choices[0].(map[string]any)
	msg := choice["message"].(map[string]any)
	msg["finish_reason"] = choice["finish_reason"]
	return msg
}

func TestScriptedLLMOverPlainHTTP(t *testing.T) {
	t.Parallel()
	llm := testenv.NewScriptedLLM(t)
	llm.Script(
		testenv.ToolCall("list_lxcs", `{}`).ToolCall("get_health_summary", `{"scope":"fleet"}`),
		testenv.Reply("Two containers are down."),
	)
	first := `{"model":"test/model","messages":[
		{"role":"system","content":"You are Nomos."},
		{"role":"user","content":[{"type":"text","text":"which containers "},{"type":"text","text":"are down?"}]}],
		"tools":[{"type":"function","function":{"name":"list_lxcs","description":"every container","parameters":{"type":"object"}}}]}`
	status, got := post(t, llm.URL()+"/chat/completions", first)
	if status != http.StatusOK {
		t.Fatalf("status %d: %v", status, got)
	}
	if got["object"] != "chat.completion" || got["model"] != "test/model" || got["usage"] == nil {
		t.Errorf("completion envelope: %v", got)
	}
	wantCalls := []any{
		map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "list_lxcs", "arguments": "{}"}},
		map[string]any{"id": "call_2", "type": "function", "function": map[string]any{"name": "get_health_summary", "arguments": `{"scope":"fleet"}`}},
	}
	if diff := cmp.Diff(map[string]any{"role": "assistant", "content": nil, "refusal": nil, "tool_calls": wantCalls, "finish_reason": "tool_calls"},
		message(t, got)); diff != "" {
		t.Errorf("tool call answer (-want +got):\n%s", diff)
	}

	second := `{"model":"test/model","messages":[
		{"role":"user","content":"which containers are down?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"list_lxcs","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"lxc:hubris/114 down"}]}`
	// The base URL without /v1 works too, as some clients build it so.
	_, got = post(t, strings.TrimSuffix(llm.URL(), "/v1")+"/chat/completions", second)
	if diff := cmp.Diff(map[string]any{"role": "assistant", "content": "Two containers are down.", "refusal": nil, "tool_calls": nil, "finish_reason": "stop"},
		message(t, got)); diff != "" {
		t.Errorf("text answer (-want +got):\n%s", diff)
	}

	_, got = post(t, llm.URL()+"/chat/completions", second)
	if msg := message(t, got); msg["content"] != "script exhausted" {
		t.Errorf("past the script: %v", msg)
	}

	reqs := llm.Requests()
	want := []testenv.LLMRequest{
		{
			Path: "/v1/chat/completions", Model: "test/model", Step: 0,
			Messages: []testenv.LLMMessage{
				{Role: "system", Content: "You are Nomos."},
				{Role: "user", Content: "which containers are down?"},
			},
			Tools: []testenv.LLMTool{{Name: "list_lxcs", Description: "every container", Parameters: json.RawMessage(`{"type":"object"}`)}},
			Reply: testenv.LLMReply{Status: 200, ToolCalls: []testenv.LLMToolCall{
				{ID: "call_1", Name: "list_lxcs", Arguments: "{}"},
				{ID: "call_2", Name: "get_health_summary", Arguments: `{"scope":"fleet"}`},
			}},
		},
		{
			Path: "/chat/completions", Model: "test/model", Step: 1,
			Messages: []testenv.LLMMessage{
				{Role: "user", Content: "which containers are down?"},
				{Role: "assistant", ToolCalls: []testenv.LLMToolCall{{ID: "call_1", Name: "list_lxcs", Arguments: "{}"}}},
				{Role: "tool", ToolCallID: "call_1", Content: "lxc:hubris/114 down"},
			},
			Reply: testenv.LLMReply{Status: 200, Text: "Two containers are down."},
		},
		{
			Path: "/v1/chat/completions", Model: "test/model", Step: -1,
			Messages: []testenv.LLMMessage{
				{Role: "user", Content: "which containers are down?"},
				{Role: "assistant", ToolCalls: []testenv.LLMToolCall{{ID: "call_1", Name: "list_lxcs", Arguments: "{}"}}},
				{Role: "tool", ToolCallID: "call_1", Content: "lxc:hubris/114 down"},
			},
			Reply: testenv.LLMReply{Status: 200, Text: "script exhausted", Exhausted: true},
		},
	}
	if diff := cmp.Diff(want, reqs, cmpopts.IgnoreFields(testenv.LLMRequest{}, "Header", "Body", "At")); diff != "" {
		t.Errorf("recorded requests (-want +got):\n%s", diff)
	}
	if len(reqs) == 3 {
		if h := reqs[0].Header; h.Get("Authorization") != "Bearer sk-test" || h.Get("X-Title") != "nomos" {
			t.Errorf("headers not recorded: %v", h)
		}
		if !json.Valid(reqs[0].Body) {
			t.Errorf("body not recorded: %q", reqs[0].Body)
		}
	}

	status, got = post(t, llm.URL()+"/embeddings", `{}`)
	if status != http.StatusNotFound || got["error"] == nil {
		t.Errorf("unknown route: %d %v", status, got)
	}
}

func newClient(llm *testenv.ScriptedLLM, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(llm.URL()), option.WithAPIKey("x"),
	}, opts...)...)
}

var listLxcs = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:        "list_lxcs",
	Description: openai.String("every container with host, vmid, IP, health and state"),
	Parameters:  openai.FunctionParameters{"type": "object", "properties": map[string]any{}},
})

func TestScriptedLLMToolRoundTripWithOpenAIGo(t *testing.T) {
	t.Parallel()
	llm := testenv.NewScriptedLLM(t)
	llm.Script(
		testenv.ToolCall("list_lxcs", `{}`),
		testenv.Reply("lxc:hubris/114 (nextcloud) is critical; the rest are fine.").When(testenv.LastToolResult(`"critical"`)),
	)
	client := newClient(llm, option.WithHeader("HTTP-Referer", "https://nomos.example"))
	ctx := t.Context()
	params := openai.ChatCompletionNewParams{
		Model: "deepseek/deepseek-v4-flash",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are Nomos."),
			openai.UserMessage("Which containers are unhealthy?"),
		},
		Tools: []openai.ChatCompletionToolUnionParam{listLxcs},
	}
	first, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	msg := first.Choices[0].Message
	if first.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 1 {
		t.Fatalf("first answer: finish %q, %d tool calls", first.Choices[0].FinishReason, len(msg.ToolCalls))
	}
	call := msg.ToolCalls[0]
	if call.ID != "call_1" || call.Function.Name != "list_lxcs" || call.Function.Arguments != "{}" {
		t.Errorf("tool call = %+v", call)
	}

	params.Messages = append(params.Messages, msg.ToParam(),
		openai.ToolMessage(`[{"slug":"lxc:hubris/114","health":"critical"}]`, call.ID))
	second, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got := second.Choices[0].Message.Content; got != "lxc:hubris/114 (nextcloud) is critical; the rest are fine." {
		t.Errorf("second answer = %q", got)
	}
	if second.Usage.TotalTokens == 0 {
		t.Error("no usage reported")
	}

	reqs := llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests recorded, want 2", len(reqs))
	}
	if diff := cmp.Diff([]string{"list_lxcs"}, reqs[0].ToolNames()); diff != "" {
		t.Errorf("tools offered (-want +got):\n%s", diff)
	}
	if reqs[0].System() != "You are Nomos." || reqs[0].Model != "deepseek/deepseek-v4-flash" {
		t.Errorf("first request: system %q, model %q", reqs[0].System(), reqs[0].Model)
	}
	if got := reqs[0].Header.Get("HTTP-Referer"); got != "https://nomos.example" {
		t.Errorf("extra header = %q", got)
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer x" {
		t.Errorf("authorization = %q", got)
	}
	wantReplay := []testenv.LLMMessage{
		{Role: "assistant", ToolCalls: []testenv.LLMToolCall{{ID: "call_1", Name: "list_lxcs", Arguments: "{}"}}},
		{Role: "tool", ToolCallID: "call_1", Content: `[{"slug":"lxc:hubris/114","health":"critical"}]`},
	}
	if diff := cmp.Diff(wantReplay, reqs[1].Messages[2:]); diff != "" {
		t.Errorf("replayed tool pair (-want +got):\n%s", diff)
	}
	if reqs[1].Step != 1 {
		t.Errorf("second request answered by step %d, want 1", reqs[1].Step)
	}
}

func TestScriptedLLMStreamsWithOpenAIGo(t *testing.T) {
	t.Parallel()
	llm := testenv.NewScriptedLLM(t)
	args := `{"target":"service:jellyfin","reason":"unit failed — restarting"}`
	llm.Script(
		testenv.Reply("Restarting jellyfin, which has been failing since 03:00.").ToolCall("request_execution", args),
	)
	client := newClient(llm)
	stream := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model:         "m",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("restart jellyfin")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("chunk refused: %s", stream.Current().RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if err := stream.Close(); err != nil {
		t.Fatal(err)
	}
	msg := acc.Choices[0].Message
	if msg.Content != "Restarting jellyfin, which has been failing since 03:00." {
		t.Errorf("streamed content = %q", msg.Content)
	}
	if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].ID != "call_1" || msg.ToolCalls[0].Function.Name != "request_execution" ||
		msg.ToolCalls[0].Function.Arguments != args {
		t.Errorf("streamed tool calls = %+v", msg.ToolCalls)
	}
	if acc.Choices[0].FinishReason != "tool_calls" || acc.Usage.TotalTokens == 0 {
		t.Errorf("finish %q, usage %+v", acc.Choices[0].FinishReason, acc.Usage)
	}
	if reqs := llm.Requests(); len(reqs) != 1 || !reqs[0].Stream {
		t.Errorf("stream request not recorded as such: %+v", reqs)
	}
}

func TestScriptedLLMInjectsFailures(t *testing.T) {
	t.Parallel()
	llm := testenv.NewScriptedLLM(t)
	llm.Script(
		testenv.HTTPError(http.StatusInternalServerError, "upstream provider is down"),
		testenv.Hang(),
		testenv.MalformedToolCall("request_execution"),
		testenv.HTTPError(http.StatusBadGateway, "still down").Times(3),
		testenv.Reply("recovered"),
	)
	client := newClient(llm, option.WithMaxRetries(0))
	ctx := t.Context()
	params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}

	_, err := client.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusInternalServerError || apiErr.Message != "upstream provider is down" {
		t.Errorf("500 step: got %v", err)
	}

	hangCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	start := time.Now()
	_, err = client.Chat.Completions.New(hangCtx, params)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hang step: got %v, want the client's deadline", err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Errorf("hang step answered after %s", waited)
	}

	c, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if args := c.Choices[0].Message.ToolCalls[0].Function.Arguments; json.Valid([]byte(args)) {
		t.Errorf("malformed step sent valid arguments %q", args)
	}

	// The client's default retries each take a step.
	retrying := newClient(llm)
	_, err = retrying.Chat.Completions.New(ctx, params)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadGateway {
		t.Errorf("502 step three times: got %v", err)
	}
	c, err = retrying.Chat.Completions.New(ctx, params)
	if err != nil || c.Choices[0].Message.Content != "recovered" {
		t.Errorf("after the failures: %v, %+v", err, c)
	}

	var got []testenv.LLMReply
	for _, r := range llm.Requests() {
		got = append(got, r.Reply)
	}
	want := []testenv.LLMReply{
		{Status: 500, Text: "upstream provider is down"},
		{Hung: true},
		{Status: 200, ToolCalls: []testenv.LLMToolCall{{ID: "call_1", Name: "request_execution", Arguments: `{"target": "service:jelly`}}},
		{Status: 502, Text: "still down"},
		{Status: 502, Text: "still down"},
		{Status: 502, Text: "still down"},
		{Status: 200, Text: "recovered"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
	if n := llm.Remaining(); n != 0 {
		t.Errorf("%d steps left", n)
	}
}

func TestScriptedLLMMatchersPickTheirRequest(t *testing.T) {
	t.Parallel()
	llm := testenv.NewScriptedLLM(t)
	// Two rooms talk at once; each step waits for its own conversation.
	llm.Script(
		testenv.Reply("gitea is fine").When(testenv.AnyMessage("user", "gitea")),
		testenv.Reply("jellyfin restarted").When(testenv.LastMessage("", "execution 7 succeeded")).When(testenv.OffersTool("list_lxcs")),
		testenv.Reply("anything"),
	)
	client := newClient(llm, option.WithMaxRetries(0))
	ask := func(msgs ...openai.ChatCompletionMessageParamUnion) string {
		c, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
			Model: "m", Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{listLxcs},
		})
		if err != nil {
			t.Error(err) // not Fatal: ask runs in other goroutines
			return ""
		}
		return c.Choices[0].Message.Content
	}
	var wg sync.WaitGroup
	var jelly, gitea string
	wg.Go(func() {
		jelly = ask(openai.UserMessage("restart jellyfin"), openai.SystemMessage("note: execution 7 succeeded"))
	})
	wg.Go(func() { gitea = ask(openai.UserMessage("is gitea up?")) })
	wg.Wait()
	if jelly != "jellyfin restarted" || gitea != "gitea is fine" {
		t.Errorf("jellyfin room got %q, gitea room got %q", jelly, gitea)
	}
	if got := ask(openai.UserMessage("hello")); got != "anything" {
		t.Errorf("unconditional step: %q", got)
	}
	reqs, err := llm.AwaitRequests(t.Context(), 3)
	if err != nil || len(reqs) != 3 {
		t.Fatalf("await: %d requests, %v", len(reqs), err)
	}
}

// errorRecorder stands in for the test so a mismatch can be observed
// without failing this one.
type errorRecorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *errorRecorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestScriptedLLMReportsAMismatch(t *testing.T) {
	t.Parallel()
	rec := &errorRecorder{TB: t}
	llm := testenv.NewScriptedLLM(rec)
	llm.Script(testenv.Reply("done").When(testenv.LastToolResult("HTTP 200")))
	_, got := post(t, llm.URL()+"/chat/completions", `{"model":"m","messages":[{"role":"user","content":"status?"}]}`)
	text, _ := message(t, got)["content"].(string)
	if !strings.HasPrefix(text, "script mismatch") || !strings.Contains(text, `last message is a tool message containing "HTTP 200"`) {
		t.Errorf("mismatch answer = %q", text)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "matches no step") {
		t.Errorf("test errors = %q, want one mismatch", rec.errs)
	}
	if r := llm.Requests(); len(r) != 1 || r[0].Reply.Mismatch == "" || r[0].Step != -1 || llm.Remaining() != 1 {
		t.Errorf("mismatch not recorded, or the step was used: %+v", r)
	}
}

func TestScriptedLLMReleasesHungRequestsAtTheEnd(t *testing.T) {
	t.Parallel()
	done := make(chan error, 1)
	t.Run("hangs", func(t *testing.T) {
		llm := testenv.NewScriptedLLM(t)
		llm.Script(testenv.Hang())
		go func() {
			c := &http.Client{}
			defer c.CloseIdleConnections()
			res, err := c.Post(llm.URL()+"/chat/completions", "application/json",
				bytes.NewReader([]byte(`{"model":"m","messages":[]}`)))
			if err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				err = fmt.Errorf("hung request answered %s", res.Status)
			}
			done <- err
		}()
		if _, err := llm.AwaitRequests(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
	})
	// The subtest's cleanup closed the server: the client sees the
	// connection drop instead of waiting forever.
	select {
	case err := <-done:
		if err == nil || strings.Contains(err.Error(), "answered") {
			t.Errorf("hung request after the test: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("hung request still open after its test ended")
	}
}
