package soak

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/labsim"
)

// services the cases restart, on both demo hosts, with the command each
// restart sends.
var services = []struct{ name, host, command string }{
	{"jellyfin", "strong", "pct exec 101 -- systemctl restart jellyfin.service"},
	{"gitea", "strong", "pct exec 102 -- systemctl restart gitea.service"},
	{"caddy", "strong", "pct exec 104 -- systemctl restart caddy.service"},
	{"vaultwarden", "hubris", "pct exec 110 -- systemctl restart vaultwarden.service"},
	{"mosquitto", "hubris", "pct exec 111 -- systemctl restart mosquitto.service"},
	{"grafana", "hubris", "pct exec 113 -- systemctl restart grafana-server.service"},
}

// plan is one operator request and the bot's card for it.
type plan struct {
	op      *operator
	msg     id.EventID
	card    roomEvent
	service string
	command string
	// logFrom is how many labsim log entries there were when it was asked.
	logFrom int
}

// ask has op ask for a restart of the i-th service (modulo) and waits for
// the card.
func (s *stack) ask(op *operator, i int) *plan {
	s.t.Helper()
	svc := services[i%len(services)]
	p := &plan{op: op, service: svc.name, command: svc.command, logFrom: len(s.log())}
	s.asked++
	p.msg = op.say("restart " + svc.name)
	p.card = s.timeline.waitFor("the card for restart "+svc.name, 60*time.Second, func(e roomEvent) bool { return e.isCardFor(s.botUser, p.msg) })
	return p
}

// execution is the execution row behind a card.
type execution struct {
	ID    string
	State string
	Error string
}

// execution reads the card's execution; ok is false while the bot has not
// recorded the card's event id yet.
func (s *stack) execution(card id.EventID) (execution, bool, error) {
	var x execution
	err := s.db.QueryRow(s.ctx, `SELECT id::text, state, coalesce(error, '') FROM executions WHERE card_event_id = $1`, card.String()).Scan(&x.ID, &x.State, &x.Error)
	if errors.Is(err, pgx.ErrNoRows) {
		return x, false, nil
	}
	return x, err == nil, err
}

var terminal = map[string]bool{"succeeded": true, "failed": true, "outcome_unknown": true, "reconciled": true, "denied": true, "expired": true, "cancelled": true}

// waitEnd waits until the card's execution ends and returns it. Database
// errors are retried: some cases restart Postgres.
func (s *stack) waitEnd(p *plan, d time.Duration) execution {
	s.t.Helper()
	x, ok := s.awaitEnd(p, d)
	if !ok {
		s.t.Fatalf("%s did not end within %s; last state %q", p, d, x.State)
	}
	return x
}

// awaitEnd is waitEnd for a case that counts an order that never ends.
func (s *stack) awaitEnd(p *plan, d time.Duration) (execution, bool) {
	deadline := time.Now().Add(d)
	var last execution
	for time.Now().Before(deadline) {
		x, ok, err := s.execution(p.card.ID)
		if err == nil && ok {
			last = x
			if terminal[x.State] {
				return x, true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return last, false
}

// waitState waits until the card's execution is in state.
func (s *stack) waitState(p *plan, state string) {
	s.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		x, ok, err := s.execution(p.card.ID)
		if err == nil && ok && x.State == state {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s never reached %s; it is %q", p, state, x.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitSays waits until the card says one of subs.
func (s *stack) waitSays(p *plan, d time.Duration, subs ...string) bool {
	deadline := time.Now().Add(d)
	for !s.says(p, subs...) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// checkAsked checks that each request made one execution and no message
// was handled again: as many restarts on record as were asked for.
func (s *stack) checkAsked() {
	s.t.Helper()
	var n int
	if err := s.db.QueryRow(s.ctx, `SELECT count(*) FROM executions WHERE action = 'restart'`).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	if n != s.asked {
		s.t.Errorf("%d restarts on record, but %d were asked for", n, s.asked)
	}
}

// log reads labsim's command log.
func (s *stack) log() []labsim.LogEntry {
	entries, err := labsim.ReadLog(s.fleet.LogPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		s.t.Fatal(err)
	}
	return entries
}

// runs counts how often command reached a host in the log from entry from.
func runs(log []labsim.LogEntry, from int, command string) int {
	n := 0
	for _, e := range log[min(from, len(log)):] {
		if e.Command == command {
			n++
		}
	}
	return n
}

// decisions counts the approvals recorded for an execution.
func (s *stack) decisions(executionID string) int {
	var n int
	if executionID == "" { // no execution was found for the card
		return 0
	}
	if err := s.db.QueryRow(s.ctx, `SELECT count(*) FROM approvals WHERE execution_id = $1`, executionID).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n
}

// checkReplies checks that the bot answered no operator message twice:
// no card posted twice, no old message handled again after a restart.
func (s *stack) checkReplies() {
	s.t.Helper()
	ops := map[id.UserID]bool{}
	for _, op := range s.operators {
		ops[op.id] = true
	}
	for _, e := range s.timeline.snapshot() {
		if ops[e.Sender] && e.isMessage() {
			if n := len(s.timeline.cardsFor(s.botUser, e.ID)); n > 1 {
				s.t.Errorf("the bot answered %q (%s) %d times", e.Body, e.ID, n)
			}
		}
	}
}

func (p *plan) String() string { return fmt.Sprintf("restart %s (card %s)", p.service, p.card.ID) }

// says reports whether the card now says any of subs.
func (s *stack) says(p *plan, subs ...string) bool {
	return contains(s.timeline.lastBody(s.botUser, p.card), subs...)
}
