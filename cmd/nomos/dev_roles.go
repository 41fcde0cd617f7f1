//go:build nomosdev

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/labsim"
)

// The dev stack's roles as child processes, and what it prints once up.

// children are the role processes the dev stack runs.
type children struct {
	procs  []*exec.Cmd
	failed chan error
	wg     sync.WaitGroup
}

func startChildren(ctx context.Context, self string, names []string, configPath string, environ []string, dir string, env *roleEnv) (*children, error) {
	c := &children{failed: make(chan error, len(names))}
	for _, name := range names {
		logPath := filepath.Join(dir, name+".log")
		logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			c.stop()
			return nil, err
		}
		cmd := exec.Command(self, "-config", configPath, name)
		cmd.Env = environ
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			_ = logFile.Close()
			c.stop()
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		env.logger.Info("role started", "role", name, "pid", cmd.Process.Pid, "log", logPath)
		c.procs = append(c.procs, cmd)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			// The child wrote its log itself; this is only the parent's copy of the descriptor.
			defer func() { _ = logFile.Close() }()
			err := cmd.Wait()
			if ctx.Err() == nil {
				c.failed <- fmt.Errorf("%s exited: %v (see %s)", name, err, logPath)
			}
		}()
	}
	return c, nil
}

// stop asks every child to finish with SIGTERM and kills what is left
// after a grace period.
func (c *children) stop() {
	for _, p := range c.procs {
		if p.Process != nil {
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
		}
	}
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		for _, p := range c.procs {
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
		}
		<-done
	}
}

func printDevSummary(env *roleEnv, s devState, dir, dirFlag, self string, started []string, sim *labsim.Sim, seed *fleetseed.Seed) {
	w := env.stdout
	fmt.Fprintf(w, "\nNomos dev stack is up (state in %s).\n\n", dir)
	fmt.Fprintf(w, "  Matrix homeserver  %s  (server name localhost, registration closed)\n", s.HomeserverURL)
	if s.Encrypted {
		fmt.Fprintf(w, "  ops room           %s  (encrypted; approvals from verified sessions only)\n", s.RoomID)
	} else {
		fmt.Fprintf(w, "  ops room           %s  (in the clear, approvals from any session: -e2ee for an encrypted one)\n", s.RoomID)
	}
	fmt.Fprintf(w, "  operator           %s  password %s\n", s.Operator.UserID, s.Operator.Password)
	fmt.Fprintf(w, "  guest (read-only)  %s  password %s\n", s.Guest.UserID, s.Guest.Password)
	fmt.Fprintf(w, "  bot                %s\n", s.Bot.UserID)
	var hosts []string
	for _, h := range seed.Hosts {
		hosts = append(hosts, h.Name+"="+sim.Addr(h.Name))
	}
	fmt.Fprintf(w, "  labsim (SSH)       %s; command log %s\n", strings.Join(hosts, " "), s.LabsimLog)
	if s.StatusURL != "" {
		fmt.Fprintf(w, "  status page        %s\n  MCP                %s (token in %s)\n", s.StatusURL, s.MCPURL, filepath.Join(dir, "secrets", "mcp_token"))
	}
	if len(started) > 0 {
		fmt.Fprintf(w, "  roles running      %s (logs in %s/<role>.log)\n", strings.Join(started, ", "), dir)
	} else {
		fmt.Fprintf(w, "  roles running      none\n")
	}
	fmt.Fprintf(w, "  config             %s\n", s.Config)
	fmt.Fprintf(w, "\nLog in with Element (or any Matrix client): homeserver %s, user operator.\n", s.HomeserverURL)
	if roles["chat"].run != nil {
		chat := devProg() + " chat"
		if dirFlag != devDir {
			chat += " -dev " + filepath.Join(dirFlag, "dev.json")
		}
		fmt.Fprintf(w, "Or chat from this terminal: %s\n", chat)
	}
	if s.MCPURL != "" {
		fmt.Fprintf(w, "To give Claude Desktop (or another MCP client) the bot's tools, add to its config:\n  %s\n", mcpClientEntry(self, s.Config))
	}
	doctor := devProg() + " doctor"
	if dirFlag != devDir {
		doctor = devProg() + " -config " + s.Config + " doctor"
	}
	fmt.Fprintf(w, "Everything is in %s/dev.json; `%s` checks the stack again.\n", dir, doctor)
}

// mcpClientEntry is the MCP client config that runs `nomos mcp --stdio`
// against the dev stack, in Claude Desktop's form.
func mcpClientEntry(self, configPath string) string {
	q := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	return fmt.Sprintf(`{"mcpServers": {"nomos": {"command": %s, "args": ["-config", %s, "mcp", "--stdio"]}}}`, q(self), q(configPath))
}
