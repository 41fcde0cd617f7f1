package actuator

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nomoshq/nomos/tasks"
)

// errReplay means the journal has already seen an execution start.
var errReplay = errors.New("execution already started")

// executionIDRE is what the journal accepts as an execution id: one word, so
// a line can never be forged through an id.
var executionIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

func validExecutionID(id string) bool { return executionIDRE.MatchString(id) }

// journal is the actuator's append-only record of which executions started
// and how they finished. Every line is synced to disk before the call that
// wrote it returns, and once a sync has failed no call succeeds:
//
//	started <id> <rfc3339>
//	sent <id> <rfc3339>
//	finished <id> <status>
//
// sent is written just before the execution's first command goes to the
// host: an execution that started but has no sent line never reached it.
type journal struct {
	path string

	mu       sync.Mutex
	f        *os.File
	started  map[string]time.Time
	sent     map[string]bool
	finished map[string]tasks.Status
	order    []string // started ids, in journal order

	// written numbers the lines written. syncMu lets one caller at a time
	// sync the file, for every line written before it began; synced, under
	// syncMu, is the last line known to be on disk.
	written atomic.Int64
	syncMu  sync.Mutex
	synced  int64
	// syncErr, under syncMu, is the first failed sync's error, which every
	// later sync returns: a failed fsync may have lost lines that others
	// wrote before it, and a later fsync would not say so.
	syncErr error
}

// unfinished is an execution the journal saw start but not finish.
type unfinished struct {
	ID        string
	StartedAt time.Time
	// Sent is false when no command of it was sent to the host.
	Sent bool
}

// openJournal reads the journal at path, creating it and its directory if
// need be. A torn last line, left by a crash in the middle of a write, is
// cut off; if it names an execution that started, that start is kept, since
// it may have reached the host. Any other malformed line is an error: the
// journal is what keeps orders from running twice, so it is never guessed at.
func openJournal(path string, now time.Time) (*journal, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	data, err := os.ReadFile(path)
	created := errors.Is(err, os.ErrNotExist)
	if err != nil && !created {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	j := &journal{path: path, started: map[string]time.Time{}, sent: map[string]bool{}, finished: map[string]tasks.Status{}}
	good := len(data)
	var torn string
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		good, torn = i+1, string(data[i+1:])
	}
	for n, line := range strings.Split(string(data[:good]), "\n") {
		if line == "" {
			continue
		}
		if err := j.apply(line); err != nil {
			return nil, fmt.Errorf("open journal %s: line %d: %w", path, n+1, err)
		}
	}
	var repair string
	if torn != "" {
		if j.apply(torn) == nil {
			repair = torn + "\n"
		} else if id, ok := tornStart(torn); ok && !j.seen(id) {
			j.start(id, now)
			repair = "started " + id + " " + now.UTC().Format(time.RFC3339Nano) + "\n"
		}
		if err := os.Truncate(path, int64(good)); err != nil {
			return nil, fmt.Errorf("open journal: cut torn line: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	j.f = f
	if created {
		if err := syncDir(dir); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("open journal: %w", err)
		}
	}
	if repair != "" {
		n, err := j.write(repair)
		if err == nil {
			err = j.sync(n)
		}
		if err != nil {
			_ = f.Close()
			return nil, err
		}
	}
	return j, nil
}

// tornStart reads the id from the start of a torn "started" line, if the
// whole id made it to disk.
func tornStart(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, "started ")
	if !ok {
		return "", false
	}
	id, _, ok := strings.Cut(rest, " ")
	return id, ok && validExecutionID(id)
}

func (j *journal) apply(line string) error {
	f := strings.Split(line, " ")
	if len(f) != 3 || !validExecutionID(f[1]) {
		return fmt.Errorf("malformed entry %q", line)
	}
	switch f[0] {
	case "started":
		at, err := time.Parse(time.RFC3339Nano, f[2])
		if err != nil {
			return fmt.Errorf("malformed time in %q", line)
		}
		if !j.seen(f[1]) {
			j.start(f[1], at)
		}
	case "sent":
		if !j.seen(f[1]) {
			return fmt.Errorf("%s sent but never started", f[1])
		}
		j.sent[f[1]] = true
	case "finished":
		if !j.seen(f[1]) {
			return fmt.Errorf("%s finished but never started", f[1])
		}
		j.finished[f[1]] = tasks.Status(f[2])
	default:
		return fmt.Errorf("malformed entry %q", line)
	}
	return nil
}

func (j *journal) start(id string, at time.Time) {
	j.started[id] = at
	j.order = append(j.order, id)
}

func (j *journal) seen(id string) bool {
	_, ok := j.started[id]
	return ok
}

// Seen reports whether id has ever started.
func (j *journal) Seen(id string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.seen(id)
}

// Begin records that id starts now and syncs it to disk. It returns
// errReplay if id started before. If the write fails, id still counts as
// started, since part of the line may have reached the disk; the caller
// must not run it.
func (j *journal) Begin(id string, at time.Time) error {
	if !validExecutionID(id) {
		return fmt.Errorf("journal start: invalid execution id %q", id)
	}
	j.mu.Lock()
	if j.seen(id) {
		j.mu.Unlock()
		return errReplay
	}
	j.start(id, at)
	n, err := j.write("started " + id + " " + at.UTC().Format(time.RFC3339Nano) + "\n")
	j.mu.Unlock()
	if err != nil {
		return err
	}
	return j.sync(n)
}

// Sent records, before the first command of id goes to the host, that
// one may have, and syncs it to disk. The command must not be sent if it
// fails. A torn line reads back as not sent, rightly: the command was not.
func (j *journal) Sent(id string, at time.Time) error {
	j.mu.Lock()
	if j.sent[id] {
		j.mu.Unlock()
		return nil
	}
	n, err := j.write("sent " + id + " " + at.UTC().Format(time.RFC3339Nano) + "\n")
	j.mu.Unlock()
	if err != nil {
		return err
	}
	if err := j.sync(n); err != nil {
		return err
	}
	j.mu.Lock()
	j.sent[id] = true
	j.mu.Unlock()
	return nil
}

// Finish records how id ended and syncs it to disk.
func (j *journal) Finish(id string, status tasks.Status) error {
	if strings.ContainsAny(string(status), " \n") || status == "" {
		return fmt.Errorf("journal finish %s: invalid status %q", id, status)
	}
	j.mu.Lock()
	if !j.seen(id) {
		j.mu.Unlock()
		return fmt.Errorf("journal finish %s: it never started", id)
	}
	n, err := j.write("finished " + id + " " + string(status) + "\n")
	j.mu.Unlock()
	if err != nil {
		return err
	}
	if err := j.sync(n); err != nil {
		return err
	}
	j.mu.Lock()
	j.finished[id] = status
	j.mu.Unlock()
	return nil
}

// Unfinished lists the executions that started and never finished, in the
// order they started.
func (j *journal) Unfinished() []unfinished {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []unfinished
	for _, id := range j.order {
		if _, ok := j.finished[id]; !ok {
			out = append(out, unfinished{ID: id, StartedAt: j.started[id], Sent: j.sent[id]})
		}
	}
	return out
}

// write writes one line in one write and returns its number, for sync;
// j.mu is held.
func (j *journal) write(line string) (int64, error) {
	if j.f == nil {
		return 0, fmt.Errorf("journal %s is closed", j.path)
	}
	if _, err := j.f.WriteString(line); err != nil {
		return 0, fmt.Errorf("write journal %s: %w", j.path, err)
	}
	return j.written.Add(1), nil
}

// sync returns once line n is on disk; j.mu is not held. A caller whose
// line was written while another's sync ran waits for it, then syncs
// every line written meanwhile at once: in a burst of orders the journal
// syncs once for many lines, where each order used to wait, under j.mu,
// for the syncs of all before it (about a millisecond each here).
func (j *journal) sync(n int64) error {
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	if j.syncErr != nil {
		return j.syncErr
	}
	if j.synced >= n {
		return nil
	}
	// Every line up to upTo was written before this sync begins.
	upTo := j.written.Load()
	j.mu.Lock()
	f := j.f
	j.mu.Unlock()
	if f == nil {
		return fmt.Errorf("journal %s is closed", j.path)
	}
	if err := f.Sync(); err != nil {
		j.syncErr = fmt.Errorf("sync journal %s: %w", j.path, err)
		return j.syncErr
	}
	j.synced = upTo
	return nil
}

// Close closes the journal file.
func (j *journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// syncDir makes a newly created file's directory entry durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }() // read-only; Sync is what matters
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}
