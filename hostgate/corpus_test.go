package hostgate_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"
)

// hostileCommands reads the hostileCommands list of executions/gate_test.go,
// the forms an adversarial review used to pass harmful commands off as
// read-only, so the gate is tested against the same list as the classifier.
func hostileCommands(t testing.TB) []string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "executions", "gate_test.go"), nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(file, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok || len(spec.Names) != 1 || spec.Names[0].Name != "hostileCommands" || len(spec.Values) != 1 {
			return true
		}
		out = stringLiterals(spec.Values[0])
		return false
	})
	if len(out) < 20 {
		t.Fatalf("found %d hostile commands in executions/gate_test.go; has the list moved?", len(out))
	}
	return out
}

// policyTestStrings returns every string literal in policy's tests: the
// classifier's and the shell tokenizer's tables are full of commands, benign
// and hostile.
func policyTestStrings(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "policy", "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, stringLiterals(file)...)
	}
	if len(out) < 100 {
		t.Fatalf("found %d string literals in policy's tests; have they moved?", len(out))
	}
	return out
}

func stringLiterals(n ast.Node) []string {
	var out []string
	ast.Inspect(n, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil {
				out = append(out, s)
			}
		}
		return true
	})
	return out
}
