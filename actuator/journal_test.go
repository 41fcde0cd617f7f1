package actuator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomoshq/nomos/tasks"
)

var (
	t0 = time.Date(2026, 7, 6, 10, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Minute)
)

func openTestJournal(t *testing.T, path string, now time.Time) *journal {
	t.Helper()
	j, err := openJournal(path, now)
	if err != nil {
		t.Fatalf("openJournal: %v", err)
	}
	t.Cleanup(func() {
		if err := j.Close(); err != nil {
			t.Errorf("close journal: %v", err)
		}
	})
	return j
}

func TestJournalStartsOnceAndSurvivesRestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state", "journal")
	j := openTestJournal(t, path, t0)
	if err := j.Begin("a", t0); err != nil {
		t.Fatal(err)
	}
	if err := j.Begin("a", t1); !errors.Is(err, errReplay) {
		t.Fatalf("second Begin: want errReplay, got %v", err)
	}
	if err := j.Begin("b", t1); err != nil {
		t.Fatal(err)
	}
	if err := j.Finish("a", tasks.StatusSucceeded); err != nil {
		t.Fatal(err)
	}
	if err := j.Finish("nope", tasks.StatusSucceeded); err == nil {
		t.Error("Finish of an id that never started: want an error")
	}
	if err := j.Begin("bad id\nfinished b succeeded", t1); err == nil {
		t.Error("Begin with an id that would forge a line: want an error")
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "file", "started a 2026-07-06T10:00:00Z\nstarted b 2026-07-06T10:01:00Z\nfinished a succeeded\n", string(data))

	j = openTestJournal(t, path, t1)
	diff(t, "a seen after restart", true, j.Seen("a"))
	diff(t, "unfinished after restart", []unfinished{{ID: "b", StartedAt: t1}}, j.Unfinished())
	if err := j.Begin("a", t1); !errors.Is(err, errReplay) {
		t.Errorf("Begin after restart: want errReplay, got %v", err)
	}
}

func TestJournalTornLastLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		file       string
		unfinished []unfinished
		after      string
	}{
		{"torn start keeps the start", "started a 2026-07-06T10:00:00Z\nfinished a failed\nstarted b 2026-07-0",
			[]unfinished{{ID: "b", StartedAt: t1}},
			"started a 2026-07-06T10:00:00Z\nfinished a failed\nstarted b 2026-07-06T10:01:00Z\n"},
		{"start torn inside its id is dropped", "started a 2026-07-06T10:00:00Z\nstar",
			[]unfinished{{ID: "a", StartedAt: t0}},
			"started a 2026-07-06T10:00:00Z\n"},
		{"complete line without its newline", "started a 2026-07-06T10:00:00Z\nfinished a succeeded",
			nil,
			"started a 2026-07-06T10:00:00Z\nfinished a succeeded\n"},
		{"a finish torn inside its status counts: the result was sent", "started a 2026-07-06T10:00:00Z\nfinished a succ",
			nil,
			"started a 2026-07-06T10:00:00Z\nfinished a succ\n"},
		{"a finish torn before its status does not", "started a 2026-07-06T10:00:00Z\nfinished a",
			[]unfinished{{ID: "a", StartedAt: t0}},
			"started a 2026-07-06T10:00:00Z\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "journal")
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			j := openTestJournal(t, path, t1)
			diff(t, "unfinished", tc.unfinished, j.Unfinished())
			data, _ := os.ReadFile(path)
			diff(t, "file after repair", tc.after, string(data))
		})
	}
}

func TestJournalRefusesCorruption(t *testing.T) {
	t.Parallel()
	for _, file := range []string{
		"started a 2026-07-06T10:00:00Z\ngarbage here\nstarted b 2026-07-06T10:00:00Z\n",
		"finished a succeeded\n",
		"started a yesterday\n",
	} {
		path := filepath.Join(t.TempDir(), "journal")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := openJournal(path, t0); err == nil || !strings.Contains(err.Error(), "line") {
			t.Errorf("journal %q: want an error naming the line, got %v", file, err)
		}
	}
}

// TestJournalConcurrentOrdersStartOnce: orders journal concurrently, and
// their lines share syncs. Each of 20 orders is delivered twice at the
// same moment (a duplicate racing the original): exactly one copy starts
// and the other is told it is a replay, and after every order is sent and
// finished the file, read back as on a restart, holds each one's three
// lines once, none left unfinished.
func TestJournalConcurrentOrdersStartOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "journal")
	j := openTestJournal(t, path, t0)
	const orders = 20
	begun := make([][2]error, orders)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range orders {
		for copy := range 2 {
			wg.Go(func() {
				<-start
				id := fmt.Sprintf("order-%d", i)
				err := j.Begin(id, t0)
				begun[i][copy] = err
				if err != nil {
					return
				}
				if err := j.Sent(id, t1); err != nil {
					t.Errorf("Sent %s: %v", id, err)
				}
				if err := j.Finish(id, tasks.StatusSucceeded); err != nil {
					t.Errorf("Finish %s: %v", id, err)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	for i, errs := range begun {
		started, replays := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				started++
			case errors.Is(err, errReplay):
				replays++
			default:
				t.Errorf("Begin order-%d: %v", i, err)
			}
		}
		if started != 1 || replays != 1 {
			t.Errorf("order-%d delivered twice at once: started %d times and refused as a replay %d times, want once each", i, started, replays)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]int{}
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		kind, rest, _ := strings.Cut(line, " ")
		id, _, _ := strings.Cut(rest, " ")
		lines[kind+" "+id]++
	}
	for i := range orders {
		for _, kind := range []string{"started", "sent", "finished"} {
			if n := lines[fmt.Sprintf("%s order-%d", kind, i)]; n != 1 {
				t.Errorf("%s order-%d: %d lines, want 1", kind, i, n)
			}
		}
	}
	j = openTestJournal(t, path, t1)
	if left := j.Unfinished(); len(left) != 0 {
		t.Errorf("after a restart %d orders are unfinished, want none: %+v", len(left), left)
	}
}

// TestJournalFailedSyncFailsEveryLaterCall: once a sync has failed, the
// journal refuses every later line, even when the file would sync again:
// the failed fsync may have lost lines other orders wrote before it, and
// a later one would report success. A pipe stands in for a file whose
// sync fails (fsync of a pipe is EINVAL).
func TestJournalFailedSyncFailsEveryLaterCall(t *testing.T) {
	t.Parallel()
	j := openTestJournal(t, filepath.Join(t.TempDir(), "journal"), t0)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	j.mu.Lock()
	file := j.f
	j.f = w
	j.mu.Unlock()
	if err := j.Begin("a", t0); err == nil {
		t.Fatal("Begin succeeded though its line could not be synced")
	}
	j.mu.Lock()
	j.f = file
	j.mu.Unlock()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.Begin("b", t1); err == nil {
		t.Error("Begin succeeded after a failed sync, on a file that syncs again")
	}
	if err := j.Finish("a", tasks.StatusFailed); err == nil {
		t.Error("Finish succeeded after a failed sync")
	}
}
