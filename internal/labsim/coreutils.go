package labsim

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

var hostBuiltins, guestBuiltins map[string]builtin

// The tables are filled in init because command -v looks them up.
func init() {
	common := map[string]builtin{
		"true":     {run: func(*call) int { return 0 }},
		"false":    {run: func(*call) int { return 1 }},
		":":        {run: func(*call) int { return 0 }},
		"echo":     {run: echoCmd},
		"printf":   {run: printfCmd},
		"cat":      {run: catCmd, stdin: noOperands},
		"grep":     {run: grepCmd, stdin: func(a []string) bool { return len(operands(a, "e", "f", "m", "A", "B", "C")) < 2 }},
		"head":     {run: headTailCmd, stdin: func(a []string) bool { return len(operands(a, "n", "c")) == 0 }},
		"tail":     {run: headTailCmd, stdin: func(a []string) bool { return len(operands(a, "n", "c")) == 0 }},
		"wc":       {run: wcCmd, stdin: noOperands},
		"tee":      {run: teeCmd, stdin: func([]string) bool { return true }},
		"hostname": {run: hostnameCmd},
		"uptime":   {run: uptimeCmd},
		"free":     {run: freeCmd},
		"df":       {run: dfCmd},
		"uname":    {run: unameCmd},
		"whoami":   {run: func(c *call) int { c.outf("root\n"); return 0 }},
		"id":       {run: func(c *call) int { c.outf("uid=0(root) gid=0(root) groups=0(root)\n"); return 0 }},
		"date":     {run: dateCmd},
		"command":  {run: commandCmd},
		"which":    {run: whichCmd},
		"type":     {run: whichCmd},
		"cd":       {run: func(*call) int { return 0 }},
		"export":   {run: func(*call) int { return 0 }},
		"sync":     {run: func(*call) int { return 0 }},
		"touch":    {run: touchCmd},
		"rm":       {run: rmCmd},
		"mkdir":    {run: func(*call) int { return 0 }},
		"chmod":    {run: func(*call) int { return 0 }},
		"getent":   {run: getentCmd},
		"nslookup": {run: nslookupCmd},
		"host":     {run: hostCmd},
		"dig":      {run: digCmd},
		"ping":     {run: pingCmd},
		"curl":     {run: curlCmd},
	}
	hostBuiltins = maps.Clone(common)
	maps.Copy(hostBuiltins, map[string]builtin{
		"pct":        {run: pctCmd},
		"qm":         {run: qmCmd},
		"pvesh":      {run: pveshCmd},
		"pveam":      {run: pveamCmd},
		"pvesm":      {run: pvesmCmd},
		"pveversion": {run: func(c *call) int { c.outf("%s\n", pveVersion); return 0 }},
		"ha-manager": {run: haManagerCmd},
		"labsim":     {run: labsimCommand, unlocked: true},
		"apt-get":    {run: nodeAptCmd},
		"apt":        {run: nodeAptCmd},
		"shutdown":   {run: shutdownCmd},
		"journalctl": {run: nodeJournalctl},
	})
	guestBuiltins = maps.Clone(common)
	maps.Copy(guestBuiltins, map[string]builtin{
		"systemctl":  {run: systemctlCmd},
		"service":    {run: serviceCmd},
		"apt-get":    {run: aptCmd},
		"apt":        {run: aptCmd},
		"dpkg":       {run: dpkgCmd},
		"journalctl": {run: journalctlCmd},
		"logger":     {run: loggerCmd},
		"ss":         {run: ssCmd},
	})
}

func (e *shellEnv) builtins() map[string]builtin {
	if e.vmid == 0 {
		return hostBuiltins
	}
	return guestBuiltins
}

// operands drops flags from args; flags named in withArg take the next
// argument as their value.
func operands(args []string, withArg ...string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i+1:]...)
		}
		if len(a) > 1 && a[0] == '-' {
			if _, err := strconv.Atoi(a[1:]); err == nil {
				continue // head -5
			}
			if slices.Contains(withArg, strings.TrimLeft(a, "-")) {
				i++
			}
			continue
		}
		out = append(out, a)
	}
	return out
}

func noOperands(args []string) bool {
	ops := operands(args)
	return len(ops) == 0 || slices.Contains(ops, "-")
}

func echoCmd(c *call) int {
	args := c.args
	newline, escapes := true, c.shell == "sh" // dash's echo always interprets escapes
	for len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' && strings.Trim(args[0][1:], "neE") == "" {
		for _, ch := range args[0][1:] {
			switch ch {
			case 'n':
				newline = false
			case 'e':
				escapes = true
			case 'E':
				escapes = false
			}
		}
		args = args[1:]
	}
	s := strings.Join(args, " ")
	if escapes {
		s = unescape(s)
	}
	c.out.WriteString(s)
	if newline {
		c.out.WriteByte('\n')
	}
	return 0
}

func unescape(s string) string {
	r := strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\\`, `\`, `\r`, "\r", `\a`, "\a", `\e`, "\x1b", `\0`, "\x00")
	return r.Replace(s)
}

func printfCmd(c *call) int {
	if len(c.args) == 0 {
		c.errf("printf: usage: printf [-v var] format [arguments]\n")
		return 2
	}
	format, args := c.args[0], c.args[1:]
	status := 0
	for {
		used := 0
		var b strings.Builder
		for i := 0; i < len(format); i++ {
			ch := format[i]
			if ch == '\\' && i+1 < len(format) {
				b.WriteString(unescape(format[i : i+2]))
				i++
				continue
			}
			if ch != '%' || i+1 == len(format) {
				b.WriteByte(ch)
				continue
			}
			j := i + 1
			for j < len(format) && strings.IndexByte("-+ #0123456789.", format[j]) >= 0 {
				j++
			}
			if j == len(format) {
				b.WriteString(format[i:])
				break
			}
			spec, verb := format[i+1:j], format[j]
			i = j
			if !sanePrintfSpec(spec) {
				c.errf("%s: printf: %%%s%c: invalid format\n", shellName(c.shell), spec, verb)
				return 1
			}
			if verb == '%' {
				b.WriteByte('%')
				continue
			}
			arg := ""
			if used < len(args) {
				arg = args[used]
			}
			used++
			switch verb {
			case 's':
				fmt.Fprintf(&b, "%"+spec+"s", arg)
			case 'b':
				fmt.Fprintf(&b, "%"+spec+"s", unescape(arg))
			case 'd', 'i':
				n, err := strconv.Atoi(cmpStr(arg, "0"))
				if err != nil {
					c.errf("%s: printf: %s: invalid number\n", shellName(c.shell), arg)
					status = 1
				}
				fmt.Fprintf(&b, "%"+spec+"d", n)
			case 'q':
				b.WriteString(quote(arg))
			default:
				b.WriteString(format[i-len(spec)-1 : i+1])
			}
		}
		c.out.WriteString(b.String())
		if used == 0 || used >= len(args) {
			return status
		}
		args = args[used:]
	}
}

// sanePrintfSpec refuses widths that would make printf allocate without bound.
func sanePrintfSpec(spec string) bool {
	for _, part := range strings.FieldsFunc(spec, func(r rune) bool { return r < '0' || r > '9' }) {
		if n, err := strconv.Atoi(part); err != nil || n > 4096 {
			return false
		}
	}
	return true
}

func cmpStr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// inputs returns the contents of the file operands, or standard input.
func (c *call) inputs(ops []string) ([]string, int) {
	if len(ops) == 0 {
		return []string{c.stdin}, 0
	}
	var out []string
	code := 0
	for _, p := range ops {
		if p == "-" {
			out = append(out, c.stdin)
			continue
		}
		data, ok := c.env.sim.readFileLocked(c.env, c.abs(p))
		if !ok {
			c.errf("%s: %s: No such file or directory\n", c.name, p)
			code = 1
			continue
		}
		out = append(out, data)
	}
	return out, code
}

func catCmd(c *call) int {
	data, code := c.inputs(operands(c.args))
	for _, d := range data {
		c.out.WriteString(d)
	}
	return code
}

func grepCmd(c *call) int {
	var quiet, invert, fold, count, fixed bool
	var pattern string
	var ops []string
	havePattern := false
	for i := 0; i < len(c.args); i++ {
		a := c.args[i]
		if a == "-e" && i+1 < len(c.args) {
			pattern, havePattern = c.args[i+1], true
			i++
			continue
		}
		if len(a) > 1 && a[0] == '-' {
			for _, ch := range a[1:] {
				switch ch {
				case 'q':
					quiet = true
				case 'v':
					invert = true
				case 'i':
					fold = true
				case 'c':
					count = true
				case 'F':
					fixed = true
				}
			}
			continue
		}
		if !havePattern {
			pattern, havePattern = a, true
			continue
		}
		ops = append(ops, a)
	}
	if !havePattern {
		c.errf("Usage: grep [OPTION]... PATTERNS [FILE]...\nTry 'grep --help' for more information.\n")
		return 2
	}
	if fixed {
		pattern = regexp.QuoteMeta(pattern)
	}
	if fold {
		pattern = "(?i)" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		re = regexp.MustCompile(regexp.QuoteMeta(pattern))
	}
	data, code := c.inputs(ops)
	n := 0
	for _, d := range data {
		for _, line := range lines(d) {
			if re.MatchString(line) != invert {
				n++
				if !quiet && !count {
					c.outf("%s\n", line)
				}
			}
		}
	}
	if count && !quiet {
		c.outf("%d\n", n)
	}
	if code != 0 {
		return 2
	}
	if n == 0 {
		return 1
	}
	return 0
}

func lines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func headTailCmd(c *call) int {
	n := 10
	for i := 0; i < len(c.args); i++ {
		a := c.args[i]
		switch {
		case a == "-n" && i+1 < len(c.args):
			n, _ = strconv.Atoi(strings.TrimPrefix(c.args[i+1], "+"))
			i++
		case strings.HasPrefix(a, "-n"):
			n, _ = strconv.Atoi(a[2:])
		case len(a) > 1 && a[0] == '-':
			if v, err := strconv.Atoi(a[1:]); err == nil {
				n = v
			}
		}
	}
	data, code := c.inputs(operands(c.args, "n", "c"))
	for _, d := range data {
		ls := lines(d)
		if c.name == "head" {
			ls = ls[:min(n, len(ls))]
		} else {
			ls = ls[max(0, len(ls)-n):]
		}
		for _, l := range ls {
			c.outf("%s\n", l)
		}
	}
	return code
}

func wcCmd(c *call) int {
	data, code := c.inputs(operands(c.args))
	all := strings.Join(data, "")
	nl, nw, nc := strings.Count(all, "\n"), len(strings.Fields(all)), len(all)
	var parts []string
	for _, a := range c.args {
		switch a {
		case "-l":
			parts = append(parts, strconv.Itoa(nl))
		case "-w":
			parts = append(parts, strconv.Itoa(nw))
		case "-c":
			parts = append(parts, strconv.Itoa(nc))
		}
	}
	if len(parts) == 0 {
		parts = []string{strconv.Itoa(nl), strconv.Itoa(nw), strconv.Itoa(nc)}
	}
	c.outf("%s\n", strings.Join(parts, " "))
	return code
}

func teeCmd(c *call) int {
	appendMode := slices.Contains(c.args, "-a")
	files := c.env.sim.filesLocked(c.env)
	for _, p := range operands(c.args) {
		p = c.abs(p)
		if readOnlyPath(p) {
			c.errf("tee: %s: Read-only file system\n", p)
			continue
		}
		if appendMode {
			files[p] += c.stdin
		} else {
			files[p] = c.stdin
		}
		c.dirty = true
	}
	c.out.WriteString(c.stdin)
	return 0
}

func touchCmd(c *call) int {
	files := c.env.sim.filesLocked(c.env)
	for _, p := range operands(c.args) {
		p = c.abs(p)
		if _, ok := files[p]; !ok {
			files[p] = ""
			c.dirty = true
		}
	}
	return 0
}

func rmCmd(c *call) int {
	force := slices.ContainsFunc(c.args, func(a string) bool { return strings.HasPrefix(a, "-") && strings.Contains(a, "f") })
	files := c.env.sim.filesLocked(c.env)
	code := 0
	for _, p := range operands(c.args) {
		p = c.abs(p)
		if _, ok := files[p]; !ok {
			if !force {
				c.errf("rm: cannot remove '%s': No such file or directory\n", p)
				code = 1
			}
			continue
		}
		delete(files, p)
		c.dirty = true
	}
	return code
}

func hostnameCmd(c *call) int {
	if c.ct == nil {
		c.outf("%s\n", c.env.host)
		return 0
	}
	if slices.Contains(c.args, "-I") || slices.Contains(c.args, "-i") {
		c.outf("%s \n", c.ct.addr())
		return 0
	}
	c.outf("%s\n", c.ct.Conf.Hostname)
	return 0
}

func uptimeCmd(c *call) int {
	since := c.hs.Booted
	users := 1
	if c.ct != nil {
		since, users = c.ct.StartedAt, 0
	}
	up := c.now.Sub(since)
	if slices.Contains(c.args, "-p") {
		c.outf("up %s\n", prettyUp(up))
		return 0
	}
	c.outf(" %s up %s,  %d user%s,  load average: %s\n", c.now.UTC().Format("15:04:05"), clockUp(up), users, plural(users), c.loadavg())
	return 0
}

func (c *call) loadavg() string {
	n := 0
	if c.ct != nil {
		for _, s := range c.ct.Guest.Services {
			if s.Active {
				n++
			}
		}
	} else {
		for _, ct := range c.hs.Containers {
			if ct.running() {
				n += 4
			}
		}
	}
	return fmt.Sprintf("%.2f, %.2f, %.2f", float64(n)*0.03, float64(n)*0.025, float64(n)*0.02)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// clockUp formats an uptime the way uptime(1) does: "3 days,  4:05" or "12 min".
func clockUp(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	days := int(d.Hours()) / 24
	h, m := int(d.Hours())%24, int(d.Minutes())%60
	var s string
	if days > 0 {
		s = fmt.Sprintf("%d day%s, ", days, plural(days))
	}
	if h > 0 {
		return s + fmt.Sprintf("%2d:%02d", h, m)
	}
	return s + fmt.Sprintf("%d min", m)
}

func prettyUp(d time.Duration) string {
	days := int(d.Hours()) / 24
	h, m := int(d.Hours())%24, int(d.Minutes())%60
	var parts []string
	if days > 0 {
		parts = append(parts, fmt.Sprintf("%d day%s", days, plural(days)))
	}
	if h > 0 {
		parts = append(parts, fmt.Sprintf("%d hour%s", h, plural(h)))
	}
	if m > 0 || len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("%d minute%s", m, plural(m)))
	}
	return strings.Join(parts, ", ")
}

func freeCmd(c *call) int {
	totalMB, swapMB := 65536, 8192
	usedMB := 3100
	if c.ct != nil {
		totalMB, swapMB = c.ct.Conf.MemoryMB, c.ct.Conf.SwapMB
		usedMB = c.ct.memUsedMB()
	} else {
		for _, ct := range c.hs.Containers {
			if ct.running() {
				usedMB += ct.Conf.MemoryMB / 3
			}
		}
	}
	cache := min(totalMB-usedMB, totalMB/8)
	free := totalMB - usedMB - cache
	shared := 1
	avail := totalMB - usedMB
	unit := "k"
	for _, a := range c.args {
		switch a {
		case "-m", "--mega":
			unit = "m"
		case "-g", "--giga":
			unit = "g"
		case "-h", "--human":
			unit = "h"
		}
	}
	f := func(mb int) string {
		switch unit {
		case "m":
			return strconv.Itoa(mb)
		case "g":
			return strconv.Itoa(mb / 1024)
		case "h":
			if mb >= 1024 {
				return fmt.Sprintf("%.1fGi", float64(mb)/1024)
			}
			return fmt.Sprintf("%dMi", mb)
		}
		return strconv.Itoa(mb * 1024)
	}
	c.outf("%15s %11s %11s %11s %11s %11s\n", "total", "used", "free", "shared", "buff/cache", "available")
	c.outf("%-7s %7s %11s %11s %11s %11s %11s\n", "Mem:", f(totalMB), f(usedMB), f(free), f(shared), f(cache), f(avail))
	c.outf("%-7s %7s %11s %11s\n", "Swap:", f(swapMB), f(0), f(swapMB))
	return 0
}

// fsRow is one file system df lists.
type fsRow struct {
	dev          string
	sizeMB, used int
	mount        string
}

func dfCmd(c *call) int {
	human := slices.ContainsFunc(c.args, func(a string) bool { return strings.HasPrefix(a, "-") && strings.Contains(a, "h") })
	rows := c.mounts()
	if ops := operands(c.args); len(ops) > 0 {
		var keep []fsRow
		for _, r := range rows {
			for _, o := range ops {
				if c.abs(o) == r.mount {
					keep = append(keep, r)
				}
			}
		}
		if len(keep) == 0 && len(rows) > 0 {
			keep = rows[:1]
			if c.ct == nil {
				keep = rows[2:3]
			}
		}
		rows = keep
	}
	width := 0
	for _, r := range rows {
		width = max(width, len(r.dev))
	}
	width = max(width, len("Filesystem"))
	if human {
		c.outf("%-*s  %4s  %4s %5s %4s %s\n", width, "Filesystem", "Size", "Used", "Avail", "Use%", "Mounted on")
	} else {
		c.outf("%-*s %9s %9s %9s %4s %s\n", width, "Filesystem", "1K-blocks", "Used", "Available", "Use%", "Mounted on")
	}
	for _, r := range rows {
		pct := 0
		if r.sizeMB > 0 {
			pct = (r.used*100 + r.sizeMB - 1) / r.sizeMB
		}
		if human {
			c.outf("%-*s  %4s  %4s %5s %3d%% %s\n", width, r.dev, humanMB(r.sizeMB), humanMB(r.used), humanMB(r.sizeMB-r.used), pct, r.mount)
		} else {
			c.outf("%-*s %9d %9d %9d %3d%% %s\n", width, r.dev, r.sizeMB*1024, r.used*1024, (r.sizeMB-r.used)*1024, pct, r.mount)
		}
	}
	return 0
}

// mounts is what df lists: a container's root disk and tmpfs, or the node's.
func (c *call) mounts() []fsRow {
	if c.ct != nil {
		size, used := c.ct.Conf.DiskGB*1024, c.ct.diskUsedMB()
		return []fsRow{
			{fmt.Sprintf("/dev/mapper/pve-vm--%d--disk--0", c.ct.VMID), size, used, "/"},
			{"none", 1, 0, "/dev"},
			{"tmpfs", c.ct.Conf.MemoryMB / 2, 0, "/dev/shm"},
			{"tmpfs", c.ct.Conf.MemoryMB / 5, 1, "/run"},
			{"tmpfs", 5, 0, "/run/lock"},
		}
	}
	used := 11800
	for _, ct := range c.hs.Containers {
		used += ct.Conf.DiskGB * 40
	}
	return []fsRow{
		{"udev", 32160, 0, "/dev"},
		{"tmpfs", 6440, 2, "/run"},
		{"/dev/mapper/pve-root", 96202, used, "/"},
		{"tmpfs", 32200, 46, "/dev/shm"},
		{"tmpfs", 5, 0, "/run/lock"},
		{"/dev/nvme0n1p2", 1022, 12, "/boot/efi"},
		{"/dev/fuse", 128, 1, "/etc/pve"},
		{"tmpfs", 6440, 0, "/run/user/0"},
	}
}

// humanMB formats megabytes as df -h does: 7.8G, 492M, 0.
func humanMB(mb int) string {
	switch {
	case mb == 0:
		return "0"
	case mb >= 1024*1024:
		return sizeUnit(float64(mb)/(1024*1024), "T")
	case mb >= 1024:
		return sizeUnit(float64(mb)/1024, "G")
	default:
		return strconv.Itoa(mb) + "M"
	}
}

func sizeUnit(v float64, unit string) string {
	if v < 10 {
		return fmt.Sprintf("%.1f%s", v, unit)
	}
	return fmt.Sprintf("%.0f%s", v, unit)
}

func unameCmd(c *call) int {
	node := c.env.host
	if c.ct != nil {
		node = c.ct.Conf.Hostname
	}
	switch {
	case slices.Contains(c.args, "-a"):
		c.outf("Linux %s %s #1 SMP PREEMPT_DYNAMIC PMX 6.8.12-2 (2024-09-05T10:03Z) x86_64 GNU/Linux\n", node, kernelRelease)
	case slices.Contains(c.args, "-r"):
		c.outf("%s\n", kernelRelease)
	case slices.Contains(c.args, "-n"):
		c.outf("%s\n", node)
	case slices.Contains(c.args, "-m"):
		c.outf("x86_64\n")
	default:
		c.outf("Linux\n")
	}
	return 0
}

func dateCmd(c *call) int {
	t := c.now.UTC()
	for _, a := range c.args {
		switch {
		case strings.HasPrefix(a, "+"):
			c.outf("%s\n", strftime(a[1:], t))
			return 0
		case a == "-Is" || a == "--iso-8601=seconds":
			c.outf("%s\n", t.Format("2006-01-02T15:04:05-07:00"))
			return 0
		case a == "-R" || a == "--rfc-email":
			c.outf("%s\n", t.Format(time.RFC1123Z))
			return 0
		}
	}
	c.outf("%s\n", t.Format("Mon Jan _2 15:04:05 MST 2006"))
	return 0
}

func strftime(f string, t time.Time) string {
	r := strings.NewReplacer(
		"%Y", t.Format("2006"), "%m", t.Format("01"), "%d", t.Format("02"),
		"%H", t.Format("15"), "%M", t.Format("04"), "%S", t.Format("05"),
		"%F", t.Format("2006-01-02"), "%T", t.Format("15:04:05"),
		"%s", strconv.FormatInt(t.Unix(), 10), "%z", t.Format("-0700"), "%Z", t.Format("MST"),
		"%%", "%",
	)
	return r.Replace(f)
}
