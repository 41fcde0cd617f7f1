package policy

import (
	"strings"
)

// ruleAwk: awk is a programming language, so never read-only. A program
// that only filters and prints stays config_mutation; one that runs
// commands, writes or reads other files or the environment is code the
// classifier cannot read.
func ruleAwk(name string) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		program, havePrg := "", false
		var files []word
		unsafe := ""
		for i := 0; i < len(args); i++ {
			w := args[i]
			v := w.val
			if w.dynamic && unsafe == "" {
				unsafe = "has arguments only known at run time"
			}
			switch {
			case havePrg:
				if n, _, ok := strings.Cut(v, "="); ok && isShellName(n) {
					continue
				}
				files = append(files, w)
			case v == "--":
			case v == "-F" || v == "-v":
				i++
			case strings.HasPrefix(v, "-F") || strings.HasPrefix(v, "-v"):
			case v == "-e" || v == "--source":
				if i+1 < len(args) {
					i++
					program, havePrg = args[i].val, true
				}
			case strings.HasPrefix(v, "-"):
				if unsafe == "" {
					unsafe = "option " + v + " may load code or write files"
				}
			default:
				program, havePrg = v, true
			}
		}
		for _, f := range files {
			a.reads(f, name)
		}
		if unsafe == "" {
			unsafe = awkProgram(program)
		}
		if what, ok := mentionsSecret(program); ok {
			a.secret(name + " mentions " + what)
		}
		if unsafe != "" {
			if c, r := crudeClass(program, a.onHost); c == Destructive {
				return c, r
			}
			return a.opaqueClass(name + " " + unsafe)
		}
		return cfgf("%s runs a program; it is never read-only", name)
	}
}

// hasIdent reports whether id occurs in text as a whole identifier.
func hasIdent(text, id string) bool {
	isID := func(c byte) bool { return isAlnum(c) || c == '_' }
	for i := 0; ; {
		j := strings.Index(text[i:], id)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(id)
		if (j == 0 || !isID(text[j-1])) && (end == len(text) || !isID(text[end])) {
			return true
		}
		i = j + 1
	}
}

func isShellName(n string) bool {
	if n == "" || isDigit(n[0]) {
		return false
	}
	return allBytes(n, func(c byte) bool { return isAlnum(c) || c == '_' })
}

// awkProgram returns why an awk program is more than a filter, or "".
func awkProgram(p string) string {
	// Looked for in the whole text, strings and all: a misread regular
	// expression must not hide one.
	for _, id := range []string{"system", "getline", "ENVIRON", "PROCINFO", "ARGV", "ARGC", "close"} {
		if hasIdent(p, id) {
			return "uses " + id
		}
	}
	if strings.Contains(p, "@") {
		return "uses @ (gawk's include, load and indirect calls)"
	}
	n := len(p)
	// regexOK: a / here starts a regular expression, not a division.
	regexOK := true
	inPrint := false
	printDepth, depth := 0, 0
	for i := 0; i < n; i++ {
		c := p[i]
		switch {
		case c == '"':
			if i = awkString(p, i); i >= n {
				return "has an unterminated string"
			}
			regexOK = false
		case c == '#':
			for i < n && p[i] != '\n' {
				i++
			}
			regexOK = true
		case c == '/' && regexOK:
			var ok bool
			if i, ok = awkRegex(p, i); !ok {
				return "has an unterminated regular expression"
			}
			regexOK = false
		case c == '|':
			if i+1 < n && p[i+1] == '|' {
				i++
				regexOK = true
				continue
			}
			return "pipes to or from a command"
		case c == '>':
			if inPrint && depth == printDepth {
				return "writes to a file"
			}
			regexOK = false
		case c == '(':
			depth++
			regexOK = true
		case c == ')':
			depth--
			regexOK = false
		case c == ';' || c == '\n' || c == '{' || c == '}':
			inPrint = false
			regexOK = true
		case c == ',' || c == '!' || c == '~' || c == '&' || c == '?' || c == ':' || c == '=':
			regexOK = true
		case isAlnum(c) || c == '_':
			start := i
			for i+1 < n && (isAlnum(p[i+1]) || p[i+1] == '_') {
				i++
			}
			if id := p[start : i+1]; id == "print" || id == "printf" {
				inPrint, printDepth = true, depth
			}
			regexOK = false
		case c == ' ' || c == '\t':
		default:
			regexOK = false
		}
	}
	return ""
}

// awkString returns the index of the quote closing the string that opens
// at p[i], or len(p) when none does.
func awkString(p string, i int) int {
	i++
	for i < len(p) && p[i] != '"' {
		if p[i] == '\\' {
			i++
		}
		i++
	}
	return i
}

// awkRegex returns the index of the slash closing the regular expression
// that opens at p[i], and false when it does not close on its line.
func awkRegex(p string, i int) (int, bool) {
	n := len(p)
	i++
	for i < n && p[i] != '/' {
		switch p[i] {
		case '\\':
			i++
		case '[':
			for i < n && p[i] != ']' {
				i++
			}
		case '\n':
			return i, false
		}
		i++
	}
	return i, i < n
}
