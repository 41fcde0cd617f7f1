package main

import (
	"bytes"
	"encoding/json"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/nomoshq/nomos"

type listedPackage struct {
	ImportPath string
	Dir        string
	Standard   bool
	Imports    []string
	Deps       []string
	GoFiles    []string
}

// listPackages runs `go list -deps -json` over the module once.
func listPackages(t *testing.T) map[string]listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json", "./...")
	cmd.Dir = "../.."
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, errOut.String())
	}
	pkgs := map[string]listedPackage{}
	dec := json.NewDecoder(&out)
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

// importRule is one line of docs/architecture.md's package table, as a check.
type importRule struct {
	pkg string
	// forbidden prefixes anywhere in the package's dependency closure.
	forbidden []string
	// allowedDirect, when set, is the only non-standard imports allowed.
	allowedDirect []string
	// noIO forbids direct imports of packages that reach the outside world.
	noIO bool
	// noNetwork forbids linking the net package at all (net/netip and
	// net/url, which are pure, are fine).
	noNetwork bool
}

var ioPackages = []string{"os", "os/exec", "net", "net/http", "database/sql", "io/fs", "syscall", "math/rand", "crypto/rand"}

// clockCalls read the wall clock; a pure package takes times as arguments.
var clockCalls = []string{"time.Now(", "time.Since(", "time.Until(", "time.Sleep(", "time.After("}

var importRules = []importRule{
	{pkg: "actuator", forbidden: []string{
		module + "/store", module + "/bot", module + "/executions", module + "/mcpserver", module + "/web",
		"maunium.net/go/mautrix", "github.com/openai/openai-go", "github.com/jackc/pgx",
	}},
	{pkg: "bot", forbidden: []string{"golang.org/x/crypto/ssh"}},
	{pkg: "executions", forbidden: []string{"golang.org/x/crypto/ssh"}},
	{pkg: "mcpserver", forbidden: []string{"golang.org/x/crypto/ssh"}},
	{pkg: "web", forbidden: []string{"golang.org/x/crypto/ssh"}},
	// `nomos mcp --stdio` is a client of the bot: it cannot reach the
	// database, the queue or the order keys.
	{pkg: "mcpserver/proxy", forbidden: []string{
		module + "/store", module + "/executions", module + "/tasks", "github.com/jackc/pgx", "github.com/hibiken/asynq",
		"golang.org/x/crypto/ssh", "maunium.net/go/mautrix", "github.com/openai/openai-go",
	}},
	{pkg: "policy", allowedDirect: []string{"mvdan.cc/sh/v3/syntax"}, noIO: true},
	{pkg: "tasks", allowedDirect: []string{"github.com/hibiken/asynq", module + "/policy"}},
	// labsim's shell is mvdan's interpreter (interp, expand, syntax).
	{pkg: "internal/labsim", allowedDirect: []string{"github.com/gliderlabs/ssh", "golang.org/x/crypto/ssh", module + "/hostgate", "mvdan.cc/sh/v3"}},
	// nomos gate runs as root on every Proxmox host: the standard library,
	// policy's validators and a shell parser, and no network.
	{pkg: "hostgate", allowedDirect: []string{module + "/policy", "mvdan.cc/sh/v3/syntax"}, noNetwork: true,
		forbidden: []string{"os/exec", "net/http", "crypto/tls"}},
	// The process's own metrics are a leaf every part may feed: the
	// Prometheus client and nothing of Nomos.
	{pkg: "internal/metrics", allowedDirect: []string{"github.com/prometheus/client_golang"}},
	// Leaves every part may use: the standard library only.
	{pkg: "internal/loop", allowedDirect: []string{}},
	{pkg: "internal/humantime", allowedDirect: []string{}},
	{pkg: "internal/typo", allowedDirect: []string{}, noIO: true},
	{pkg: "internal/backoff", allowedDirect: []string{}},
	// Task leases: asynq and its Redis client, nothing of Nomos.
	{pkg: "internal/lease", allowedDirect: []string{"github.com/hibiken/asynq", "github.com/redis/go-redis/v9"}},
	// What a Proxmox node prints, read for the actuator and for `nomos
	// discover -from`: pure, so both read the same bytes the same way.
	{pkg: "internal/pveout", allowedDirect: []string{}, noIO: true},
	// The rules of what an inventory changes, and the seed files' format:
	// pure, so the store applies them and tests read them without a
	// database.
	{pkg: "inventory", allowedDirect: []string{}, noIO: true},
	{pkg: "internal/fleetseed", allowedDirect: []string{module + "/policy", "go.yaml.in/yaml/v3"}},
	// The brief is written from the database alone: no Matrix, no LLM.
	{pkg: "report", forbidden: []string{"golang.org/x/crypto/ssh", "maunium.net/go/mautrix", "github.com/openai/openai-go"}},
	// The watchdog runs on another machine with one secret, its Matrix
	// account: no database, queue, SSH or LLM, nor the bot's own parts.
	{pkg: "watchdog", forbidden: []string{
		module + "/store", module + "/bot", module + "/executions", module + "/tasks", module + "/mcpserver",
		"github.com/jackc/pgx", "github.com/hibiken/asynq", "github.com/redis/go-redis", "golang.org/x/crypto/ssh", "github.com/openai/openai-go",
	}},
	{pkg: "store", forbidden: []string{"golang.org/x/crypto/ssh", "maunium.net/go/mautrix", "github.com/openai/openai-go"}},
}

// TestImportRules enforces docs/architecture.md's trust boundaries: the bot side never
// links an SSH client, the actuator never links the database, Matrix or the
// LLM, and the pure packages stay pure.
func TestImportRules(t *testing.T) {
	pkgs := listPackages(t)
	for _, rule := range importRules {
		t.Run(rule.pkg, func(t *testing.T) {
			found := false
			for path, p := range pkgs {
				if path != module+"/"+rule.pkg && !strings.HasPrefix(path, module+"/"+rule.pkg+"/") {
					continue
				}
				found = true
				for _, dep := range p.Deps {
					for _, bad := range rule.forbidden {
						if dep == bad || strings.HasPrefix(dep, bad+"/") {
							t.Errorf("%s depends on %s, which docs/architecture.md forbids", path, dep)
						}
					}
				}
				if rule.allowedDirect != nil {
					for _, imp := range p.Imports {
						if pkgs[imp].Standard || strings.HasPrefix(imp, module+"/"+rule.pkg) {
							continue
						}
						if !slices.ContainsFunc(rule.allowedDirect, func(a string) bool { return imp == a || strings.HasPrefix(imp, a+"/") }) {
							t.Errorf("%s imports %s; only the standard library and %v are allowed", path, imp, rule.allowedDirect)
						}
					}
				}
				if rule.noNetwork && slices.Contains(p.Deps, "net") {
					t.Errorf("%s links the net package; it must reach no network", path)
				}
				if rule.noIO {
					for _, imp := range p.Imports {
						if slices.Contains(ioPackages, imp) {
							t.Errorf("%s imports %s; it must stay pure (no I/O, no clock)", path, imp)
						}
					}
					for _, f := range p.GoFiles {
						src, err := os.ReadFile(filepath.Join(p.Dir, f))
						if err != nil {
							t.Fatal(err)
						}
						for _, call := range clockCalls {
							if bytes.Contains(src, []byte(call)) {
								t.Errorf("%s/%s calls %s…); take the time as an argument", path, f, call)
							}
						}
					}
				}
			}
			if !found {
				t.Logf("package %s does not exist yet; the rule applies once it does", rule.pkg)
			}
		})
	}
}

// TestEveryPackageHasDocComment keeps `go doc` useful for every package.
func TestEveryPackageHasDocComment(t *testing.T) {
	pkgs := listPackages(t)
	for path, p := range pkgs {
		if !strings.HasPrefix(path, module) || len(p.GoFiles) == 0 {
			continue
		}
		documented := false
		for _, f := range p.GoFiles {
			file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, f), nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if file.Doc != nil && strings.TrimSpace(file.Doc.Text()) != "" {
				documented = true
				break
			}
		}
		if !documented {
			t.Errorf("package %s has no doc comment", path)
		}
	}
}

// TestProductionBuildLeavesOutDevCode: the nomos binary built without the
// nomosdev tag, the one the Dockerfile and docs/install.md build, links
// neither labsim, the dev stack nor the dev chat client; the development
// build links them all, so the check would see them if the tag stopped
// working.
func TestProductionBuildLeavesOutDevCode(t *testing.T) {
	devOnly := []string{module + "/internal/labsim", module + "/internal/devstack", module + "/internal/chatclient"}
	for _, build := range []struct {
		tags string
		dev  bool
	}{{"goolm", false}, {"goolm,nomosdev", true}} {
		cmd := exec.Command("go", "list", "-deps", "-tags="+build.tags, "./cmd/nomos")
		cmd.Dir = "../.."
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -tags=%s: %v\n%s", build.tags, err, errOut.String())
		}
		deps := strings.Fields(string(out))
		for _, pkg := range devOnly {
			if linked := slices.Contains(deps, pkg); linked != build.dev {
				t.Errorf("built with -tags=%s, nomos links %s: %v, want %v", build.tags, pkg, linked, build.dev)
			}
		}
	}
}
