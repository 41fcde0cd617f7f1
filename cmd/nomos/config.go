package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	envprovider "github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
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
	Web      WebConfig      `koanf:"web"`
	MCP      MCPConfig      `koanf:"mcp"`
	Seeds    SeedsConfig    `koanf:"seeds"`
	Labsim   LabsimConfig   `koanf:"labsim"`
	Checks   ChecksConfig   `koanf:"checks"`
	// Approvals holds the rules on who and what may approve a plan.
	Approvals ApprovalsConfig `koanf:"approvals"`
}

// ApprovalsConfig tightens what counts as an approval.
type ApprovalsConfig struct {
	// RequireVerifiedDevice: in an encrypted room an approval counts only
	// when it was encrypted and sent from a device its operator has
	// cross-signed. On by default; it does not apply to unencrypted rooms.
	RequireVerifiedDevice bool `koanf:"require_verified_device"`
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
	OpsRoom         string   `koanf:"ops_room"`
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
}

// ActuatorConfig holds the actuator's SSH material.
type ActuatorConfig struct {
	SSHKeyFile     string `koanf:"ssh_key_file"`
	KnownHostsFile string `koanf:"known_hosts_file"`
	SSHUser        string `koanf:"ssh_user"`
	JournalFile    string `koanf:"journal_file"`
}

// OrdersConfig holds the Ed25519 keys that sign and verify orders. The bot
// needs only the signing key, the actuator only the verify key.
type OrdersConfig struct {
	SigningKeyFile string        `koanf:"signing_key_file"`
	VerifyKeyFile  string        `koanf:"verify_key_file"`
	TTL            time.Duration `koanf:"ttl"`
}

// WebConfig is the read-only status page.
type WebConfig struct {
	Listen string `koanf:"listen"`
}

// MCPConfig guards the MCP endpoint.
type MCPConfig struct {
	Token     string `koanf:"token"`
	TokenFile string `koanf:"token_file"`
}

// ChecksConfig controls the prober, which runs the fleet's check
// definitions on their schedule through the actuator.
type ChecksConfig struct {
	Enabled bool `koanf:"enabled"`
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
	"orders.ttl":                "15m",
	"web.listen":                "127.0.0.1:8080",
	"labsim.state_dir":          ".nomos-dev/labsim",
	"checks.enabled":            true,

	"approvals.require_verified_device": true,
}

// envPrefix marks Nomos's environment variables; "__" separates levels, so
// NOMOS_LLM__BASE_URL is llm.base_url.
const envPrefix = "NOMOS_"

// listKeys are split on commas when they come from the environment.
var listKeys = map[string]bool{"matrix.operators": true, "matrix.readers": true}

// loadConfig reads defaults, then the YAML file at path (if any), then
// NOMOS_ environment variables from environ, and resolves *_file secrets.
func loadConfig(path string, environ []string) (*Config, error) {
	k := koanf.New(".")
	for key, v := range defaults {
		if err := k.Set(key, v); err != nil {
			return nil, fmt.Errorf("config defaults: %w", err)
		}
	}
	if path != "" {
		if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
			return nil, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	env := envprovider.Provider(".", envprovider.Opt{
		Prefix:      envPrefix,
		EnvironFunc: func() []string { return environ },
		TransformFunc: func(key, value string) (string, any) {
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
	if err := k.Load(env, nil); err != nil {
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
	return nil
}

// need lists which parts of the config a role uses.
type need struct {
	database, redis, matrix, llm, actuator, signing, verify, web, labsim bool
}

var roleNeeds = map[string]need{
	"migrate":  {database: true},
	"seed":     {database: true},
	"labsim":   {labsim: true},
	"bot":      {database: true, redis: true, matrix: true, signing: true, web: true},
	"actuator": {redis: true, actuator: true, verify: true},
	"mcp":      {database: true, redis: true, signing: true},
}

var (
	userIDPattern = regexp.MustCompile(`^@[a-z0-9._=/+-]+:[A-Za-z0-9.-]+(:[0-9]{1,5})?$`)
	logLevels     = []string{"debug", "info", "warn", "error"}
)

// validate checks the parts of the config that role uses and returns every
// problem at once, each naming its key and what is expected.
func (c *Config) validate(role string) error {
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
		checkURL(bad, "matrix.homeserver_url", c.Matrix.HomeserverURL, "http", "https")
		if !userIDPattern.MatchString(c.Matrix.UserID) {
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
		for i, op := range c.Matrix.Operators {
			if !userIDPattern.MatchString(op) {
				bad(fmt.Sprintf("matrix.operators[%d]", i), "want a Matrix user id such as @alice:example.org, got %q", op)
			}
		}
		for i, r := range c.Matrix.Readers {
			if !userIDPattern.MatchString(r) {
				bad(fmt.Sprintf("matrix.readers[%d]", i), "want a Matrix user id such as @bob:example.org, got %q", r)
			}
		}
	}
	if n.llm || c.LLM.Model != "" || c.LLM.APIKey != "" {
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
	if n.actuator {
		checkFile(bad, "actuator.ssh_key_file", c.Actuator.SSHKeyFile)
		checkFile(bad, "actuator.known_hosts_file", c.Actuator.KnownHostsFile)
		if c.Actuator.JournalFile == "" {
			bad("actuator.journal_file", "want a path for the actuator's local journal, such as /var/lib/nomos/journal")
		}
	}
	if n.signing {
		checkFile(bad, "orders.signing_key_file", c.Orders.SigningKeyFile)
	}
	if n.verify {
		checkFile(bad, "orders.verify_key_file", c.Orders.VerifyKeyFile)
	}
	if (n.signing || n.verify) && (c.Orders.TTL < time.Minute || c.Orders.TTL > 24*time.Hour) {
		bad("orders.ttl", "want a duration between 1m and 24h, got %s", c.Orders.TTL)
	}
	if n.web {
		if _, _, err := net.SplitHostPort(c.Web.Listen); err != nil {
			bad("web.listen", "want host:port such as 127.0.0.1:8080, got %q", c.Web.Listen)
		}
	}
	if c.MCP.Token != "" && len(c.MCP.Token) < 16 {
		bad("mcp.token", "want at least 16 characters so it can't be guessed")
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

func checkURL(bad func(string, string, ...any), key, raw string, schemes ...string) {
	if raw == "" {
		bad(key, "is required: want a %s:// URL", schemes[0])
		return
	}
	u, err := url.Parse(raw)
	if err != nil || !slices.Contains(schemes, u.Scheme) || u.Host == "" {
		bad(key, "want a %s:// URL with a host, got %q", schemes[0], redactURL(raw))
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

// redactURL hides a password embedded in a URL before it is shown.
func redactURL(raw string) string {
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
