//go:build unix

package devstack

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

type dendriteSignal = syscall.Signal

const (
	dendriteSIGTERM = syscall.SIGTERM
	dendriteSIGKILL = syscall.SIGKILL
)

// dendriteSysProcAttr puts Dendrite in its own process group, so a terminal's
// Ctrl-C reaches only the parent, which then stops it in order.
func dendriteSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func dendriteSignalGroup(pid int, sig dendriteSignal) error {
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

func dendriteAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// dendriteTryLock takes an exclusive flock on path without waiting. The lock
// lasts until unlock is called or this process exits.
func dendriteTryLock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", path, errDendriteLocked)
		}
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}
