package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// ScriptedLLM is an OpenAI-compatible chat completions server that answers
// from a script instead of a model: the one stand-in the tests allow, at
// the HTTP edge of the LLM. It records every request, parsed, so a test can
// assert what the model was shown.
//
// A request takes the first pending step whose matchers all accept it;
// steps without matchers accept any request, so an unconditional script is
// used in order. When no step is left the reply is the text
// "script exhausted"; when steps are left but none accepts the request the
// reply is a text starting "script mismatch" and the test fails.
//
// openai-go retries a 5xx or a per-attempt timeout twice by default, and
// every attempt takes a step: give the client option.WithMaxRetries(0) or
// use Times. Injected errors carry Retry-After-Ms: 10, so retries are quick.
//
// Tool calls the server emits get the ids call_1, call_2, … in order.
// ScriptedLLM is safe for concurrent use.
type ScriptedLLM struct {
	t       testing.TB
	srv     *httptest.Server
	closing chan struct{}

	mu      sync.Mutex
	steps   []*pendingStep
	added   int
	reqs    []LLMRequest
	calls   int
	changed chan struct{} // closed and replaced when a request is recorded
}

// Step is one scripted answer. Build one with Reply, ToolCall,
// MalformedToolCall, HTTPError or Hang, then refine it with its methods,
// which return a changed copy.
type Step struct {
	text   string
	calls  []LLMToolCall
	when   []Matcher
	status int
	errMsg string
	hang   bool
	delay  time.Duration
	times  int
}

// Reply is a step that answers with text and finish_reason "stop".
func Reply(text string) Step { return Step{text: text} }

// ToolCall is a step that asks for one tool call. argsJSON is sent as the
// call's arguments string without being checked.
func ToolCall(name, argsJSON string) Step {
	return Step{calls: []LLMToolCall{{Name: name, Arguments: argsJSON}}}
}

// MalformedToolCall is a step that asks for a tool call whose arguments are
// cut off in the middle, as a weak model sometimes sends them.
func MalformedToolCall(name string) Step {
	return ToolCall(name, `{"target": "service:jelly`)
}

// HTTPError is a step that fails with an OpenAI-style error body.
func HTTPError(status int, message string) Step {
	return Step{status: status, errMsg: message}
}

// Hang is a step that never answers: the request stays open until the
// client gives up (its context ends) or the test ends.
func Hang() Step { return Step{hang: true} }

// ToolCall adds a tool call to the step's answer, so one answer can carry
// several calls, or text and calls: Reply("checking").ToolCall(...).
func (s Step) ToolCall(name, argsJSON string) Step {
	s.calls = append(s.calls[:len(s.calls):len(s.calls)], LLMToolCall{Name: name, Arguments: argsJSON})
	return s
}

// When makes the step answer only requests that m accepts. Several When
// calls must all accept.
func (s Step) When(m Matcher) Step {
	s.when = append(s.when[:len(s.when):len(s.when)], m)
	return s
}

// Delay makes the step wait d before answering, or less if the client
// gives up first.
func (s Step) Delay(d time.Duration) Step {
	s.delay = d
	return s
}

// Times makes the step answer n requests instead of one.
func (s Step) Times(n int) Step {
	s.times = n
	return s
}

// describe says what the step expects, for a mismatch report.
func (s Step) describe() string {
	if len(s.when) == 0 {
		return "any request"
	}
	d := make([]string, len(s.when))
	for i, m := range s.when {
		d[i] = m.Desc
	}
	return strings.Join(d, " and ")
}

// Matcher decides whether a step answers a request.
type Matcher struct {
	// Desc says what the matcher wants, for failure messages.
	Desc string
	// Accept reports whether the request is one the step answers.
	Accept func(LLMRequest) bool
}

// Match is a matcher from any function.
func Match(desc string, accept func(LLMRequest) bool) Matcher {
	return Matcher{Desc: desc, Accept: accept}
}

// LastMessage accepts a request whose last message has the role (any role
// when empty) and contains the text.
func LastMessage(role, contains string) Matcher {
	return Match(fmt.Sprintf("last message is %s containing %q", roleOrAny(role), contains), func(r LLMRequest) bool {
		last := r.Last()
		return (role == "" || last.Role == role) && strings.Contains(last.Content, contains)
	})
}

// LastToolResult accepts a request whose last message is a tool result
// containing the text.
func LastToolResult(contains string) Matcher { return LastMessage("tool", contains) }

// AnyMessage accepts a request with a message of the role (any role when
// empty) that contains the text.
func AnyMessage(role, contains string) Matcher {
	return Match(fmt.Sprintf("some message is %s containing %q", roleOrAny(role), contains), func(r LLMRequest) bool {
		for _, m := range r.Messages {
			if (role == "" || m.Role == role) && strings.Contains(m.Content, contains) {
				return true
			}
		}
		return false
	})
}

// OffersTool accepts a request that offers the named tool.
func OffersTool(name string) Matcher {
	return Match(fmt.Sprintf("tool %s is offered", name), func(r LLMRequest) bool {
		for _, t := range r.Tools {
			if t.Name == name {
				return true
			}
		}
		return false
	})
}

func roleOrAny(role string) string {
	if role == "" {
		return "any message"
	}
	return "a " + role + " message"
}

// LLMRequest is one request the server received, parsed.
type LLMRequest struct {
	// Path is the URL path, /v1/chat/completions or /chat/completions.
	Path     string
	Header   http.Header
	Model    string
	Messages []LLMMessage
	Tools    []LLMTool
	// ToolChoice is the raw tool_choice, if any.
	ToolChoice json.RawMessage
	Stream     bool
	// Body is the request body as sent.
	Body json.RawMessage
	// Step is the index of the step that answered, counting every step
	// passed to Script in order from 0; -1 when none did.
	Step  int
	Reply LLMReply
	// At is when the request arrived.
	At time.Time
}

// Last returns the request's last message, or a zero one.
func (r LLMRequest) Last() LLMMessage {
	if len(r.Messages) == 0 {
		return LLMMessage{}
	}
	return r.Messages[len(r.Messages)-1]
}

// System returns the text of the system messages, joined by blank lines.
func (r LLMRequest) System() string {
	var parts []string
	for _, m := range r.Messages {
		if m.Role == "system" || m.Role == "developer" {
			parts = append(parts, m.Content)
		}
	}
	return strings.Join(parts, "\n\n")
}

// ToolNames lists the names of the tools offered, in order.
func (r LLMRequest) ToolNames() []string {
	names := make([]string, len(r.Tools))
	for i, t := range r.Tools {
		names[i] = t.Name
	}
	return names
}

// LLMMessage is one message of a request.
type LLMMessage struct {
	Role string
	// Content is the text; the text parts of a multi-part content are
	// joined.
	Content    string
	Name       string
	ToolCalls  []LLMToolCall
	ToolCallID string
}

// LLMToolCall is a function call, asked for by the model or replayed to it.
type LLMToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// LLMTool is a function tool offered in a request.
type LLMTool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// LLMReply is what the server answered.
type LLMReply struct {
	// Status is the HTTP status; 0 when the request hung.
	Status    int
	Text      string
	ToolCalls []LLMToolCall
	// Hung is set when the step was Hang.
	Hung bool
	// Exhausted is set when no step was left.
	Exhausted bool
	// Mismatch says what the pending steps expected when none accepted
	// the request.
	Mismatch string
}

type pendingStep struct {
	Step
	index int
	left  int
}

// NewScriptedLLM starts a scripted server that stops when t ends.
func NewScriptedLLM(t testing.TB) *ScriptedLLM {
	t.Helper()
	l := &ScriptedLLM{t: t, closing: make(chan struct{}), changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", l.serveChat)
	mux.HandleFunc("/chat/completions", l.serveChat)
	mux.HandleFunc("GET /v1/models", serveModels)
	mux.HandleFunc("GET /models", serveModels)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusNotFound, "scripted llm: no route "+r.Method+" "+r.URL.Path)
	})
	l.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		close(l.closing) // releases hung requests, or Close would wait for them
		l.srv.Close()
	})
	return l
}

// URL is the base URL to give an OpenAI client; it ends in /v1.
func (l *ScriptedLLM) URL() string { return l.srv.URL + "/v1" }

// Script appends steps to the script.
func (l *ScriptedLLM) Script(steps ...Step) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range steps {
		l.steps = append(l.steps, &pendingStep{Step: s, index: l.added, left: max(s.times, 1)})
		l.added++
	}
}

// Remaining counts the answers the script still holds.
func (l *ScriptedLLM) Remaining() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.steps {
		n += s.left
	}
	return n
}

// Requests returns a copy of every request received so far, in order of
// arrival.
func (l *ScriptedLLM) Requests() []LLMRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]LLMRequest, len(l.reqs))
	for i, r := range l.reqs {
		out[i] = r.clone()
	}
	return out
}

// AwaitRequests waits until at least n requests have arrived, then returns
// them all as Requests does. It fails when ctx ends first.
func (l *ScriptedLLM) AwaitRequests(ctx context.Context, n int) ([]LLMRequest, error) {
	for {
		l.mu.Lock()
		have, changed := len(l.reqs), l.changed
		l.mu.Unlock()
		if have >= n {
			return l.Requests(), nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("scripted llm: %d of %d requests arrived: %w", have, n, ctx.Err())
		}
	}
}

func (r LLMRequest) clone() LLMRequest {
	r.Header = r.Header.Clone()
	r.Messages = append([]LLMMessage(nil), r.Messages...)
	for i := range r.Messages {
		r.Messages[i].ToolCalls = append([]LLMToolCall(nil), r.Messages[i].ToolCalls...)
	}
	r.Tools = append([]LLMTool(nil), r.Tools...)
	r.Reply.ToolCalls = append([]LLMToolCall(nil), r.Reply.ToolCalls...)
	return r
}

// The request as the OpenAI API defines it, as far as the tests need.
type wireRequest struct {
	Model         string          `json:"model"`
	Messages      []wireMessage   `json:"messages"`
	Tools         []wireTool      `json:"tools"`
	ToolChoice    json.RawMessage `json:"tool_choice"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []wireToolCall  `json:"tool_calls"`
}

type wireToolCall struct {
	Index    *int         `json:"index,omitempty"` // streaming only
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// contentText flattens a message content: a string, or an array of parts
// of which the text ones count.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return ""
}

func (l *ScriptedLLM) serveChat(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeAPIError(w, http.StatusMethodNotAllowed, "scripted llm: use POST")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, "scripted llm: read body: "+err.Error())
		return
	}
	var wr wireRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		l.t.Errorf("scripted llm: request body is not JSON: %v", err)
		writeAPIError(w, http.StatusBadRequest, "scripted llm: body is not JSON: "+err.Error())
		return
	}
	req := LLMRequest{
		Path: r.URL.Path, Header: r.Header.Clone(), Model: wr.Model, ToolChoice: wr.ToolChoice,
		Stream: wr.Stream, Body: json.RawMessage(body), Step: -1, At: time.Now(),
	}
	for _, m := range wr.Messages {
		msg := LLMMessage{Role: m.Role, Content: contentText(m.Content), Name: m.Name, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, LLMToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, t := range wr.Tools {
		req.Tools = append(req.Tools, LLMTool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}

	step, ok := l.take(&req)
	if !ok {
		l.writeCompletion(w, wr, req.Reply)
		return
	}
	if step.delay > 0 {
		select {
		case <-time.After(step.delay):
		case <-r.Context().Done():
			return
		case <-l.closing:
			panic(http.ErrAbortHandler) // drop the connection: no half answer
		}
	}
	switch {
	case step.hang:
		select {
		case <-r.Context().Done():
		case <-l.closing:
			panic(http.ErrAbortHandler)
		}
	case step.status != 0:
		// Real APIs may say when to retry; saying "now" keeps a client's
		// retries of an injected error from slowing the tests down.
		w.Header().Set("Retry-After-Ms", "10")
		writeAPIError(w, step.status, step.errMsg)
	default:
		l.writeCompletion(w, wr, req.Reply)
	}
}

// take picks the step that answers req, fills in req.Step and req.Reply,
// and records req. ok is false when no step answers.
func (l *ScriptedLLM) take(req *LLMRequest) (Step, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer func() {
		l.reqs = append(l.reqs, req.clone())
		close(l.changed)
		l.changed = make(chan struct{})
	}()
	for i, p := range l.steps {
		if !accepts(p.Step, *req) {
			continue
		}
		p.left--
		if p.left == 0 {
			l.steps = append(l.steps[:i:i], l.steps[i+1:]...)
		}
		req.Step = p.index
		switch {
		case p.hang:
			req.Reply = LLMReply{Hung: true}
		case p.status != 0:
			req.Reply = LLMReply{Status: p.status, Text: p.errMsg}
		default:
			req.Reply = LLMReply{Status: http.StatusOK, Text: p.text}
			for _, c := range p.calls {
				l.calls++
				c.ID = fmt.Sprintf("call_%d", l.calls)
				req.Reply.ToolCalls = append(req.Reply.ToolCalls, c)
			}
		}
		return p.Step, true
	}
	if len(l.steps) == 0 {
		req.Reply = LLMReply{Status: http.StatusOK, Text: "script exhausted", Exhausted: true}
		return Step{}, false
	}
	want := make([]string, len(l.steps))
	for i, p := range l.steps {
		want[i] = fmt.Sprintf("step %d wants %s", p.index, p.describe())
	}
	req.Reply = LLMReply{Status: http.StatusOK, Mismatch: strings.Join(want, "; ")}
	req.Reply.Text = "script mismatch: no step answers this request; " + req.Reply.Mismatch
	last := req.Last()
	l.t.Errorf("scripted llm: request %d (last message %s %.200q) matches no step: %s",
		len(l.reqs), last.Role, last.Content, req.Reply.Mismatch)
	return Step{}, false
}

func accepts(s Step, r LLMRequest) bool {
	for _, m := range s.when {
		if !m.Accept(r) {
			return false
		}
	}
	return true
}

type wireUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// usage estimates tokens at four bytes each.
func usage(req wireRequest, reply LLMReply) wireUsage {
	in, _ := json.Marshal(req.Messages)
	out := len(reply.Text)
	for _, c := range reply.ToolCalls {
		out += len(c.Name) + len(c.Arguments)
	}
	u := wireUsage{PromptTokens: (len(in) + 3) / 4, CompletionTokens: (out + 3) / 4}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

var completionSeq struct {
	sync.Mutex
	n int
}

func completionID() string {
	completionSeq.Lock()
	defer completionSeq.Unlock()
	completionSeq.n++
	return fmt.Sprintf("chatcmpl-scripted-%d", completionSeq.n)
}

func (l *ScriptedLLM) writeCompletion(w http.ResponseWriter, req wireRequest, reply LLMReply) {
	model := req.Model
	if model == "" {
		model = "scripted"
	}
	finish := "stop"
	if len(reply.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	id, created := completionID(), time.Now().Unix()
	if req.Stream {
		l.writeStream(w, req, reply, id, model, finish, created)
		return
	}
	var content *string
	if reply.Text != "" || len(reply.ToolCalls) == 0 {
		content = &reply.Text
	}
	var calls []wireToolCall
	for _, c := range reply.ToolCalls {
		calls = append(calls, wireToolCall{ID: c.ID, Type: "function", Function: wireFunction{Name: c.Name, Arguments: c.Arguments}})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": id, "object": "chat.completion", "created": created, "model": model,
		"choices": []any{map[string]any{
			"index": 0, "finish_reason": finish, "logprobs": nil,
			"message": map[string]any{"role": "assistant", "content": content, "refusal": nil, "tool_calls": calls},
		}},
		"usage": usage(req, reply),
	})
}

// writeStream sends the reply as server-sent chunks the way the OpenAI API
// does: the role, the text in pieces, each tool call's name then its
// arguments in pieces, the finish reason, usage if asked, and [DONE].
func (l *ScriptedLLM) writeStream(w http.ResponseWriter, req wireRequest, reply LLMReply, id, model, finish string, created int64) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(choices []any, extra map[string]any) {
		chunk := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model, "choices": choices}
		for k, v := range extra {
			chunk[k] = v
		}
		b, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	delta := func(d map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "finish_reason": finish, "logprobs": nil}}
	}
	send(delta(map[string]any{"role": "assistant", "content": ""}, nil), nil)
	for _, piece := range pieces(reply.Text, 24) {
		send(delta(map[string]any{"content": piece}, nil), nil)
	}
	for i, c := range reply.ToolCalls {
		send(delta(map[string]any{"tool_calls": []wireToolCall{{Index: &i, ID: c.ID, Type: "function", Function: wireFunction{Name: c.Name}}}}, nil), nil)
		for _, piece := range pieces(c.Arguments, 16) {
			send(delta(map[string]any{"tool_calls": []wireToolCall{{Index: &i, Function: wireFunction{Arguments: piece}}}}, nil), nil)
		}
	}
	send(delta(map[string]any{}, finish), nil)
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		send([]any{}, map[string]any{"usage": usage(req, reply)})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// pieces cuts s into chunks of about n bytes without splitting a rune.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		cut := min(n, len(s))
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}

func serveModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{
		map[string]any{"id": "scripted", "object": "model", "created": 0, "owned_by": "nomos-tests"},
	}})
}

func writeAPIError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"message": message, "type": "scripted_error", "param": nil, "code": nil,
	}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}
