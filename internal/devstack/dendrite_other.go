//go:build !unix

package devstack

import (
	"errors"
	"os"
	"syscall"
)

type dendriteSignal = os.Signal

var (
	dendriteSIGTERM dendriteSignal = os.Kill // no SIGTERM to send here
	dendriteSIGKILL dendriteSignal = os.Kill
)

var errDendriteUnsupported = errors.New("running dendrite is supported only on unix systems")

func dendriteSysProcAttr() *syscall.SysProcAttr { return nil }

func dendriteSignalGroup(pid int, sig dendriteSignal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Signal(sig)
}

func dendriteAlive(int) bool { return false }

func dendriteTryLock(string) (func(), error) { return nil, errDendriteUnsupported }
