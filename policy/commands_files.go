package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// addFileRules adds the rules of the file commands.
func addFileRules(rules map[string]rule, modelsPaths map[string]bool) {
	// Readers print what they read: read-only for literal paths that hold
	// no secret.
	rules["cat"] = strictReader("cat", newSpec(
		"-n -A -v -E -T -b -s --number --show-all --show-nonprinting --show-ends --show-tabs --number-nonblank --squeeze-blank", ""), nil)
	grep := newSpec(
		"-i -y -v -w -x -c -l -L -o -q -s -n -h -H -b -a -I -r -R -E -F -G -P -z -Z -T -U "+
			"--ignore-case --no-ignore-case --invert-match --word-regexp --line-regexp --count "+
			"--files-with-matches --files-without-match --only-matching --quiet --silent --no-messages "+
			"--line-number --no-filename --with-filename --byte-offset --text --recursive "+
			"--dereference-recursive --extended-regexp --fixed-strings --basic-regexp --perl-regexp "+
			"--null-data --null --initial-tab --color --colour --line-buffered",
		"-e -f -m -A -B -C -d -D --regexp --file --max-count --after-context --before-context "+
			"--context --label --include --exclude --exclude-dir --exclude-from --binary-files "+
			"--directories --devices --group-separator")
	grep.optional = set("--color", "--colour")
	grep.digits = true
	for _, n := range []string{"grep", "egrep", "fgrep", "zgrep", "zegrep", "zfgrep", "rgrep"} {
		rules[n] = strictReader(n, grep, &grepShape)
	}
	for _, n := range []string{
		"head", "tail", "tac", "nl", "rev", "od", "hexdump", "strings", "base64", "base32",
		"basenc", "cut", "column", "paste", "fold", "fmt", "expand", "unexpand", "comm", "join",
		"zcat", "bzcat", "xzcat", "lzcat", "cmp", "diff",
		// last, who and users print records from any file they are given.
		"last", "lastb", "who", "users",
	} {
		rules[n] = looseReader(n)
	}
	for _, n := range []string{"zstdcat", "lz4cat"} {
		rules[n] = ruleDecompressor(n)
	}
	rules["xxd"] = ruleXxd
	rules["jq"] = ruleJq
	rules["sort"] = ruleSort
	modelsPaths["uniq"] = true
	for _, n := range []string{"less", "more", "most", "pg", "man"} {
		rules[n] = rulePager(n)
	}
	for _, n := range []string{"vi", "vim", "nvim", "view", "vimdiff", "nano", "pico", "ed", "red", "ex", "emacs", "joe", "mcedit", "sensible-editor", "editor", "sudoedit", "visudo", "vipw", "vigr"} {
		rules[n] = ruleEditor(n)
	}

	// Writers.
	rules["tee"] = ruleTee
	rules["truncate"] = ruleTruncate
	rules["cp"] = ruleCopy("cp", "tS", []string{"target-directory", "suffix"})
	rules["install"] = ruleCopy("install", "gmotS", []string{"group", "mode", "owner", "target-directory", "suffix", "strip-program"})
	rules["ln"] = ruleCopy("ln", "tS", []string{"target-directory", "suffix"})
	rules["touch"] = ruleTouch
	rules["mkdir"] = ruleMkdir("mkdir")
	rules["rmdir"] = ruleMkdir("rmdir")
	rules["rm"] = ruleRm
	rules["unlink"] = ruleRm
	rules["mv"] = ruleMv
	for _, n := range []string{"chmod", "chown", "chgrp", "setfacl", "chattr"} {
		rules[n] = ruleRecursiveOwner(n)
	}
	rules["dd"] = ruleDD
	rules["rsync"] = ruleRsync
	rules["sed"] = ruleSed
	for _, n := range []string{"awk", "gawk", "mawk", "nawk", "busybox-awk"} {
		rules[n] = ruleAwk(n)
	}
	rules["tar"] = ruleTar
	rules["find"] = ruleFind
	rules["cd"] = ruleCd
	rules["pushd"] = ruleCd
	rules["popd"] = fixed(ReadOnly, "")
	for _, n := range []string{"grep", "egrep", "fgrep", "zgrep", "zegrep", "zfgrep", "rgrep",
		"head", "tail", "tac", "nl", "rev", "od", "hexdump", "strings", "base64", "base32",
		"basenc", "cut", "column", "paste", "fold", "fmt", "expand", "unexpand", "comm", "join",
		"zcat", "bzcat", "xzcat", "lzcat", "cmp", "diff", "last", "lastb", "who", "users", "less", "more", "most", "pg", "man",
		"vi", "vim", "nvim", "view", "vimdiff", "nano", "pico", "ed", "red", "ex", "emacs", "joe", "mcedit",
		"sensible-editor", "editor", "sudoedit", "visudo", "vipw", "vigr", "awk", "gawk", "mawk", "nawk", "busybox-awk",
		"zstdcat", "lz4cat", "cat", "tee", "truncate", "cp", "install", "ln", "touch", "mkdir", "rmdir", "rm", "unlink", "mv", "chmod", "chown", "chgrp", "setfacl", "chattr", "dd", "rsync", "sed", "tar", "find", "cd", "pushd", "sort", "xxd", "jq"} {
		modelsPaths[n] = true
	}
}

// readerShape says which operands of a reader are files.
type readerShape struct {
	// patternFirst: the first operand is a pattern unless one of patternOpts
	// is given (grep).
	patternFirst bool
	patternOpts  []string
	fileOpts     []string // options whose value is a file it reads
	recursive    func(p parsed) bool
}

var grepShape = readerShape{
	patternFirst: true,
	patternOpts:  []string{"-e", "-f", "--regexp", "--file"},
	fileOpts:     []string{"-f", "--file", "--exclude-from"},
	recursive: func(p parsed) bool {
		if p.has("-r", "-R", "--recursive", "--dereference-recursive") {
			return true
		}
		for _, o := range p.values("-d", "--directories") {
			if o.val == "recurse" {
				return true
			}
		}
		return false
	},
}

// strictReader is read-only only with the options s names and literal
// operands that hold no secret.
func strictReader(name string, s spec, shape *readerShape) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		p := s.parse(args, false)
		files := p.operands
		recursive := false
		if shape != nil {
			for _, o := range p.values(shape.fileOpts...) {
				a.reads(o.word, name)
			}
			if shape.patternFirst && !p.has(shape.patternOpts...) && len(files) > 0 {
				files = files[1:]
			}
			recursive = shape.recursive != nil && shape.recursive(p)
			if recursive && len(files) == 0 {
				files = []word{{val: ".", raw: "."}}
			}
		}
		for _, f := range files {
			if recursive {
				if what, ok := a.secretTree(f); ok {
					a.secret(name + " -r " + what)
				}
			}
			a.reads(f, name)
		}
		switch {
		case len(p.unknown) > 0:
			return cfgf("%s option %s is not on the read-only list", name, p.unknown[0])
		case p.bad:
			return cfgf("%s option without its value", name)
		case p.dynamic:
			return notLiteral(name)
		}
		return ReadOnly, ""
	}
}

// looseReader is for readers none of whose options writes a file or runs a
// program: every word that is not an option is checked as a file it may
// read, option values included.
func looseReader(name string) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		recursive := name == "diff" && (hasShort(args, "r") || hasLong(args, "recursive"))
		for _, w := range args {
			v := w
			if strings.HasPrefix(w.val, "-") {
				_, after, ok := strings.Cut(w.val, "=")
				if !ok {
					continue
				}
				v = word{val: after, dynamic: w.dynamic, glob: w.glob}
			}
			if recursive {
				if what, ok := a.secretTree(v); ok {
					a.secret(name + " -r " + what)
				}
			}
			a.reads(v, name)
		}
		if anyDynamic(args) {
			return notLiteral(name)
		}
		return ReadOnly, ""
	}
}

// ruleDecompressor is for zstdcat and lz4cat, whose options include -o
// FILE: read-only with no option and literal operands, each of which it
// prints.
func ruleDecompressor(name string) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		c, why := ReadOnly, ""
		for _, w := range args {
			if strings.HasPrefix(w.val, "-") && w.val != "-" {
				if c == ReadOnly {
					c, why = cfgf("%s option %s is not on the read-only list", name, w.val)
				}
				continue
			}
			a.reads(w, name)
		}
		if c == ReadOnly && anyDynamic(args) {
			return notLiteral(name)
		}
		return c, why
	}
}

// ruleXxd: xxd -r writes binary, and a second operand is an output file.
func ruleXxd(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "cglosnR", []string{"cols", "groupsize", "len", "seek", "name"}, false)
	if len(p.operands) > 0 {
		a.reads(p.operands[0], "xxd")
	}
	if len(p.operands) > 1 {
		a.writeTo(p.operands[1], "xxd")
		return cfgf("xxd with two operands writes the second")
	}
	if p.has("-r", "-revert") {
		return cfgf("xxd -r writes binary data")
	}
	if p.dynamic {
		return notLiteral("xxd")
	}
	return ReadOnly, ""
}

// ruleJq: jq reads files and, through env and $ENV, the environment; it
// can also load modules from files.
func ruleJq(a *analyzer, args []word, _ int) (Class, string) {
	program := ""
	havePrg := false
	var files []word
	dynamic := false
	for i := 0; i < len(args); i++ {
		w := args[i]
		dynamic = dynamic || w.dynamic
		v := w.val
		switch {
		case v == "--args" || v == "--jsonargs":
			// What follows are values, not files.
			i = len(args)
		case v == "--arg" || v == "--argjson":
			i += 2
		case v == "--slurpfile" || v == "--rawfile":
			if i+2 < len(args) {
				a.reads(args[i+2], "jq "+v)
			}
			i += 2
		case v == "--indent":
			i++
		case v == "-f" || v == "--from-file" || v == "-L" || strings.HasPrefix(v, "-L"):
			return cfgf("jq %s loads a program from a file", v)
		case strings.HasPrefix(v, "-") && v != "-":
		case !havePrg:
			program, havePrg = v, true
		default:
			files = append(files, w)
		}
	}
	for _, f := range files {
		a.reads(f, "jq")
	}
	if hasIdent(program, "env") || hasIdent(program, "ENV") {
		a.secret("jq env prints the environment")
	}
	if hasIdent(program, "import") || hasIdent(program, "include") {
		return cfgf("jq loads modules")
	}
	if dynamic {
		return notLiteral("jq")
	}
	return ReadOnly, ""
}

// ruleSort: -o writes a file and --compress-program runs one.
func ruleSort(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "kotST", []string{"key", "output", "field-separator", "buffer-size", "temporary-directory", "parallel", "random-source", "sort", "batch-size", "files0-from", "compress-program"}, false)
	c, why := ReadOnly, ""
	if hasLong(args, "compress-program") {
		c, why = a.opaqueClass("sort --compress-program runs a program")
	}
	for _, o := range p.opts {
		// getopt_long takes any unambiguous prefix: --out=FILE is --output.
		if o.name == "-o" || len(o.name) > 3 && strings.HasPrefix("--output", o.name) {
			if o.hasVal {
				a.writeTo(o.word, "sort -o")
			}
			if c == ReadOnly {
				c, why = ConfigMutation, "sort -o writes a file"
			}
		}
	}
	if hasShort(args, "o") && c == ReadOnly {
		c, why = ConfigMutation, "sort -o writes a file"
	}
	if hasLong(args, "files0-from") && c == ReadOnly {
		c, why = ConfigMutation, "sort --files0-from reads file names from a file"
	}
	for _, o := range p.values("--random-source") {
		a.reads(o.word, "sort")
	}
	for _, f := range p.operands {
		a.reads(f, "sort")
	}
	if c == ReadOnly && p.dynamic {
		// A word known only at run time may be -o FILE.
		return cfgf("sort has arguments only known at run time (one could be -o)")
	}
	return c, why
}

// rulePager: pagers run commands and editors at a keystroke and open any
// file; they are never read-only.
func rulePager(name string) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		for _, w := range args {
			if !strings.HasPrefix(w.val, "-") {
				a.reads(w, name)
			}
		}
		return cfgf("%s is interactive and can run commands", name)
	}
}

// ruleEditor: editors write files and run commands (vim -c '!cmd', ed's
// !cmd); they are programs the classifier cannot read.
func ruleEditor(name string) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		for _, w := range args {
			if !strings.HasPrefix(w.val, "-") && !strings.HasPrefix(w.val, "+") {
				a.reads(w, name)
				if _, crit, ok := a.criticalWord(w); ok {
					return Destructive, name + " edits " + w.val + ", " + crit
				}
			}
		}
		if c, r := crudeClass(joinRaw(args), a.onHost); c == Destructive {
			return c, r
		}
		return a.opaqueClass(name + " edits files and can run commands")
	}
}

func ruleTee(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "", nil, false)
	c, why := ReadOnly, ""
	for _, f := range p.operands {
		a.writeTo(f, "tee")
		if !f.static() || !safeOutput(cleanPath(f.val)) {
			c, why = ConfigMutation, "tee writes files"
		}
	}
	return c, why
}

func ruleTruncate(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "rs", []string{"reference", "size"}, false)
	for _, f := range p.operands {
		a.writeTo(f, "truncate")
	}
	if p.dynamic {
		if c, r := crudeClass(joinRaw(args), a.onHost); c == Destructive {
			return c, r
		}
	}
	return cfgf("truncate cuts files short")
}

// ruleCopy handles cp, install and ln: the destination is the last operand
// or the -t directory; copying a secret somewhere is noted as revealing it.
func ruleCopy(name, shortVal string, longVal []string) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		p := parseOpts(args, shortVal, longVal, false)
		c, why := cfgf("%s writes files", name)
		if name == "install" && hasLong(args, "strip-program") {
			c, why = a.opaqueClass("install --strip-program runs a program")
		}
		dests := p.values("-t", "--target-directory")
		sources := p.operands
		switch {
		case len(dests) > 0:
		case name == "install" && p.has("-d", "--directory"):
			for _, d := range p.operands {
				a.writeTo(d, name)
			}
			return c, why
		case len(sources) > 1:
			dests = []opt{{word: sources[len(sources)-1]}}
			sources = sources[:len(sources)-1]
		case name == "ln" && len(sources) == 1:
			// ln TARGET makes a link named after TARGET in the working
			// directory.
			dests = []opt{{word: word{val: path.Base(sources[0].val), dynamic: sources[0].dynamic, glob: sources[0].glob}}}
		}
		if p.dynamic {
			// A word known only at run time (xargs's input, say) may shift
			// which operand is the destination: any of them may be.
			for _, s := range p.operands {
				dests = append(dests, opt{word: s})
			}
		}
		recursive := name != "ln" && (hasShort(args, "rRa") || hasLong(args, "recursive", "archive"))
		for _, d := range dests {
			a.writeTo(d.word, name)
			a.intoDir(d.word, sources, recursive, false, name)
		}
		if name != "ln" {
			for _, s := range sources {
				a.reads(s, name)
				if what, ok := a.secretTree(s); ok && recursive {
					a.secret(name + " -r " + what)
				}
			}
		}
		if p.dynamic && c < Destructive {
			if cc, r := crudeClass(joinRaw(args), a.onHost); cc == Destructive {
				return cc, r
			}
		}
		return c, why
	}
}

func ruleTouch(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "drt", []string{"date", "reference", "time"}, false)
	for _, f := range p.operands {
		a.writeTo(f, "touch")
	}
	return cfgf("touch creates files or changes their times")
}

func ruleMkdir(name string) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		p := parseOpts(args, "mZ", []string{"mode", "context"}, false)
		for _, d := range p.operands {
			if _, crit, ok := a.criticalWord(d); ok && (name == "rmdir" || !strings.HasPrefix(crit, "a path")) {
				return Destructive, name + " " + d.val + " changes " + crit
			}
		}
		return cfgf("%s changes directories", name)
	}
}

func ruleRm(a *analyzer, args []word, _ int) (Class, string) {
	if hasShort(args, "rR") || hasLong(args, "recursive") {
		return Destructive, "rm -r deletes recursively"
	}
	if hasLong(args, "no-preserve-root") {
		return Destructive, "rm --no-preserve-root"
	}
	p := parseOpts(args, "", nil, false)
	if p.dynamic && slices.ContainsFunc(p.operands, func(w word) bool { return w.expands }) {
		return Destructive, "rm with arguments only known at run time"
	}
	for _, o := range p.operands {
		if criticalPath(o.val) || (o.glob && criticalPath(path.Dir(o.val))) || criticalFile(o.val) {
			return Destructive, "rm of " + o.val
		}
		if p, crit, ok := a.criticalWord(o); ok {
			return Destructive, fmt.Sprintf("rm of %s, %s", p, crit)
		}
	}
	if p.dynamic {
		return cfgf("rm deletes files matching a pattern")
	}
	return cfgf("rm deletes files")
}

func ruleMv(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "St", []string{"suffix", "target-directory"}, false)
	if p.dynamic {
		return Destructive, "mv with arguments only known at run time"
	}
	for _, o := range p.operands {
		if criticalPath(o.val) || criticalFile(o.val) {
			return Destructive, "mv of " + o.val
		}
		if p, crit, ok := a.criticalWord(o); ok {
			return Destructive, fmt.Sprintf("mv onto or of %s, %s", p, crit)
		}
	}
	for _, o := range p.values("-t", "--target-directory") {
		a.writeTo(o.word, "mv")
	}
	return cfgf("mv moves files")
}

func ruleRecursiveOwner(name string) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		p := parseOpts(args, "", []string{"reference", "from"}, false)
		if hasShort(args, "R") || hasLong(args, "recursive") {
			for _, o := range p.operands {
				if criticalPath(o.val) || o.dynamic {
					return Destructive, fmt.Sprintf("%s -R on %s", name, o.val)
				}
			}
		}
		for _, o := range p.operands {
			if p, crit, ok := a.criticalWord(o); ok {
				return Destructive, fmt.Sprintf("%s on %s, %s", name, p, crit)
			}
		}
		return cfgf("%s changes permissions", name)
	}
}

func ruleDD(a *analyzer, args []word, _ int) (Class, string) {
	for _, w := range args {
		if v, ok := strings.CutPrefix(w.val, "if="); ok {
			a.reads(word{val: v, dynamic: w.dynamic, glob: w.glob}, "dd")
		}
	}
	for _, w := range args {
		if strings.HasPrefix(w.val, "of=") || w.dynamic {
			return Destructive, "dd of= writes raw blocks"
		}
	}
	return cfgf("dd is not on the read-only list")
}

func ruleRsync(a *analyzer, args []word, depth int) (Class, string) {
	if hasLong(args, "delete", "delete-before", "delete-during", "delete-delay", "delete-after", "delete-excluded", "remove-source-files") {
		return Destructive, "rsync --delete removes files"
	}
	if anyDynamic(args) {
		return Destructive, "rsync with arguments only known at run time"
	}
	p := parseOpts(args, "eBfTM", []string{"rsh", "rsync-path", "filter", "temp-dir", "exclude", "include", "exclude-from", "include-from", "files-from", "password-file", "log-file", "remote-option", "partial-dir", "backup-dir", "compare-dest", "copy-dest", "link-dest", "chmod", "chown", "timeout", "bwlimit", "out-format", "port"}, false)
	c, why := cfgf("rsync writes files")
	for _, o := range p.values("-e", "--rsh", "--rsync-path") {
		a.script(o.val, depth+1)
		c, why = a.opaqueClass("rsync runs the remote shell " + o.val)
	}
	if n := len(p.operands); n > 1 {
		a.writeTo(p.operands[n-1], "rsync")
		a.intoDir(p.operands[n-1], p.operands[:n-1], hasShort(args, "ra") || hasLong(args, "recursive", "archive"), true, "rsync")
		for _, s := range p.operands[:n-1] {
			if what, ok := a.secretTree(s); ok && (hasShort(args, "ra") || hasLong(args, "recursive", "archive")) {
				a.secret("rsync " + what)
			}
			a.reads(s, "rsync")
		}
	}
	return c, why
}

// tarRunners are tar's long options that run a program or write a state
// file.
var tarRunners = []string{"to-command", "checkpoint-action", "use-compress-program", "compress-program", "info-script", "new-volume-script", "rsh-command", "rmt-command", "index-file", "listed-incremental", "volno-file"}

var tarSpec = func() spec {
	s := newSpec(
		"-c -x -t -d -r -u -A -v -z -j -J -a -p -h -O -k -m -P -S -W -s -Z -B -i -l -U -o "+
			"--create --extract --get --list --diff --compare --append --update --concatenate --catenate --delete "+
			"--verbose --gzip --gunzip --ungzip --bzip2 --xz --zstd --lzma --lzip --lzop --compress --uncompress --auto-compress "+
			"--numeric-owner --same-permissions --preserve-permissions --dereference --to-stdout "+
			"--keep-old-files --skip-old-files --keep-newer-files --absolute-names --sparse --full-time --totals "+
			"--no-same-owner --no-same-permissions --same-owner --overwrite --overwrite-dir --wildcards "+
			"--no-wildcards --anchored --no-anchored --ignore-case --no-ignore-case --no-recursion --recursion "+
			"--one-file-system --acls --no-acls --xattrs --no-xattrs --selinux --no-selinux --force-local "+
			"--exclude-vcs --exclude-backups --exclude-caches --show-transformed-names --check-links "+
			"--ignore-zeros --ignore-failed-read --utc --warning --no-auto-compress --interactive --confirmation",
		"-f -C -b -X -H -K -N -V -T -g -F -I -L "+
			"--file --directory --blocking-factor --record-size --exclude --exclude-from --strip-components "+
			"--transform --xform --owner --group --mode --mtime --format --label --starting-file --newer "+
			"--after-date --newer-mtime --files-from --tape-length")
	s.optional = set("--checkpoint", "--occurrence", "--totals", "--warning", "--exclude", "--backup", "--one-top-level", "--sort", "--quoting-style")
	return s
}()

// ruleTar: listing an archive is read-only; extracting writes files,
// creating one writes the archive, and several options run programs.
func ruleTar(a *analyzer, args []word, depth int) (Class, string) {
	args = slices.Clone(args)
	// Old style: the first word is a cluster of letters without a dash.
	if len(args) > 0 && args[0].static() && args[0].val != "" && !strings.HasPrefix(args[0].val, "-") &&
		allBytes(args[0].val, func(c byte) bool { return isAlnum(c) }) {
		args[0].val = "-" + args[0].val
	}
	p := tarSpec.parse(args, false)
	if hasLong(args, "remove-files") {
		return Destructive, "tar --remove-files deletes the files it archives"
	}
	if p.has("-P") || hasLong(args, "absolute-names") {
		return Destructive, "tar -P (--absolute-names) keeps the leading / of member names, so it reads and writes anywhere on the system"
	}
	if c, why, ok := a.tarRunner(p, depth); ok {
		return c, why
	}
	archives := p.values("-f", "--file")
	for _, f := range archives {
		if strings.Contains(f.val, ":") && !p.has("--force-local") {
			return a.opaqueClass("tar -f " + f.val + " runs rsh for a remote archive")
		}
	}
	for _, o := range p.values("-X", "--exclude-from", "-T", "--files-from") {
		a.reads(o.word, "tar")
	}
	extract := p.has("-x", "--extract", "--get")
	create := p.has("-c", "--create", "-r", "--append", "-u", "--update", "-A", "--concatenate", "--catenate", "--delete")
	toStdout := p.has("-O", "--to-stdout")
	c, why := ReadOnly, ""
	switch {
	case extract && !toStdout:
		return a.tarExtract(p)
	case create:
		c, why = a.tarCreate(p, archives)
	case toStdout:
		a.tarPrints(p, archives)
	default:
		// Listing prints names only: a guest backup may be listed.
		for _, f := range archives {
			if _, ok := a.imageWord(f.word); !ok {
				a.reads(f.word, "tar")
			}
		}
	}
	switch {
	case c > ReadOnly:
		return c, why
	case len(p.unknown) > 0:
		return cfgf("tar option %s is not on the read-only list", p.unknown[0])
	case p.bad:
		return cfgf("tar option without its value")
	case p.dynamic:
		return notLiteral("tar")
	case p.has("-T", "--files-from"):
		return cfgf("tar -T reads file names from a file")
	}
	return ReadOnly, ""
}

// tarRunner judges the options that make tar run a program; ok is false
// when none is given.
func (a *analyzer) tarRunner(p parsed, depth int) (c Class, why string, ok bool) {
	for _, o := range p.opts {
		name := strings.TrimPrefix(o.name, "--")
		if !strings.HasPrefix(o.name, "--") || len(name) < 3 {
			continue
		}
		for _, r := range tarRunners {
			if !strings.HasPrefix(r, name) {
				continue
			}
			if o.hasVal && o.val != "" {
				cmd := o.val
				if r == "checkpoint-action" {
					var ok bool
					if _, cmd, ok = strings.Cut(o.val, "exec="); !ok {
						cmd = ""
					}
				}
				if cmd != "" {
					a.script(cmd, depth+1)
				}
			}
			c, why = a.opaqueClass("tar --" + r + " runs a program")
			return c, why, true
		}
	}
	if p.has("-I", "-F", "-g") {
		for _, o := range p.values("-I", "-F") {
			a.script(o.val, depth+1)
		}
		c, why = a.opaqueClass("tar -I, -F or -g runs a program or writes a state file")
		return c, why, true
	}
	return ReadOnly, "", false
}

// tarExtract judges extracting an archive to files. An archive's members
// may be any path below the directory it extracts into (etc/shadow,
// .ssh/authorized_keys), so extracting into a directory that holds a file
// the host cannot lose is destructive: /, /etc, /var, /usr, /boot, /root,
// and the login directories a script starts in when it names none with -C.
func (a *analyzer) tarExtract(p parsed) (Class, string) {
	for _, u := range p.unknown {
		if len(u) >= len("--dir") && strings.HasPrefix("--directory", u) {
			return Destructive, "tar -x with " + u + ", an abbreviated --directory: where it extracts is not clear"
		}
	}
	dirs := p.values("-C", "--directory")
	if len(dirs) == 0 {
		dirs = []opt{{word: word{val: ".", raw: "."}}}
	}
	for _, d := range dirs {
		v := d.word.val
		switch {
		case !d.word.static():
			return Destructive, "tar -x extracts into a directory only known at run time (" + d.word.raw + ")"
		case a.cwdUnknown && !strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "~"):
			return Destructive, "tar -x extracts into a working directory only known at run time; name the directory with -C"
		}
		for _, c := range a.resolve(v) {
			if why, ok := criticalWrite(c, a.onHost); ok {
				return Destructive, "tar -x extracts into " + c + ", " + why
			}
			if c == "/" {
				return Destructive, "tar -x extracts over the whole system (/)"
			}
			for _, e := range criticalExamples {
				if under(e, c) {
					hint := ""
					if len(p.values("-C", "--directory")) == 0 {
						hint = "; name another directory with -C"
					}
					return Destructive, "tar -x extracts into " + c + ", where an archive may replace " + e + hint
				}
			}
		}
	}
	return cfgf("tar -x extracts files")
}

// tarPrints notes what tar -O (--to-stdout) prints: the files of a guest
// backup, which hold the guest's password hashes and keys, and members
// whose names are secret files (./etc/shadow).
func (a *analyzer) tarPrints(p parsed, archives []opt) {
	for _, f := range archives {
		if what, ok := a.imageWord(f.word); ok {
			a.secret("tar -O prints the files of " + what)
		} else {
			a.reads(f.word, "tar")
		}
	}
	for _, m := range p.operands {
		name := path.Clean("/" + strings.TrimPrefix(m.val, "./"))
		if secretPath(name) || (m.glob || p.has("--wildcards")) && globMaySecret(name) {
			a.secret("tar -O prints " + m.val + " from the archive")
		}
	}
}

// tarCreate notes what creating an archive writes and reads.
func (a *analyzer) tarCreate(p parsed, archives []opt) (Class, string) {
	c, why := ReadOnly, ""
	for _, f := range archives {
		a.writeTo(f.word, "tar")
		if !f.word.static() || f.val != "-" && !safeOutput(cleanPath(f.val)) {
			c, why = cfgf("tar writes the archive %s", f.val)
		}
	}
	for _, src := range p.operands {
		if what, ok := a.secretTree(src); ok {
			a.secret("tar " + what)
		}
		a.reads(src, "tar")
	}
	return c, why
}

// ruleFind: -exec and kin run a command per file, with each file name in
// place of {}; -delete deletes; -fprint and kin write files.
func ruleFind(a *analyzer, args []word, depth int) (Class, string) {
	c, why := ReadOnly, ""
	for i := 0; i < len(args); i++ {
		switch v := args[i].val; v {
		case "-delete":
			return Destructive, "find -delete deletes files"
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j].val != ";" && args[j].val != "+" {
				j++
			}
			inner := slices.Clone(args[i+1 : j])
			for k, w := range inner {
				if strings.Contains(w.val, "{}") {
					inner[k] = word{val: w.val, raw: w.raw, dynamic: true, expands: true}
				}
			}
			if len(inner) > 0 {
				base, _ := commandBase(inner[0].val)
				switch base {
				case "rm", "shred", "unlink", "rmdir", "wipefs", "truncate":
					return Destructive, "find " + v + " " + base + " deletes files in bulk"
				}
				a.argv(inner, depth)
			}
			c, why = ConfigMutation, "find "+v+" runs a command for each file"
			i = j
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			if i+1 < len(args) {
				a.writeTo(args[i+1], "find "+v)
			}
			return cfgf("find %s writes a file", v)
		case "-files0-from":
			c, why = cfgf("find -files0-from reads names from a file")
		}
	}
	if slices.ContainsFunc(args, func(w word) bool { return w.expands }) {
		return Destructive, "find with arguments only known at run time (one could be -delete)"
	}
	if c == ReadOnly && anyDynamic(args) {
		return cfgf("find with a pattern the shell expands")
	}
	return c, why
}

// ruleCd follows the working directory, so relative paths read or written
// later are judged where they are.
func ruleCd(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "", nil, false)
	dirs := []string{"~"}
	if len(p.operands) > 0 {
		dirs = nil
		// With words known only at run time, any static one may be the
		// directory.
		for _, o := range p.operands {
			if o.static() && o.val != "-" {
				dirs = append(dirs, o.val)
			}
		}
	}
	for _, d := range dirs {
		for _, c := range a.resolve(d) {
			if !slices.Contains(a.cwds, c) {
				a.cwds = append(a.cwds, c)
			}
		}
	}
	if p.dynamic {
		a.cwdUnknown = true
		return notLiteral("cd")
	}
	return ReadOnly, ""
}
