package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nomoshq/nomos/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	return testenv.WriteFile(t, dir, name, data)
}

func TestUnknownRole(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	if code := run([]string{"frobnicate"}, nil, &out, &errOut); code != 2 {
		t.Errorf("exit = %d, want 2", code)
	}
	if !strings.Contains(errOut.String(), `unknown role "frobnicate"`) {
		t.Errorf("stderr = %q", errOut.String())
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// buildNomos builds the nomos binary the dev stack runs its roles with.
// Tests of the binary are skipped under -short.
func buildNomos(t testing.TB) string {
	t.Helper()
	testenv.SkipIfShort(t, "it builds and runs the nomos binary")
	bin := filepath.Join(t.TempDir(), "nomos")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false -tags=goolm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build nomos: %v\n%s", err, out)
	}
	return bin
}

func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
