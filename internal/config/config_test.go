package config

import (
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/bcrypt"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/mcpserver"
)

func TestConfigEnvironmentNesting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := testenv.WriteFile(t, dir, "nomos.yaml", "llm:\n  model: file-model\n  base_url: http://file.example/v1\n")
	cfg, err := Load(path, []string{
		"NOMOS_LLM__BASE_URL=http://127.0.0.1:9999/v1",
		"NOMOS_MATRIX__OPERATORS=@alice:example.org, @bob:example.org",
		"NOMOS_DATABASE__URL=postgres://u:p@db/nomos",
		"OTHER_VAR=ignored",
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.BaseURL != "http://127.0.0.1:9999/v1" {
		t.Errorf("llm.base_url = %q, want the environment to win over the file", cfg.LLM.BaseURL)
	}
	if cfg.LLM.Model != "file-model" {
		t.Errorf("llm.model = %q, want it from the file", cfg.LLM.Model)
	}
	if diff := cmp.Diff([]string{"@alice:example.org", "@bob:example.org"}, cfg.Matrix.Operators); diff != "" {
		t.Errorf("matrix.operators (-want +got):\n%s", diff)
	}
	if cfg.Web.Listen != "127.0.0.1:8080" {
		t.Errorf("web.listen = %q, want the default", cfg.Web.Listen)
	}
}

func TestConfigSecretFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pw := testenv.WriteFile(t, dir, "pw", "s3cret\n")
	cfg, err := Load("", []string{"NOMOS_MATRIX__PASSWORD_FILE=" + pw})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Matrix.Password != "s3cret" {
		t.Errorf("matrix.password = %q, want the file's content without the newline", cfg.Matrix.Password)
	}
	_, err = Load("", []string{"NOMOS_MATRIX__PASSWORD_FILE=" + pw, "NOMOS_MATRIX__PASSWORD=x"})
	if err == nil || !strings.Contains(err.Error(), "matrix.password and matrix.password_file are both set") {
		t.Errorf("both set: err = %v, want it refused naming the key", err)
	}
	_, err = Load("", []string{"NOMOS_MCP__TOKEN_FILE=" + filepath.Join(dir, "missing")})
	if err == nil || !strings.Contains(err.Error(), "mcp.token_file") {
		t.Errorf("missing file: err = %v, want it to name mcp.token_file", err)
	}
}

func TestConfigValidationNamesTheKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := testenv.WriteFile(t, dir, "key", "k")
	notHash := testenv.WriteFile(t, dir, "not-a-hash", "correct horse battery staple")
	tests := []struct {
		name    string
		role    string
		env     []string
		wantKey string
	}{
		{"missing database", "migrate", nil, "database.url: is required"},
		{"bad database scheme", "migrate", []string{"NOMOS_DATABASE__URL=mysql://x/y"}, "database.url: want a postgres:// URL"},
		{"password hidden", "migrate", []string{"NOMOS_DATABASE__URL=mysql://u:hunter2@x/y"}, "xxxxx"},
		{"bad log level", "migrate", []string{"NOMOS_DATABASE__URL=postgres://x/y", "NOMOS_LOG__LEVEL=loud"}, "log.level: want one of"},
		{"bad user id", "bot", []string{"NOMOS_MATRIX__USER_ID=nomos"}, "matrix.user_id: want a Matrix user id"},
		{"no operators", "bot", nil, "matrix.operators: want at least one"},
		{"bad operator", "bot", []string{"NOMOS_MATRIX__OPERATORS=alice"}, "matrix.operators[0]"},
		{"no credentials", "bot", nil, "matrix.password: set matrix.password or matrix.access_token"},
		{"no pickle key", "bot", nil, "matrix.pickle_key: want a secret of at least 16"},
		{"missing signing key", "bot", nil, "orders.signing_key_file: is required"},
		{"unreadable key", "actuator", []string{"NOMOS_ACTUATOR__SSH_KEY_FILE=/nonexistent/key"}, "actuator.ssh_key_file: cannot read /nonexistent/key"},
		{"missing redis", "actuator", []string{"NOMOS_ORDERS__VERIFY_KEY_FILE=" + key}, "redis.url: is required"},
		{"short mcp token", "mcp", []string{"NOMOS_MCP__TOKEN=short"}, "mcp.token: want at least 16"},
		{"bad web listen", "bot", []string{"NOMOS_WEB__LISTEN=8080"}, "web.listen: want host:port"},
		{"open web listen", "bot", []string{"NOMOS_WEB__LISTEN=0.0.0.0:8080"}, "web.listen: 0.0.0.0:8080 is reachable from other machines: set web.auth"},
		{"open web listen, any address", "bot", []string{"NOMOS_WEB__LISTEN=:8080"}, "web.listen: :8080 is reachable from other machines"},
		{"web auth without user", "bot", []string{"NOMOS_WEB__AUTH__PASSWORD=correct-horse-battery"}, "web.auth.user: want a user name"},
		{"web auth short password", "bot", []string{"NOMOS_WEB__AUTH__USER=ops", "NOMOS_WEB__AUTH__PASSWORD=short"}, "web.auth.password: want a password of at least 12"},
		{"web hash file without a hash", "bot", []string{"NOMOS_WEB__AUTH__USER=ops", "NOMOS_WEB__AUTH__PASSWORD_HASH_FILE=" + notHash}, "web.auth.password_hash: want a bcrypt hash"},
		{"web hash and password", "bot", []string{"NOMOS_WEB__AUTH__USER=ops", "NOMOS_WEB__AUTH__PASSWORD=correct-horse-battery", "NOMOS_WEB__AUTH__PASSWORD_HASH_FILE=" + notHash}, "web.auth.password_hash: set either it or web.auth.password"},
		{"web trusted proxy not an address", "bot", []string{"NOMOS_WEB__TRUSTED_PROXIES=10.0.0.5, authelia.lan"}, "web.trusted_proxies: trusted proxy \"authelia.lan\""},
		{"web public url not http", "bot", []string{"NOMOS_WEB__PUBLIC_URL=javascript:alert(1)"}, "web.public_url"},
		{"web header that is Authorization", "bot", []string{"NOMOS_WEB__TRUSTED_PROXIES=10.0.0.5", "NOMOS_WEB__AUTH__HEADER=authorization"}, "web.auth.header: want a header name"},
		{"http_allow with a URL", "bot", []string{"NOMOS_LLM__HTTP_ALLOW=github.com, https://evil.example"}, "llm.http_allow[1]: want a domain name"},
		{"no request rate", "bot", []string{"NOMOS_MCP__REQUEST_RATE=0"}, "mcp.request_rate: want 1 to 600"},
		{"mcp stdio without url", "mcp", nil, "mcp.url: is required"},
		{"mcp stdio without token", "mcp", []string{"NOMOS_MCP__URL=http://127.0.0.1:8080/mcp"}, "mcp.client_token: want the token"},
		{"bad ttl", "bot", []string{"NOMOS_ORDERS__TTL=5s"}, "orders.ttl: want a duration between 1m and 1h"},
		{"ttl over the cap", "bot", []string{"NOMOS_ORDERS__TTL=2h"}, "orders.ttl: want a duration between 1m and 1h, got 2h0m0s: an order stays valid that long, and the actuator refuses one valid for more than an hour"},
		{"ttl over the cap on the actuator", "actuator", []string{"NOMOS_ORDERS__TTL=61m"}, "orders.ttl: want a duration between 1m and 1h"},
		{"missing report verify key", "bot", nil, "reports.verify_key_file: is required"},
		{"missing report signing key", "actuator", nil, "reports.signing_key_file: is required"},
		{"bad actuator metrics listen", "actuator", []string{"NOMOS_ACTUATOR__METRICS_LISTEN=9464"}, `actuator.metrics_listen: want host:port such as 127.0.0.1:9464, or nothing to serve no metrics, got "9464"`},
		{"bad actuator name", "actuator", []string{"NOMOS_ACTUATOR__NAME=pve east"}, `actuator.name: want one word of letters, digits, '.', '_' and '-', at most 64 characters, got "pve east"`},
		{"llm without model", "migrate", []string{"NOMOS_DATABASE__URL=postgres://x/y", "NOMOS_LLM__API_KEY=k"}, "llm.model: want a model name"},
		{"labsim keys", "labsim", nil, "labsim.authorized_keys_file: is required"},
		{"quorum above the operators", "bot", []string{"NOMOS_MATRIX__OPERATORS=@a:x,@b:x", "NOMOS_APPROVALS__DESTRUCTIVE_QUORUM=3"}, "approvals.destructive_quorum: want 1 to the 2 operators"},
		{"quorum of none", "bot", []string{"NOMOS_MATRIX__OPERATORS=@a:x", "NOMOS_APPROVALS__DESTRUCTIVE_QUORUM=0"}, "approvals.destructive_quorum"},
		{"inventory too often", "bot", []string{"NOMOS_INVENTORY__INTERVAL=1s"}, "inventory.interval: want 0 (discovery off) or a duration between 10s and 24h, got 1s"},
		{"discover without a database", "discover", nil, "database.url: is required"},
		{"mute too long", "bot", []string{"NOMOS_ALERTS__MUTE_FOR=720h"}, "alerts.mute_for: want a duration between 1m and 168h"},
		{"short webhook token", "bot", []string{"NOMOS_ALERTS__WEBHOOK_TOKEN=0123456789abcdef"}, "alerts.webhook_token: want at least 32 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Load("", tt.env)
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.Validate(tt.role)
			if err == nil || !strings.Contains(err.Error(), tt.wantKey) {
				t.Fatalf("validate(%s) = %v, want an error containing %q", tt.role, err, tt.wantKey)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error shows a password: %v", err)
			}
		})
	}
}

func TestConfigValidPasses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := testenv.WriteFile(t, dir, "key", "k")
	base := []string{
		"NOMOS_DATABASE__URL=postgres://nomos:nomos@127.0.0.1:5432/nomos",
		"NOMOS_REDIS__URL=redis://127.0.0.1:6379/0",
		"NOMOS_MATRIX__HOMESERVER_URL=http://127.0.0.1:8008",
		"NOMOS_MATRIX__USER_ID=@nomos:localhost",
		"NOMOS_MATRIX__PASSWORD=pw",
		"NOMOS_MATRIX__OPERATORS=@operator:localhost",
		"NOMOS_MATRIX__PICKLE_KEY=0123456789abcdef0123",
		"NOMOS_ORDERS__SIGNING_KEY_FILE=" + key,
		"NOMOS_REPORTS__VERIFY_KEY_FILE=" + key,
	}
	cfg, err := Load("", base)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate("bot"); err != nil {
		t.Fatalf("validate(bot) = %v, want nil", err)
	}
	if cfg.Actuator.Name != "actuator" || cfg.Orders.TTL != 15*time.Minute {
		t.Errorf("actuator.name %q orders.ttl %s, want the defaults actuator and 15m", cfg.Actuator.Name, cfg.Orders.TTL)
	}
	// Off loopback the page needs its password.
	cfg.Web.Listen, cfg.Web.Auth = "0.0.0.0:8080", WebAuthConfig{User: "ops", Password: "correct horse battery"}
	if err := cfg.Validate("bot"); err != nil {
		t.Fatalf("validate(bot) on 0.0.0.0 with web.auth = %v, want nil", err)
	}
	// A bcrypt hash from a file, or a forward-auth proxy, will do too.
	hash, err := bcrypt.GenerateFromPassword([]byte("correct horse battery"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	hashFile := testenv.WriteFile(t, dir, "web-hash", string(hash)+"\n")
	for name, env := range map[string][]string{
		"a bcrypt hash": {"NOMOS_WEB__LISTEN=0.0.0.0:8080", "NOMOS_WEB__AUTH__USER=ops", "NOMOS_WEB__AUTH__PASSWORD_HASH_FILE=" + hashFile},
		"a proxy":       {"NOMOS_WEB__LISTEN=0.0.0.0:8080", "NOMOS_WEB__TRUSTED_PROXIES=10.0.0.5, 192.168.10.0/24"},
	} {
		c, err := Load("", append(slices.Clone(base), env...))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate("bot"); err != nil {
			t.Errorf("%s: validate(bot) on 0.0.0.0 = %v, want nil", name, err)
		}
		auth, err := c.Web.Authenticator()
		if err != nil || auth == nil {
			t.Errorf("%s: authenticator = %v, %v; want one", name, auth, err)
		}
	}
}

func TestConfigMCPTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const secret = "file-token-0123456789abcdef"
	tokenFile := testenv.WriteFile(t, dir, "token", secret+"\n")
	hash := strings.Repeat("ab", 32)
	path := testenv.WriteFile(t, dir, "nomos.yaml", `mcp:
  tokens:
    - {name: claude, token_file: `+tokenFile+`, scope: request}
    - {name: dashboard, token_sha256: `+hash+`, scope: read}
    - {name: claude, token_sha256: `+strings.Repeat("cd", 32)+`, scope: read}
    - {name: "bad name", token_sha256: xyz, scope: admin}
`)
	cfg, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The file's token is kept only as its hash.
	sum := mcpserver.HashToken(secret)
	if got := cfg.MCP.Tokens[0].TokenSHA256; got != hex.EncodeToString(sum[:]) {
		t.Errorf("token_file hashed to %q, want the SHA-256 of the file's token", got)
	}
	if dump := fmt.Sprintf("%+v", cfg.MCP); strings.Contains(dump, secret) {
		t.Errorf("the loaded config holds the token itself: %s", dump)
	}
	err = cfg.Validate("bot")
	for _, want := range []string{
		`mcp.tokens[2].name: "claude" names two tokens`,
		`mcp.tokens[3].name: want 1 to 40 letters`,
		`mcp.tokens[3].token_sha256: want the SHA-256 of the token as 64 hex digits`,
		`mcp.tokens[3].scope: want read (the read tools only) or request`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate = %v, want it to contain %q", err, want)
		}
	}
	for _, ok := range []string{"mcp.tokens[0]", "mcp.tokens[1]"} {
		if err != nil && strings.Contains(err.Error(), ok) {
			t.Errorf("validate refused a good token: %v", err)
		}
	}

	both := testenv.WriteFile(t, dir, "both.yaml", "mcp:\n  tokens:\n    - {name: a, token_file: "+tokenFile+", token_sha256: "+hash+", scope: read}\n")
	if _, err := Load(both, nil); err == nil || !strings.Contains(err.Error(), "mcp.tokens[0]: token_sha256 and token_file are both set") {
		t.Errorf("token_sha256 and token_file both set: err = %v", err)
	}
	short := testenv.WriteFile(t, dir, "short.yaml", "mcp:\n  tokens:\n    - {name: a, token_file: "+testenv.WriteFile(t, dir, "short", "abc")+", scope: read}\n")
	if _, err := Load(short, nil); err == nil || !strings.Contains(err.Error(), "want a token of at least 16 characters") {
		t.Errorf("a short token file: err = %v", err)
	}
}

// TestConfigMCPStdioNeedsNoDatabaseOrKey: the stdio role validates with
// only the bot's URL and a client token.
func TestConfigMCPStdioNeedsNoDatabaseOrKey(t *testing.T) {
	t.Parallel()
	cfg, err := Load("", []string{"NOMOS_MCP__URL=http://127.0.0.1:8080/mcp", "NOMOS_MCP__CLIENT_TOKEN=client-token-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate("mcp"); err != nil {
		t.Errorf("validate(mcp) = %v, want nil with no database, Redis or signing key", err)
	}
}

// TestConfigWatchdog: the watchdog starts from its own section alone (no
// database, Redis, key or bot account), its password from a file, its
// operators from a comma list; and each mistake that would leave it blind
// or paging nobody is refused, naming the key.
func TestConfigWatchdog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pw := testenv.WriteFile(t, dir, "pw", "watchdog-password\n")
	good := []string{
		"NOMOS_WATCHDOG__LAN_URL=http://192.168.1.20:8080/", "NOMOS_WATCHDOG__MESH_URL=https://nomos.example.org/",
		"NOMOS_WATCHDOG__HOMESERVER_URL=https://matrix.example.org", "NOMOS_WATCHDOG__USER_ID=@watchdog:example.org",
		"NOMOS_WATCHDOG__PASSWORD_FILE=" + pw, "NOMOS_WATCHDOG__ROOM=!alerts:example.org",
		"NOMOS_WATCHDOG__OPERATORS=@alice:example.org, @bob:example.org",
	}
	cfg, err := Load("", good)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate("watchdog"); err != nil {
		t.Fatalf("validate(watchdog) = %v, want nil with its own section alone", err)
	}
	if cfg.Watchdog.Password != "watchdog-password" || len(cfg.Watchdog.Operators) != 2 || cfg.Watchdog.Interval != 30*time.Second {
		t.Errorf("watchdog config = %+v", cfg.Watchdog)
	}
	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"one path twice", []string{"NOMOS_WATCHDOG__MESH_URL=http://192.168.1.20:8080/"}, "watchdog.mesh_url: is the same URL as watchdog.lan_url"},
		{"the bot's own account", []string{"NOMOS_MATRIX__USER_ID=@watchdog:example.org"}, "watchdog.user_id: is the bot's account"},
		{"no operators", []string{"NOMOS_WATCHDOG__OPERATORS="}, "watchdog.operators: want at least one"},
		{"a room alias", []string{"NOMOS_WATCHDOG__ROOM=#alerts:example.org"}, "watchdog.room: want a room id"},
		{"a timeout past the interval", []string{"NOMOS_WATCHDOG__TIMEOUT=1m"}, "watchdog.timeout: want a duration between 1s and watchdog.interval"},
		{"a sync age under a long-poll", []string{"NOMOS_WATCHDOG__MAX_SYNC_AGE=20s"}, "watchdog.max_sync_age: want at least 1m"},
		{"unbounded pages", []string{"NOMOS_WATCHDOG__MAX_PAGES=100"}, "watchdog.max_pages: want 1 to 10"},
	} {
		cfg, err := Load("", append(slices.Clone(good), c.env...))
		if err == nil {
			err = cfg.Validate("watchdog")
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error saying %q", c.name, err, c.want)
		}
	}
	if _, err := Load(testenv.WriteFile(t, dir, "typo.yaml", "watchdog:\n  lan_ur: http://x/\n"), nil); err == nil || !strings.Contains(err.Error(), "did you mean watchdog.lan_url?") {
		t.Errorf("a typo in the watchdog section: %v; want it refused, naming watchdog.lan_url", err)
	}
}
