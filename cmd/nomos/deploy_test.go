package main

// The tests of deploy/ (the compose file, the systemd units, the image)
// live here, beside the role wiring, and not in a package of their own:
// that way they can prove that the environment each compose service gets
// and the YAML each unit reads pass the very config.Load and Validate the
// role runs at start, with only the secrets that service is given. A
// separate package could only check a look-alike of that. compose-go is a
// test-only import, so the nomos binary does not link it.

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/nomoshq/nomos/tasks"
)

const deployDir = "../../deploy"

// writeFakeSecret writes a plausible value for the secret called name
// (a compose secret or a systemd credential), so the config loader and
// validate see what a real deployment gives them.
func writeFakeSecret(t *testing.T, path, name string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	pw := randomHex(t)
	var data []byte
	switch {
	case strings.Contains(name, "database"):
		data = []byte("postgres://nomos:" + pw + "@postgres:5432/nomos?sslmode=disable\n")
	case strings.Contains(name, "redis_url"):
		user := "nomos-bot"
		if strings.Contains(name, "actuator") {
			user = "nomos-actuator"
		}
		data = []byte("redis://" + user + ":" + pw + "@redis:6379/0\n")
	case strings.Contains(name, "redis"):
		data = []byte(pw + "\n")
	case strings.Contains(name, "ssh"):
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		block, err := ssh.MarshalPrivateKey(priv, "nomos actuator (test)")
		if err != nil {
			t.Fatal(err)
		}
		data = pem.EncodeToMemory(block)
	case strings.Contains(name, "known_hosts"):
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		key, err := ssh.NewPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		data = []byte("192.0.2.10 " + string(ssh.MarshalAuthorizedKey(key)))
	case strings.Contains(name, "signing"), strings.Contains(name, "verify"):
		dir := t.TempDir()
		signing, verify := filepath.Join(dir, "signing"), filepath.Join(dir, "verify")
		if err := tasks.GenerateKeyFiles(signing, verify); err != nil {
			t.Fatal(err)
		}
		half := verify
		if strings.Contains(name, "signing") {
			half = signing
		}
		var err error
		if data, err = os.ReadFile(half); err != nil {
			t.Fatal(err)
		}
	default: // passwords, the pickle key, API keys
		data = []byte(pw + "\n")
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

var (
	secretNamePattern = regexp.MustCompile(`(?i)password|passwd|passphrase|token|secret|api_?key|pickle|private|requirepass|credential`)
	// tokenPattern is a long run of key material: letters and digits
	// together, no spaces, dots, colons or slashes of a path or address.
	tokenPattern = regexp.MustCompile(`^[A-Za-z0-9+=_-]{24,}$`)
	// secretFlagPattern is a command-line flag whose value is a secret.
	secretFlagPattern = regexp.MustCompile(`(?i)^-{1,2}(requirepass|masterauth|pass|password|token|api[-_]?key|secret)(=.*)?$`)
)

// looksSecret reports whether an environment variable or an argument
// carries a secret itself rather than the path of a file holding one.
func looksSecret(key, value string) bool {
	if value == "" {
		return false
	}
	if secretNamePattern.MatchString(key) && !strings.HasSuffix(strings.ToUpper(key), "_FILE") {
		return true
	}
	if strings.Contains(value, "PRIVATE KEY") {
		return true
	}
	if u, err := url.Parse(value); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			return true
		}
	}
	return tokenPattern.MatchString(value) && strings.ContainsAny(value, "0123456789") &&
		strings.ContainsAny(strings.ToLower(value), "abcdefghijklmnopqrstuvwxyz")
}

func TestLooksSecret(t *testing.T) {
	t.Parallel()
	secret := [][2]string{
		{"NOMOS_MATRIX__PASSWORD", "hunter2"},
		{"NOMOS_LLM__API_KEY", "x"},
		{"NOMOS_MATRIX__PICKLE_KEY", "0123456789abcdef"},
		{"POSTGRES_PASSWORD", "nomos"},
		{"NOMOS_DATABASE__URL", "postgres://nomos:pw@postgres:5432/nomos"},
		{"NOMOS_REDIS__URL", "redis://:pw@redis:6379/0"},
		{"WHATEVER", "sk-or-v1-0a1b2c3d4e5f60718293a4b5c6d7e8f9"},
		{"KEY", "-----BEGIN PRIVATE KEY-----\nMC4CAQ..."},
	}
	plain := [][2]string{
		{"NOMOS_MATRIX__PASSWORD_FILE", "/run/secrets/matrix_password"},
		{"POSTGRES_PASSWORD_FILE", "/run/secrets/postgres_password"},
		{"NOMOS_MATRIX__HOMESERVER_URL", "https://matrix.example.org"},
		{"NOMOS_DATABASE__URL", "postgres://nomos@postgres:5432/nomos"},
		{"NOMOS_MATRIX__USER_ID", "@nomos:example.org"},
		{"NOMOS_LLM__MODEL", "deepseek/deepseek-chat"},
		{"NOMOS_WEB__LISTEN", "0.0.0.0:8080"},
		{"NOMOS_MATRIX__OPS_ROOM", ""},
		{"NOMOS_ACTUATOR__NAME", "actuator"},
	}
	for _, c := range secret {
		if !looksSecret(c[0], c[1]) {
			t.Errorf("looksSecret(%q, %q) = false, want true", c[0], c[1])
		}
	}
	for _, c := range plain {
		if looksSecret(c[0], c[1]) {
			t.Errorf("looksSecret(%q, %q) = true, want false", c[0], c[1])
		}
	}
}

// dockerStage is one FROM … stage of a Dockerfile, with its instructions
// (continuation lines joined).
type dockerStage struct {
	from         string
	instructions [][2]string // {INSTRUCTION, rest}
}

func parseDockerfile(t *testing.T, path string) []dockerStage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // read-only
	var stages []dockerStage
	var line string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if cont, ok := strings.CutSuffix(text, "\\"); ok {
			line += cont + " "
			continue
		}
		line += text
		instr, rest, _ := strings.Cut(line, " ")
		line = ""
		instr = strings.ToUpper(instr)
		if instr == "FROM" {
			stages = append(stages, dockerStage{from: rest})
			continue
		}
		if len(stages) == 0 {
			continue // ARGs before the first FROM
		}
		s := &stages[len(stages)-1]
		s.instructions = append(s.instructions, [2]string{instr, rest})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

func (s dockerStage) all(instr string) []string {
	var out []string
	for _, i := range s.instructions {
		if i[0] == instr {
			out = append(out, i[1])
		}
	}
	return out
}

// TestDockerfile checks what cannot be built here (there is no Docker
// engine): a Go builder on the module's Go version, a static goolm build,
// a runtime stage that is not the builder, runs as a non-root uid and
// checks the bot's /healthz; and that no secret can enter the build.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	stages := parseDockerfile(t, "../../Dockerfile")
	if len(stages) < 2 {
		t.Fatalf("want a multi-stage build, got %d stage(s)", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(gomod))
	if goVersion == nil || !strings.Contains(build.from, "golang:"+goVersion[1]) {
		t.Errorf("build stage FROM %q, want golang:%v (go.mod)", build.from, goVersion)
	}
	runs := strings.Join(build.all("RUN"), "\n")
	for _, want := range []string{"CGO_ENABLED=0", "-tags goolm", "-buildvcs=false", "./cmd/nomos"} {
		if !strings.Contains(runs, want) {
			t.Errorf("build stage does not build with %s:\n%s", want, runs)
		}
	}
	if strings.Contains(final.from, "golang") {
		t.Errorf("runtime stage FROM %q: the toolchain does not belong in the image", final.from)
	}
	users := final.all("USER")
	if len(users) == 0 {
		t.Fatal("runtime stage has no USER: it would run as root")
	}
	uid, _, _ := strings.Cut(users[len(users)-1], ":")
	if uid != dockerUID {
		t.Errorf("runtime USER %q, want uid %s (docs/install.md has the secrets chowned to it)", users[len(users)-1], dockerUID)
	}
	hc := final.all("HEALTHCHECK")
	if len(hc) != 1 || !strings.Contains(hc[0], botHealthURL) {
		t.Errorf("runtime HEALTHCHECK %q, want one that fetches %s", hc, botHealthURL)
	}
	if ep := final.all("ENTRYPOINT"); len(ep) != 1 || ep[0] != `["/usr/local/bin/nomos"]` {
		t.Errorf("ENTRYPOINT %q, want [\"/usr/local/bin/nomos\"]", ep)
	}
	labels := strings.Join(final.all("LABEL"), " ")
	for _, want := range []string{
		`org.opencontainers.image.version="${VERSION}"`,
		`org.opencontainers.image.revision="${COMMIT}"`,
		`org.opencontainers.image.source="https://github.com/nomoshq/nomos"`,
	} {
		if !strings.Contains(labels, want) {
			t.Errorf("runtime stage lacks the OCI label %s: %q", want, labels)
		}
	}
	// A release image copies the binary make release wrote and summed.
	if !slices.ContainsFunc(stages, func(s dockerStage) bool {
		return slices.Contains(s.all("COPY"), "dist/nomos_${VERSION}_linux_${TARGETARCH} /out/nomos")
	}) {
		t.Error("no stage copies make release's dist/nomos_${VERSION}_linux_${TARGETARCH}: a release image would hold a second build")
	}
	for _, s := range stages {
		for _, c := range append(s.all("COPY"), s.all("ADD")...) {
			if strings.Contains(c, "secrets") || strings.Contains(c, ".nomos-dev") {
				t.Errorf("the image copies %q", c)
			}
		}
	}
	ignore, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(ignore), "\n")
	for _, want := range []string{"deploy/secrets/", "deploy/.env", ".nomos-dev/"} {
		if !slices.Contains(lines, want) {
			t.Errorf(".dockerignore does not exclude %s: its keys would enter the build context", want)
		}
	}
}

// dockerUID is the uid the image runs as, and that docs/install.md has
// the secret files chowned to.
const dockerUID = "10001"

// botHealthURL is what the image and the compose file check.
const botHealthURL = "http://127.0.0.1:8080/healthz"

// actuatorHealthURL is the actuator's /healthz on its metrics listener,
// which compose sets to the container's loopback.
const actuatorHealthURL = "http://127.0.0.1:9464/healthz"

// actuatorStopTime is how long the actuator may take to stop: its
// shutdown grace (actuator.Config.ShutdownGrace, 10 s) and the 10 s it then
// gives killed commands to report.
const actuatorStopTime = 20 * time.Second
