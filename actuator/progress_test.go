package actuator

import (
	"strings"
	"testing"
	"time"
)

func TestCoalescer(t *testing.T) {
	t.Parallel()
	c := coalescer{interval: 2 * time.Second, heartbeat: 10 * time.Second, last: t0}
	diff(t, "quiet: wait for the heartbeat", 10*time.Second, c.wait(t0))
	diff(t, "quiet, later", 4*time.Second, c.wait(t0.Add(6*time.Second)))
	c.dirty = true
	diff(t, "news: wait out the interval", 2*time.Second, c.wait(t0))
	diff(t, "news after the interval: now", time.Duration(0), c.wait(t0.Add(3*time.Second)))
	c.sent(t0.Add(3 * time.Second))
	diff(t, "sent: clean again", false, c.dirty)
	diff(t, "next heartbeat counts from the last report", 10*time.Second, c.wait(t0.Add(3*time.Second)))
	c = coalescer{interval: 2 * time.Second, heartbeat: time.Second, last: t0, dirty: true}
	diff(t, "a heartbeat shorter than the interval wins", time.Second, c.wait(t0))
}

func TestTail(t *testing.T) {
	t.Parallel()
	lines := func(n int) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			b.WriteString("line " + strings.Repeat("x", i%3) + "\n")
		}
		return b.String()
	}
	diff(t, "short output whole", "a\nb\n", tail("a\nb\n", 20, 4096))
	diff(t, "last lines", 3, strings.Count(tail(lines(50), 3, 4096), "\n"))
	diff(t, "no trailing newline", "c\nd", tail("a\nb\nc\nd", 2, 4096))
	got := tail(strings.Repeat("é", 3000), 20, 101)
	if len(got) > 101 || !strings.HasPrefix(got, "é") {
		t.Errorf("byte cut must keep whole runes within the limit, got %d bytes starting %q", len(got), got[:2])
	}
	diff(t, "byte cut at a line", "ccc\n", tail("aaaa\nbbbb\nccc\n", 20, 6))
	diff(t, "last line", "E: failed", lastLine("x\nE: failed\n\n"))
}

func TestOutputBufferKeepsTheTailRedacted(t *testing.T) {
	t.Parallel()
	var b outputBuffer
	b.WriteString("-----BEGIN OPENSSH PRIVATE KEY-----\n")
	for range 5000 {
		b.WriteString("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=\n")
	}
	b.WriteString("-----END OPENSSH PRIVATE KEY-----\ndone\n")
	// Less than the kept window: the key's start has scrolled out of it,
	// its end has not.
	for range 3 {
		b.WriteString(strings.Repeat("y", 8000) + "\n")
	}
	b.WriteString("token=abc\n")
	got := b.Tail(resultTailLines, 1<<20)
	if !strings.Contains(got, "[REDACTED PRIVATE KEY]\ndone\n") || strings.Contains(got, "QUJD") || strings.Contains(got, "abc") {
		t.Errorf("secret survived the tail:\n%.300s", got)
	}
	if !strings.HasSuffix(got, "token=[REDACTED]\n") {
		t.Errorf("want the last line redacted at the end, got ...%q", got[max(0, len(got)-40):])
	}
}
