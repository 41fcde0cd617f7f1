package labsim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"

	gossh "golang.org/x/crypto/ssh"
)

func TestCommandLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cmds := []string{
		"pct status 101",
		"pct exec 101 -- hostname",
		"nosuch",
		"echo hi; false",
		"pct start 999",
	}
	for _, c := range cmds {
		b.run(t, "pve1", c)
	}
	b.clock.Advance(1500000000) // 1.5s, so the next entry's ts differs
	b.run(t, "pve2", "pct list")

	fp := gossh.FingerprintSHA256(b.key.PublicKey())
	later := epoch.Add(1500000000)
	want := []LogEntry{
		{TS: epoch, Host: "pve1", User: "root", KeyFP: fp, Command: "pct status 101", VMID: 101, Exit: 0},
		{TS: epoch, Host: "pve1", User: "root", KeyFP: fp, Command: "pct exec 101 -- hostname", VMID: 101, Exit: 0},
		{TS: epoch, Host: "pve1", User: "root", KeyFP: fp, Command: "nosuch", Exit: 127},
		{TS: epoch, Host: "pve1", User: "root", KeyFP: fp, Command: "echo hi; false", Exit: 1},
		{TS: epoch, Host: "pve1", User: "root", KeyFP: fp, Command: "pct start 999", VMID: 999, Exit: 2},
		{TS: later, Host: "pve2", User: "root", KeyFP: fp, Command: "pct list", Exit: 0},
	}
	got, err := ReadLog(b.cfg.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "log", want, got)

	// The wire format is what other tools read: check the field names.
	f, err := os.Open(b.cfg.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // read-only
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		t.Fatal("empty log")
	}
	var raw map[string]any
	if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	diff(t, "first line", map[string]any{
		"ts": "2024-11-30T10:00:00Z", "host": "pve1", "user": "root", "key_fp": fp,
		"command": "pct status 101", "vmid": float64(101), "exit": float64(0), "duration_ms": float64(0),
	}, raw)
}

func TestCommandLogConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 24
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			host := []string{"pve1", "pve2"}[i%2]
			if r, err := b.exec(t, host, fmt.Sprintf("echo %d", i)); err != nil || r.Exit != 0 {
				t.Errorf("echo %d: %+v %v", i, r, err)
			}
		}()
	}
	wg.Wait()
	got, err := ReadLog(b.cfg.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, e := range got {
		cmds = append(cmds, e.Command)
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("echo %d", i))
	}
	slices.Sort(cmds)
	slices.Sort(want)
	diff(t, "commands logged once each", want, cmds)
}

func TestReadLogRejectsGarbage(t *testing.T) {
	t.Parallel()
	p := t.TempDir() + "/log.jsonl"
	if err := os.WriteFile(p, []byte("{\"command\":\"ok\"}\nnot json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLog(p); err == nil {
		t.Fatal("ReadLog accepted a broken line")
	}
}
