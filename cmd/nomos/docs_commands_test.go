package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docFiles are the guides whose commands an operator types as written.
var docFiles = []string{"../../README.md", "../../docs/install.md", "../../docs/operations.md", "../../docs/user-guide.md", "../../docs/security.md"}

// codeLines returns the lines of every fenced block and every inline code
// span of a Markdown text: what the reader copies.
func codeLines(text string) []string {
	var out []string
	fenced := false
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			out = append(out, line)
			continue
		}
		parts := strings.Split(line, "`")
		for i := 1; i < len(parts); i += 2 {
			out = append(out, parts[i])
		}
	}
	return out
}

var (
	envAssign   = regexp.MustCompile(`^[A-Z][A-Z0-9_]*=`)
	composeSvc  = regexp.MustCompile(`^(nomos-[a-z]+)(:|$)`)
	unitName    = regexp.MustCompile(`^(nomos-[a-z]+)(\.service)?$`)
	shellBreaks = []string{"|", "||", "&&", ";", ">", ">>", "<", "#", "2>&1"}
)

// nomosCommand is one `nomos ROLE [flags]` a guide shows.
type nomosCommand struct {
	line, role string
	flags      []string
}

// nomosCommands finds the nomos invocations in a line of code: the binary
// (nomos, ./nomos, /usr/local/bin/nomos) in command position, after an
// optional -config FILE.
func nomosCommands(line string) []nomosCommand {
	toks := strings.Fields(line)
	var out []nomosCommand
	for i, tok := range toks {
		if tok != "nomos" && !strings.HasSuffix(tok, "/nomos") {
			continue
		}
		commandPosition := i == 0 || slices.Contains([]string{"sudo", "&&", "||", "|", ";", "$", "(", "then"}, toks[i-1]) ||
			envAssign.MatchString(toks[i-1]) || (i >= 2 && (toks[i-2] == "exec" || toks[i-2] == "run"))
		if !commandPosition {
			continue
		}
		rest := toks[i+1:]
		if len(rest) >= 2 && rest[0] == "-config" {
			rest = rest[2:]
		}
		if len(rest) == 0 || !regexp.MustCompile(`^[a-z]+$`).MatchString(rest[0]) {
			continue
		}
		c := nomosCommand{line: line, role: rest[0]}
		// Flags up to the first positional argument right after the role
		// (a subcommand such as `mcp token`, or DIR, HOST) or the end of
		// the command.
		for j, a := range rest[1:] {
			if slices.Contains(shellBreaks, a) || strings.HasPrefix(a, "#") {
				break
			}
			if j == 0 && !strings.HasPrefix(a, "-") {
				break
			}
			if strings.HasPrefix(a, "-") && a != "-" && a != "--" {
				name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
				c.flags = append(c.flags, name)
			}
		}
		out = append(out, c)
	}
	return out
}

// TestDocsNameRealCommands reads every command the guides show and checks
// it against the code and the deploy files: each `nomos ROLE` is a role,
// each of its flags is one the role defines, each compose service and
// systemd unit named exists, and each compose file put in COMPOSE_FILE is
// in deploy/. A guide that names a command nobody built fails here rather
// than on an operator's machine.
func TestDocsNameRealCommands(t *testing.T) {
	t.Parallel()
	p := loadCompose(t, []string{"homeserver", "seed"}, "compose.yaml", "compose.llm.yaml", "compose.rotate-orders.yaml", "compose.rotate-reports.yaml")
	usage := map[string]string{}
	flagsOf := func(role string) string {
		if u, ok := usage[role]; ok {
			return u
		}
		var out, errOut bytes.Buffer
		run([]string{role, "-h"}, nil, &out, &errOut)
		usage[role] = out.String() + errOut.String()
		return usage[role]
	}
	seen := 0
	for _, doc := range docFiles {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(doc)
		for _, line := range codeLines(string(raw)) {
			for _, c := range nomosCommands(line) {
				seen++
				if _, ok := roles[c.role]; !ok {
					t.Errorf("%s: %q runs nomos %s, which is not a role", name, line, c.role)
					continue
				}
				if _, devOnly := devOnlyRoles()[c.role]; devOnly && !devBuild {
					continue // its flags are checked in the development build
				}
				for _, f := range c.flags {
					if !strings.Contains(flagsOf(c.role), "  -"+f+" ") && !strings.Contains(flagsOf(c.role), "  -"+f+"\n") {
						t.Errorf("%s: %q gives nomos %s the flag -%s, which it does not define", name, line, c.role, f)
					}
				}
			}
			toks := strings.Fields(line)
			if i := slices.Index(toks, "compose"); i > 0 && toks[i-1] == "docker" {
				for _, tok := range toks[i+1:] {
					if m := composeSvc.FindStringSubmatch(tok); m != nil {
						if _, ok := p.Services[m[1]]; !ok {
							t.Errorf("%s: %q names compose service %s, which deploy/ does not define", name, line, m[1])
						}
					}
				}
			}
			if slices.ContainsFunc(toks, func(s string) bool { return s == "systemctl" || s == "journalctl" || s == "systemd-analyze" }) {
				for k, tok := range toks {
					// journalctl -t names a syslog tag (nomos-gate), not a unit.
					if k > 0 && toks[k-1] == "-t" {
						continue
					}
					if m := unitName.FindStringSubmatch(tok); m != nil {
						if _, err := os.Stat(filepath.Join(deployDir, "systemd", m[1]+".service")); err != nil {
							t.Errorf("%s: %q names unit %s, which deploy/systemd/ does not have", name, line, m[1])
						}
					}
				}
			}
			if _, files, ok := strings.Cut(line, "COMPOSE_FILE="); ok {
				for f := range strings.SplitSeq(strings.Fields(files + " ")[0], ":") {
					if _, err := os.Stat(filepath.Join(deployDir, f)); err != nil {
						t.Errorf("%s: %q puts %s in COMPOSE_FILE, which deploy/ does not have", name, line, f)
					}
				}
			}
		}
	}
	t.Logf("checked %d nomos commands", seen)
	if seen < 20 {
		t.Errorf("found only %d nomos commands in the guides; the parser has lost them", seen)
	}
}

// TestNomosCommandsParser pins what the docs test reads as a command, so
// it neither misses one nor takes prose or a database name for a role.
func TestNomosCommandsParser(t *testing.T) {
	t.Parallel()
	for line, want := range map[string][]nomosCommand{
		"sudo ./nomos actuator -pin 192.168.1.10 -known-hosts secrets/known_hosts": {{role: "actuator", flags: []string{"pin", "known-hosts"}}},
		"docker compose exec nomos-bot nomos doctor":                               {{role: "doctor"}},
		"sudo nomos -config /etc/nomos/bot.yaml doctor -roles bot":                 {{role: "doctor", flags: []string{"roles"}}},
		"sudo env NOMOS_DATABASE__URL_FILE=/x nomos migrate":                       {{role: "migrate"}},
		"nomos mcp token claude-desktop -scope read":                               {{role: "mcp"}},
		"nomos gate -check 'pct start 101' # comment -x":                           {{role: "gate", flags: []string{"check"}}},
		"sudo -u postgres createdb -O nomos nomos":                                 nil,
		"docker compose exec -T postgres pg_dump -U nomos -Fc nomos > x":           nil,
		"ssh-keygen -t ed25519 -C nomos-actuator -f ssh_key":                       nil,
	} {
		got := nomosCommands(line)
		if len(got) != len(want) {
			t.Errorf("%q: got %+v, want %+v", line, got, want)
			continue
		}
		for i := range got {
			if got[i].role != want[i].role || !slices.Equal(got[i].flags, want[i].flags) {
				t.Errorf("%q: got %+v, want %+v", line, got[i], want[i])
			}
		}
	}
}
