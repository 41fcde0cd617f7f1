package config

import (
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	envprovider "github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
	"golang.org/x/crypto/bcrypt"

	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/report"
	"github.com/nomoshq/nomos/tasks"
	"github.com/nomoshq/nomos/web"
)

// Config is the whole of Nomos's configuration. deploy/nomos.example.yaml
// documents every field; each role validates the part it uses.
type Config struct {
	Log      LogConfig      `koanf:"log"`
	Database DatabaseConfig `koanf:"database"`
	Redis    RedisConfig    `koanf:"redis"`
	Matrix   MatrixConfig   `koanf:"matrix"`
	LLM      LLMConfig      `koanf:"llm"`
	Actuator ActuatorConfig `koanf:"actuator"`
	Orders   OrdersConfig   `koanf:"orders"`
	Reports  ReportsConfig  `koanf:"reports"`
	Web      WebConfig      `koanf:"web"`
	MCP      MCPConfig      `koanf:"mcp"`
	Seeds    SeedsConfig    `koanf:"seeds"`
	Labsim   LabsimConfig   `koanf:"labsim"`
	Checks   ChecksConfig   `koanf:"checks"`
	// Inventory is fleet discovery.
	Inventory InventoryConfig `koanf:"inventory"`
	// Approvals holds the rules on who and what may approve a plan.
	Approvals ApprovalsConfig `koanf:"approvals"`
	// Snapshots says how Nomos treats the snapshots it takes before a
	// change, and the locks that keep a container from being changed.
	Snapshots SnapshotsConfig `koanf:"snapshots"`
	// Alerts tunes the alerts in the ops room.
	Alerts AlertsConfig `koanf:"alerts"`
	// Report says when the daily brief and the weekly report are posted.
	Report ReportConfig `koanf:"report"`
	// Watchdog is `nomos watchdog`, which watches the bot from another
	// machine.
	Watchdog WatchdogConfig `koanf:"watchdog"`
	// Agent keeps the agent's sessions.
	Agent AgentConfig `koanf:"agent"`
	// Schedules run catalogue actions and runbooks at cron times.
	Schedules []ScheduleConfig `koanf:"schedules"`
	// Windows open maintenance windows at cron times.
	Windows []WindowConfig `koanf:"windows"`
}

// AgentConfig says how long the agent's sessions are kept.
type AgentConfig struct {
	// SessionRetention is how long a session nobody has touched is kept
	// before the leading bot deletes its transcript (the audit log keeps
	// its entries). Default 720h (30 days); 0 keeps every session; else at
	// least 1h.
	SessionRetention time.Duration `koanf:"session_retention"`
}

// WatchdogConfig is `nomos watchdog` (docs/operations.md, "The
// watchdog"): where it reaches the bot, how often it looks, and its own
// Matrix account, whose password or token is its only secret.
type WatchdogConfig struct {
	// LANURL and MeshURL are the bot's status page over the two paths,
	// such as http://192.168.1.20:8080/ and https://nomos.example.org/
	// through the reverse proxy; /healthz and /readyz are read below
	// each. The watchdog pages only when both fail.
	LANURL  string `koanf:"lan_url"`
	MeshURL string `koanf:"mesh_url"`
	// Interval is how often both are checked. Default 30s; 5s to 10m.
	Interval time.Duration `koanf:"interval"`
	// Timeout bounds each request. Default 10s; at most Interval.
	Timeout time.Duration `koanf:"timeout"`
	// FailAfter is how many failed checks in a row take a path down.
	// Default 2; 1 to 10.
	FailAfter int `koanf:"fail_after"`
	// MaxSyncAge is how long ago the bot may last have synced with the
	// homeserver before a path counts as failing. Default 3m; at least
	// 1m (the bot long-polls for 30s).
	MaxSyncAge time.Duration `koanf:"max_sync_age"`
	// RepageAfter is how long after the first page of an outage the
	// second is sent; each later one waits twice as long. Default 30m.
	RepageAfter time.Duration `koanf:"repage_after"`
	// MaxPages bounds the pages of one outage. Default 3; 1 to 10.
	MaxPages int `koanf:"max_pages"`
	// HomeserverURL, UserID and Password (or AccessToken) are the
	// watchdog's own account, not the bot's.
	HomeserverURL   string `koanf:"homeserver_url"`
	UserID          string `koanf:"user_id"`
	Password        string `koanf:"password"`
	PasswordFile    string `koanf:"password_file"`
	AccessToken     string `koanf:"access_token"`
	AccessTokenFile string `koanf:"access_token_file"`
	// Room is where it pages: an unencrypted room (it sends without
	// encryption) with the operators in it, that its account was invited
	// to.
	Room string `koanf:"room"`
	// Operators are mentioned in each page, so push reaches their phones.
	Operators []string `koanf:"operators"`
}

// ScheduleConfig is one schedule (docs/operations.md, "Schedules"): what
// runs, on what, and when. The leading bot asks for it at each cron time
// like any request: a read-only catalogue action runs unattended, anything
// else is carded in the ops room and waits for a person.
type ScheduleConfig struct {
	// Name names it; its requests are by schedule:<name>. Letters, digits,
	// '-', '_' and '.'.
	Name string `koanf:"name"`
	// Cron is when: five fields (minute hour day-of-month month
	// day-of-week) or @daily, @hourly, @every 15m.
	Cron string `koanf:"cron"`
	// Timezone is the IANA zone Cron is read in; empty means
	// report.timezone.
	Timezone string `koanf:"timezone"`
	// Action and Params, or Runbook (a runbook's slug), say what runs on
	// Target.
	Action  string         `koanf:"action"`
	Params  map[string]any `koanf:"params"`
	Runbook string         `koanf:"runbook"`
	Target  string         `koanf:"target"`
	// Standing names a window (windows[].name) whose standing approval
	// this schedule may run under, once an operator has granted it.
	Standing string `koanf:"standing"`
}

// WindowConfig is a maintenance window that opens at a cron time.
type WindowConfig struct {
	Name     string        `koanf:"name"`
	Cron     string        `koanf:"cron"`
	Timezone string        `koanf:"timezone"`
	Duration time.Duration `koanf:"duration"`
	// Targets are the entities whose alerts it holds back; each must name
	// exactly one.
	Targets []string `koanf:"targets"`
	Reason  string   `koanf:"reason"`
	// Allow asks, at each opening, for a standing approval up to this
	// risk class (read_only, reversible_low or config_mutation; never
	// destructive), which an operator grants in the room with its phrase.
	Allow string `koanf:"allow"`
}

// ReportConfig says when the leading bot posts the daily brief and the
// weekly report in the ops room (docs/operations.md, "Daily brief").
type ReportConfig struct {
	// Daily is the time of day (HH:MM) of the daily brief, or off.
	// Default 08:00.
	Daily string `koanf:"daily"`
	// Weekly is the weekday of the weekly report, at Daily's time
	// ("monday"), or a weekday and a time ("fri 17:30"), or off. Default
	// monday.
	Weekly string `koanf:"weekly"`
	// Timezone is the IANA zone both are read in; empty means the host's.
	Timezone string `koanf:"timezone"`
	// BackupMaxAge is how old a guest's newest backup may be before the
	// daily brief names it, among the guests behind on backups. Default
	// 36h.
	BackupMaxAge time.Duration `koanf:"backup_max_age"`
}

// AlertsConfig tunes what the ops room hears about signals.
type AlertsConfig struct {
	// MuteFor is how long 🔇 on an alert (or a reply "mute") keeps new
	// alerts of its kind on its entity quiet. Default 4h.
	MuteFor time.Duration `koanf:"mute_for"`
	// WebhookToken (or WebhookTokenFile) turns on POST
	// /hooks/alertmanager, which takes Prometheus Alertmanager's alerts
	// with this bearer token. Empty: off.
	WebhookToken     string `koanf:"webhook_token"`
	WebhookTokenFile string `koanf:"webhook_token_file"`
}

// SnapshotsConfig is the bot's say on snapshots and locks; it signs them
// into each order, so the actuator needs no config of its own for them.
type SnapshotsConfig struct {
	// Keep is how many of its own snapshots (nomos-…) Nomos leaves on a
	// container: after a change it snapshotted first, the actuator deletes
	// its oldest beyond Keep, and never a snapshot it did not make.
	// Default 3; 1 to 100.
	Keep int `koanf:"keep"`
	// Require refuses, before approval, a change that needs a snapshot on
	// a container Proxmox cannot snapshot (a bind mount, a raw disk on dir
	// storage). Off by default: the card says there will be none.
	Require bool `koanf:"require"`
	// LockWait is how long a step waits for a lock on its container (a
	// backup's) to clear before it fails, naming the lock. Default 2m; at
	// most 30m.
	LockWait time.Duration `koanf:"lock_wait"`
}

// ApprovalsConfig tightens what counts as an approval.
type ApprovalsConfig struct {
	// RequireVerifiedDevice: a room for plans (matrix.ops_room,
	// matrix.rooms) must be encrypted, and there an approval counts only
	// when it was encrypted and sent from a device its operator has
	// cross-signed. On by default. Off, any room for plans takes plans and
	// approvals from any device: only for a test stack whose clients speak
	// plain Matrix (`nomos dev`'s default).
	RequireVerifiedDevice bool `koanf:"require_verified_device"`
	// SelfApproval lets whoever asked for a plan approve it, including the
	// operator an agent asked on behalf of. On by default, for a one-person
	// homelab; off, another operator must approve.
	SelfApproval bool `koanf:"self_approval"`
	// DestructiveQuorum is how many different operators must type a
	// destructive plan's phrase. Default 1; at most the number of
	// operators.
	DestructiveQuorum int `koanf:"destructive_quorum"`
}

// LogConfig sets the log level and format.
type LogConfig struct {
	Level  string `koanf:"level"`
	Format string `koanf:"format"`
}

// DatabaseConfig locates Postgres.
type DatabaseConfig struct {
	URL     string `koanf:"url"`
	URLFile string `koanf:"url_file"`
}

// RedisConfig locates Redis, the asynq transport.
type RedisConfig struct {
	URL     string `koanf:"url"`
	URLFile string `koanf:"url_file"`
}

// MatrixConfig is the bot's Matrix identity and who may command it.
type MatrixConfig struct {
	HomeserverURL   string   `koanf:"homeserver_url"`
	UserID          string   `koanf:"user_id"`
	Password        string   `koanf:"password"`
	PasswordFile    string   `koanf:"password_file"`
	AccessToken     string   `koanf:"access_token"`
	AccessTokenFile string   `koanf:"access_token_file"`
	Operators       []string `koanf:"operators"`
	// Readers may read history and show besides the operators.
	Readers         []string `koanf:"readers"`
	PickleKey       string   `koanf:"pickle_key"`
	PickleKeyFile   string   `koanf:"pickle_key_file"`
	RecoveryKeyFile string   `koanf:"recovery_key_file"`
	// OpsRoom is the ops room: plans are asked for and decided there, and
	// every plan is carded (or copied) there.
	OpsRoom string `koanf:"ops_room"`
	// Rooms are more rooms where plans are asked for and decided; each
	// plan carded in one is copied to the ops room. In any other room the
	// bot answers reads only.
	Rooms []string `koanf:"rooms"`
	// ServedBy are the fleet's entities between Nomos and its homeserver,
	// by slug (service:caddy, lxc:104): a plan that restarts, stops or
	// reboots one of them, or what it runs on, says on its card that the
	// room may go quiet until it is back.
	ServedBy []string `koanf:"served_by"`
}

// LLMConfig points the agent at an OpenAI-compatible endpoint.
type LLMConfig struct {
	BaseURL    string            `koanf:"base_url"`
	APIKey     string            `koanf:"api_key"`
	APIKeyFile string            `koanf:"api_key_file"`
	Model      string            `koanf:"model"`
	Headers    map[string]string `koanf:"headers"`
	// Limits of one agent turn.
	MaxIterations      int `koanf:"max_iterations"`
	MaxTokens          int `koanf:"max_tokens"`
	MaxToolResultBytes int `koanf:"max_tool_result_bytes"`
	// HTTPAllow lists the domains http_get may fetch (each with its
	// subdomains). Empty: http_get fetches nothing.
	HTTPAllow []string `koanf:"http_allow"`
}

// ActuatorConfig holds the actuator's SSH material and its name. The bot
// reads the name too: it addresses its orders to it and takes reports only
// from it.
type ActuatorConfig struct {
	Name string `koanf:"name"`
	// Site is the site this actuator serves (docs/operations.md, "Sites"):
	// it consumes only that site's queues and refuses orders for hosts of
	// any other. Only the actuator reads it; the bot takes each host's
	// site from the fleet. Default "default".
	Site           string `koanf:"site"`
	SSHKeyFile     string `koanf:"ssh_key_file"`
	KnownHostsFile string `koanf:"known_hosts_file"`
	SSHUser        string `koanf:"ssh_user"`
	JournalFile    string `koanf:"journal_file"`
	// MetricsListen serves the actuator's own /metrics there, such as
	// 127.0.0.1:9464; empty (the default) serves none. A port alone
	// (:9464) means loopback: name another address to serve a
	// Prometheus elsewhere.
	MetricsListen string `koanf:"metrics_listen"`
}

// OrdersConfig holds the Ed25519 keys that sign and verify orders. The bot
// needs only the signing key, the actuator only the verify key.
type OrdersConfig struct {
	SigningKeyFile string `koanf:"signing_key_file"`
	VerifyKeyFile  string `koanf:"verify_key_file"`
	// PreviousVerifyKeyFile is the verify key being rotated out: while it
	// is set the actuator accepts orders signed with either key
	// (docs/operations.md, "Rotating keys").
	PreviousVerifyKeyFile string        `koanf:"previous_verify_key_file"`
	TTL                   time.Duration `koanf:"ttl"`
	// AckTimeout is how long a dispatched order may go unacknowledged
	// before the reconciler sends it again from Postgres (a lost Redis);
	// ReconcileInterval is how often the reconciler looks. Defaults 30s
	// and 1m.
	AckTimeout        time.Duration `koanf:"ack_timeout"`
	ReconcileInterval time.Duration `koanf:"reconcile_interval"`
}

// ReportsConfig holds the Ed25519 keys that sign and verify what the
// actuator reports: progress, results and probe results. The actuator
// needs only the signing key, the bot only the verify key.
type ReportsConfig struct {
	SigningKeyFile string `koanf:"signing_key_file"`
	VerifyKeyFile  string `koanf:"verify_key_file"`
	// PreviousVerifyKeyFile is the verify key being rotated out: while it
	// is set the bot accepts reports signed with either key.
	PreviousVerifyKeyFile string `koanf:"previous_verify_key_file"`
}

// WebConfig is the read-only status page.
type WebConfig struct {
	Listen string        `koanf:"listen"`
	Auth   WebAuthConfig `koanf:"auth"`
	// PublicURL is the status page's address as operators reach it, for
	// links in the room; empty means http://<web.listen>/.
	PublicURL string `koanf:"public_url"`
	// TrustedProxies are the addresses (or prefixes) of a forward-auth
	// proxy whose web.auth.header names the user. The header is ignored
	// from anywhere else.
	TrustedProxies []string `koanf:"trusted_proxies"`
}

// WebAuthConfig is how the status page knows who is looking: HTTP basic
// auth (a password or, better, a bcrypt hash from a file), a forward-auth
// proxy's header, or both. One is required when web.listen is not a
// loopback address.
type WebAuthConfig struct {
	User         string `koanf:"user"`
	Password     string `koanf:"password"`
	PasswordFile string `koanf:"password_file"`
	// PasswordHash is a bcrypt hash of the password (htpasswd -nbB, or any
	// bcrypt tool), usually from PasswordHashFile; the configuration then
	// never holds the password.
	PasswordHash     string `koanf:"password_hash"`
	PasswordHashFile string `koanf:"password_hash_file"`
	// Header names the user on requests from web.trusted_proxies;
	// default Remote-User.
	Header string `koanf:"header"`
}

// authConfigured reports whether web.auth or web.trusted_proxies asks
// anything of a request.
func (w WebConfig) authConfigured() bool {
	return w.Auth.User != "" || len(w.TrustedProxies) > 0
}

// authenticator builds what web.auth and web.trusted_proxies describe;
// nil when neither is set.
func (w WebConfig) Authenticator() (web.Authenticator, error) {
	var basic web.Authenticator
	if w.Auth.User != "" {
		basic = &web.BasicAuth{User: w.Auth.User, Password: w.Auth.Password, PasswordHash: []byte(w.Auth.PasswordHash)}
	}
	if len(w.TrustedProxies) == 0 {
		return basic, nil
	}
	proxies, err := web.ParseProxies(w.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("web.trusted_proxies: %w", err)
	}
	return &web.ForwardAuth{Header: w.Auth.Header, Proxies: proxies, Fallback: basic}, nil
}

// MCPConfig guards the bot's MCP endpoint and points `nomos mcp --stdio`
// at it.
type MCPConfig struct {
	// Tokens are the named tokens the bot's /mcp endpoint accepts.
	Tokens []MCPTokenConfig `koanf:"tokens"`
	// Token and TokenFile are one token named "mcp" with scope read: it
	// names no owner, so it cannot request. Deprecated: use Tokens, which
	// keeps only a hash in the config and names the token's owner.
	Token     string `koanf:"token"`
	TokenFile string `koanf:"token_file"`
	// RequestRate and RequestBurst bound how many executions each
	// requester (an MCP token, or the agent) may ask for per minute.
	RequestRate  int `koanf:"request_rate"`
	RequestBurst int `koanf:"request_burst"`
	// URL, ClientToken and ClientTokenFile are what `nomos mcp --stdio`
	// connects to the bot's endpoint with.
	URL             string `koanf:"url"`
	ClientToken     string `koanf:"client_token"`
	ClientTokenFile string `koanf:"client_token_file"`
}

// MCPTokenConfig is one named MCP token. The token itself is never in the
// config: give its SHA-256 (as `nomos mcp token` prints it), or a file
// holding it, which is hashed as it is read.
type MCPTokenConfig struct {
	Name        string `koanf:"name"`
	TokenSHA256 string `koanf:"token_sha256"`
	TokenFile   string `koanf:"token_file"`
	Scope       string `koanf:"scope"`
	// For is the Matrix user the token was made for: its plans are on
	// their behalf, so with approvals.self_approval off they cannot
	// approve them. A request token without it only reads.
	For string `koanf:"for"`
}

// requestWithoutOwner reports whether t asks for scope request without
// naming whom it is for: such a token, made before tokens had owners,
// is served with scope read.
func (t MCPTokenConfig) requestWithoutOwner() bool {
	return t.Scope == string(mcpserver.ScopeRequest) && t.For == ""
}

// ChecksConfig controls the prober, which runs the fleet's check
// definitions on their schedule through the actuator.
type ChecksConfig struct {
	Enabled bool `koanf:"enabled"`
}

// InventoryConfig controls fleet discovery: the bot has the actuator list
// each host's containers and keeps the fleet in step with what it finds.
type InventoryConfig struct {
	// Interval is how often each host is listed; 0 turns discovery off.
	Interval time.Duration `koanf:"interval"`
}

// SeedsConfig chooses the seed files; empty means the embedded demo fleet.
type SeedsConfig struct {
	Dir string `koanf:"dir"`
}

// LabsimConfig configures the simulated Proxmox hosts.
type LabsimConfig struct {
	StateDir           string `koanf:"state_dir"`
	AuthorizedKeysFile string `koanf:"authorized_keys_file"`
	LogFile            string `koanf:"log_file"`
	// Gate makes every simulated host enforce nomos gate, as a node whose
	// authorized_keys forces it, with the rules below.
	Gate                     bool `koanf:"gate"`
	GateHostShell            bool `koanf:"gate_host_shell"`
	GatePrivilegedContainers bool `koanf:"gate_privileged_containers"`
}

// defaults are applied before the file and the environment.
var defaults = map[string]any{
	"log.level":                 "info",
	"log.format":                "text",
	"llm.base_url":              "https://openrouter.ai/api/v1",
	"llm.max_iterations":        8,
	"llm.max_tokens":            1024,
	"llm.max_tool_result_bytes": 16384,
	"actuator.ssh_user":         "root",
	"actuator.name":             "actuator",
	"actuator.site":             "default",
	"orders.ttl":                "15m",
	"orders.ack_timeout":        "30s",
	"orders.reconcile_interval": "1m",
	"web.listen":                "127.0.0.1:8080",
	"mcp.request_rate":          10,
	"mcp.request_burst":         5,
	"labsim.state_dir":          ".nomos-dev/labsim",
	"checks.enabled":            true,
	"inventory.interval":        "5m",

	"approvals.require_verified_device": true,
	"approvals.self_approval":           true,
	"approvals.destructive_quorum":      1,
	"snapshots.keep":                    3,
	"snapshots.require":                 false,
	"snapshots.lock_wait":               "2m",
	"alerts.mute_for":                   "4h",
	"report.daily":                      "08:00",
	"report.weekly":                     "monday",
	"report.backup_max_age":             "36h",
	"agent.session_retention":           "720h",
	"watchdog.interval":                 "30s",
	"watchdog.timeout":                  "10s",
	"watchdog.fail_after":               2,
	"watchdog.max_sync_age":             "3m",
	"watchdog.repage_after":             "30m",
	"watchdog.max_pages":                3,
}

// envPrefix marks Nomos's environment variables; "__" separates levels, so
// NOMOS_LLM__BASE_URL is llm.base_url.
const envPrefix = "NOMOS_"

// listKeys are split on commas when they come from the environment.
var listKeys = map[string]bool{"watchdog.operators": true, "matrix.operators": true, "matrix.readers": true, "matrix.rooms": true, "matrix.served_by": true, "llm.http_allow": true, "web.trusted_proxies": true}

// loadConfig reads defaults, then the YAML file at path (if any), then
// NOMOS_ environment variables from environ, and resolves *_file secrets.
func Load(path string, environ []string) (*Config, error) {
	k := koanf.New(".")
	for key, v := range defaults {
		if err := k.Set(key, v); err != nil {
			return nil, fmt.Errorf("config defaults: %w", err)
		}
	}
	if path != "" {
		fk := koanf.New(".")
		if err := fk.Load(file.Provider(path), yaml.Parser()); err != nil {
			return nil, fmt.Errorf("config file %s: %w", path, err)
		}
		if err := checkKeys(fk, "config file "+path, nil); err != nil {
			return nil, err
		}
		if err := k.Merge(fk); err != nil {
			return nil, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	env := envprovider.Provider(".", envprovider.Opt{
		Prefix:      envPrefix,
		EnvironFunc: func() []string { return environ },
		TransformFunc: func(key, value string) (string, any) {
			if !strings.Contains(key, "__") {
				// Not a config key, which always has its section:
				// NOMOS_CONFIG, NOMOS_TEST_GATE and the like.
				return "", nil
			}
			key = strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(key, envPrefix), "__", "."))
			if listKeys[key] {
				var items []string
				for item := range strings.SplitSeq(value, ",") {
					if item = strings.TrimSpace(item); item != "" {
						items = append(items, item)
					}
				}
				return key, items
			}
			return key, value
		},
	})
	ek := koanf.New(".")
	if err := ek.Load(env, nil); err != nil {
		return nil, fmt.Errorf("config environment: %w", err)
	}
	if err := errors.Join(checkKeys(ek, "environment", envVar), checkEnvSeparators(environ)); err != nil {
		return nil, err
	}
	if err := k.Merge(ek); err != nil {
		return nil, fmt.Errorf("config environment: %w", err)
	}
	var cfg Config
	if err := k.UnmarshalWithConf("", &cfg, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := cfg.resolveSecrets(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// resolveSecrets reads every *_file secret. Setting both a value and its
// file is refused, since one of them would be silently ignored.
func (c *Config) resolveSecrets() error {
	secrets := []struct {
		key        string
		value      *string
		fileSource string
	}{
		{"database.url", &c.Database.URL, c.Database.URLFile},
		{"redis.url", &c.Redis.URL, c.Redis.URLFile},
		{"matrix.password", &c.Matrix.Password, c.Matrix.PasswordFile},
		{"matrix.access_token", &c.Matrix.AccessToken, c.Matrix.AccessTokenFile},
		{"matrix.pickle_key", &c.Matrix.PickleKey, c.Matrix.PickleKeyFile},
		{"llm.api_key", &c.LLM.APIKey, c.LLM.APIKeyFile},
		{"mcp.token", &c.MCP.Token, c.MCP.TokenFile},
		{"mcp.client_token", &c.MCP.ClientToken, c.MCP.ClientTokenFile},
		{"web.auth.password", &c.Web.Auth.Password, c.Web.Auth.PasswordFile},
		{"web.auth.password_hash", &c.Web.Auth.PasswordHash, c.Web.Auth.PasswordHashFile},
		{"alerts.webhook_token", &c.Alerts.WebhookToken, c.Alerts.WebhookTokenFile},
		{"watchdog.password", &c.Watchdog.Password, c.Watchdog.PasswordFile},
		{"watchdog.access_token", &c.Watchdog.AccessToken, c.Watchdog.AccessTokenFile},
	}
	for _, s := range secrets {
		if s.fileSource == "" {
			continue
		}
		if *s.value != "" {
			return fmt.Errorf("config: %s and %s_file are both set: keep one", s.key, s.key)
		}
		data, err := os.ReadFile(s.fileSource)
		if err != nil {
			return fmt.Errorf("config: %s_file: %w", s.key, err)
		}
		*s.value = strings.TrimRight(string(data), "\r\n")
		if *s.value == "" {
			return fmt.Errorf("config: %s_file %s: file is empty", s.key, s.fileSource)
		}
	}
	return c.MCP.hashTokenFiles()
}

// hashTokenFiles reads each mcp.tokens[].token_file and keeps only the
// token's hash, so the token itself is never held past loading.
func (m *MCPConfig) hashTokenFiles() error {
	for i := range m.Tokens {
		t := &m.Tokens[i]
		if t.TokenFile == "" {
			continue
		}
		key := fmt.Sprintf("mcp.tokens[%d]", i)
		if t.TokenSHA256 != "" {
			return fmt.Errorf("config: %s: token_sha256 and token_file are both set: keep one", key)
		}
		data, err := os.ReadFile(t.TokenFile)
		if err != nil {
			return fmt.Errorf("config: %s.token_file: %w", key, err)
		}
		token := strings.TrimRight(string(data), "\r\n")
		if len(token) < mcpserver.MinTokenLength {
			return fmt.Errorf("config: %s.token_file %s: want a token of at least %d characters", key, t.TokenFile, mcpserver.MinTokenLength)
		}
		sum := mcpserver.HashToken(token)
		t.TokenSHA256 = hex.EncodeToString(sum[:])
	}
	return nil
}

// serverTokens turns mcp.tokens, and the deprecated mcp.token, into the
// tokens the MCP endpoint accepts. validate has checked them. A request
// token that names nobody it is for (made before tokens had owners) and
// the deprecated mcp.token are served with scope read.
func (m *MCPConfig) ServerTokens() ([]mcpserver.Token, error) {
	var out []mcpserver.Token
	for i, t := range m.Tokens {
		sum, err := mcpserver.ParseTokenHash(t.TokenSHA256)
		if err != nil {
			return nil, fmt.Errorf("mcp.tokens[%d].token_sha256: %w", i, err)
		}
		scope := mcpserver.Scope(t.Scope)
		if t.requestWithoutOwner() {
			scope = mcpserver.ScopeRead
		}
		out = append(out, mcpserver.Token{Name: t.Name, SHA256: sum, Scope: scope, Owner: t.For})
	}
	if m.Token != "" {
		out = append(out, mcpserver.Token{Name: mcpserver.LegacyTokenName, SHA256: mcpserver.HashToken(m.Token), Scope: mcpserver.ScopeRead})
	}
	return out, nil
}

// readOnlyRequestTokens names the tokens of mcp.tokens that ask for scope
// request but are served with scope read, since they name nobody they are
// for.
func (m *MCPConfig) ReadOnlyRequestTokens() []string {
	var names []string
	for _, t := range m.Tokens {
		if t.requestWithoutOwner() {
			names = append(names, t.Name)
		}
	}
	return names
}

// need lists which parts of the config a role uses.
type need struct {
	database, redis, matrix, llm, actuator, signing, verify, web, labsim bool
	// mcpClient is `nomos mcp --stdio`: the bot's MCP URL and a token.
	mcpClient bool
	// reportSigning and reportVerify are the actuator's report key pair.
	reportSigning, reportVerify bool
	// brief is the schedule of the daily brief and weekly report.
	brief bool
	// watchdog is `nomos watchdog`'s own section, and nothing else.
	watchdog bool
}

var roleNeeds = map[string]need{
	"migrate":  {database: true},
	"seed":     {database: true},
	"labsim":   {labsim: true},
	"bot":      {database: true, redis: true, matrix: true, signing: true, web: true, reportVerify: true, brief: true},
	"actuator": {redis: true, actuator: true, verify: true, reportSigning: true},
	"mcp":      {mcpClient: true},
	"discover": {database: true},
	"verify":   {database: true},
	"report":   {database: true, brief: true},
	"watchdog": {watchdog: true},
}

var (
	logLevels = []string{"debug", "info", "warn", "error"}
)

// validate checks the parts of the config that role uses and returns every
// problem at once, each naming its key and what is expected.
func (c *Config) Validate(role string) error {
	n := roleNeeds[role]
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if !slices.Contains(logLevels, c.Log.Level) {
		bad("log.level", "want one of %s, got %q", strings.Join(logLevels, ", "), c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		bad("log.format", "want text or json, got %q", c.Log.Format)
	}
	if n.database {
		checkURL(bad, "database.url", c.Database.URL, "postgres", "postgresql")
	}
	if n.redis {
		checkURL(bad, "redis.url", c.Redis.URL, "redis", "rediss")
	}
	if n.matrix {
		c.validateMatrix(bad)
	}
	if n.llm || c.LLM.Model != "" || c.LLM.APIKey != "" {
		c.validateLLM(bad)
	}
	if n.actuator {
		c.validateActuator(bad)
	}
	c.validateKeys(n, bad)
	c.validateWeb(n, bad)
	c.validateMCPClient(n, bad)
	if n.brief {
		errs = append(errs, c.validateReport()...)
	}
	if n.watchdog {
		c.validateWatchdog(bad)
	}
	if role == "bot" {
		if _, _, err := c.Watch(); err != nil {
			errs = append(errs, err)
		}
	}
	if n.labsim {
		if c.Labsim.StateDir == "" {
			bad("labsim.state_dir", "want a directory for host keys and container state")
		}
		checkFile(bad, "labsim.authorized_keys_file", c.Labsim.AuthorizedKeysFile)
	}
	if len(errs) > 0 {
		return fmt.Errorf("config is not valid for %s:\n  %w", role, joinLines(errs))
	}
	return nil
}

// validateMatrix checks the bot's account, its operators and readers, and
// what depends on them (alerts, the destructive quorum).
func (c *Config) validateMatrix(bad func(string, string, ...any)) {
	checkURL(bad, "matrix.homeserver_url", c.Matrix.HomeserverURL, "http", "https")
	if policy.ValidateMatrixUserID(c.Matrix.UserID) != nil {
		bad("matrix.user_id", "want a Matrix user id such as @nomos:example.org, got %q", c.Matrix.UserID)
	}
	if c.Matrix.Password == "" && c.Matrix.AccessToken == "" {
		bad("matrix.password", "set matrix.password or matrix.access_token (or their _file forms)")
	}
	if len(c.Matrix.Operators) == 0 {
		bad("matrix.operators", "want at least one operator user id, such as [\"@alice:example.org\"]")
	}
	if len(c.Matrix.PickleKey) < 16 {
		bad("matrix.pickle_key", "want a secret of at least 16 characters; it encrypts the bot's end-to-end keys at rest")
	}
	if c.Matrix.OpsRoom != "" && !strings.HasPrefix(c.Matrix.OpsRoom, "!") {
		bad("matrix.ops_room", "want a room id such as !abc123:example.org, got %q", c.Matrix.OpsRoom)
	}
	for i, r := range c.Matrix.Rooms {
		if !strings.HasPrefix(r, "!") {
			bad(fmt.Sprintf("matrix.rooms[%d]", i), "want a room id such as !abc123:example.org, got %q", r)
		}
	}
	for i, slug := range c.Matrix.ServedBy {
		if typ, name, ok := strings.Cut(slug, ":"); !ok || typ == "" || name == "" || strings.ContainsAny(slug, " \t") {
			bad(fmt.Sprintf("matrix.served_by[%d]", i), "want an entity's slug such as service:caddy or lxc:104, got %q", slug)
		}
	}
	for i, op := range c.Matrix.Operators {
		if policy.ValidateMatrixUserID(op) != nil {
			bad(fmt.Sprintf("matrix.operators[%d]", i), "want a Matrix user id such as @alice:example.org, got %q", op)
		}
	}
	for i, r := range c.Matrix.Readers {
		if policy.ValidateMatrixUserID(r) != nil {
			bad(fmt.Sprintf("matrix.readers[%d]", i), "want a Matrix user id such as @bob:example.org, got %q", r)
		}
	}
	if d := c.Agent.SessionRetention; d != 0 && d < time.Hour {
		bad("agent.session_retention", "want 0 (keep every session) or at least 1h, got %s", d)
	}
	if d := c.Alerts.MuteFor; d < time.Minute || d > 7*24*time.Hour {
		bad("alerts.mute_for", "want a duration between 1m and 168h, got %s", d)
	}
	if t := c.Alerts.WebhookToken; t != "" && len(t) < web.MinHookTokenLength {
		bad("alerts.webhook_token", "want at least %d characters so it can't be guessed, such as `openssl rand -hex 32`", web.MinHookTokenLength)
	}
	if q := c.Approvals.DestructiveQuorum; q < 1 || q > max(len(c.Matrix.Operators), 1) {
		bad("approvals.destructive_quorum", "want 1 to the %d operators in matrix.operators, got %d: more could never approve a destructive plan",
			len(c.Matrix.Operators), q)
	}
}

// validateWatchdog checks the watchdog's two paths, its timing and its
// own Matrix account.
func (c *Config) validateWatchdog(bad func(string, string, ...any)) {
	w := c.Watchdog
	checkURL(bad, "watchdog.lan_url", w.LANURL, "http", "https")
	checkURL(bad, "watchdog.mesh_url", w.MeshURL, "http", "https")
	if w.LANURL != "" && w.LANURL == w.MeshURL {
		bad("watchdog.mesh_url", "is the same URL as watchdog.lan_url: give the second path to the bot (the public or mesh name through the reverse proxy), or a broken path goes unnoticed")
	}
	if w.Interval < 5*time.Second || w.Interval > 10*time.Minute {
		bad("watchdog.interval", "want a duration between 5s and 10m, got %s", w.Interval)
	}
	if w.Timeout < time.Second || w.Timeout > w.Interval {
		bad("watchdog.timeout", "want a duration between 1s and watchdog.interval (%s), got %s", w.Interval, w.Timeout)
	}
	if w.FailAfter < 1 || w.FailAfter > 10 {
		bad("watchdog.fail_after", "want 1 to 10 failed checks in a row, got %d", w.FailAfter)
	}
	if w.MaxSyncAge < time.Minute {
		bad("watchdog.max_sync_age", "want at least 1m: the bot long-polls the homeserver for 30s, got %s", w.MaxSyncAge)
	}
	if w.RepageAfter < time.Minute || w.RepageAfter > 24*time.Hour {
		bad("watchdog.repage_after", "want a duration between 1m and 24h, got %s", w.RepageAfter)
	}
	if w.MaxPages < 1 || w.MaxPages > 10 {
		bad("watchdog.max_pages", "want 1 to 10 pages per outage, got %d", w.MaxPages)
	}
	checkURL(bad, "watchdog.homeserver_url", w.HomeserverURL, "http", "https")
	if policy.ValidateMatrixUserID(w.UserID) != nil {
		bad("watchdog.user_id", "want the watchdog's own Matrix user id, such as @nomos-watchdog:example.org, got %q", w.UserID)
	} else if w.UserID == c.Matrix.UserID {
		bad("watchdog.user_id", "is the bot's account: give the watchdog one of its own, so it can page while the bot is down")
	}
	if w.Password == "" && w.AccessToken == "" {
		bad("watchdog.password", "set watchdog.password or watchdog.access_token (or their _file forms)")
	}
	if !strings.HasPrefix(w.Room, "!") {
		bad("watchdog.room", "want a room id such as !abc123:example.org (unencrypted, with the operators in it), got %q", w.Room)
	}
	if len(w.Operators) == 0 {
		bad("watchdog.operators", "want at least one Matrix user id to page, such as [\"@alice:example.org\"]")
	}
	for i, op := range w.Operators {
		if policy.ValidateMatrixUserID(op) != nil {
			bad(fmt.Sprintf("watchdog.operators[%d]", i), "want a Matrix user id such as @alice:example.org, got %q", op)
		}
	}
}

// validateReport checks when the briefs fall due; each error names its
// key.
func (c *Config) validateReport() []error {
	var errs []error
	if _, err := c.Report.Schedule(); err != nil {
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			errs = append(errs, joined.Unwrap()...)
		} else {
			errs = append(errs, err)
		}
	}
	if d := c.Report.BackupMaxAge; d < time.Hour || d > 30*24*time.Hour {
		errs = append(errs, fmt.Errorf("report.backup_max_age: want a duration between 1h and 720h, got %s", d))
	}
	return errs
}

// schedule is report.daily, report.weekly and report.timezone read.
func (r ReportConfig) Schedule() (report.Schedule, error) {
	return report.ParseSchedule(r.Daily, r.Weekly, r.Timezone)
}

// validateLLM checks the model the agent calls.
func (c *Config) validateLLM(bad func(string, string, ...any)) {
	checkURL(bad, "llm.base_url", c.LLM.BaseURL, "http", "https")
	if c.LLM.Model == "" {
		bad("llm.model", "want a model name such as deepseek/deepseek-chat when the LLM is used")
	}
	if c.LLM.MaxIterations < 1 || c.LLM.MaxIterations > 50 {
		bad("llm.max_iterations", "want 1 to 50 model calls per turn, got %d", c.LLM.MaxIterations)
	}
	if c.LLM.MaxTokens < 64 {
		bad("llm.max_tokens", "want at least 64, got %d", c.LLM.MaxTokens)
	}
	if c.LLM.MaxToolResultBytes < 1024 || c.LLM.MaxToolResultBytes > 16384 {
		bad("llm.max_tool_result_bytes", "want 1024 to 16384 (a stored message holds 16 KB), got %d", c.LLM.MaxToolResultBytes)
	}
}

// validateActuator checks the actuator's SSH files, journal and metrics.
func (c *Config) validateActuator(bad func(string, string, ...any)) {
	checkFile(bad, "actuator.ssh_key_file", c.Actuator.SSHKeyFile)
	checkFile(bad, "actuator.known_hosts_file", c.Actuator.KnownHostsFile)
	if c.Actuator.JournalFile == "" {
		bad("actuator.journal_file", "want a path for the actuator's local journal, such as /var/lib/nomos/journal")
	}
	if l := c.Actuator.MetricsListen; l != "" {
		if _, _, err := net.SplitHostPort(l); err != nil {
			bad("actuator.metrics_listen", "want host:port such as 127.0.0.1:9464, or nothing to serve no metrics, got %q", l)
		}
	}
}

// validateKeys checks the order and report keys each role signs or
// verifies with, the order lifetime, the actuator's name and discovery.
func (c *Config) validateKeys(n need, bad func(string, string, ...any)) {
	if n.signing {
		checkFile(bad, "orders.signing_key_file", c.Orders.SigningKeyFile)
	}
	if n.verify {
		checkFile(bad, "orders.verify_key_file", c.Orders.VerifyKeyFile)
		checkPreviousKey(bad, "orders", c.Orders.VerifyKeyFile, c.Orders.PreviousVerifyKeyFile)
	}
	if n.signing && (c.Orders.AckTimeout < time.Second || c.Orders.AckTimeout > c.Orders.TTL) {
		bad("orders.ack_timeout", "want a duration between 1s and orders.ttl (%s), got %s", c.Orders.TTL, c.Orders.AckTimeout)
	}
	if n.signing && (c.Orders.ReconcileInterval < time.Second || c.Orders.ReconcileInterval > time.Hour) {
		bad("orders.reconcile_interval", "want a duration between 1s and 1h, got %s", c.Orders.ReconcileInterval)
	}
	if (n.signing || n.verify) && (c.Orders.TTL < time.Minute || c.Orders.TTL > tasks.MaxOrderTTL) {
		bad("orders.ttl", "want a duration between 1m and 1h, got %s: an order stays valid that long, and the actuator refuses one valid for more than an hour", c.Orders.TTL)
	}
	if n.reportSigning {
		checkFile(bad, "reports.signing_key_file", c.Reports.SigningKeyFile)
	}
	if n.reportVerify {
		checkFile(bad, "reports.verify_key_file", c.Reports.VerifyKeyFile)
		checkPreviousKey(bad, "reports", c.Reports.VerifyKeyFile, c.Reports.PreviousVerifyKeyFile)
	}
	if n.signing || n.verify {
		if err := tasks.ValidateActuatorName(c.Actuator.Name); err != nil {
			bad("actuator.name", "want one word of letters, digits, '.', '_' and '-', at most 64 characters, got %q", c.Actuator.Name)
		}
	}
	if n.verify {
		if err := policy.ValidateSiteName(c.Actuator.Site); err != nil {
			bad("actuator.site", "want a DNS label (a-z, 0-9, -) of at most 32 characters, got %q", c.Actuator.Site)
		}
	}
	if n.signing && c.Inventory.Interval != 0 && (c.Inventory.Interval < 10*time.Second || c.Inventory.Interval > 24*time.Hour) {
		bad("inventory.interval", "want 0 (discovery off) or a duration between 10s and 24h, got %s", c.Inventory.Interval)
	}
	if n.signing && (c.Snapshots.Keep < 1 || c.Snapshots.Keep > 100) {
		bad("snapshots.keep", "want 1 to 100 of Nomos's own snapshots to keep per container, got %d", c.Snapshots.Keep)
	}
	if n.signing && (c.Snapshots.LockWait < time.Second || c.Snapshots.LockWait > tasks.MaxLockWait) {
		bad("snapshots.lock_wait", "want a duration between 1s and %s, got %s", tasks.MaxLockWait, c.Snapshots.LockWait)
	}
}

// validateWeb checks the status page's listener and login, and the MCP
// server it serves.
func (c *Config) validateWeb(n need, bad func(string, string, ...any)) {
	if n.web {
		if _, _, err := net.SplitHostPort(c.Web.Listen); err != nil {
			bad("web.listen", "want host:port such as 127.0.0.1:8080, got %q", c.Web.Listen)
		} else if !web.LoopbackListen(c.Web.Listen) && !c.Web.authConfigured() {
			bad("web.listen", "%s is reachable from other machines: set web.auth (user and password_hash_file) or web.trusted_proxies so the status page knows who is looking, or listen on 127.0.0.1", c.Web.Listen)
		}
		c.validateMCPServer(bad)
	}
	if a := c.Web.Auth; a.User != "" || a.Password != "" || a.PasswordHash != "" {
		if a.User == "" || strings.Contains(a.User, ":") {
			bad("web.auth.user", "want a user name without ':' when web.auth.password is set")
		}
		switch {
		case a.PasswordHash != "" && a.Password != "":
			bad("web.auth.password_hash", "set either it or web.auth.password, not both")
		case a.PasswordHash != "":
			if _, err := bcrypt.Cost([]byte(a.PasswordHash)); err != nil {
				bad("web.auth.password_hash", "want a bcrypt hash ($2a$, $2b$ or $2y$), such as htpasswd -nbB prints after the user and ':'")
			}
		case len(a.Password) < 12:
			bad("web.auth.password", "want a password of at least 12 characters (or web.auth.password_hash_file)")
		}
	}
	if c.Web.PublicURL != "" {
		checkURL(bad, "web.public_url", c.Web.PublicURL, "http", "https")
	}
	if _, err := web.ParseProxies(c.Web.TrustedProxies); err != nil {
		bad("web.trusted_proxies", "%v", err)
	}
	if h := c.Web.Auth.Header; h != "" && (strings.ContainsAny(h, " :\r\n\t") || http.CanonicalHeaderKey(h) == "Authorization") {
		bad("web.auth.header", "want a header name such as Remote-User, got %q", h)
	}
}

// validateMCPClient checks the legacy server token and the client's URL
// and token.
func (c *Config) validateMCPClient(n need, bad func(string, string, ...any)) {
	if c.MCP.Token != "" && len(c.MCP.Token) < mcpserver.MinTokenLength {
		bad("mcp.token", "want at least %d characters so it can't be guessed", mcpserver.MinTokenLength)
	}
	if n.mcpClient {
		checkURL(bad, "mcp.url", c.MCP.URL, "http", "https")
		if len(c.MCP.ClientToken) < mcpserver.MinTokenLength {
			bad("mcp.client_token", "want the token this client presents to the bot's /mcp endpoint, at least %d characters (or mcp.client_token_file); `nomos mcp token NAME` makes one", mcpserver.MinTokenLength)
		}
	}
}

// validateMCPServer checks what the bot's MCP endpoint uses: the tokens,
// the request rate and llm.http_allow.
func (c *Config) validateMCPServer(bad func(string, string, ...any)) {
	names := map[string]bool{}
	for i, t := range c.MCP.Tokens {
		key := fmt.Sprintf("mcp.tokens[%d]", i)
		if !mcpserver.ValidTokenName(t.Name) {
			bad(key+".name", "want 1 to 40 letters, digits, '.', '_' or '-', got %q", t.Name)
		} else if names[t.Name] || (t.Name == mcpserver.LegacyTokenName && c.MCP.Token != "") {
			bad(key+".name", "%q names two tokens; each client needs its own name", t.Name)
		}
		names[t.Name] = true
		if _, err := mcpserver.ParseTokenHash(t.TokenSHA256); err != nil {
			bad(key+".token_sha256", "%v (or set token_file); `nomos mcp token %s` prints both", err, cmp.Or(t.Name, "NAME"))
		}
		if t.Scope != string(mcpserver.ScopeRead) && t.Scope != string(mcpserver.ScopeRequest) {
			bad(key+".scope", "want read (the read tools only) or request (may also request executions), got %q", t.Scope)
		}
		if t.For != "" {
			if err := policy.ValidateMatrixUserID(t.For); err != nil {
				bad(key+".for", "the person the token is for: %v", err)
			}
		}
	}
	if c.MCP.RequestRate < 1 || c.MCP.RequestRate > 600 {
		bad("mcp.request_rate", "want 1 to 600 requests per minute, got %d", c.MCP.RequestRate)
	}
	if c.MCP.RequestBurst < 1 || c.MCP.RequestBurst > 100 {
		bad("mcp.request_burst", "want 1 to 100, got %d", c.MCP.RequestBurst)
	}
	for i, d := range c.LLM.HTTPAllow {
		if !mcpserver.ValidAllowEntry(d) {
			bad(fmt.Sprintf("llm.http_allow[%d]", i), "want a domain name such as github.com (it allows its subdomains too), without scheme, port, path or wildcard; got %q", d)
		}
	}
}

func checkURL(bad func(string, string, ...any), key, raw string, schemes ...string) {
	if raw == "" {
		bad(key, "is required: want a %s:// URL", schemes[0])
		return
	}
	u, err := url.Parse(raw)
	if err != nil || !slices.Contains(schemes, u.Scheme) || u.Host == "" {
		bad(key, "want a %s:// URL with a host, got %q", schemes[0], RedactURL(raw))
	}
}

func checkFile(bad func(string, string, ...any), key, path string) {
	if path == "" {
		bad(key, "is required: want the path of a readable file")
		return
	}
	st, err := os.Stat(path)
	if err != nil {
		bad(key, "cannot read %s: %v", path, errors.Unwrap(err))
		return
	}
	if st.IsDir() {
		bad(key, "%s is a directory, want a file", path)
	}
}

// checkPreviousKey checks prefix.previous_verify_key_file, which is
// optional: a public key, and not the current verify key again, which
// would leave the rotation it stands for undone.
func checkPreviousKey(bad func(string, string, ...any), prefix, current, previous string) {
	if previous == "" {
		return
	}
	key := prefix + ".previous_verify_key_file"
	old, err := tasks.LoadVerifyKey(previous)
	if err != nil {
		bad(key, "want the public key being rotated out, as a PEM file: %v", err)
		return
	}
	if cur, err := tasks.LoadVerifyKey(current); err == nil && cur.Equal(old) {
		bad(key, "holds the same key as %s.verify_key_file: point it at the key being rotated out, or leave it out", prefix)
	}
}

// redactURL hides a password embedded in a URL before it is shown.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

// joinLines joins errors one per line, indented under the heading.
func joinLines(errs []error) error {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = e.Error()
	}
	return errors.New(strings.Join(lines, "\n  "))
}
