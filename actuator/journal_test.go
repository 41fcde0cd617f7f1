package actuator

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
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
	t.Cleanup(func() { j.Close() })
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
	j.Close()

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
