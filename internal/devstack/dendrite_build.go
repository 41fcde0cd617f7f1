package devstack

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// DendriteVersion is the Dendrite release Nomos builds and runs. It must stay
// a github.com/matrix-org/dendrite tag: the element-hq fork is AGPL.
const DendriteVersion = "v0.13.8"

const dendriteModule = "github.com/matrix-org/dendrite"

// dendriteCommands are the commands EnsureDendrite builds. A bin directory
// counts as built only when all of them are present.
var dendriteCommands = []string{"dendrite", "generate-keys", "create-account", "generate-config"}

// Files kept in a Dendrite state directory.
const (
	dendriteConfigFile = "dendrite.yaml"
	dendriteKeyFile    = "matrix_key.pem"
	dendriteSecretFile = "registration_shared_secret"
	dendriteNameFile   = "server_name"
	dendriteLogFile    = "dendrite.log"
	dendritePIDFile    = "dendrite.pid"
	dendriteLockFile   = "dendrite.lock"
)

const (
	defaultDendriteStartTimeout = 2 * time.Minute
	defaultDendriteStopGrace    = 15 * time.Second
	dendritePollInterval        = 100 * time.Millisecond
)

// CacheDir is where Nomos keeps things it builds once per machine, such as the
// Dendrite binaries: $NOMOS_CACHE_DIR, else $XDG_CACHE_HOME/nomos, else
// ~/.cache/nomos.
func CacheDir() string {
	if dir := os.Getenv("NOMOS_CACHE_DIR"); dir != "" {
		return dir
	}
	if dir := os.Getenv("XDG_CACHE_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "nomos")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".cache", "nomos")
	}
	return filepath.Join(os.TempDir(), "nomos-cache")
}

// EnsureDendrite returns a directory holding the Dendrite binaries, building
// them with `go install` into CacheDir() the first time. Concurrent callers,
// in this process or others, wait on a file lock and build only once. The build
// goes to a temporary directory that is renamed into place when complete, so a
// half-finished build is never used.
func EnsureDendrite(ctx context.Context, logger *slog.Logger) (binDir string, err error) {
	logger = cmp.Or(logger, slog.New(slog.DiscardHandler))
	versionDir := filepath.Join(CacheDir(), "dendrite-"+DendriteVersion)
	binDir = filepath.Join(versionDir, "bin")
	if dendriteBinariesPresent(binDir) {
		return binDir, nil
	}
	if err := os.MkdirAll(versionDir, 0o755); err != nil {
		return "", fmt.Errorf("create dendrite cache dir: %w", err)
	}

	unlock, err := dendriteLockWait(ctx, filepath.Join(versionDir, "build.lock"), logger)
	if err != nil {
		return "", fmt.Errorf("lock dendrite build: %w", err)
	}
	defer unlock()
	if dendriteBinariesPresent(binDir) { // built by whoever held the lock
		return binDir, nil
	}

	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("build dendrite %s: the go toolchain is needed and was not found: %w", DendriteVersion, err)
	}
	tmp, err := os.MkdirTemp(versionDir, "bin-partial-")
	if err != nil {
		return "", fmt.Errorf("build dendrite: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }() // nothing left to remove once renamed

	args := []string{"install"}
	for _, name := range dendriteCommands {
		args = append(args, dendriteModule+"/cmd/"+name+"@"+DendriteVersion)
	}
	logPath := filepath.Join(versionDir, "build.log")
	logger.InfoContext(ctx, "building dendrite", "version", DendriteVersion, "bin_dir", binDir, "build_log", logPath)
	start := time.Now()

	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, goTool, args...)
	cmd.Dir = tmp // outside any module, so no go.mod or go.work applies
	// Dendrite links SQLite through cgo; build it that way whatever the
	// caller's CGO_ENABLED says.
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOWORK=off", "GO111MODULE=on", "CGO_ENABLED=1", "GOFLAGS=-buildvcs=false")
	cmd.Stdout = &out
	cmd.Stderr = &out
	runErr := cmd.Run()
	_ = os.WriteFile(logPath, out.Bytes(), 0o644)
	if runErr != nil {
		return "", fmt.Errorf("build dendrite %s (go %s): %w\n%s", DendriteVersion, strings.Join(args, " "), runErr, dendriteTail(out.Bytes()))
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes it 0700
		return "", fmt.Errorf("build dendrite: %w", err)
	}
	if !dendriteBinariesPresent(tmp) {
		return "", fmt.Errorf("build dendrite %s: go install succeeded but %v are not all in %s", DendriteVersion, dendriteCommands, tmp)
	}
	// A bin dir without every binary (an interrupted manual build) is replaced.
	if err := os.RemoveAll(binDir); err != nil {
		return "", fmt.Errorf("replace dendrite bin dir: %w", err)
	}
	if err := os.Rename(tmp, binDir); err != nil {
		return "", fmt.Errorf("install dendrite bin dir: %w", err)
	}
	logger.InfoContext(ctx, "built dendrite", "version", DendriteVersion, "bin_dir", binDir, "duration", time.Since(start).Round(time.Millisecond))
	return binDir, nil
}

func dendriteBinariesPresent(dir string) bool {
	for _, name := range dendriteCommands {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// dendriteLockWait takes an exclusive flock on path, polling so that ctx can
// cancel the wait.
func dendriteLockWait(ctx context.Context, path string, logger *slog.Logger) (unlock func(), err error) {
	logged := false
	for {
		unlock, err := dendriteTryLock(path)
		if err == nil {
			return unlock, nil
		}
		if !errors.Is(err, errDendriteLocked) {
			return nil, err
		}
		if !logged {
			logger.InfoContext(ctx, "waiting for another dendrite build", "lock", path)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

var errDendriteLocked = errors.New("locked by another process")

// DendriteInUse reports whether a running Dendrite holds the state
// directory dir, so it must not be deleted under it.
func DendriteInUse(dir string) bool {
	path := filepath.Join(dir, dendriteLockFile)
	if _, err := os.Stat(path); err != nil {
		return false
	}
	unlock, err := dendriteTryLock(path)
	if err != nil {
		return errors.Is(err, errDendriteLocked)
	}
	unlock()
	return false
}
