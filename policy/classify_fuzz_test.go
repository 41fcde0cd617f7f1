package policy

import (
	"fmt"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// dangerPayload is a command that is not read-only where it is classified:
// every such example of issue 9 and of the classifier's own table.
type dangerPayload struct {
	cmd   string
	where TargetType
}

var dangerPayloads = func() []dangerPayload {
	var out []dangerPayload
	seen := map[string]bool{}
	add := func(cmd string, where TargetType) {
		if !seen[cmd] {
			seen[cmd] = true
			out = append(out, dangerPayload{cmd, where})
		}
	}
	for _, tt := range issueTests {
		if tt.want > ReadOnly {
			add(tt.cmd, tt.place())
		}
	}
	for _, tt := range classifyTests {
		if tt.want > ReadOnly {
			add(tt.cmd, tt.place())
		}
	}
	for _, cmd := range []string{
		"reboot", "rm -rf /", "pct destroy 101", "zfs destroy -r rpool/data",
		"dd if=/dev/zero of=/dev/sda", "systemctl poweroff", "echo b > /proc/sysrq-trigger",
		"wipefs -a /dev/sda", "qm destroy 100", "cp /dev/null /etc/pve/storage.cfg",
		"qm stop 200", "qm rollback 200 snap", "qm guest exec 200 -- rm -rf /", "qm monitor 200",
		"python3 -c 'import os'", "frobnicate --now",
	} {
		add(cmd, TargetHost)
	}
	return out
}()

// dangerStyle embeds a payload in a larger script. It returns false when
// it cannot hold this payload (quotes it cannot nest, a first word that is
// not a plain name).
type dangerStyle struct {
	name string
	// embed builds the script.
	embed func(p string) (string, bool)
	// simple: the result is one simple command, so a wrapper may precede
	// it.
	simple bool
	// transparent: the result runs the payload as it would run alone, so
	// its class is at least the payload's.
	transparent bool
	// dynamicName: the result runs a program named at run time.
	dynamicName bool
	// bash: only bash evaluates the payload here (a subscript), so compare
	// with the payload as bash alone reads it.
	bash bool
}

func plainName(p string) (name, rest string, ok bool) {
	name, rest, _ = strings.Cut(p, " ")
	if name == "" || syntax.IsKeyword(name) || strings.Contains(name, "=") {
		return "", "", false
	}
	for i := 0; i < len(name); i++ {
		if !isAlnum(name[i]) && !strings.ContainsRune("-._/[", rune(name[i])) {
			return "", "", false
		}
	}
	if rest != "" {
		rest = " " + rest
	}
	return name, rest, true
}

func nameStyle(f func(name string) string) func(string) (string, bool) {
	return func(p string) (string, bool) {
		name, rest, ok := plainName(p)
		if !ok {
			return "", false
		}
		return f(name) + rest, true
	}
}

func singleLine(p string) bool { return !strings.Contains(p, "\n") }

var dangerStyles = []dangerStyle{
	{name: "plain", embed: func(p string) (string, bool) { return p, true }, simple: true, transparent: true},
	{name: "single-quoted name", embed: nameStyle(func(n string) string { return "'" + n + "'" }), simple: true, transparent: true},
	{name: "double-quoted name", embed: nameStyle(func(n string) string { return `"` + n + `"` }), simple: true, transparent: true},
	{name: "escaped name", embed: nameStyle(func(n string) string { return `\` + n }), simple: true, transparent: true},
	{name: "split name", embed: nameStyle(func(n string) string { return n[:1] + "''" + n[1:] }), simple: true, transparent: true},
	{name: "ANSI-C name", embed: nameStyle(func(n string) string {
		var b strings.Builder
		b.WriteString("$'")
		for i := 0; i < len(n); i++ {
			fmt.Fprintf(&b, `\x%02x`, n[i])
		}
		b.WriteString("'")
		return b.String()
	}), simple: true, transparent: true},
	{name: "dynamic name", embed: nameStyle(func(n string) string { return "$(printf %s " + ShellQuote(n) + ")" }), simple: true, dynamicName: true},
	{name: "sh -c", embed: func(p string) (string, bool) { return "sh -c " + ShellQuote(p), true }, simple: true, transparent: true},
	{name: "bash -c", embed: func(p string) (string, bool) { return "bash -c " + ShellQuote(p), true }, simple: true, transparent: true},
	{name: "eval", embed: func(p string) (string, bool) { return "eval " + ShellQuote(p), true }, simple: true, transparent: true},
	{name: "su -c", embed: func(p string) (string, bool) { return "su -c " + ShellQuote(p), true }, simple: true, transparent: true},
	{name: "watch", embed: func(p string) (string, bool) { return "watch -n1 " + ShellQuote(p), true }, simple: true, transparent: true},
	// find and xargs -I put a file name in place of {} anywhere, even
	// inside the script: a payload with {} is not itself there.
	{name: "find -exec sh -c", embed: func(p string) (string, bool) {
		return "find . -exec sh -c " + ShellQuote(p) + ` \;`, !strings.Contains(p, "{}")
	}, simple: true, transparent: true},
	{name: "xargs sh -c", embed: func(p string) (string, bool) {
		return "echo x | xargs -I{} sh -c " + ShellQuote(p), !strings.Contains(p, "{}")
	}, transparent: true},
	{name: "ssh", embed: func(p string) (string, bool) { return "ssh other " + ShellQuote(p), true }, simple: true},
	{name: "pct exec", embed: func(p string) (string, bool) { return "pct exec 101 -- sh -c " + ShellQuote(p), true }, simple: true},
	{name: "command substitution", embed: func(p string) (string, bool) { return "echo $( " + p + "\n)", true }, simple: true, transparent: true},
	{name: "backquotes", embed: func(p string) (string, bool) {
		return "echo `" + p + "`", !strings.ContainsAny(p, "`\\")
	}, simple: true, transparent: true},
	{name: "process substitution", embed: func(p string) (string, bool) { return "cat <( " + p + "\n)", true }, simple: true, transparent: true, bash: true},
	{name: "here-document", embed: func(p string) (string, bool) {
		return "cat <<EOF\n$( " + p + " )\nEOF", singleLine(p) && !strings.Contains(p, "EOF")
	}, transparent: true},
	{name: "test -v", embed: func(p string) (string, bool) {
		return "test -v 'a[$( " + p + " )]'", singleLine(p) && !strings.Contains(p, "'")
	}, simple: true, transparent: true, bash: true},
	{name: "printf -v", embed: func(p string) (string, bool) {
		return "printf -v 'a[$( " + p + " )]' x", singleLine(p) && !strings.Contains(p, "'")
	}, simple: true, transparent: true, bash: true},
	{name: "[[ -v ]]", embed: func(p string) (string, bool) {
		return "[[ -v 'a[$( " + p + " )]' ]]", singleLine(p) && !strings.Contains(p, "'")
	}, transparent: true, bash: true},
	{name: "group", embed: func(p string) (string, bool) { return "{ " + p + "\n}", true }, transparent: true},
	{name: "subshell", embed: func(p string) (string, bool) { return "( " + p + "\n)", true }, transparent: true},
	{name: "function", embed: func(p string) (string, bool) { return "f() { " + p + "\n}; f", true }, transparent: true},
	{name: "if", embed: func(p string) (string, bool) { return "if true; then " + p + "\nfi", true }, transparent: true},
	{name: "while", embed: func(p string) (string, bool) { return "while " + p + "\ndo break; done", true }, transparent: true},
	{name: "case", embed: func(p string) (string, bool) { return "case x in x) " + p + "\n;; esac", true }, transparent: true},
}

// dangerWrappers run the command that follows them.
var dangerWrappers = []string{
	"", "sudo ", "sudo -u root ", "env ", "env FOO=1 ", "nice ", "nice -n 5 ", "timeout 5 ",
	"nohup ", "stdbuf -oL ", "setsid ", "ionice -c3 ", "command ", "exec ", "time ", "doas ",
	"flock /tmp/l ", "busybox ", "xargs ", "xargs -0 ", "chroot / ", "builtin ",
}

var dangerPrefixes = []string{"", "ls; ", "ls && ", "false || ", "ls | ", "ls\n", "true & ", "# note\n", "df -h;\n"}

var dangerSuffixes = []string{"", "\nls", " &", "\n:", " | cat", " >/dev/null", " 2>&1", "; ls"}

// chooser turns fuzz bytes into choices; missing bytes choose 0.
type chooser struct {
	b []byte
	i int
}

func (c *chooser) pick(n int) int {
	v := 0
	if c.i < len(c.b) {
		v = int(c.b[c.i])
	}
	c.i++
	return v % n
}

// FuzzClassifyDangerous builds commands from a grammar of dangerous forms
// (prefix wrappers, quoting styles, separators, destructive payloads) and
// checks none classifies read_only, and that a form which runs its payload
// as it would run alone is classified at least as high.
func FuzzClassifyDangerous(f *testing.F) {
	for i, p := range dangerPayloads {
		where := byte(0)
		if p.where != TargetHost {
			where = 1
		}
		f.Add([]byte{byte(i >> 8), byte(i), 0, 0, 0, 0, where})
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := &chooser{b: b}
		p := dangerPayloads[(c.pick(256)<<8|c.pick(256))%len(dangerPayloads)]
		style := dangerStyles[c.pick(len(dangerStyles))]
		wrapper := dangerWrappers[c.pick(len(dangerWrappers))]
		prefix := dangerPrefixes[c.pick(len(dangerPrefixes))]
		suffix := dangerSuffixes[c.pick(len(dangerSuffixes))]
		where := TargetHost
		if c.pick(2) == 1 {
			where = TargetLXC
		}
		body, ok := style.embed(p.cmd)
		if !ok {
			style, body = dangerStyles[0], p.cmd
		}
		if _, _, ok := plainName(body); !style.simple || !ok {
			// A wrapper before a keyword (function, if) is a syntax error
			// that runs nothing.
			wrapper = ""
		}
		if strings.Contains(body, "\n") && (suffix == " | cat" || suffix == " &" || suffix == " >/dev/null" || suffix == " 2>&1" || suffix == "; ls") {
			// A suffix on the line of a here-document's end would hide it.
			suffix = "\n" + strings.TrimLeft(suffix, " ;")
		}
		cmd := prefix + wrapper + body + suffix
		got := ClassifyCommand(cmd, where)
		if got.Class == ReadOnly {
			t.Fatalf("%q (%s, style %s) = read_only %q; the payload %q is not", cmd, where, style.name, got.Reasons, p.cmd)
		}
		alone := classify(p.cmd, where, style.bash)
		if style.transparent && singleLine(p.cmd) && got.Class < alone.Class {
			t.Fatalf("%q (%s, style %s) = %s %q; the payload %q alone is %s %q",
				cmd, where, style.name, got.Class, got.Reasons, p.cmd, alone.Class, alone.Reasons)
		}
		if _, err := parseScript(cmd, false); style.dynamicName && err == nil && where == TargetHost && got.Class != Destructive {
			t.Fatalf("%q on the host = %s %q; a program named at run time needs the typed phrase", cmd, got.Class, got.Reasons)
		}
	})
}
