package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFile writes data to dir/name, readable by its owner only, as a
// secret or a config file would be, and returns the path.
func WriteFile(t testing.TB, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
