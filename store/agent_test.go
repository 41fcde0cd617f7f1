package store_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

type agentEnv struct {
	s  *store.Store
	db *pgx.Conn // for counting rows the store API does not expose
}

func setupAgent(t *testing.T) agentEnv {
	t.Helper()
	ctx := testenv.Context(t)
	url := testenv.DatabaseURL(t)
	s, err := store.Open(ctx, store.Config{URL: url, MaxConns: 8, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(ctx) })
	return agentEnv{s: s, db: db}
}

func (e agentEnv) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.QueryRow(testenv.Context(t), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func (e agentEnv) execution(t *testing.T) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	_, err := e.s.CreateExecution(testenv.Context(t), store.NewExecution{
		Request: store.Request{
			ID: id, Action: "restart", TargetSlug: "service:jellyfin", RiskClass: "reversible_low",
			PlanHash: "hash", PlanCode: "code", State: store.StateAwaitingApproval, RequestedBy: "@op:test",
			RequestedVia: "agent", RoomID: "!ops:test", ExpiresAt: time.Now().Add(time.Hour),
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// jsonEqual compares tool calls by meaning: jsonb does not keep bytes.
var jsonEqual = cmp.Transformer("json", func(r json.RawMessage) any {
	if r == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(r, &v); err != nil {
		return "invalid JSON: " + string(r)
	}
	return v
})

var ignoreStored = cmpopts.IgnoreFields(store.AgentMessage{}, "ID", "SessionID", "CreatedAt")

func TestEnsureAgentSessionIsOnePerRoomAndThread(t *testing.T) {
	t.Parallel()
	e := setupAgent(t)
	ctx := testenv.Context(t)

	var wg sync.WaitGroup
	ids := make([]uuid.UUID, 8)
	errs := make([]error, 8)
	for i := range ids {
		wg.Go(func() {
			a, err := e.s.EnsureAgentSession(ctx, "!ops:test", "")
			ids[i], errs[i] = a.ID, err
		})
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Errorf("caller %d got session %s, caller 0 got %s", i, ids[i], ids[0])
		}
	}
	thread, err := e.s.EnsureAgentSession(ctx, "!ops:test", "$root")
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.s.EnsureAgentSession(ctx, "!other:test", "")
	if err != nil {
		t.Fatal(err)
	}
	if thread.ID == ids[0] || other.ID == ids[0] || thread.ID == other.ID {
		t.Errorf("room, thread and other room share a session: %s %s %s", ids[0], thread.ID, other.ID)
	}
	if _, err := e.s.EnsureAgentSession(ctx, "", ""); err == nil {
		t.Error("a session without a room was created")
	}
}

func TestAgentSessionRoundTrip(t *testing.T) {
	t.Parallel()
	e := setupAgent(t)
	ctx := testenv.Context(t)
	a, err := e.s.EnsureAgentSession(ctx, "!ops:test", "$thread")
	if err != nil {
		t.Fatal(err)
	}
	if a.LastOperatorApprovalAt != nil || a.Title != "" || a.Summary != "" {
		t.Fatalf("new session is not blank: %+v", a)
	}
	if err := e.s.SetAgentSessionTitle(ctx, a.ID, "Jellyfin on strong"); err != nil {
		t.Fatal(err)
	}
	approved := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := e.s.RecordOperatorApproval(ctx, a.ID, approved); err != nil {
		t.Fatal(err)
	}
	// An older approval arriving late does not move the window back.
	if err := e.s.RecordOperatorApproval(ctx, a.ID, approved.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.AgentSession(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := store.AgentSession{ID: a.ID, RoomID: "!ops:test", ThreadID: "$thread", Title: "Jellyfin on strong", LastOperatorApprovalAt: &approved}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(store.AgentSession{}, "CreatedAt", "UpdatedAt"),
		cmpopts.EquateApproxTime(0)); diff != "" {
		t.Errorf("session (-want +got):\n%s", diff)
	}

	missing := uuid.Must(uuid.NewV7())
	for name, err := range map[string]error{
		"load":     func() error { _, err := e.s.AgentSession(ctx, missing); return err }(),
		"title":    e.s.SetAgentSessionTitle(ctx, missing, "x"),
		"approval": e.s.RecordOperatorApproval(ctx, missing, approved),
		"summary":  e.s.SummarizeAgentSession(ctx, missing, "x", 1),
		"append": func() error {
			_, err := e.s.AppendAgentMessages(ctx, missing, store.AgentMessage{Role: store.AgentRoleUser, Content: "hi"})
			return err
		}(),
	} {
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s on a missing session: got %v, want ErrNotFound", name, err)
		}
	}
}

func TestAgentMessagesReplayToolPairs(t *testing.T) {
	t.Parallel()
	e := setupAgent(t)
	ctx := testenv.Context(t)
	a, err := e.s.EnsureAgentSession(ctx, "!ops:test", "")
	if err != nil {
		t.Fatal(err)
	}
	turn := []store.AgentMessage{
		{Role: store.AgentRoleUser, Content: "which containers are unhealthy?"},
		{Role: store.AgentRoleAssistant, ToolCalls: json.RawMessage(`[{"id":"call_1","type":"function","function":{"name":"list_lxcs","arguments":"{}"}}]`)},
		{Role: store.AgentRoleTool, ToolCallID: "call_1", Content: `[{"slug":"lxc:hubris/114","health":"critical"}]`},
		{Role: store.AgentRoleAssistant, Content: "lxc:hubris/114 (nextcloud) is critical."},
	}
	stored, err := e.s.AppendAgentMessages(ctx, a.ID, turn...)
	if err != nil {
		t.Fatal(err)
	}
	note := store.AgentMessage{Role: store.AgentRoleNote, Content: "execution 42 succeeded"}
	if _, err := e.s.AppendAgentMessages(ctx, a.ID, note); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.AgentMessages(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]store.AgentMessage{}, turn...), note)
	if diff := cmp.Diff(want, got, ignoreStored, jsonEqual); diff != "" {
		t.Errorf("replayed messages (-want +got):\n%s", diff)
	}
	for i := 1; i < len(got); i++ {
		if got[i].ID <= got[i-1].ID {
			t.Errorf("message %d has id %d after %d", i, got[i].ID, got[i-1].ID)
		}
	}
	if diff := cmp.Diff(stored, got[:len(stored)], jsonEqual, cmpopts.EquateApproxTime(time.Millisecond)); diff != "" {
		t.Errorf("append returned (-append +list):\n%s", diff)
	}

	// The summary covers the first exchange; only what follows is replayed.
	if err := e.s.SummarizeAgentSession(ctx, a.ID, "operator asked about health; nextcloud was critical", stored[3].ID); err != nil {
		t.Fatal(err)
	}
	got, err = e.s.AgentMessages(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]store.AgentMessage{note}, got, ignoreStored, jsonEqual); diff != "" {
		t.Errorf("after summary (-want +got):\n%s", diff)
	}
	sess, err := e.s.AgentSession(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sess.Summary != "operator asked about health; nextcloud was critical" {
		t.Errorf("summary = %q", sess.Summary)
	}

	for name, m := range map[string]store.AgentMessage{
		"unknown role":     {Role: "operator", Content: "x"},
		"tool calls junk":  {Role: store.AgentRoleAssistant, ToolCalls: json.RawMessage(`[{"id":`)},
		"empty role given": {Content: "x"},
	} {
		if _, err := e.s.AppendAgentMessages(ctx, a.ID, note, m); err == nil {
			t.Errorf("%s: stored", name)
		}
	}
	if n := e.count(t, `SELECT count(*) FROM agent_messages WHERE session_id = $1`, a.ID); n != 5 {
		t.Errorf("%d messages stored, want 5: a refused batch stores nothing", n)
	}
}

func TestAgentMessageCap(t *testing.T) {
	t.Parallel()
	e := setupAgent(t)
	ctx := testenv.Context(t)
	a, err := e.s.EnsureAgentSession(ctx, "!ops:test", "")
	if err != nil {
		t.Fatal(err)
	}

	var b strings.Builder
	b.WriteString("HEAD-MARKER apt-get update\n")
	for i := 0; b.Len() < 100<<10; i++ {
		fmt.Fprintf(&b, "Get:%d http://deb.debian.org/debian bookworm/main amd64 Packages — ünïcødé [%d kB]\n", i, i%977)
	}
	b.WriteString("E: Temporary failure resolving 'deb.debian.org' TAIL-MARKER\n")
	big := b.String()
	sum := sha256.Sum256([]byte(big))
	sha := hex.EncodeToString(sum[:])

	// Multi-byte runes with no newlines put every cut inside a rune.
	runes := strings.Repeat("é", store.AgentMessageCap)

	tests := []struct {
		name    string
		content string
		blob    bool
		keep    []string // substrings the stored excerpt keeps
	}{
		{"small", "ok", false, []string{"ok"}},
		{"at the cap", strings.Repeat("x", store.AgentMessageCap), false, nil},
		{"one over the cap", strings.Repeat("x", store.AgentMessageCap+1), true, nil},
		{"100 KB tool output", big, true, []string{sha, "HEAD-MARKER", "TAIL-MARKER", "Temporary failure resolving"}},
		{"cuts inside runes", runes, true, []string{"éé"}},
	}
	for _, tt := range tests {
		msgs, err := e.s.AppendAgentMessages(ctx, a.ID, store.AgentMessage{Role: store.AgentRoleTool, ToolCallID: "call_" + tt.name, Content: tt.content})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		m := msgs[0]
		if len(m.Content) > store.AgentMessageCap {
			t.Errorf("%s: stored %d bytes, cap is %d", tt.name, len(m.Content), store.AgentMessageCap)
		}
		if !utf8.ValidString(m.Content) {
			t.Errorf("%s: stored content is not valid UTF-8", tt.name)
		}
		if !tt.blob {
			if m.BlobSHA256 != "" || m.Content != tt.content {
				t.Errorf("%s: content under the cap was changed or blobbed (blob %q)", tt.name, m.BlobSHA256)
			}
			continue
		}
		want := sha256.Sum256([]byte(tt.content))
		if m.BlobSHA256 != hex.EncodeToString(want[:]) {
			t.Errorf("%s: blob_sha256 = %q, want the content's sha256", tt.name, m.BlobSHA256)
		}
		for _, k := range append(tt.keep, m.BlobSHA256) {
			if !strings.Contains(m.Content, k) {
				t.Errorf("%s: stored excerpt lacks %q", tt.name, k)
			}
		}
		full, err := e.s.AgentBlob(ctx, m.BlobSHA256)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if full != tt.content {
			t.Errorf("%s: blob holds %d bytes, want the %d bytes appended", tt.name, len(full), len(tt.content))
		}
	}

	// The same output again, as in a replayed or repeated tool call, is
	// stored once.
	again, err := e.s.AppendAgentMessages(ctx, a.ID, store.AgentMessage{Role: store.AgentRoleTool, ToolCallID: "call_again", Content: big})
	if err != nil {
		t.Fatal(err)
	}
	if again[0].BlobSHA256 != sha {
		t.Errorf("second copy references %q, want %s", again[0].BlobSHA256, sha)
	}
	if n := e.count(t, `SELECT count(*) FROM agent_blobs WHERE sha256 = $1`, sha); n != 1 {
		t.Errorf("the 100 KB output is stored %d times in agent_blobs, want once", n)
	}
	if n := e.count(t, `SELECT count(*) FROM agent_blobs`); n != 3 {
		t.Errorf("%d blobs, want 3 (one per distinct oversized content)", n)
	}
	if n := e.count(t, `SELECT count(*) FROM agent_messages WHERE octet_length(content) > $1`, store.AgentMessageCap); n != 0 {
		t.Errorf("%d stored messages exceed the cap", n)
	}
	listed, err := e.s.AgentMessages(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(again[0], listed[len(listed)-1], cmpopts.EquateApproxTime(time.Millisecond)); diff != "" {
		t.Errorf("listed excerpt differs from the appended one (-append +list):\n%s", diff)
	}

	if _, err := e.s.AgentBlob(ctx, strings.Repeat("0", 64)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing blob: got %v, want ErrNotFound", err)
	}
}

func TestAgentMessagesStoreWhatPostgresRefuses(t *testing.T) {
	t.Parallel()
	e := setupAgent(t)
	ctx := testenv.Context(t)
	a, err := e.s.EnsureAgentSession(ctx, "!ops:test", "")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := e.s.AppendAgentMessages(ctx, a.ID, store.AgentMessage{Role: store.AgentRoleTool, ToolCallID: "c", Content: "bin\x00ary \xff\xfe out"})
	if err != nil {
		t.Fatalf("NUL and invalid UTF-8 in tool output: %v", err)
	}
	if want := "bin\uFFFDary \uFFFD out"; msgs[0].Content != want {
		t.Errorf("stored %q, want %q", msgs[0].Content, want)
	}
}

func TestLinkExecutionAndClaimContinuationOnce(t *testing.T) {
	t.Parallel()
	e := setupAgent(t)
	ctx := testenv.Context(t)
	a, err := e.s.EnsureAgentSession(ctx, "!ops:test", "")
	if err != nil {
		t.Fatal(err)
	}
	x := e.execution(t)

	if _, ok, err := e.s.ClaimContinuation(ctx, x); ok || err != nil {
		t.Fatalf("claim of an unlinked execution: ok=%v err=%v, want false", ok, err)
	}
	link, err := e.s.LinkExecution(ctx, x, a.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := store.ExecutionLink{ExecutionID: x, SessionID: a.ID, ChainDepth: 2}
	ignoreCreated := cmpopts.IgnoreFields(store.ExecutionLink{}, "CreatedAt")
	if diff := cmp.Diff(want, link, ignoreCreated); diff != "" {
		t.Errorf("link (-want +got):\n%s", diff)
	}
	// A repeated link keeps the first.
	other, err := e.s.EnsureAgentSession(ctx, "!other:test", "")
	if err != nil {
		t.Fatal(err)
	}
	relinked, err := e.s.LinkExecution(ctx, x, other.ID, 5)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, relinked, ignoreCreated); diff != "" {
		t.Errorf("relink (-want +got):\n%s", diff)
	}
	found, err := e.s.ExecutionLink(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, found, ignoreCreated); diff != "" {
		t.Errorf("session of execution (-want +got):\n%s", diff)
	}

	if _, err := e.s.LinkExecution(ctx, uuid.Must(uuid.NewV7()), a.ID, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("link of a missing execution: got %v, want ErrNotFound", err)
	}
	if _, err := e.s.LinkExecution(ctx, e.execution(t), uuid.Must(uuid.NewV7()), 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("link to a missing session: got %v, want ErrNotFound", err)
	}
	if _, err := e.s.ExecutionLink(ctx, uuid.Must(uuid.NewV7())); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("session of an unlinked execution: got %v, want ErrNotFound", err)
	}

	// The same result delivered many times at once continues the session once.
	const callers = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	var wins []store.ExecutionLink
	start := make(chan struct{})
	for range callers {
		wg.Go(func() {
			<-start
			l, ok, err := e.s.ClaimContinuation(ctx, x)
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				mu.Lock()
				wins = append(wins, l)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if len(wins) != 1 {
		t.Fatalf("%d of %d callers claimed the continuation, want exactly 1", len(wins), callers)
	}
	if wins[0].ContinuedAt == nil || wins[0].SessionID != a.ID || wins[0].ChainDepth != 2 {
		t.Errorf("claimed link = %+v, want session %s, depth 2, continued_at set", wins[0], a.ID)
	}
	if _, ok, err := e.s.ClaimContinuation(ctx, x); ok || err != nil {
		t.Errorf("claim after the continuation: ok=%v err=%v, want false", ok, err)
	}
	found, err = e.s.ExecutionLink(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	if found.ContinuedAt == nil {
		t.Error("the link does not show the continuation")
	}
}

func TestCreateExecutionLinksItsSessionInTheSameTransaction(t *testing.T) {
	t.Parallel()
	e := setupAgent(t)
	ctx := testenv.Context(t)
	sess, err := e.s.EnsureAgentSession(ctx, "!ops:test", "")
	if err != nil {
		t.Fatal(err)
	}
	n := store.NewExecution{
		Request: store.Request{
			Action: "restart", TargetSlug: "service:jellyfin", RiskClass: "read_only", PlanHash: "hash",
			PlanCode: "code", State: store.StateAwaitingApproval, RequestedBy: "agent", RequestedVia: "agent",
			RoomID: "!ops:test", ExpiresAt: time.Now().Add(time.Hour),
		},
	}

	n.ID = uuid.Must(uuid.NewV7())
	n.Session = &store.SessionLink{SessionID: sess.ID, ChainDepth: 3}
	if _, err := e.s.CreateExecution(ctx, n, nil); err != nil {
		t.Fatal(err)
	}
	link, err := e.s.ExecutionLink(ctx, n.ID)
	if err != nil {
		t.Fatalf("the new execution has no session link: %v", err)
	}
	if link.SessionID != sess.ID || link.ChainDepth != 3 || link.ContinuedAt != nil {
		t.Errorf("link %+v, want session %s at depth 3, not continued", link, sess.ID)
	}

	// A session that does not exist refuses the whole request: no
	// execution is left behind whose result could re-invoke nobody.
	n.ID = uuid.Must(uuid.NewV7())
	n.Session = &store.SessionLink{SessionID: uuid.Must(uuid.NewV7())}
	if _, err := e.s.CreateExecution(ctx, n, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("create with a missing session: %v, want ErrNotFound", err)
	}
	if _, err := e.s.GetExecution(ctx, n.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused execution was stored anyway: %v", err)
	}
}
