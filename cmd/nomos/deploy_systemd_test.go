package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/nomoshq/nomos/internal/config"
)

// unitFile is a parsed systemd unit: every assignment in order (a key may
// repeat), plus the LoadCredential= lines left commented out as options.
type unitFile struct {
	name                 string
	entries              []unitEntry
	commentedCredentials []unitCredential
}

type unitEntry struct{ section, key, value string }

type unitCredential struct{ name, source string }

func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseUnitText(filepath.Base(path), string(data))
}

func parseUnitText(name, text string) unitFile {
	u := unitFile{name: name}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	var line string
	for sc.Scan() {
		raw := strings.TrimSpace(sc.Text())
		if c, ok := strings.CutPrefix(raw, "#LoadCredential="); ok {
			id, source, _ := strings.Cut(c, ":")
			u.commentedCredentials = append(u.commentedCredentials, unitCredential{id, source})
			continue
		}
		if raw == "" || strings.HasPrefix(raw, "#") || strings.HasPrefix(raw, ";") {
			continue
		}
		if cont, ok := strings.CutSuffix(raw, "\\"); ok {
			line += cont + " "
			continue
		}
		line += raw
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = strings.Trim(line, "[]")
		} else if key, value, ok := strings.Cut(line, "="); ok {
			u.entries = append(u.entries, unitEntry{section, strings.TrimSpace(key), strings.TrimSpace(value)})
		}
		line = ""
	}
	return u
}

// values are the assignments of key in [Service], in order.
func (u unitFile) values(key string) []string {
	var out []string
	for _, e := range u.entries {
		if e.section == "Service" && e.key == key {
			out = append(out, e.value)
		}
	}
	return out
}

// last is the effective value of a single-valued key: the last assignment.
func (u unitFile) last(key string) (string, bool) {
	v := u.values(key)
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

func (u unitFile) credentials() []unitCredential {
	var out []unitCredential
	for _, v := range u.values("LoadCredential") {
		id, source, _ := strings.Cut(v, ":")
		out = append(out, unitCredential{id, source})
	}
	return out
}

// unitSpec is what one unit must be: whose user, which state directory,
// which roles with which config, and exactly which credentials.
type unitSpec struct {
	file, yaml, user, stateDir, config, credentialDir string
	roles                                             []string // ExecStartPre roles with their flags, then ExecStart's
	credentials                                       []string // loaded always
	optional                                          []string // commented out until a feature is on
}

var unitSpecs = []unitSpec{
	{
		file: "nomos-bot.service", yaml: "bot.yaml", user: "nomos-bot", stateDir: "nomos-bot",
		config: "/etc/nomos/bot.yaml", credentialDir: "/etc/nomos/bot/",
		roles:       []string{"migrate -backup /var/lib/nomos-bot/backups", "bot"},
		credentials: []string{"database_url", "redis_url", "matrix_password", "pickle_key", "orders_signing.key", "reports_verify.pub"},
		optional:    []string{"llm_api_key", "web_password", "reports_verify.previous.pub"},
	},
	{
		file: "nomos-actuator.service", yaml: "actuator.yaml", user: "nomos-actuator", stateDir: "nomos-actuator",
		config: "/etc/nomos/actuator.yaml", credentialDir: "/etc/nomos/actuator/",
		roles:       []string{"actuator"},
		credentials: []string{"redis_url", "ssh_key", "known_hosts", "orders_verify.pub", "reports_signing.key"},
		optional:    []string{"orders_verify.previous.pub"},
	},
	{
		// On another machine, with no state: its only secret is its
		// Matrix password (or token).
		file: "nomos-watchdog.service", yaml: "watchdog.yaml", user: "nomos-watchdog",
		config: "/etc/nomos/watchdog.yaml", credentialDir: "/etc/nomos/watchdog/",
		roles:       []string{"watchdog"},
		credentials: []string{"matrix_password"},
		optional:    []string{"matrix_access_token"},
	},
}

// unitHardening is what every unit sets, as its effective (last) value.
var unitHardening = [][2]string{
	{"NoNewPrivileges", "yes"},
	{"ProtectSystem", "strict"},
	{"ProtectHome", "yes"},
	{"PrivateTmp", "yes"},
	{"PrivateDevices", "yes"},
	{"ProtectKernelTunables", "yes"},
	{"ProtectKernelModules", "yes"},
	{"ProtectKernelLogs", "yes"},
	{"ProtectControlGroups", "yes"},
	{"LockPersonality", "yes"},
	{"MemoryDenyWriteExecute", "yes"},
	{"RestrictRealtime", "yes"},
	{"RestrictNamespaces", "yes"},
	{"RestrictSUIDSGID", "yes"},
	{"SystemCallArchitectures", "native"},
	{"UMask", "0077"},
	{"Restart", "on-failure"},
	// sd_notify: READY once every service started, watchdog pings while
	// healthy (sdnotify.go).
	{"Type", "notify"},
	{"WatchdogSec", "60s"},
}

// unitProblems lists every way u falls short of spec.
func unitProblems(u unitFile, spec unitSpec) []string {
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, u.name+": "+fmt.Sprintf(format, args...))
	}
	for _, key := range []string{"User", "Group"} {
		if v, _ := u.last(key); v != spec.user {
			bad("%s=%s, want %s: each role runs as its own system user", key, v, spec.user)
		}
	}
	if v, _ := u.last("DynamicUser"); v == "yes" {
		bad("DynamicUser=yes: nomos.sysusers makes %s", spec.user)
	}
	for _, h := range unitHardening {
		if v, ok := u.last(h[0]); !ok || v != h[1] {
			bad("%s=%s, want %s", h[0], v, h[1])
		}
	}
	for _, key := range []string{"CapabilityBoundingSet", "AmbientCapabilities"} {
		vs := u.values(key)
		if len(vs) == 0 {
			bad("no %s=: want it empty, so no capability can be had", key)
		}
		for _, v := range vs {
			if v != "" {
				bad("%s=%s: want it empty", key, v)
			}
		}
	}
	filters := u.values("SystemCallFilter")
	if !slices.Contains(filters, "@system-service") {
		bad("no SystemCallFilter=@system-service")
	}
	for _, f := range filters {
		if f != "@system-service" && !strings.HasPrefix(f, "~") {
			bad("SystemCallFilter=%s widens the @system-service allow list", f)
		}
	}
	families := u.values("RestrictAddressFamilies")
	if len(families) == 0 {
		bad("no RestrictAddressFamilies=")
	}
	for _, v := range families {
		for _, f := range strings.Fields(v) {
			if !slices.Contains([]string{"AF_UNIX", "AF_INET", "AF_INET6"}, f) {
				bad("RestrictAddressFamilies allows %s: want only AF_UNIX, AF_INET and AF_INET6", f)
			}
		}
	}
	if v, _ := u.last("StateDirectory"); v != spec.stateDir {
		bad("StateDirectory=%s, want %s", v, spec.stateDir)
	}
	for _, key := range []string{"SetCredential", "SetCredentialEncrypted", "EnvironmentFile", "PassEnvironment"} {
		if vs := u.values(key); len(vs) > 0 {
			bad("%s=%s: secrets reach a role only through LoadCredential= from %s", key, vs[0], spec.credentialDir)
		}
	}
	for _, v := range u.values("Environment") {
		for _, kv := range strings.Fields(v) {
			key, value, _ := strings.Cut(strings.Trim(kv, `"`), "=")
			if looksSecret(key, value) {
				bad("Environment=%s holds a secret: use LoadCredential= and a *_file key", key)
			}
		}
	}
	for _, key := range []string{"BindPaths", "BindReadOnlyPaths", "ReadWritePaths"} {
		if vs := u.values(key); len(vs) > 0 {
			bad("%s=%s opens a path the role does not need", key, strings.Join(vs, " "))
		}
	}
	loaded := map[string]bool{}
	for _, c := range u.credentials() {
		loaded[c.name] = true
		if !slices.Contains(spec.credentials, c.name) && !slices.Contains(spec.optional, c.name) {
			owner := "no role"
			for _, other := range unitSpecs {
				if slices.Contains(other.credentials, c.name) || slices.Contains(other.optional, c.name) {
					owner = other.file
				}
			}
			bad("loads credential %s, which belongs to %s", c.name, owner)
		}
		if !strings.HasPrefix(c.source, spec.credentialDir) {
			bad("loads credential %s from %s, outside %s", c.name, c.source, spec.credentialDir)
		}
	}
	for _, need := range spec.credentials {
		if !loaded[need] {
			bad("does not load credential %s, which it needs", need)
		}
	}
	var execs []string
	for _, key := range []string{"ExecStartPre", "ExecStart"} {
		execs = append(execs, u.values(key)...)
	}
	var want []string
	for _, role := range spec.roles {
		want = append(want, "/usr/local/bin/nomos -config "+spec.config+" "+role)
	}
	if !slices.Equal(execs, want) {
		bad("runs %q, want %q", execs, want)
	}
	sort.Strings(problems)
	return problems
}

// TestSystemdUnits holds both units to their spec, and the sysusers
// snippet to making both users.
func TestSystemdUnits(t *testing.T) {
	t.Parallel()
	for _, spec := range unitSpecs {
		u := parseUnit(t, filepath.Join(deployDir, "systemd", spec.file))
		for _, p := range unitProblems(u, spec) {
			t.Error(p)
		}
		for _, c := range u.commentedCredentials {
			if !slices.Contains(spec.optional, c.name) {
				t.Errorf("%s: commented credential %s is not one of its options %v", spec.file, c.name, spec.optional)
			}
		}
	}
	sysusers, err := os.ReadFile(filepath.Join(deployDir, "systemd", "nomos.sysusers"))
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]string{}
	for line := range strings.SplitSeq(string(sysusers), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "u" {
			users[f[1]] = f[len(f)-1]
		}
	}
	for _, spec := range unitSpecs {
		if shell, ok := users[spec.user]; !ok || shell != "/usr/sbin/nologin" {
			t.Errorf("nomos.sysusers: user %s missing or with a login shell (%q)", spec.user, shell)
		}
	}
}

// TestSystemdUnitsCatchHostileEdits makes each edit that would weaken a
// unit and checks that unitProblems names it.
func TestSystemdUnitsCatchHostileEdits(t *testing.T) {
	t.Parallel()
	bot, actuator, dog := unitSpecs[0], unitSpecs[1], unitSpecs[2]
	cases := []struct {
		name string
		spec unitSpec
		edit func(string) string
		want string
	}{
		{"bot loads the SSH key", bot, addToService("LoadCredential=ssh_key:/etc/nomos/actuator/ssh_key"), "loads credential ssh_key, which belongs to nomos-actuator.service"},
		{"bot loads the order verify key", bot, addToService("LoadCredential=orders_verify.pub:/etc/nomos/bot/orders_verify.pub"), "loads credential orders_verify.pub, which belongs to nomos-actuator.service"},
		{"bot reads the actuator's directory", bot, replace("/etc/nomos/bot/redis_url", "/etc/nomos/actuator/redis_url"), "outside /etc/nomos/bot/"},
		{"actuator loads the database URL", actuator, addToService("LoadCredential=database_url:/etc/nomos/actuator/database_url"), "loads credential database_url, which belongs to nomos-bot.service"},
		{"actuator loads the order signing key", actuator, addToService("LoadCredential=orders_signing.key:/etc/nomos/actuator/orders_signing.key"), "loads credential orders_signing.key, which belongs to nomos-bot.service"},
		{"actuator without known_hosts", actuator, replace("LoadCredential=known_hosts:/etc/nomos/actuator/known_hosts\n", ""), "does not load credential known_hosts"},
		{"a literal credential", bot, addToService("SetCredential=matrix_password:hunter2"), "SetCredential=matrix_password:hunter2"},
		{"a password in Environment=", bot, addToService("Environment=NOMOS_MATRIX__PASSWORD=hunter2hunter2"), "Environment=NOMOS_MATRIX__PASSWORD holds a secret"},
		{"an environment file", actuator, addToService("EnvironmentFile=/etc/nomos/actuator.env"), "EnvironmentFile=/etc/nomos/actuator.env"},
		{"new privileges allowed", bot, addToService("NoNewPrivileges=no"), "NoNewPrivileges=no, want yes"},
		{"/etc writable", actuator, replace("ProtectSystem=strict", "ProtectSystem=full"), "ProtectSystem=full, want strict"},
		{"no private /tmp", bot, replace("PrivateTmp=yes\n", ""), "PrivateTmp=, want yes"},
		{"runs as root", actuator, replace("User=nomos-actuator", "User=root"), "User=root, want nomos-actuator"},
		{"the bot as the actuator's user", bot, replace("User=nomos-bot", "User=nomos-actuator"), "User=nomos-actuator, want nomos-bot"},
		{"a capability", actuator, addToService("CapabilityBoundingSet=CAP_NET_RAW"), "CapabilityBoundingSet=CAP_NET_RAW: want it empty"},
		{"raw packets", actuator, addToService("RestrictAddressFamilies=AF_PACKET"), "allows AF_PACKET"},
		{"mount syscalls", bot, addToService("SystemCallFilter=@mount"), "SystemCallFilter=@mount widens"},
		{"no syscall filter", bot, replace("SystemCallFilter=@system-service\n", ""), "no SystemCallFilter=@system-service"},
		{"never restarted", bot, replace("Restart=on-failure", "Restart=no"), "Restart=no, want on-failure"},
		{"the actuator's journal opened to the bot", bot, addToService("ReadWritePaths=/var/lib/nomos-actuator"), "ReadWritePaths=/var/lib/nomos-actuator opens"},
		{"the bot shares the actuator's state directory", bot, replace("StateDirectory=nomos-bot", "StateDirectory=nomos-actuator"), "StateDirectory=nomos-actuator, want nomos-bot"},
		{"the watchdog loads the database URL", dog, addToService("LoadCredential=database_url:/etc/nomos/watchdog/database_url"), "loads credential database_url, which belongs to nomos-bot.service"},
		{"the watchdog loads the SSH key", dog, addToService("LoadCredential=ssh_key:/etc/nomos/watchdog/ssh_key"), "loads credential ssh_key, which belongs to nomos-actuator.service"},
		{"the watchdog reads the bot's password", dog, replace("matrix_password:/etc/nomos/watchdog/matrix_password", "matrix_password:/etc/nomos/bot/matrix_password"), "outside /etc/nomos/watchdog/"},
		{"the watchdog keeps state", dog, addToService("StateDirectory=nomos-bot"), "StateDirectory=nomos-bot, want "},
		{"the bot unit runs the actuator", bot, replace("/etc/nomos/bot.yaml bot", "/etc/nomos/actuator.yaml actuator"), "runs "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			text, err := os.ReadFile(filepath.Join(deployDir, "systemd", c.spec.file))
			if err != nil {
				t.Fatal(err)
			}
			edited := c.edit(string(text))
			if edited == string(text) {
				t.Fatal("the edit changed nothing: the unit no longer has the line it replaces")
			}
			problems := unitProblems(parseUnitText(c.spec.file, edited), c.spec)
			if !slices.ContainsFunc(problems, func(s string) bool { return strings.Contains(s, c.want) }) {
				t.Errorf("the edit went unnoticed: want a problem containing %q, got:\n%s", c.want, strings.Join(problems, "\n"))
			}
		})
	}
}

func addToService(line string) func(string) string {
	return func(text string) string { return strings.Replace(text, "\n[Install]", "\n"+line+"\n\n[Install]", 1) }
}

func replace(old, new string) func(string) string {
	return func(text string) string { return strings.Replace(text, old, new, 1) }
}

// TestSystemdConfigsStartWithTheirCredentials puts exactly the unit's
// credentials and state directory at temporary paths, points the unit's
// YAML at them and runs the loader and the validation of each role the
// unit starts. A YAML naming a credential the unit does not load, or a
// role missing one, fails as it would under systemd.
func TestSystemdConfigsStartWithTheirCredentials(t *testing.T) {
	t.Parallel()
	for _, spec := range unitSpecs {
		t.Run(spec.file, func(t *testing.T) {
			t.Parallel()
			u := parseUnit(t, filepath.Join(deployDir, "systemd", spec.file))
			raw, err := os.ReadFile(filepath.Join(deployDir, "systemd", spec.yaml))
			if err != nil {
				t.Fatal(err)
			}
			credPrefix := "/run/credentials/" + spec.file + "/"
			var active []string
			for line := range strings.SplitSeq(string(raw), "\n") {
				if !strings.HasPrefix(strings.TrimSpace(line), "#") {
					active = append(active, line)
				}
			}
			activeText := strings.Join(active, "\n")
			for _, c := range u.credentials() {
				if !strings.Contains(activeText, credPrefix+c.name+"\n") {
					t.Errorf("%s loads credential %s, but %s never reads it", spec.file, c.name, spec.yaml)
				}
			}
			for _, c := range u.commentedCredentials {
				if !strings.Contains(string(raw), credPrefix+c.name) {
					t.Errorf("%s offers credential %s, but %s has no key for it", spec.file, c.name, spec.yaml)
				}
			}

			for _, p := range yamlSecretProblems(t, raw) {
				t.Errorf("%s: %s", spec.yaml, p)
			}

			root := t.TempDir()
			credDir, stateDir := filepath.Join(root, "credentials"), filepath.Join(root, "state")
			for _, c := range u.credentials() {
				writeFakeSecret(t, filepath.Join(credDir, c.name), c.name)
			}
			if err := os.MkdirAll(stateDir, 0o700); err != nil {
				t.Fatal(err)
			}
			text := strings.ReplaceAll(string(raw), credPrefix, credDir+"/")
			text = strings.ReplaceAll(text, "/var/lib/"+spec.stateDir+"/", stateDir+"/")
			if strings.Contains(text, "/run/credentials/") || strings.Contains(text, "/var/lib/nomos") {
				t.Errorf("%s points at another unit's credentials or state:\n%s", spec.yaml, text)
			}
			path := filepath.Join(root, spec.yaml)
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path, nil)
			if err != nil {
				t.Fatalf("%s would not start: %v", spec.file, err)
			}
			for _, role := range spec.roles {
				if err := cfg.Validate(strings.Fields(role)[0]); err != nil {
					t.Errorf("%s would not start: %v", spec.file, err)
				}
			}
		})
	}
}

// TestSystemdAnalyze runs systemd's own checks on the units: `verify`
// must print nothing (it exits 0 even on an unknown key), and the offline
// `security` exposure must stay at most 2.0 (1.2 today; the flag counts
// tenths). The one change to
// the units is the binary's path, since verify wants it to exist.
func TestSystemdAnalyze(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze is not installed: run `make prepare`, which installs Debian's systemd package for it")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var paths []string
	for _, spec := range unitSpecs {
		text, err := os.ReadFile(filepath.Join(deployDir, "systemd", spec.file))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, spec.file)
		if err := os.WriteFile(path, bytes.ReplaceAll(text, []byte("/usr/local/bin/nomos"), []byte(exe)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	out, err := exec.Command(analyze, append([]string{"verify"}, paths...)...).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command(analyze, append([]string{"security", "--offline=true", "--threshold=20", "--no-pager"}, paths...)...).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security: %v\n%s", err, out)
	}
}

// yamlSecretProblems names every value in a config file that is a secret
// itself rather than the path of a file holding one.
func yamlSecretProblems(t *testing.T, raw []byte) []string {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("not valid YAML: %v", err)
	}
	var problems []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, child := range v {
				walk(strings.TrimPrefix(path+"."+k, "."), child)
			}
		case []any:
			for i, child := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), child)
			}
		case string:
			leaf := path[strings.LastIndex(path, ".")+1:]
			if looksSecret(leaf, v) {
				problems = append(problems, path+" holds a secret: use its _file key and a credential")
			}
		}
	}
	walk("", doc)
	sort.Strings(problems)
	return problems
}

func TestYAMLSecretProblems(t *testing.T) {
	t.Parallel()
	hostile := map[string]string{
		"matrix.password":   "matrix:\n  password: hunter2hunter2\n",
		"database.url":      "database:\n  url: postgres://nomos:pw@127.0.0.1/nomos\n",
		"llm.api_key":       "llm:\n  api_key: sk-or-v1-0a1b2c3d4e5f60718293a4b5c6d7e8f9\n",
		"matrix.pickle_key": "matrix:\n  pickle_key: 0123456789abcdef0123\n",
	}
	for key, text := range hostile {
		if p := yamlSecretProblems(t, []byte(text)); len(p) != 1 || !strings.HasPrefix(p[0], key+" ") {
			t.Errorf("%s: got %q, want one problem naming %s", key, p, key)
		}
	}
	if p := yamlSecretProblems(t, []byte("matrix:\n  password_file: /run/credentials/nomos-bot.service/matrix_password\n")); len(p) != 0 {
		t.Errorf("a password_file path was taken for a secret: %q", p)
	}
}
