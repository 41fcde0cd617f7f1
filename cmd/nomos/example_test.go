package main

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/nomoshq/nomos/internal/config"
)

// TestExampleConfigDocumentsEveryField keeps deploy/nomos.example.yaml in
// step with Config: each field appears there, set or as a commented line.
func TestExampleConfigDocumentsEveryField(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../deploy/nomos.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("example config is not valid YAML: %v", err)
	}
	for _, path := range koanfPaths(reflect.TypeOf(config.Config{}), "") {
		if hasPath(doc, path) {
			continue
		}
		leaf := path[strings.LastIndex(path, ".")+1:]
		if !strings.Contains(string(raw), "# "+leaf+":") {
			t.Errorf("deploy/nomos.example.yaml does not document %s", path)
		}
	}
	if _, err := config.Load("../../deploy/nomos.example.yaml", nil); err != nil {
		t.Errorf("example config does not load: %v", err)
	}
}

func koanfPaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		key := prefix + f.Tag.Get("koanf")
		if f.Type.Kind() == reflect.Struct && f.Type.String() != "time.Duration" {
			out = append(out, koanfPaths(f.Type, key+".")...)
			continue
		}
		out = append(out, key)
	}
	return out
}

func hasPath(doc map[string]any, path string) bool {
	var cur any = doc
	for part := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[part]; !ok {
			return false
		}
	}
	return true
}
