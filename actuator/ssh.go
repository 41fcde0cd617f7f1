package actuator

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Errors a Runner returns. They say what the host saw, which decides how an
// execution ends.
var (
	// ErrNotSent means the command never reached the host, so it did not
	// run: the host was unreachable, refused us, or the work was cancelled
	// first.
	ErrNotSent = errors.New("command was not sent")
	// ErrHostKey means the host's key is not pinned in known_hosts or does
	// not match the pinned one. Errors that match it also match ErrNotSent.
	ErrHostKey = errors.New("host key refused")
	// ErrTimedOut is the cause of a context that ran out of time. A command
	// that outlives it is killed.
	ErrTimedOut = errors.New("timed out")
	// ErrNoExitStatus means the command was sent but its session ended
	// without an exit status, as when the connection drops: it may or may
	// not have run.
	ErrNoExitStatus = errors.New("session ended without an exit status")
)

// Runner runs one shell command on a Proxmox host and returns its exit
// status. When ctx ends before the command does, the command is killed and
// Run returns an error wrapping context.Cause(ctx). Errors match ErrNotSent
// when nothing reached the host; any other error means the command may
// have run.
type Runner interface {
	Run(ctx context.Context, addr, command string, stdout, stderr io.Writer) (int, error)
}

var _ Runner = (*SSHRunner)(nil)

// SSHConfig configures an SSHRunner.
type SSHConfig struct {
	// User is the login on every host. Default root.
	User string
	// Signer is the actuator's private key. Required.
	Signer ssh.Signer
	// KnownHostsFile pins every host's key, in OpenSSH known_hosts format.
	// It is read again at each connection, so a new host needs no
	// restart. Required.
	KnownHostsFile string
	// DialTimeout bounds connecting, the SSH handshake and opening a
	// session. Default 10s.
	DialTimeout time.Duration
	// KillGrace is how long a killed command may take to report that it
	// died before its session is closed regardless. Default 2s.
	KillGrace time.Duration
	// MaxSessions bounds how many commands run at once on one host, as
	// sessions of its one connection; a command past it waits for a
	// session to end. OpenSSH's sshd refuses a connection's sessions past
	// its MaxSessions, 10 unless sshd_config says otherwise. Default 10.
	MaxSessions int
	// Logger receives connection events. Default: discarded.
	Logger *slog.Logger
}

// SSHRunner runs commands over SSH with pinned host keys, keeping one
// connection per host address and opening a session per command.
type SSHRunner struct {
	cfg SSHConfig
	log *slog.Logger

	mu     sync.Mutex
	hosts  map[string]*hostConn
	closed bool
}

// hostConn is the connection to one address; mu serialises dialing it,
// and slots holds a token for each session open on it.
type hostConn struct {
	mu     sync.Mutex
	client *ssh.Client
	slots  chan struct{}
}

// NewSSHRunner checks cfg and reads the known_hosts file once, so that a
// missing or malformed file is reported at start-up.
func NewSSHRunner(cfg SSHConfig) (*SSHRunner, error) {
	cfg.User = cmp.Or(cfg.User, "root")
	cfg.DialTimeout = cmp.Or(cfg.DialTimeout, 10*time.Second)
	cfg.KillGrace = cmp.Or(cfg.KillGrace, 2*time.Second)
	cfg.MaxSessions = cmp.Or(cfg.MaxSessions, 10)
	var errs []error
	if cfg.Signer == nil {
		errs = append(errs, errors.New("an SSH private key is required"))
	}
	if cfg.KnownHostsFile == "" {
		errs = append(errs, errors.New("a known_hosts file is required: host keys are always pinned"))
	} else if _, err := knownhosts.New(cfg.KnownHostsFile); err != nil {
		errs = append(errs, fmt.Errorf("known_hosts: %w", err))
	}
	if cfg.DialTimeout < 0 || cfg.KillGrace < 0 {
		errs = append(errs, errors.New("timeouts must not be negative"))
	}
	if cfg.MaxSessions < 1 {
		errs = append(errs, fmt.Errorf("max sessions must be at least 1, got %d", cfg.MaxSessions))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("ssh runner: %w", err)
	}
	return &SSHRunner{
		cfg:   cfg,
		log:   cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		hosts: map[string]*hostConn{},
	}, nil
}

// beforeSendKey carries a func(), called with the session open and just
// before the command is sent: the last moment at which nothing has.
type beforeSendKey struct{}

// WithBeforeSend returns a context under which Run calls fn right before
// it sends the command, and sends nothing if fn fails.
func WithBeforeSend(ctx context.Context, fn func() error) context.Context {
	return context.WithValue(ctx, beforeSendKey{}, fn)
}

// Run implements Runner. Output is copied to stdout and stderr as it
// arrives; they may be the same writer, which must then be safe for
// concurrent use.
func (r *SSHRunner) Run(ctx context.Context, addr, command string, stdout, stderr io.Writer) (int, error) {
	h, err := r.host(addr)
	if err != nil {
		return -1, err
	}
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	case <-ctx.Done():
		return -1, fmt.Errorf("%w to %s: waiting for a free session: %w", ErrNotSent, addr, context.Cause(ctx))
	}
	sess, err := r.session(ctx, h, addr)
	if err != nil {
		return -1, err
	}
	defer sess.Close()
	sess.Stdout, sess.Stderr = stdout, stderr
	if err := ctx.Err(); err != nil {
		return -1, fmt.Errorf("%w to %s: %w", ErrNotSent, addr, context.Cause(ctx))
	}
	if before, ok := ctx.Value(beforeSendKey{}).(func() error); ok {
		if err := before(); err != nil {
			return -1, fmt.Errorf("%w to %s: %w", ErrNotSent, addr, err)
		}
	}
	if err := sess.Start(command); err != nil {
		// A failure to send the exec request leaves us not knowing whether
		// it arrived; a refused one ran nothing. The refusal's message
		// quotes the command, so it stays out of the error.
		var netErr net.Error
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.As(err, &netErr) {
			return -1, fmt.Errorf("%w: start command on %s: %v", ErrNoExitStatus, addr, err)
		}
		return -1, fmt.Errorf("%w: %s refused to start the command", ErrNotSent, addr)
	}
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	select {
	case err := <-done:
		return exitStatus(addr, err)
	case <-ctx.Done():
	}
	// Out of time or cancelled: kill the command, give it a moment to say
	// it died, then close the session regardless. The stop is the outcome,
	// whatever the signal or the session's end returns.
	_ = sess.Signal(ssh.SIGKILL)
	t := time.NewTimer(r.cfg.KillGrace)
	defer t.Stop()
	select {
	case <-done: //nolint:errcheck // the stop is the outcome
	case <-t.C:
		sess.Close()
		<-done //nolint:errcheck // the stop is the outcome
	}
	return -1, fmt.Errorf("command on %s stopped: %w", addr, context.Cause(ctx))
}

// exitStatus reads the outcome of a finished session.
func exitStatus(addr string, err error) (int, error) {
	var exitErr *ssh.ExitError
	var missing *ssh.ExitMissingError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exitErr):
		return exitErr.ExitStatus(), nil
	case errors.As(err, &missing):
		return -1, fmt.Errorf("%w from %s", ErrNoExitStatus, addr)
	}
	return -1, fmt.Errorf("%w from %s: %v", ErrNoExitStatus, addr, err)
}

// session opens a session on the connection to h. Sessions open at once,
// multiplexed over the one connection; only dialing is one at a time. A
// reused connection that turns out to be dead is replaced once; nothing
// has been sent then.
func (r *SSHRunner) session(ctx context.Context, h *hostConn, addr string) (*ssh.Session, error) {
	for attempt := 0; ; attempt++ {
		c, fresh, err := r.connection(ctx, h, addr)
		if err != nil {
			return nil, err
		}
		s, err := r.newSession(ctx, c)
		if err == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			// Our work was cancelled; the connection may be fine and
			// carry other commands.
			return nil, fmt.Errorf("%w to %s: %w", ErrNotSent, addr, err)
		}
		h.mu.Lock()
		if h.client == c {
			h.client = nil
		}
		h.mu.Unlock()
		c.Close()
		if fresh || attempt > 0 {
			return nil, fmt.Errorf("%w: open a session on %s: %v", ErrNotSent, addr, err)
		}
		r.log.Info("ssh connection went away; dialing again", "addr", addr, "err", err)
	}
}

// connection returns h's connection, dialing it first when there is
// none, and whether it was dialed just now.
func (r *SSHRunner) connection(ctx context.Context, h *hostConn, addr string) (*ssh.Client, bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.client != nil {
		return h.client, false, nil
	}
	c, err := r.dial(ctx, addr)
	if err != nil {
		return nil, false, err
	}
	h.client = c
	go r.watch(h, c, addr)
	return c, true, nil
}

// watch forgets a connection once it closes, so the next command dials.
func (r *SSHRunner) watch(h *hostConn, c *ssh.Client, addr string) {
	err := c.Wait()
	h.mu.Lock()
	if h.client == c {
		h.client = nil
	}
	h.mu.Unlock()
	r.log.Debug("ssh connection closed", "addr", addr, "err", err)
}

func (r *SSHRunner) host(addr string) (*hostConn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("%w: the ssh runner is closed", ErrNotSent)
	}
	h := r.hosts[addr]
	if h == nil {
		h = &hostConn{slots: make(chan struct{}, r.cfg.MaxSessions)}
		r.hosts[addr] = h
	}
	return h, nil
}

// newSession opens a session, bounded by ctx and the dial timeout: on a
// connection that died silently it would otherwise wait for ever.
func (r *SSHRunner) newSession(ctx context.Context, c *ssh.Client) (*ssh.Session, error) {
	type opened struct {
		s   *ssh.Session
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		s, err := c.NewSession()
		ch <- opened{s, err}
	}()
	t := time.NewTimer(r.cfg.DialTimeout)
	defer t.Stop()
	select {
	case o := <-ch:
		return o.s, o.err
	case <-ctx.Done():
		// Leave the connection to the commands it carries; close the
		// session if it opens after all.
		go func() {
			if o := <-ch; o.s != nil {
				o.s.Close()
			}
		}()
		return nil, context.Cause(ctx)
	case <-t.C:
	}
	c.Close() // the connection is dead; this unblocks NewSession
	if o := <-ch; o.s != nil {
		o.s.Close()
	}
	return nil, fmt.Errorf("no answer after %s", r.cfg.DialTimeout)
}

// dial connects to addr and completes the handshake, checking the host key
// against known_hosts.
func (r *SSHRunner) dial(ctx context.Context, addr string) (*ssh.Client, error) {
	base, err := knownhosts.New(r.cfg.KnownHostsFile)
	if err != nil {
		return nil, fmt.Errorf("%w to %s: read known_hosts: %v", ErrNotSent, addr, err)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, r.cfg.DialTimeout, fmt.Errorf("%w: no answer within %s", ErrTimedOut, r.cfg.DialTimeout))
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot reach %s: %v", ErrNotSent, addr, err)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var keyErr error
	cfg := &ssh.ClientConfig{
		User: r.cfg.User,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(r.cfg.Signer)},
		HostKeyCallback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			keyErr = hostKeyError(r.cfg.KnownHostsFile, hostname, key, base(hostname, remote, key))
			return keyErr
		},
		HostKeyAlgorithms: pinnedAlgorithms(base, addr, conn.RemoteAddr()),
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		conn.Close()
		if keyErr != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotSent, keyErr)
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("handshake: %w", context.Cause(ctx))
		}
		return nil, fmt.Errorf("%w: ssh to %s: %v", ErrNotSent, addr, err)
	}
	r.log.Debug("ssh connected", "addr", addr, "user", r.cfg.User)
	return ssh.NewClient(c, chans, reqs), nil
}

// hostKeyError turns a known_hosts verdict into an error an operator can
// act on.
func hostKeyError(file, host string, key ssh.PublicKey, err error) error {
	if err == nil {
		return nil
	}
	fp := ssh.FingerprintSHA256(key)
	var ke *knownhosts.KeyError
	var re *knownhosts.RevokedError
	switch {
	case errors.As(err, &re):
		return fmt.Errorf("%w: %s presented revoked %s key %s", ErrHostKey, host, key.Type(), fp)
	case errors.As(err, &ke) && len(ke.Want) == 0:
		return fmt.Errorf("%w: %s is not in %s (it presented %s key %s); add its key to known_hosts after checking it on the host", ErrHostKey, host, file, key.Type(), fp)
	case errors.As(err, &ke):
		return fmt.Errorf("%w: %s presented %s key %s, which does not match the key pinned in %s at line %d: the host was reinstalled, or someone is in the middle",
			ErrHostKey, host, key.Type(), fp, ke.Want[0].Filename, ke.Want[0].Line)
	}
	return fmt.Errorf("%w: %s: %v", ErrHostKey, host, err)
}

// probeKey is a key no host has; asking known_hosts about it lists the
// keys pinned for a host.
var probeKey, _ = ssh.NewPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))

// pinnedAlgorithms lists the host key algorithms of the keys pinned for
// addr, so the server is asked for a key we can check rather than one it
// prefers. Empty means the host is not pinned; the handshake then fails
// in the host key check.
func pinnedAlgorithms(cb ssh.HostKeyCallback, addr string, remote net.Addr) []string {
	var ke *knownhosts.KeyError
	if !errors.As(cb(addr, remote, probeKey), &ke) {
		return nil
	}
	var algos []string
	seen := map[string]bool{}
	for _, k := range ke.Want {
		typ := k.Key.Type()
		names := []string{typ}
		if typ == ssh.KeyAlgoRSA {
			names = []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
		}
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				algos = append(algos, n)
			}
		}
	}
	return algos
}

// Close closes every connection. Commands still running see their
// sessions end.
func (r *SSHRunner) Close() error {
	r.mu.Lock()
	r.closed = true
	hosts := r.hosts
	r.hosts = map[string]*hostConn{}
	r.mu.Unlock()
	var errs []error
	for _, h := range hosts {
		h.mu.Lock()
		if h.client != nil {
			if err := h.client.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
				errs = append(errs, err)
			}
			h.client = nil
		}
		h.mu.Unlock()
	}
	return errors.Join(errs...)
}
