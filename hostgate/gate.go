package hostgate

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Exit statuses of the gate itself. Any other status is the program's own.
const (
	// ExitRefused is the status of a refused command, and of a program
	// that was found but could not be started.
	ExitRefused = 126
	// ExitNotFound is the status of an allowed command whose program is
	// not installed.
	ExitNotFound = 127
)

// DefaultPath lists the directories the gate finds programs in, in order.
// The client's PATH plays no part.
var DefaultPath = []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// maxJournalCommand caps the command quoted in a journal line.
const maxJournalCommand = 512

// Journal records refusals in the host's log; *syslog.Writer is one.
type Journal interface {
	Warning(m string) error
}

// Config is one run of the gate.
type Config struct {
	// Command is what the client asked for: SSH_ORIGINAL_COMMAND.
	Command string
	// RulesFile holds the rules (see LoadRules). Default DefaultRulesFile.
	RulesFile string
	// Environ is the gate's environment. The program gets PATH set to
	// Path and only what sshd sets from the account and the connection:
	// HOME, USER, LOGNAME, SSH_CLIENT and SSH_CONNECTION. Variables a
	// client may send (LANG, LC_*) never pass.
	Environ []string
	// Stderr receives the one-line refusal. Required.
	Stderr io.Writer
	// Journal receives a line for each refusal. Nil: stderr only.
	Journal Journal
	// Path is searched for the program. Default DefaultPath.
	Path []string
	// Exec replaces the process with the program, keeping its standard
	// input, output and error, so the program's exit status is the
	// session's. It returns only when it fails. Default syscall.Exec.
	Exec func(path string, argv, env []string) error
}

// Run checks cfg.Command and runs it, returning an exit status only when
// it does not: ExitRefused after a refusal, ExitNotFound when the program
// is missing.
func Run(cfg Config) int {
	rules, err := LoadRules(cmp.Or(cfg.RulesFile, DefaultRulesFile))
	if err != nil {
		// Fail closed: a rules file that cannot be trusted allows nothing.
		err = refusef("the gate's rules file is unusable: %v", err)
	} else {
		var argv []string
		if argv, err = Check(cfg.Command, rules); err == nil {
			return run(cfg, argv)
		}
	}
	fmt.Fprintln(cfg.Stderr, "nomos gate: "+oneLine(err.Error()))
	if cfg.Journal != nil {
		// A second copy of what stderr has just said; stderr is the one
		// the caller reads.
		_ = cfg.Journal.Warning(journalLine(cfg, err))
	}
	return ExitRefused
}

// run replaces the process with argv's program.
func run(cfg Config, argv []string) int {
	dirs := cfg.Path
	if len(dirs) == 0 {
		dirs = DefaultPath
	}
	path, ok := lookPath(argv[0], dirs)
	if !ok {
		fmt.Fprintf(cfg.Stderr, "nomos gate: %s is not installed in %s\n", argv[0], strings.Join(dirs, ":"))
		return ExitNotFound
	}
	exec := cfg.Exec
	if exec == nil {
		exec = syscall.Exec
	}
	err := exec(path, argv, childEnv(cfg.Environ, dirs))
	fmt.Fprintf(cfg.Stderr, "nomos gate: cannot run %s: %v\n", path, err)
	return ExitRefused
}

// lookPath finds an executable regular file called name in dirs.
func lookPath(name string, dirs []string) (string, bool) {
	if strings.ContainsRune(name, '/') {
		return "", false
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// childEnv is the program's environment: a fixed PATH and the variables
// that describe the login, never the client's command.
func childEnv(environ, dirs []string) []string {
	env := []string{"PATH=" + strings.Join(dirs, ":")}
	for _, kv := range environ {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "HOME", "USER", "LOGNAME", "SSH_CLIENT", "SSH_CONNECTION":
			env = append(env, kv)
		}
	}
	return env
}

// journalLine says what was refused, from where and why, with the command
// quoted and capped so that no client text can forge a line.
func journalLine(cfg Config, err error) string {
	from := "an unknown client"
	for _, kv := range cfg.Environ {
		if v, ok := strings.CutPrefix(kv, "SSH_CLIENT="); ok {
			if addr, _, _ := strings.Cut(v, " "); addr != "" {
				from = strconv.Quote(addr)
			}
		}
	}
	cmd := cfg.Command
	suffix := ""
	if len(cmd) > maxJournalCommand {
		cmd, suffix = cmd[:maxJournalCommand], fmt.Sprintf(" (first %d of %d bytes)", maxJournalCommand, len(cfg.Command))
	}
	return fmt.Sprintf("nomos gate: %s; command from %s: %s%s", oneLine(err.Error()), from, strconv.Quote(cmd), suffix)
}
