package actuator

import (
	"context"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/tasks"
)

// How much output goes where. Progress carries a short tail, a result a
// longer one; the status page links to the rest.
const (
	progressTailLines = 20
	progressTailBytes = 4 << 10
	resultTailLines   = 100
	resultTailBytes   = 8 << 10
	// outputKeepBytes is how much raw output is kept to cut tails from. It
	// is larger than any tail so that a secret whose start scrolled out of
	// a tail is still recognised and redacted.
	outputKeepBytes = 64 << 10
)

// outputBuffer keeps the tail of an execution's combined output. It is safe
// for the concurrent writes of a command's stdout and stderr.
type outputBuffer struct {
	mu     sync.Mutex
	buf    []byte
	cut    bool // output was dropped from the front
	notify func()
}

func (b *outputBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*outputKeepBytes {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-outputKeepBytes:]...)
		b.cut = true
	}
	notify := b.notify
	b.mu.Unlock()
	if notify != nil {
		notify()
	}
	return len(p), nil
}

// WriteString writes s; it is for the actuator's own lines between phases.
// Write never fails.
func (b *outputBuffer) WriteString(s string) { _, _ = b.Write([]byte(s)) }

// Tail returns at most the last maxLines lines and maxBytes bytes of the
// output, redacted, as valid UTF-8.
func (b *outputBuffer) Tail(maxLines, maxBytes int) string {
	b.mu.Lock()
	raw := b.buf
	if len(raw) > outputKeepBytes {
		raw = raw[len(raw)-outputKeepBytes:]
	}
	s, cut := string(raw), b.cut || len(raw) < len(b.buf)
	b.mu.Unlock()
	if cut {
		// The first line is partial; drop it rather than show half of it.
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return tail(redact.String(strings.ToValidUTF8(s, "\uFFFD")), maxLines, maxBytes)
}

// tail cuts s to its last maxLines lines and maxBytes bytes, starting at a
// line boundary where it can and never inside a UTF-8 sequence.
func tail(s string, maxLines, maxBytes int) string {
	trimmed := strings.TrimRight(s, "\n")
	n := 0
	for i := len(trimmed) - 1; i >= 0; i-- {
		if trimmed[i] == '\n' {
			n++
			if n == maxLines {
				s = s[i+1:]
				break
			}
		}
	}
	if len(s) <= maxBytes {
		return s
	}
	s = s[len(s)-maxBytes:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
		return s[i+1:]
	}
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}

// lastLine is the last non-empty line of s, for error messages.
func lastLine(s string) string {
	s = strings.TrimRight(s, "\n \t\r")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

// coalescer decides when the next progress report is due: as soon as
// interval has passed since the last one if there is news, and after
// heartbeat in any case, so the bot can tell a quiet command from a dead
// actuator.
type coalescer struct {
	interval  time.Duration
	heartbeat time.Duration
	last      time.Time
	dirty     bool
}

// wait returns how long from now until the next report is due.
func (c *coalescer) wait(now time.Time) time.Duration {
	d := c.heartbeat
	if c.dirty {
		d = min(d, c.interval)
	}
	return max(0, c.last.Add(d).Sub(now))
}

// sent records a report made at now.
func (c *coalescer) sent(now time.Time) {
	c.last = now
	c.dirty = false
}

// progress streams an execution's output to the results queue while it
// runs.
type progress struct {
	a       *Actuator
	id      string
	started time.Time
	out     *outputBuffer

	mu    sync.Mutex
	phase string
	seq   int

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

func newProgress(a *Actuator, id string, started time.Time, out *outputBuffer) *progress {
	p := &progress{
		a: a, id: id, started: started, out: out,
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	out.notify = p.poke
	return p
}

func (p *progress) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// setPhase names the phase now running; the change is news.
func (p *progress) setPhase(name string) {
	p.mu.Lock()
	p.phase = name
	p.mu.Unlock()
	p.poke()
}

// start reports in the background until finish. The first report, which
// the bot takes as the order's acknowledgment, goes out once there is
// news and ProgressInterval has passed, or after HeartbeatInterval: an
// order that ends sooner sends its result alone, which says it began
// (tasks.Result.Began). That is one signed message and one Postgres
// transaction fewer for most orders, and none before the first command;
// an acknowledgment within HeartbeatInterval stays well inside the bot's
// orders.ack_timeout, after which it would send the order again.
func (p *progress) start(ctx context.Context) {
	go p.loop(ctx)
}

func (p *progress) loop(ctx context.Context) {
	defer close(p.done)
	c := coalescer{interval: p.a.cfg.ProgressInterval, heartbeat: p.a.cfg.HeartbeatInterval, last: p.a.now()}
	timer := time.NewTimer(c.wait(p.a.now()))
	defer timer.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-ctx.Done():
			return
		case <-p.wake:
			c.dirty = true
		case <-timer.C:
			// The wait was computed to end when a report is due, so send
			// without asking the clock again: a clock that stands still
			// must not stop the reports.
			p.send(ctx)
			c.sent(p.a.now())
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(c.wait(p.a.now()))
	}
}

// finish stops the background reports and waits until the last one is on
// the queue, so no progress can arrive after the result.
func (p *progress) finish() {
	close(p.stop)
	<-p.done
}

func (p *progress) send(ctx context.Context) {
	p.mu.Lock()
	p.seq++
	now := p.a.now()
	msg := tasks.Progress{
		ExecutionID: p.id,
		Seq:         p.seq,
		Phase:       p.phase,
		Tail:        p.out.Tail(progressTailLines, progressTailBytes),
		Elapsed:     tasks.Duration(now.Sub(p.started)),
		At:          now,
	}
	p.mu.Unlock()
	p.a.reportProgress(ctx, msg)
}
