package labsim

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gliderlabs/ssh"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/nomoshq/nomos/hostgate"
)

// Sim is a set of simulated Proxmox nodes sharing one state, one fault
// control file and one command log.
type Sim struct {
	log         *slog.Logger
	clock       func() time.Time
	haDelay     time.Duration
	authKeys    string
	gate        *hostgate.Rules
	statePath   string
	faultsPath  string
	logPath     string
	hosts       []*simHost
	serverClose func() bool // stops the context.AfterFunc set by Start

	mu    sync.Mutex // guards state and every host's and container's files
	state *simState
	// saving is set while a goroutine writes state.json, and resave when
	// the state changed again meanwhile; both under mu. saves counts
	// that goroutine, which Close waits for; closing, closed when Close
	// begins, tells it to write at once.
	saving, resave bool
	saves          sync.WaitGroup
	closing        chan struct{}

	faultMu    sync.Mutex // serialises faults.json read-modify-write
	lastFaults faultSet

	logMu   sync.Mutex
	logFile *os.File

	// sessMu guards started, closed and sessions. Every wg.Add happens
	// under it after checking closed, so Close's Wait never races an Add.
	sessMu   sync.Mutex
	started  bool
	closed   bool
	sessions map[*activeSession]struct{}
	wg       sync.WaitGroup

	closeOnce sync.Once
	closeErr  error

	connMu sync.Mutex // guards conns; never held while closing a connection
	conns  map[*trackedConn]struct{}
}

type simHost struct {
	name   string
	addr   string // as configured
	signer gossh.Signer
	srv    *ssh.Server
	ln     net.Listener
}

// activeSession is a running SSH session, kept so that Close and drop
// faults can end it.
type activeSession struct {
	host    string
	command string
	cancel  context.CancelCauseFunc
	conn    interface{ Close() error }
}

// New validates cfg, loads or creates the host keys and merges the saved
// state with the configured fleet. It does not listen yet.
func New(cfg Config) (*Sim, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("labsim config: %w", err)
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	s := &Sim{
		log:        cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		clock:      cfg.Clock,
		haDelay:    cmp.Or(cfg.HADelay, defaultHADelay),
		authKeys:   cfg.AuthorizedKeysFile,
		statePath:  filepath.Join(cfg.StateDir, "state.json"),
		faultsPath: filepath.Join(cfg.StateDir, "faults.json"),
		logPath:    cmp.Or(cfg.LogPath, filepath.Join(cfg.StateDir, "commands.jsonl")),
		sessions:   map[*activeSession]struct{}{},
		conns:      map[*trackedConn]struct{}{},
		closing:    make(chan struct{}),
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	s.log = s.log.With("component", "labsim")
	if cfg.Gate != nil {
		rules := *cfg.Gate
		s.gate = &rules
	}
	if _, err := s.authorizedKeys(); err != nil {
		return nil, err
	}
	for _, h := range cfg.Hosts {
		signer, err := loadOrCreateHostKey(filepath.Join(cfg.StateDir, "hostkey_"+h.Name), h.Name)
		if err != nil {
			return nil, err
		}
		s.hosts = append(s.hosts, &simHost{name: h.Name, addr: h.Addr, signer: signer})
	}
	st, err := loadState(s.statePath)
	if err != nil {
		return nil, err
	}
	for _, name := range st.merge(cfg, s.clock()) {
		s.log.Warn("dropping saved state of a host no longer configured", "host", name)
	}
	if err := st.checkClusters(); err != nil {
		return nil, err
	}
	s.state = st
	if err := saveState(s.statePath, st); err != nil {
		return nil, err
	}
	if _, err := s.readFaultFile(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Sim) host(name string) *simHost {
	for _, h := range s.hosts {
		if h.name == name {
			return h
		}
	}
	return nil
}

// Start listens on every host's address and serves SSH until Close or
// until ctx ends. It returns once every listener is open.
func (s *Sim) Start(ctx context.Context) error {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if s.closed {
		return errors.New("labsim: start after close")
	}
	if s.started {
		return errors.New("labsim: already started")
	}
	f, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open command log: %w", err)
	}
	var lns []net.Listener
	for _, h := range s.hosts {
		ln, err := net.Listen("tcp", h.addr)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			_ = f.Close() // nothing written yet
			return fmt.Errorf("listen for host %s on %s: %w", h.name, h.addr, err)
		}
		lns = append(lns, ln)
	}
	s.logMu.Lock()
	s.logFile = f
	s.logMu.Unlock()
	s.started = true
	for i, h := range s.hosts {
		h.ln = &trackingListener{Listener: lns[i], sim: s}
		h.srv = &ssh.Server{
			Handler:          func(sess ssh.Session) { s.serveSession(h, sess) },
			HostSigners:      []ssh.Signer{h.signer},
			Version:          "labsim",
			PublicKeyHandler: s.allowKey,
			ConnCallback:     func(_ ssh.Context, c net.Conn) net.Conn { return s.stallIfHung(h, c) },
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			err := h.srv.Serve(h.ln)
			if !errors.Is(err, ssh.ErrServerClosed) {
				s.log.Error("ssh server stopped", "host", h.name, "err", err)
			}
		}()
		s.log.Info("simulated proxmox host listening", "host", h.name, "addr", h.ln.Addr().String())
	}
	s.serverClose = context.AfterFunc(ctx, func() {
		if err := s.Close(); err != nil {
			s.log.Warn("close labsim", "err", err)
		}
	})
	return nil
}

// Close stops the listeners, ends every session and waits for them. Every
// caller waits for the same close and gets the same error.
func (s *Sim) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Sim) close() error {
	close(s.closing)
	s.sessMu.Lock()
	s.closed = true
	sessions := make([]*activeSession, 0, len(s.sessions))
	for as := range s.sessions {
		sessions = append(sessions, as)
	}
	s.sessMu.Unlock()

	if s.serverClose != nil {
		s.serverClose()
	}
	var errs []error
	for _, h := range s.hosts {
		if h.srv != nil {
			if err := h.srv.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
				errs = append(errs, fmt.Errorf("close host %s: %w", h.name, err))
			}
		}
		// Close the listener too: a Close right after Start can come
		// before Serve has registered it with the server, and then
		// srv.Close leaves Serve blocked in Accept for ever.
		if h.ln != nil {
			h.ln.Close()
		}
	}
	for _, as := range sessions {
		as.cancel(errSimClosed)
	}
	s.connMu.Lock()
	conns := make([]*trackedConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.connMu.Unlock()
	for _, c := range conns {
		_ = c.Close() // cut, whatever state it was in
	}
	s.wg.Wait()
	s.saves.Wait()

	s.logMu.Lock()
	if s.logFile != nil {
		if err := s.logFile.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close command log: %w", err))
		}
		s.logFile = nil
	}
	s.logMu.Unlock()
	return errors.Join(errs...)
}

// Addr is the address host listens on, with the real port once started.
func (s *Sim) Addr(host string) string {
	h := s.host(host)
	if h == nil {
		return ""
	}
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if h.ln != nil {
		return h.ln.Addr().String()
	}
	return h.addr
}

// HostPublicKey is host's SSH host key, or nil for an unknown host.
func (s *Sim) HostPublicKey(host string) gossh.PublicKey {
	h := s.host(host)
	if h == nil {
		return nil
	}
	return h.signer.PublicKey()
}

// KnownHostsLines are known_hosts lines pinning every host's key at its
// listen address.
func (s *Sim) KnownHostsLines() []string {
	var out []string
	for _, h := range s.hosts {
		out = append(out, knownhosts.Line([]string{knownhosts.Normalize(s.Addr(h.name))}, h.signer.PublicKey()))
	}
	return out
}

// WriteKnownHosts replaces path with lines, one per line.
func WriteKnownHosts(path string, lines []string) error {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return writeFileAtomic(path, []byte(b.String()), 0o644)
}

func loadOrCreateHostKey(path, host string) (gossh.Signer, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		signer, err := gossh.ParsePrivateKey(data)
		if err != nil {
			return nil, fmt.Errorf("parse host key %s: %w", path, err)
		}
		return signer, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read host key: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate host key for %s: %w", host, err)
	}
	block, err := gossh.MarshalPrivateKey(priv, "root@"+host)
	if err != nil {
		return nil, fmt.Errorf("encode host key for %s: %w", host, err)
	}
	if err := writeFileAtomic(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}
	signer, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		return nil, fmt.Errorf("host key for %s: %w", host, err)
	}
	return signer, nil
}

// authorizedKeys reads the authorized_keys file; key options are ignored.
func (s *Sim) authorizedKeys() ([]gossh.PublicKey, error) {
	data, err := os.ReadFile(s.authKeys)
	if err != nil {
		return nil, fmt.Errorf("read authorized keys: %w", err)
	}
	var keys []gossh.PublicKey
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, _, _, _, err := gossh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("authorized keys %s line %d: %w", s.authKeys, i+1, err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("authorized keys %s: no keys", s.authKeys)
	}
	return keys, nil
}

func (s *Sim) allowKey(ctx ssh.Context, key ssh.PublicKey) bool {
	keys, err := s.authorizedKeys()
	if err != nil {
		s.log.Error("refusing login: cannot read authorized keys", "err", err)
		return false
	}
	blob := key.Marshal()
	for _, k := range keys {
		if bytes.Equal(k.Marshal(), blob) {
			return true
		}
	}
	s.log.Info("refused unknown key", "user", ctx.User(), "remote_addr", ctx.RemoteAddr().String(), "key_fp", gossh.FingerprintSHA256(key))
	return false
}

// stallIfHung holds a new connection to a host under ssh_hang without a
// word, as a wedged node's kernel accepts a connection its sshd never
// serves, until the client gives up or Close cuts it (it is tracked); it
// then returns nil, which closes it. Any other connection is returned as
// is.
func (s *Sim) stallIfHung(h *simHost, c net.Conn) net.Conn {
	if !s.currentFaults().onHost(FaultSSHHang, h.name) {
		return c
	}
	s.log.Info("ssh_hang fault: holding a new connection without a handshake", "host", h.name, "remote", c.RemoteAddr().String())
	_, _ = io.Copy(io.Discard, c) // until the client gives up
	return nil
}

// trackingListener registers every accepted connection so that Close can
// cut connections still in the handshake, which gliderlabs does not track.
type trackingListener struct {
	net.Listener
	sim *Sim
}

func (l *trackingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		s := l.sim
		s.sessMu.Lock()
		if s.closed {
			s.sessMu.Unlock()
			c.Close()
			continue
		}
		tc := &trackedConn{Conn: c, sim: s}
		s.connMu.Lock()
		s.conns[tc] = struct{}{}
		s.connMu.Unlock()
		s.wg.Add(1)
		s.sessMu.Unlock()
		return tc, nil
	}
}

type trackedConn struct {
	net.Conn
	sim  *Sim
	once sync.Once
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.sim.connMu.Lock()
		delete(c.sim.conns, c)
		c.sim.connMu.Unlock()
		c.sim.wg.Done()
	})
	return err
}

func (s *Sim) dropSessions(host string, except *activeSession) {
	var victims []*activeSession
	s.sessMu.Lock()
	for as := range s.sessions {
		if as != except && (host == "*" || as.host == host) {
			victims = append(victims, as)
		}
	}
	s.sessMu.Unlock()
	for _, as := range victims {
		_ = as.conn.Close()
	}
}
