package devstack

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// runCmd runs a command and returns its combined output, with the output in
// the error when it fails so the cause reaches the operator.
func runCmd(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(out.String(), 2000))
	}
	return out.String(), nil
}

// asRoot prefixes a command with sudo when this process is not root.
func asRoot(name string, args ...string) (string, []string) {
	if os.Geteuid() == 0 {
		return name, args
	}
	return "sudo", append([]string{"-n", name}, args...)
}

var aptUpdated sync.Once

// aptInstall installs Debian packages, refreshing the package lists once.
func aptInstall(ctx context.Context, pkgs ...string) error {
	var updateErr error
	aptUpdated.Do(func() {
		name, args := asRoot("apt-get", "update", "-qq")
		_, updateErr = runCmd(ctx, name, args...)
	})
	if updateErr != nil {
		return fmt.Errorf("apt-get update: %w", updateErr)
	}
	name, args := asRoot("env", append([]string{"DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-qq", "--no-install-recommends"}, pkgs...)...)
	if _, err := runCmd(ctx, name, args...); err != nil {
		return fmt.Errorf("install %s: %w", strings.Join(pkgs, " "), err)
	}
	return nil
}

// waitTCP waits until addr accepts connections or ctx ends.
func waitTCP(ctx context.Context, addr string) error {
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w (last error: %v)", addr, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tail returns at most the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
