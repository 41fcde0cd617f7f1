package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestInternalTestsAreNamed keeps one convention for test packages:
// tests are external (package x_test) by default, and in-package tests
// live only in files named *_internal_test.go, so a reader knows from the
// name which tests reach unexported code. A directory whose tests are all
// in-package (and package main, which cannot be imported) has not taken
// the convention up yet and is left alone.
func TestInternalTestsAreNamed(t *testing.T) {
	for path, p := range listPackages(t) {
		if !strings.HasPrefix(path, module) || p.Dir == "" {
			continue
		}
		files, err := filepath.Glob(filepath.Join(p.Dir, "*_test.go"))
		if err != nil {
			t.Fatal(err)
		}
		external := false
		var inPackage []string
		for _, f := range files {
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly)
			if err != nil {
				t.Fatal(err)
			}
			switch name := file.Name.Name; {
			case name == "main":
			case strings.HasSuffix(name, "_test"):
				external = true
			case !strings.HasSuffix(f, "_internal_test.go"):
				inPackage = append(inPackage, filepath.Base(f))
			}
		}
		if external && len(inPackage) > 0 {
			t.Errorf("%s: %v test in package %s; name in-package test files *_internal_test.go, or make them package %s_test",
				path, inPackage, filepath.Base(path), filepath.Base(path))
		}
	}
}
