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

// importRule is one line of docs/architecture.md's package table, as a
// check of what depguard cannot see: a package's whole dependency closure,
// and calls. The rules on a package's direct imports (only the standard
// library and named modules; no I/O in a pure package) are depguard's, in
// .golangci.yml.
type importRule struct {
	pkg string
	// forbidden prefixes anywhere in the package's dependency closure.
	forbidden []string
	// noClock forbids reading the wall clock: a pure package takes times
	// as arguments.
	noClock bool
	// noNetwork forbids linking the net package at all (net/netip and
	// net/url, which are pure, are fine).
	noNetwork bool
}

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
	{pkg: "policy", noClock: true},
	// nomos gate runs as root on every Proxmox host: no network, and
	// nothing that runs a command or speaks HTTP or TLS, however linked.
	{pkg: "hostgate", noNetwork: true, forbidden: []string{"os/exec", "net/http", "crypto/tls"}},
	{pkg: "internal/typo", noClock: true},
	// What a Proxmox node prints, read for the actuator and for `nomos
	// discover -from`: pure, so both read the same bytes the same way.
	{pkg: "internal/pveout", noClock: true},
	// The rules of what an inventory changes: pure, so the store applies
	// them and tests read them without a database.
	{pkg: "inventory", noClock: true},
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
// LLM, nomos gate links no network, and the pure packages read no clock.
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
				if rule.noNetwork && slices.Contains(p.Deps, "net") {
					t.Errorf("%s links the net package; it must reach no network", path)
				}
				if rule.noClock {
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
