package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// signalChild is set in the copy of the test binary that
// TestSecondInterruptExitsAtOnce runs as a role that never finishes its
// shutdown.
const signalChild = "NOMOS_TEST_SIGNAL_CHILD"

// TestSecondInterruptExitsAtOnce: the first Ctrl-C ends the role's
// context and the role begins its graceful stop; a second Ctrl-C, while
// that stop still runs, kills the process with SIGINT instead of being
// swallowed.
func TestSecondInterruptExitsAtOnce(t *testing.T) {
	if os.Getenv(signalChild) == "1" {
		ctx, stop := signalContext()
		defer stop()
		fmt.Println("ready")
		<-ctx.Done()
		fmt.Println("stopping")
		select {} // a shutdown that hangs
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSecondInterruptExitsAtOnce$", "-test.count=1")
	cmd.Env = append(os.Environ(), signalChild+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := bufio.NewScanner(out)
	expect := func(want string) {
		t.Helper()
		for lines.Scan() {
			if lines.Text() == want {
				return
			}
		}
		t.Fatalf("the child never printed %q", want)
	}
	expect("ready")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	expect("stopping")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	// The bound only keeps a swallowed signal from hanging the test.
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("the child ended with %v, want killed by SIGINT", err)
		}
		ws := exit.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != syscall.SIGINT {
			t.Errorf("the child ended with %v, want killed by SIGINT", exit)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a second Ctrl-C did not end the process: it was swallowed")
	}
}
