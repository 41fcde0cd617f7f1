package labsim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// LogEntry is one line of the JSONL command log: a command as the host
// received it and how it ended. Exit is -1 when the session went away
// before the command finished.
type LogEntry struct {
	TS         time.Time `json:"ts"`
	Host       string    `json:"host"`
	User       string    `json:"user"`
	KeyFP      string    `json:"key_fp"`
	Command    string    `json:"command"`
	VMID       int       `json:"vmid,omitempty"`
	Exit       int       `json:"exit"`
	DurationMS int64     `json:"duration_ms"`
	// Refused is why the gate refused the command, in gate mode; such a
	// command never reached the host and exited 126.
	Refused string `json:"refused,omitempty"`
}

// ReadLog reads a command log written by labsim.
func ReadLog(path string) ([]LogEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read command log: %w", err)
	}
	defer func() { _ = f.Close() }() // read-only
	var out []LogEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var e LogEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("read command log %s line %d: %w", path, n, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read command log %s: %w", path, err)
	}
	return out, nil
}

// appendLog writes e as one line. Each line goes out in a single write to a
// file opened with O_APPEND, so lines never interleave.
func (s *Sim) appendLog(e LogEntry) {
	line, err := json.Marshal(e)
	if err != nil {
		s.log.Error("encode command log entry", "err", err)
		return
	}
	line = append(line, '\n')
	s.logMu.Lock()
	defer s.logMu.Unlock()
	if s.logFile == nil {
		s.log.Error("command log is closed", "command", e.Command)
		return
	}
	if _, err := s.logFile.Write(line); err != nil {
		s.log.Error("write command log", "path", s.logPath, "err", err)
	}
}
