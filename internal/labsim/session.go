package labsim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gliderlabs/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/nomoshq/nomos/hostgate"
)

// exitKilled is the exit code logged for a command whose session ended
// before it did.
const exitKilled = -1

var (
	errSimClosed   = errors.New("labsim closed")
	errSessionGone = errors.New("client closed the session")
	errFinished    = errors.New("command finished")
)

// signalError is a session cancelled by a signal from the client.
type signalError struct{ sig ssh.Signal }

func (e signalError) Error() string { return "client sent SIG" + string(e.sig) }

// probeInterval is how often a blocked command checks that its client is
// still there. The SSH library does not tell a handler when the client
// closes the channel but keeps the connection.
const probeInterval = 100 * time.Millisecond

func (s *Sim) enterSession(host string, sess ssh.Session, cancel context.CancelCauseFunc) (*activeSession, bool) {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if s.closed {
		return nil, false
	}
	as := &activeSession{host: host, command: sess.RawCommand(), cancel: cancel, conn: closerFor(sess)}
	s.sessions[as] = struct{}{}
	s.wg.Add(1)
	return as, true
}

func (s *Sim) leaveSession(as *activeSession) {
	s.sessMu.Lock()
	delete(s.sessions, as)
	s.sessMu.Unlock()
	s.wg.Done()
}

// closerFor returns what ends the whole connection under sess.
func closerFor(sess ssh.Session) interface{ Close() error } {
	if c, ok := sess.Context().Value(ssh.ContextKeyConn).(gossh.Conn); ok {
		return c
	}
	return sess
}

// serveSession runs one SSH session's command on h.
//
//nolint:contextcheck // gliderlabs/ssh gives the handler its session, whose Context it derives from.
func (s *Sim) serveSession(h *simHost, sess ssh.Session) {
	ctx, cancel := context.WithCancelCause(sess.Context())
	defer cancel(errFinished)
	as, ok := s.enterSession(h.name, sess, cancel)
	if !ok {
		_ = sess.Exit(255)
		return
	}
	defer s.leaveSession(as)

	start := s.clock()
	entry := newLogEntry(h.name, sess, start)
	raw := entry.Command
	log := s.log.With("host", h.name, "user", entry.User, "command", raw)

	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		watchSession(ctx, cancel, sess)
	}()
	stopWatch := func() {
		cancel(errFinished)
		<-watchDone
	}

	faults := s.currentFaults()
	if faults.drops(h.name) && !isControlCommand(raw) {
		stopWatch()
		entry.Exit = exitKilled
		entry.DurationMS = s.clock().Sub(start).Milliseconds()
		s.appendLog(entry)
		log.Info("drop fault: closing connection without exit status")
		_ = as.conn.Close()
		return
	}
	env := &shellEnv{sim: s, host: h.name, faults: faults, session: as}
	code := s.runCommand(ctx, env, sess, &entry, log)
	cause := context.Cause(ctx)
	stopWatch()

	entry.Exit = code
	entry.DurationMS = s.clock().Sub(start).Milliseconds()
	s.appendLog(entry)
	log.Debug("command finished", "exit", code, "duration_ms", entry.DurationMS)
	endSession(sess, code, cause)
}

// newLogEntry starts the log line of the command sess carries.
func newLogEntry(host string, sess ssh.Session, start time.Time) LogEntry {
	raw := sess.RawCommand()
	e := LogEntry{TS: start, Host: host, User: sess.User(), Command: raw, VMID: commandVMID(raw)}
	if k := sess.PublicKey(); k != nil {
		e.KeyFP = gossh.FingerprintSHA256(k)
	}
	return e
}

// runCommand runs the session's command as the host would, through the
// gate in gate mode, and returns its exit status.
func (s *Sim) runCommand(ctx context.Context, env *shellEnv, sess ssh.Session, entry *LogEntry, log *slog.Logger) int {
	raw := entry.Command
	script, refused := raw, error(nil)
	if sess.User() != AdminUser {
		script, refused = s.gateCommand(raw)
	}
	switch {
	case refused != nil:
		_, _ = fmt.Fprintln(sess.Stderr(), "nomos gate: "+refused.Error())
		entry.Refused = strings.TrimPrefix(refused.Error(), hostgate.ErrRefused.Error()+": ")
		log.Info("the gate refused a command", "reason", entry.Refused)
		return hostgate.ExitRefused
	case strings.TrimSpace(raw) == "":
		_, _ = fmt.Fprint(sess.Stderr(), "labsim: interactive shells are not supported; pass a command, e.g. ssh root@host 'pct list'\n")
		return 1
	case (env.faults.hangs(raw, entry.VMID) || env.faults.onHost(FaultSSHHang, env.host)) && !isControlCommand(raw):
		log.Info("hang fault: command will not finish")
		<-ctx.Done()
		return exitKilled
	}
	return s.runGuarded(ctx, env, script, sess, log)
}

// endSession reports code to the client, or for a command a signal ended,
// the signal, as sshd does. A client that has gone hears nothing, and
// there is no one else to tell.
func endSession(sess ssh.Session, code int, cause error) {
	if code != exitKilled {
		_ = sess.Exit(code & 0xff)
		return
	}
	var sig signalError
	if errors.As(cause, &sig) {
		_, _ = sess.SendRequest("exit-signal", false, gossh.Marshal(struct {
			Signal     string
			CoreDumped bool
			Error      string
			Lang       string
		}{Signal: string(sig.sig)}))
	}
	_ = sess.Close()
}

// AdminUser is the node's administrator, as someone at the Proxmox UI or
// console would be: gate mode does not apply to a session as this user,
// as a real node's gate applies only to the key whose authorized_keys line
// forces it. Tests act as the admin to change a host behind Nomos's back.
const AdminUser = "admin"

// gateCommand is what the simulated host runs for raw: raw itself, or in
// gate mode the argv nomos gate would exec, quoted back into one line, or
// the gate's refusal. labsim's own control commands pass the gate when
// they are one plain command.
func (s *Sim) gateCommand(raw string) (string, error) {
	if s.gate == nil {
		return raw, nil
	}
	if argv, err := hostgate.Parse(raw); err == nil && argv[0] == "labsim" {
		return hostgate.Quote(argv), nil
	}
	argv, err := hostgate.Check(raw, *s.gate)
	if err != nil {
		return "", err
	}
	return hostgate.Quote(argv), nil
}

// runGuarded runs the command and turns a bug in the simulator into exit
// 255 and a log line, so one bad command does not take down every host.
func (s *Sim) runGuarded(ctx context.Context, env *shellEnv, raw string, sess ssh.Session, log *slog.Logger) (code int) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("labsim bug: command panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			_, _ = fmt.Fprintf(sess.Stderr(), "labsim: internal error running %q\n", raw)
			code = 255
		}
	}()
	return runScript(ctx, env, "bash", raw, loginProc(sess, sess, sess.Stderr()), nil, nil)
}

// watchSession cancels ctx when the client sends a signal or closes the
// channel, so blocked commands can end.
func watchSession(ctx context.Context, cancel context.CancelCauseFunc, sess ssh.Session) {
	sigs := make(chan ssh.Signal, 16)
	sess.Signals(sigs)
	defer sess.Signals(nil)
	t := time.NewTicker(probeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case sig := <-sigs:
			cancel(signalError{sig})
			return
		case <-t.C:
			// A request on a channel the client closed fails at once.
			if _, err := sess.SendRequest("keepalive@openssh.com", false, nil); err != nil {
				cancel(errSessionGone)
				return
			}
		}
	}
}

// Running lists the raw commands of the sessions in progress, so a test can
// tell that a command has reached the host before it interrupts it.
func (s *Sim) Running() []string {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	out := make([]string, 0, len(s.sessions))
	for as := range s.sessions {
		out = append(out, as.command)
	}
	return out
}
