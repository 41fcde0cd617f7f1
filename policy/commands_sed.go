package policy

import (
	"fmt"
	"slices"
	"strings"
)

// ruleSed: sed is read-only when its script only edits the stream. e and
// s///e run commands, w, W and s///w write files, -i edits files in place,
// and a script from a file or one that cannot be read may do any of these.
func ruleSed(a *analyzer, args []word, depth int) (Class, string) {
	p := parseSedArgs(args)
	for _, f := range p.files {
		a.reads(f, "sed")
		if p.inPlace {
			a.writeTo(f, "sed -i")
		}
	}
	script := strings.Join(p.scripts, "\n")
	switch {
	case p.dynamic:
		if c, r := crudeClass(joinRaw(args), a.onHost); c == Destructive {
			return c, r
		}
		return a.opaqueClass("sed with a script or files only known at run time")
	case p.fromFile:
		return a.opaqueClass("sed -f runs a script file the classifier cannot read")
	}
	effects, c, why := a.sedReadings(script)
	if effects == nil {
		return c, why
	}
	for _, e := range effects {
		for _, cmd := range e.exec {
			if cmd != "" {
				a.script(cmd, depth+1)
			}
			if cc, r := crudeClass(script, a.onHost); cc == Destructive {
				return cc, r
			}
			c, why = a.opaqueClass("sed runs shell commands")
		}
		for _, f := range e.writes {
			a.writeTo(word{val: f, raw: f}, "sed w")
			if !safeOutput(cleanPath(f)) && c < ConfigMutation {
				c, why = ConfigMutation, "sed writes "+f
			}
		}
		for _, f := range e.reads {
			a.reads(word{val: f, raw: f}, "sed r")
		}
	}
	if p.inPlace {
		c, why = max(c, ConfigMutation), "sed -i edits files in place"
	}
	switch {
	case c > ReadOnly:
	case p.unknown != "":
		return cfgf("sed option %s is not on the read-only list", p.unknown)
	case p.filesDynamic:
		return cfgf("sed with files only known at run time (one could be -i)")
	}
	return c, why
}

// sedReadings reads script the ways a sed may. GNU sed lets a bracket
// expression hold the delimiter, as in s/[/]/x/; other seds do not. A
// script one of them rejects does not run there, so every reading that
// parses is judged, and only when none does is the script opaque: then
// effects is nil and the class and reason are the verdict.
func (a *analyzer) sedReadings(script string) (effects []sedEffect, c Class, why string) {
	for _, brackets := range []bool{true, false} {
		if e := sedScript(script, brackets); e.bad == "" {
			effects = append(effects, e)
		} else if len(effects) == 0 && !brackets {
			if cc, r := crudeClass(script, a.onHost); cc == Destructive {
				return nil, cc, r
			}
			c, why = a.opaqueClass("sed script the classifier cannot read: " + e.bad)
			return nil, c, why
		}
	}
	return effects, ReadOnly, ""
}

// sedArgs is what a sed command line asks for.
type sedArgs struct {
	scripts      []string
	files        []word
	inPlace      bool
	fromFile     bool
	dynamic      bool // an option or the script is known only at run time
	filesDynamic bool
	scriptGiven  bool
	unknown      string // an option not on the read-only list
}

// sedLongFlags are sed's long options that neither write nor run anything.
var sedLongFlags = []string{"--quiet", "--silent", "--regexp-extended", "--null-data", "--zero-terminated", "--separate", "--unbuffered", "--posix", "--debug", "--sandbox", "--line-length", "--follow-symlinks", "--binary", "--help", "--version"}

func parseSedArgs(args []word) sedArgs {
	var p sedArgs
	for i := 0; i < len(args); i++ {
		w := args[i]
		v := w.val
		if w.dynamic && strings.HasPrefix(v, "-") {
			p.dynamic = true
		}
		switch {
		case v == "--":
			p.files = append(p.files, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(v, "--"):
			i = p.long(args, i)
		case len(v) > 1 && v[0] == '-':
			i = p.short(args, i)
		case !p.scriptGiven && !p.fromFile:
			p.scriptGiven = true
			p.scripts = append(p.scripts, v)
			p.dynamic = p.dynamic || w.dynamic
		default:
			// A file known only at run time may be an option too (-i).
			p.files = append(p.files, w)
			p.filesDynamic = p.filesDynamic || w.dynamic
		}
	}
	return p
}

// long reads the long option args[i] and returns the index of the last
// word it used.
func (p *sedArgs) long(args []word, i int) int {
	name, val, has := strings.Cut(args[i].val, "=")
	switch {
	case name == "--expression":
		p.scriptGiven = true
		if !has && i+1 < len(args) {
			i++
			val = args[i].val
			p.dynamic = p.dynamic || args[i].dynamic
		}
		p.scripts = append(p.scripts, val)
	case name == "--file":
		p.fromFile = true
	case strings.HasPrefix("--in-place", name) && len(name) > 4:
		p.inPlace = true
	case name == "--line-length" && !has:
		i++
	case slices.Contains(sedLongFlags, name):
	default:
		p.unknown = name
	}
	return i
}

// short reads the cluster of short options args[i] and returns the index
// of the last word it used.
func (p *sedArgs) short(args []word, i int) int {
	v := args[i].val
	for j := 1; j < len(v); j++ {
		switch v[j] {
		case 'n', 'r', 'E', 's', 'z', 'u', 'b':
		case 'i':
			p.inPlace = true
			j = len(v) // the rest is the backup suffix
		case 'e', 'f', 'l':
			val := v[j+1:]
			if val == "" && i+1 < len(args) {
				i++
				val = args[i].val
				p.dynamic = p.dynamic || args[i].dynamic
			}
			switch v[j] {
			case 'e':
				p.scriptGiven = true
				p.scripts = append(p.scripts, val)
			case 'f':
				p.fromFile = true
			}
			j = len(v)
		default:
			p.unknown = "-" + v[j:j+1]
		}
	}
	return i
}

// sedEffect is what a sed script does beyond editing the stream.
type sedEffect struct {
	exec   []string // commands of e (empty for s///e, which runs the pattern space)
	writes []string // files of w, W and s///w
	reads  []string // files of r and R
	bad    string   // why the script could not be read
}

// sedScript reads a GNU sed script. brackets tells whether a bracket
// expression in a regular expression may hold the delimiter, as in GNU sed
// but not every sed; the caller reads the script both ways.
func sedScript(s string, brackets bool) sedEffect {
	r := &sedReader{s: s, brackets: brackets}
	for {
		for r.i < len(s) && strings.IndexByte(" \t\n;", s[r.i]) >= 0 {
			r.i++
		}
		if r.i >= len(s) {
			break
		}
		if s[r.i] == '#' {
			r.toEOL()
			continue
		}
		if bad := r.command(); bad != "" {
			r.e.bad = bad
			return r.e
		}
	}
	if r.depth != 0 {
		r.e.bad = "an unclosed {"
	}
	return r.e
}

// sedReader walks a sed script and collects its effects.
type sedReader struct {
	s        string
	i        int
	brackets bool
	depth    int // of { blocks
	e        sedEffect
}

func (r *sedReader) skipBlank() {
	for r.i < len(r.s) && (r.s[r.i] == ' ' || r.s[r.i] == '\t') {
		r.i++
	}
}

func (r *sedReader) toEOL() string {
	start := r.i
	for r.i < len(r.s) && r.s[r.i] != '\n' {
		r.i++
	}
	return r.s[start:r.i]
}

func (r *sedReader) label() {
	r.skipBlank()
	for r.i < len(r.s) && r.s[r.i] != '\n' && r.s[r.i] != ';' {
		r.i++
	}
}

// command reads one command and its addresses, and returns why the script
// cannot be read, or "".
func (r *sedReader) command() string {
	if bad := r.addresses(); bad != "" {
		return bad
	}
	if r.i >= len(r.s) {
		return "a missing command"
	}
	c := r.s[r.i]
	r.i++
	if c == '{' {
		r.depth++
		return ""
	}
	if bad := r.verb(c); bad != "" {
		return bad
	}
	r.skipBlank()
	if r.i < len(r.s) && strings.IndexByte(";\n}#", r.s[r.i]) < 0 {
		return "text after a command"
	}
	return ""
}

// addresses reads a command's optional address or range and its negation.
func (r *sedReader) addresses() string {
	var ok bool
	if r.i, ok = sedAddress(r.s, r.i, r.brackets, false); !ok {
		return "an address"
	}
	r.skipBlank()
	if r.i < len(r.s) && r.s[r.i] == ',' {
		r.i++
		r.skipBlank()
		if r.i, ok = sedAddress(r.s, r.i, r.brackets, true); !ok {
			return "an address"
		}
	}
	r.skipBlank()
	for r.i < len(r.s) && r.s[r.i] == '!' {
		r.i++
		r.skipBlank()
	}
	return ""
}

// verb reads what follows the command letter c.
func (r *sedReader) verb(c byte) string {
	switch c {
	case '}':
		r.depth--
		if r.depth < 0 {
			return "an unexpected }"
		}
	case '=', 'd', 'D', 'g', 'G', 'h', 'H', 'n', 'N', 'p', 'P', 'x', 'z', 'F':
	case 'l', 'L', 'q', 'Q':
		r.skipBlank()
		for r.i < len(r.s) && isDigit(r.s[r.i]) {
			r.i++
		}
	case ':':
		start := r.i
		r.label()
		if strings.TrimSpace(r.s[start:r.i]) == "" {
			return "a label without a name"
		}
	case 'b', 't', 'T', 'v':
		r.label()
	case 'a', 'i', 'c':
		// Text to the end of the line; a backslash before the newline
		// continues it.
		for r.i < len(r.s) && r.s[r.i] != '\n' {
			if r.s[r.i] == '\\' && r.i+1 < len(r.s) {
				r.i++
			}
			r.i++
		}
	case 'e':
		r.skipBlank()
		r.e.exec = append(r.e.exec, r.toEOL())
	case 'r', 'R':
		r.skipBlank()
		r.e.reads = append(r.e.reads, r.toEOL())
	case 'w', 'W':
		r.skipBlank()
		r.e.writes = append(r.e.writes, r.toEOL())
	case 's', 'y':
		return r.substitute(c)
	default:
		return fmt.Sprintf("the unknown command %q", c)
	}
	return ""
}

// substitute reads the rest of an s or y command.
func (r *sedReader) substitute(c byte) string {
	if r.i >= len(r.s) || r.s[r.i] == '\n' || r.s[r.i] == '\\' {
		return "a missing delimiter"
	}
	delim := r.s[r.i]
	r.i++
	var ok bool
	if r.i, ok = sedPart(r.s, r.i, delim, r.brackets && c == 's'); !ok {
		return "an unterminated " + string(c) + " command"
	}
	if r.i, ok = sedPart(r.s, r.i, delim, false); !ok {
		return "an unterminated " + string(c) + " command"
	}
	if c == 's' {
		r.flags()
	}
	return ""
}

// flags reads an s command's flags: e runs the pattern space, w writes a file.
func (r *sedReader) flags() {
	for r.i < len(r.s) {
		switch f := r.s[r.i]; {
		case f == 'g' || f == 'p' || f == 'i' || f == 'I' || f == 'm' || f == 'M' || isDigit(f):
			r.i++
		case f == 'e':
			r.e.exec = append(r.e.exec, "")
			r.i++
		case f == 'w':
			r.i++
			r.skipBlank()
			r.e.writes = append(r.e.writes, r.toEOL())
			return
		default:
			return
		}
	}
}

// sedAddress reads an optional address at s[i:]; second allows the forms
// only a range's end may take (+N, ~N).
func sedAddress(s string, i int, brackets, second bool) (int, bool) {
	n := len(s)
	if i >= n {
		return i, true
	}
	switch c := s[i]; {
	case isDigit(c):
		for i < n && isDigit(s[i]) {
			i++
		}
		if i < n && s[i] == '~' {
			i++
			for i < n && isDigit(s[i]) {
				i++
			}
		}
	case c == '$':
		i++
	case second && (c == '+' || c == '~'):
		i++
		for i < n && isDigit(s[i]) {
			i++
		}
	case c == '/' || c == '\\':
		delim := byte('/')
		if c == '\\' {
			if i+1 >= n || s[i+1] == '\n' {
				return i, false
			}
			delim = s[i+1]
			i++
		}
		var ok bool
		if i, ok = sedPart(s, i+1, delim, brackets); !ok {
			return i, false
		}
		for i < n && (s[i] == 'I' || s[i] == 'M') {
			i++
		}
	}
	return i, true
}

// sedPart reads up to and past the unescaped delim.
func sedPart(s string, i int, delim byte, brackets bool) (int, bool) {
	n := len(s)
	for i < n {
		c := s[i]
		switch {
		case c == '\\':
			i += 2
			continue
		case c == delim:
			return i + 1, true
		case c == '\n' && brackets:
			return i, false
		case c == '[' && brackets:
			j := i + 1
			if j < n && s[j] == '^' {
				j++
			}
			if j < n && s[j] == ']' {
				j++
			}
			for j < n && s[j] != ']' {
				if s[j] == '[' && j+1 < n && strings.IndexByte(":.=", s[j+1]) >= 0 {
					end := strings.Index(s[j+2:], string(s[j+1])+"]")
					if end < 0 {
						return j, false
					}
					j += 2 + end + 2
					continue
				}
				j++
			}
			if j >= n {
				return j, false
			}
			i = j + 1
			continue
		}
		i++
	}
	return i, false
}
