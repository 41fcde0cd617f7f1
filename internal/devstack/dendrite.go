package devstack

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/synapseadmin"
)

// DendriteConfig describes a Dendrite homeserver for StartDendrite.
type DendriteConfig struct {
	// Dir holds the server's state: config, signing key, shared secret, SQLite
	// databases (unless DatabaseURL is set), JetStream streams, media and
	// dendrite.log. It is created if missing and reused if present, so a second
	// run keeps the same server key, accounts and rooms. Required.
	Dir string
	// DatabaseURL, when set, is a Postgres connection URL for one existing
	// database that holds all of Dendrite's tables instead of SQLite files in
	// Dir. SQLite serialises writers across the whole server: under the
	// concurrent sends, reactions and syncs of a test suite or a busy room,
	// Dendrite v0.13.8 on SQLite answers some requests with HTTP 500 ("database
	// is locked"). Postgres does not. Default: SQLite.
	DatabaseURL string
	// ServerName is the Matrix server name, the part after the colon in user
	// ids. It cannot change once Dir holds state. Default "localhost".
	ServerName string
	// Listen is the loopback host:port to serve plain HTTP on. Port 0 picks a
	// free port on every start. Default "127.0.0.1:0".
	Listen string
	// BinDir holds the Dendrite binaries. Default: EnsureDendrite's result.
	BinDir string
	// Logger receives devstack's own messages; Dendrite logs to Dir/dendrite.log.
	// Default: discard.
	Logger *slog.Logger
	// StartTimeout bounds the wait for the server to answer. Default 2m.
	StartTimeout time.Duration
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL. Default 15s.
	StopGrace time.Duration
}

func (c *DendriteConfig) resolve(ctx context.Context) error {
	if c.Dir == "" {
		return errors.New("dendrite config: Dir is required")
	}
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return fmt.Errorf("dendrite config: Dir: %w", err)
	}
	c.Dir = dir
	c.ServerName = cmp.Or(c.ServerName, "localhost")
	if strings.ContainsAny(c.ServerName, " \t\r\n/@") {
		return fmt.Errorf("dendrite config: ServerName %q is not a valid server name", c.ServerName)
	}
	c.Listen = cmp.Or(c.Listen, "127.0.0.1:0")
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("dendrite config: Listen %q: %w", c.Listen, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("dendrite config: Listen %q: host must be a loopback address such as 127.0.0.1", c.Listen)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("dendrite config: Listen %q: bad port", c.Listen)
	}
	if c.DatabaseURL != "" && !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		return errors.New("dendrite config: DatabaseURL must be a postgres:// URL")
	}
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	c.StartTimeout = cmp.Or(c.StartTimeout, defaultDendriteStartTimeout)
	c.StopGrace = cmp.Or(c.StopGrace, defaultDendriteStopGrace)
	if c.BinDir == "" {
		if c.BinDir, err = EnsureDendrite(ctx, c.Logger); err != nil {
			return err
		}
	}
	return nil
}

// Dendrite is a running Dendrite homeserver started by StartDendrite.
type Dendrite struct {
	cfg          DendriteConfig
	url          string
	sharedSecret string
	logPath      string
	logOffset    int64 // where this run's output starts in logPath
	http         *http.Client
	unlockDir    func()

	cmd      *exec.Cmd
	done     chan struct{} // closed once the process has exited
	waitErr  error         // the exit status; read only after done is closed
	stopping atomic.Bool

	stopOnce sync.Once
	stopErr  error
}

// StartDendrite starts a Dendrite monolith on cfg.Dir and returns once it
// answers GET /_matrix/client/versions. Federation and open registration are
// off; accounts come from RegisterUser. ctx bounds only the start-up: the
// server runs until Stop. A failed start returns an error with the tail of
// Dir/dendrite.log.
func StartDendrite(ctx context.Context, cfg DendriteConfig) (*Dendrite, error) {
	if err := cfg.resolve(ctx); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create dendrite dir: %w", err)
	}
	unlock, err := dendriteTryLock(filepath.Join(cfg.Dir, dendriteLockFile))
	if errors.Is(err, errDendriteLocked) {
		return nil, fmt.Errorf("start dendrite: %s is in use by another running dendrite", cfg.Dir)
	}
	if err != nil {
		return nil, fmt.Errorf("lock dendrite dir: %w", err)
	}
	d := &Dendrite{
		cfg:       cfg,
		logPath:   filepath.Join(cfg.Dir, dendriteLogFile),
		http:      &http.Client{Timeout: 30 * time.Second},
		unlockDir: unlock,
	}
	if err := d.start(ctx); err != nil {
		_ = os.Remove(filepath.Join(cfg.Dir, dendritePIDFile))
		unlock()
		return nil, err
	}
	return d, nil
}

func (d *Dendrite) start(ctx context.Context) error {
	d.stopOrphan()
	if err := d.prepareDir(ctx); err != nil {
		return err
	}
	const attempts = 3
	for attempt := 1; ; attempt++ {
		addr, err := dendriteListenAddr(d.cfg.Listen)
		if err != nil {
			return fmt.Errorf("start dendrite: %w", err)
		}
		err = d.run(ctx, addr)
		if err == nil {
			return nil
		}
		// A free port picked for us can be taken before Dendrite binds it.
		if attempt < attempts && strings.HasSuffix(d.cfg.Listen, ":0") && strings.Contains(d.tail(), "address already in use") {
			d.cfg.Logger.WarnContext(ctx, "dendrite port taken, retrying", "addr", addr)
			continue
		}
		return err
	}
}

// dendriteListenAddr turns listen into a concrete address that is free right
// now, picking a port when listen ends in :0.
func dendriteListenAddr(listen string) (string, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return "", fmt.Errorf("listen address %s is not available: %w", listen, err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", err
	}
	return addr, nil
}

// prepareDir writes the state Dendrite needs: a signing key and shared secret
// made once and kept, and a config file rewritten on every start.
func (d *Dendrite) prepareDir(ctx context.Context) error {
	dir := d.cfg.Dir
	namePath := filepath.Join(dir, dendriteNameFile)
	switch old, err := os.ReadFile(namePath); {
	case err == nil && strings.TrimSpace(string(old)) != d.cfg.ServerName:
		return fmt.Errorf("start dendrite: %s holds state for server name %q, not %q", dir, strings.TrimSpace(string(old)), d.cfg.ServerName)
	case errors.Is(err, os.ErrNotExist):
		if err := dendriteWriteFile(namePath, []byte(d.cfg.ServerName+"\n"), 0o644); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("read dendrite server name: %w", err)
	}

	keyPath := filepath.Join(dir, dendriteKeyFile)
	if _, err := os.Stat(keyPath); errors.Is(err, os.ErrNotExist) {
		tmp := dendriteKeyFile + ".new"
		cmd := exec.CommandContext(ctx, filepath.Join(d.cfg.BinDir, "generate-keys"), "--private-key", tmp)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("generate dendrite signing key: %w\n%s", err, out)
		}
		if err := os.Rename(filepath.Join(dir, tmp), keyPath); err != nil {
			return fmt.Errorf("generate dendrite signing key: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("check dendrite signing key: %w", err)
	}

	secretPath := filepath.Join(dir, dendriteSecretFile)
	secret, err := os.ReadFile(secretPath)
	if errors.Is(err, os.ErrNotExist) {
		secret = []byte(rand.Text())
		err = dendriteWriteFile(secretPath, secret, 0o600)
	}
	if err != nil {
		return fmt.Errorf("dendrite shared secret: %w", err)
	}
	d.sharedSecret = strings.TrimSpace(string(secret))
	if d.sharedSecret == "" {
		return fmt.Errorf("dendrite shared secret: %s is empty", secretPath)
	}

	var conf bytes.Buffer
	if err := dendriteConfigTemplate.Execute(&conf, map[string]string{
		"Version":      DendriteVersion,
		"ServerName":   d.cfg.ServerName,
		"SharedSecret": d.sharedSecret,
		"DatabaseURL":  d.cfg.DatabaseURL,
	}); err != nil {
		return fmt.Errorf("render dendrite config: %w", err)
	}
	return dendriteWriteFile(filepath.Join(dir, dendriteConfigFile), conf.Bytes(), 0o600)
}

// run starts the process on addr and waits until it answers or exits.
func (d *Dendrite) run(ctx context.Context, addr string) error {
	logFile, err := os.OpenFile(d.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open dendrite log: %w", err)
	}
	defer func() { _ = logFile.Close() }() // the child keeps its own descriptor
	if info, err := logFile.Stat(); err == nil {
		d.logOffset = info.Size()
	}
	_, _ = fmt.Fprintf(logFile, "--- nomos devstack: starting dendrite %s on %s at %s ---\n", DendriteVersion, addr, time.Now().Format(time.RFC3339))

	d.url = "http://" + addr
	d.done = make(chan struct{})
	d.stopping.Store(false)
	d.cmd = exec.Command(filepath.Join(d.cfg.BinDir, "dendrite"),
		"-config", filepath.Join(d.cfg.Dir, dendriteConfigFile),
		"-http-bind-address", addr,
	)
	d.cmd.Dir = d.cfg.Dir // relative paths in the config resolve here
	d.cmd.Stdout = logFile
	d.cmd.Stderr = logFile
	d.cmd.SysProcAttr = dendriteSysProcAttr()
	if err := d.cmd.Start(); err != nil {
		return fmt.Errorf("start dendrite: %w", err)
	}
	pid := d.cmd.Process.Pid
	d.cfg.Logger.InfoContext(ctx, "dendrite starting", "pid", pid, "url", d.url, "dir", d.cfg.Dir)
	go func(cmd *exec.Cmd, done chan struct{}) {
		d.waitErr = cmd.Wait()
		close(done)
		if !d.stopping.Load() {
			d.cfg.Logger.Error("dendrite exited unexpectedly", "pid", cmd.Process.Pid, "err", d.waitErr, "log", d.logPath)
		}
	}(d.cmd, d.done)
	_ = dendriteWriteFile(filepath.Join(d.cfg.Dir, dendritePIDFile), []byte(strconv.Itoa(pid)+"\n"), 0o644)

	start := time.Now()
	if err := d.waitReady(ctx); err != nil {
		d.kill()
		return fmt.Errorf("start dendrite at %s: %w\nlast lines of %s:\n%s", d.url, err, d.logPath, d.tail())
	}
	d.cfg.Logger.InfoContext(ctx, "dendrite ready", "pid", pid, "url", d.url, "server_name", d.cfg.ServerName, "duration", time.Since(start).Round(time.Millisecond))
	return nil
}

func (d *Dendrite) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if d.versionsAnswer(ctx, client) {
			return nil
		}
		select {
		case <-d.done:
			return fmt.Errorf("dendrite exited before it was ready: %v", d.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("dendrite not ready: %w", context.Cause(ctx))
		case <-time.After(dendritePollInterval):
		}
	}
}

func (d *Dendrite) versionsAnswer(ctx context.Context, client *http.Client) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url+"/_matrix/client/versions", nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var body struct {
		Versions []string `json:"versions"`
	}
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&body) == nil && len(body.Versions) > 0
}

// URL is the client-server API base URL, such as http://127.0.0.1:8008.
func (d *Dendrite) URL() string { return d.url }

// ServerName is the Matrix server name, as in @user:ServerName.
func (d *Dendrite) ServerName() string { return d.cfg.ServerName }

// LogPath is the file Dendrite's stdout and stderr go to.
func (d *Dendrite) LogPath() string { return d.logPath }

// Done is closed when the Dendrite process exits, whether by Stop or not.
func (d *Dendrite) Done() <-chan struct{} { return d.done }

// RegisterUser creates an account through the shared-secret registration API
// and returns its user id. A localpart that is already registered is not an
// error: its id is returned and its password and admin flag stay as they were.
//
// Dendrite serves Synapse's /_synapse/admin/v1/register (its clientapi
// routing, register_secret.go: the same nonce and HMAC-SHA1 over nonce,
// user, password and admin or notadmin), so mautrix's synapseadmin client
// speaks it.
func (d *Dendrite) RegisterUser(ctx context.Context, localpart, password string, admin bool) (userID string, err error) {
	cli, err := mautrix.NewClient(d.url, "", "")
	if err != nil {
		return "", fmt.Errorf("register %s: %w", localpart, err)
	}
	cli.Client = d.http
	resp, err := (&synapseadmin.Client{Client: cli}).SharedSecretRegister(ctx, d.sharedSecret, synapseadmin.ReqSharedSecretRegister{
		Username: localpart, Password: password, Admin: admin,
	})
	switch {
	case errors.Is(err, mautrix.MUserInUse):
		// Dendrite lowercases localparts on registration.
		return "@" + strings.ToLower(localpart) + ":" + d.cfg.ServerName, nil
	case err != nil:
		return "", fmt.Errorf("register %s: %w", localpart, err)
	case resp.UserID == "":
		return "", fmt.Errorf("register %s: response has no user_id", localpart)
	}
	return resp.UserID.String(), nil
}

// Stop shuts Dendrite down: SIGTERM to its process group, then SIGKILL if it
// has not exited after StopGrace. It returns an error if Dendrite had already
// exited on its own. Calling Stop again returns the first result.
func (d *Dendrite) Stop() error {
	d.stopOnce.Do(func() { d.stopErr = d.stop() })
	return d.stopErr
}

func (d *Dendrite) stop() error {
	defer d.unlockDir()
	defer func() { _ = os.Remove(filepath.Join(d.cfg.Dir, dendritePIDFile)) }()
	select {
	case <-d.done:
		return fmt.Errorf("dendrite exited before Stop: %v\nlast lines of %s:\n%s", d.waitErr, d.logPath, d.tail())
	default:
	}
	d.stopping.Store(true)
	pid := d.cmd.Process.Pid
	dendriteSettle(pid, dendriteSettleMax)
	if err := dendriteSignalGroup(pid, dendriteSIGTERM); err != nil {
		d.cfg.Logger.Warn("dendrite SIGTERM failed", "pid", pid, "err", err)
	}
	select {
	case <-d.done:
		if d.waitErr != nil {
			// Unacknowledged JetStream messages are redelivered on the next start.
			d.cfg.Logger.Warn("dendrite exited uncleanly on SIGTERM", "pid", pid, "err", d.waitErr, "log", d.logPath)
		} else {
			d.cfg.Logger.Info("dendrite stopped", "pid", pid)
		}
		return nil
	case <-time.After(d.cfg.StopGrace):
	}
	d.cfg.Logger.Warn("dendrite ignored SIGTERM, killing it", "pid", pid, "grace", d.cfg.StopGrace)
	d.kill()
	return nil
}

// dendriteSettleMax bounds how long Stop waits for Dendrite to go idle.
const dendriteSettleMax = 2 * time.Second

// dendriteSettle waits, at most max, until pid has used no CPU for two polls
// in a row. On SIGTERM Dendrite cancels the context its JetStream consumers
// write with, and a consumer caught mid-write panics (matrix-org/dendrite#2798,
// open). Stopping an idle server avoids that. Without /proc it returns at once.
func dendriteSettle(pid int, max time.Duration) {
	const poll = 50 * time.Millisecond
	prev, err := dendriteCPUTicks(pid)
	if err != nil {
		return
	}
	idle := 0
	for deadline := time.Now().Add(max); idle < 2 && time.Now().Before(deadline); {
		time.Sleep(poll)
		cur, err := dendriteCPUTicks(pid)
		if err != nil {
			return
		}
		if cur == prev {
			idle++
		} else {
			idle = 0
		}
		prev = cur
	}
}

// dendriteCPUTicks returns the user plus system CPU time of pid in clock ticks,
// from /proc/<pid>/stat.
func dendriteCPUTicks(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, may hold spaces; it ends at the last ')'.
	// After it come field 3 (state) onwards; utime and stime are fields 14 and 15.
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("parse /proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	return utime + stime, nil
}

// kill stops the process group at once and waits for the exit.
func (d *Dendrite) kill() {
	d.stopping.Store(true)
	_ = dendriteSignalGroup(d.cmd.Process.Pid, dendriteSIGKILL)
	<-d.done
}

// stopOrphan stops a Dendrite left running on this Dir by a process that died
// without calling Stop. Holding the Dir lock proves no live owner exists; the
// command line proves the pid is still that Dendrite and not a reused pid.
func (d *Dendrite) stopOrphan() {
	raw, err := os.ReadFile(filepath.Join(d.cfg.Dir, dendritePIDFile))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 1 {
		return
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(cmdline, []byte(filepath.Join(d.cfg.Dir, dendriteConfigFile)+"\x00")) {
		return
	}
	d.cfg.Logger.Warn("stopping orphaned dendrite", "pid", pid, "dir", d.cfg.Dir)
	dendriteSettle(pid, dendriteSettleMax)
	for _, sig := range []dendriteSignal{dendriteSIGTERM, dendriteSIGKILL} {
		_ = dendriteSignalGroup(pid, sig)
		for deadline := time.Now().Add(d.cfg.StopGrace); time.Now().Before(deadline); {
			if !dendriteAlive(pid) {
				return
			}
			time.Sleep(dendritePollInterval)
		}
	}
	d.cfg.Logger.Warn("orphaned dendrite would not stop", "pid", pid)
}

// tail returns the end of this run's part of the log.
func (d *Dendrite) tail() string {
	f, err := os.Open(d.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	defer func() { _ = f.Close() }() // read-only
	raw, err := io.ReadAll(io.NewSectionReader(f, d.logOffset, 1<<30))
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	return dendriteTail(raw)
}

// dendriteTail returns the last lines of output, at most about 8 KB.
func dendriteTail(out []byte) string {
	const maxLines, maxBytes = 40, 8 << 10
	s := strings.TrimRight(string(out), "\n")
	if len(s) > maxBytes {
		s = s[len(s)-maxBytes:]
	}
	lines := strings.Split(s, "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return strings.Join(lines, "\n")
}

// dendriteWriteFile replaces path atomically.
func dendriteWriteFile(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // gone once renamed
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func dendriteYAMLQuote(s string) string {
	b, _ := json.Marshal(s) // a JSON string is a valid YAML double-quoted scalar
	return string(b)
}

// dendriteConfigTemplate is the config for Dendrite v0.13.8's config version 2
// (setup/config in the Dendrite module). Relative paths resolve against Dir,
// the process's working directory.
var dendriteConfigTemplate = template.Must(template.New("dendrite.yaml").
	Funcs(template.FuncMap{"q": dendriteYAMLQuote}).Parse(`# Written by nomos (internal/devstack) on every start: edits are overwritten.
# Dendrite {{.Version}} monolith for development and tests: {{if .DatabaseURL}}Postgres{{else}}SQLite{{end}}, no federation,
# shared-secret registration only, plain HTTP on loopback.
version: 2

global:
  server_name: {{q .ServerName}}
{{- if .DatabaseURL}}
  # One pool for every component (setup/config's global database): a
  # component without a database section of its own uses it.
  database:
    connection_string: {{q .DatabaseURL}}
    max_open_conns: 10
    max_idle_conns: 2
    conn_max_lifetime: -1
{{- end}}
  private_key: matrix_key.pem
  trusted_third_party_id_servers: []
  disable_federation: true
  presence:
    enable_inbound: false
    enable_outbound: false
  report_stats:
    enabled: false
  server_notices:
    enabled: false
  jetstream:
    addresses: []
    storage_path: ./
    topic_prefix: Dendrite
    in_memory: false
  metrics:
    enabled: false
  sentry:
    enabled: false
  dns_cache:
    enabled: false

app_service_api:
  config_files: []

client_api:
  registration_disabled: true
  guests_disabled: true
  registration_shared_secret: {{q .SharedSecret}}
  enable_registration_captcha: false
  rate_limiting:
    enabled: false

federation_api:
{{- if not .DatabaseURL}}
  database:
    connection_string: file:dendrite_federationapi.db
{{- end}}
  key_perspectives: []

{{- if not .DatabaseURL}}
key_server:
  database:
    connection_string: file:dendrite_keyserver.db
{{- end}}

media_api:
  base_path: ./media
{{- if not .DatabaseURL}}
  database:
    connection_string: file:dendrite_mediaapi.db
{{- end}}
  max_file_size_bytes: 10485760
  dynamic_thumbnails: false

mscs:
  mscs: []
{{- if not .DatabaseURL}}
  database:
    connection_string: file:dendrite_mscs.db
{{- end}}

{{- if not .DatabaseURL}}
relay_api:
  database:
    connection_string: file:dendrite_relayapi.db
{{- end}}

{{- if not .DatabaseURL}}
room_server:
  database:
    connection_string: file:dendrite_roomserver.db
{{- end}}

sync_api:
{{- if not .DatabaseURL}}
  database:
    connection_string: file:dendrite_syncapi.db
{{- end}}
  search:
    enabled: false

user_api:
{{- if not .DatabaseURL}}
  account_database:
    connection_string: file:dendrite_userapi.db
{{- end}}
  # Cheap hashing: this server holds only development and test accounts.
  bcrypt_cost: 4
  # Lets tests point pushers at a local HTTPS gateway with a self-signed cert.
  push_gateway_disable_tls_validation: true

tracing:
  enabled: false

logging:
  - type: std
    level: info
`))
