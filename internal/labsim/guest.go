package labsim

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file holds the programs only a container has: systemd, apt, dpkg,
// the journal and ss.

func journalctlCmd(c *call) int {
	var units []string
	n := -1
	follow := false
	for i := 0; i < len(c.args); i++ {
		a := c.args[i]
		switch {
		case (a == "-u" || a == "--unit") && i+1 < len(c.args):
			units = append(units, unitName(c.args[i+1]))
			i++
		case strings.HasPrefix(a, "--unit="):
			units = append(units, unitName(strings.TrimPrefix(a, "--unit=")))
		case strings.HasPrefix(a, "-u") && len(a) > 2:
			units = append(units, unitName(a[2:]))
		case (a == "-n" || a == "--lines") && i+1 < len(c.args):
			n, _ = strconv.Atoi(c.args[i+1])
			i++
		case strings.HasPrefix(a, "--lines="):
			n, _ = strconv.Atoi(strings.TrimPrefix(a, "--lines="))
		case strings.HasPrefix(a, "-n") && len(a) > 2:
			n, _ = strconv.Atoi(a[2:])
		case a == "-f" || a == "--follow":
			follow = true
		case a == "-e":
			n = 1000
		}
	}
	var sel []journalLine
	for _, l := range c.ct.Journal {
		if len(units) == 0 || slices.Contains(units, l.Unit) {
			sel = append(sel, l)
		}
	}
	if follow && n < 0 {
		n = 10
	}
	if n >= 0 && len(sel) > n {
		sel = sel[len(sel)-n:]
	}
	if len(sel) == 0 {
		c.outf("-- No entries --\n")
	}
	for _, l := range sel {
		c.outf("%s\n", c.journalLine(l))
	}
	c.block = follow
	return 0
}

// loggerCmd is util-linux's logger: it writes its arguments as one line
// to the container's journal, under -t's tag (default the user, root).
// The line belongs to no unit, so only the whole journal shows it.
func loggerCmd(c *call) int {
	tag := "root"
	var words []string
	for i := 0; i < len(c.args); i++ {
		switch a := c.args[i]; {
		case (a == "-t" || a == "--tag") && i+1 < len(c.args):
			tag = c.args[i+1]
			i++
		case (a == "-p" || a == "--priority") && i+1 < len(c.args):
			i++
		default:
			words = append(words, a)
		}
	}
	c.ct.journal(c.now, "", tag, strings.Join(words, " "))
	c.dirty = true
	return 0
}

func (c *call) journalLine(l journalLine) string {
	return fmt.Sprintf("%s %s %s: %s", l.Time.UTC().Format("Jan 02 15:04:05"), c.ct.Conf.Hostname, l.Ident, l.Msg)
}

func ssCmd(c *call) int {
	// Every simulated listener is TCP, so -t and -u change nothing.
	var listening, procs bool
	for _, a := range c.args {
		if !strings.HasPrefix(a, "-") || strings.HasPrefix(a, "--") {
			continue
		}
		listening = listening || strings.ContainsAny(a, "la")
		procs = procs || strings.Contains(a, "p")
	}
	c.outf("%-6s %-6s %-6s %20s %20s %s\n", "State", "Recv-Q", "Send-Q", "Local Address:Port", "Peer Address:Port", "Process")
	if !listening {
		return 0
	}
	svcs := slices.Collect(maps.Values(c.ct.Guest.Services))
	slices.SortFunc(svcs, func(a, b svcState) int { return a.Port - b.Port })
	for _, s := range svcs {
		if !s.Active || s.Port == 0 {
			continue
		}
		proc := ""
		if procs {
			proc = fmt.Sprintf("users:((\"%s\",pid=%d,fd=3))", s.Name, s.PID)
		}
		c.outf("%-6s %-6d %-6d %20s %20s %s\n", "LISTEN", 0, 4096, fmt.Sprintf("0.0.0.0:%d", s.Port), "0.0.0.0:*", proc)
	}
	return 0
}

// systemd

func (c *call) unit(name string) (svcState, bool) {
	s, ok := c.ct.Guest.Services[unitName(name)]
	return s, ok
}

func systemctlCmd(c *call) int {
	var verb string
	var units []string
	quiet, now, all := false, false, false
	for _, a := range c.args {
		switch {
		case a == "-q" || a == "--quiet":
			quiet = true
		case a == "--now":
			now = true
		case a == "-a" || a == "--all":
			all = true
		case strings.HasPrefix(a, "-"):
		case verb == "":
			verb = a
		default:
			units = append(units, unitName(a))
		}
	}
	switch verb {
	case "", "list-units":
		return c.listUnits(all)
	case "daemon-reload", "daemon-reexec":
		return 0
	case "status":
		if len(units) == 0 {
			c.outf("● %s\n    State: running\n    Units: %d loaded (incl. loaded aliases)\n     Jobs: 0 queued\n   Failed: 0 units\n    Since: %s\n  systemd: 252.31-1~deb12u1\n",
				c.ct.Conf.Hostname, 180+len(c.ct.Guest.Services), systemdTime(c.ct.StartedAt, c.now))
			return 0
		}
		return c.unitStatus(units)
	}
	if len(units) == 0 {
		c.errf("Too few arguments.\n")
		return 1
	}
	switch verb {
	case "is-active", "is-failed":
		return c.unitActive(verb, units, quiet)
	case "is-enabled":
		return c.unitEnabled(units, quiet)
	case "start", "stop", "restart", "try-restart", "reload", "reload-or-restart", "force-reload":
		for _, u := range units {
			if code := c.unitJob(verb, u); code != 0 {
				return code
			}
		}
		return 0
	case "enable", "disable":
		return c.unitEnable(verb == "enable", units, now)
	}
	c.errf("Unknown command verb %s.\n", verb)
	return 1
}

// unitActive answers is-active and is-failed.
func (c *call) unitActive(verb string, units []string, quiet bool) int {
	code := 3
	if verb == "is-failed" {
		code = 1
	}
	for _, u := range units {
		s, _ := c.unit(u)
		state := "inactive"
		if s.Active {
			state = "active"
			if verb == "is-active" {
				code = 0
			}
		}
		if !quiet {
			c.outf("%s\n", state)
		}
	}
	return code
}

func (c *call) unitEnabled(units []string, quiet bool) int {
	code := 1
	for _, u := range units {
		s, ok := c.unit(u)
		switch {
		case !ok:
			c.errf("Failed to get unit file state for %s: No such file or directory\n", u)
		case s.Enabled:
			code = 0
			if !quiet {
				c.outf("enabled\n")
			}
		default:
			if !quiet {
				c.outf("disabled\n")
			}
		}
	}
	return code
}

// unitEnable enables or disables units, and with now starts or stops them.
func (c *call) unitEnable(enable bool, units []string, now bool) int {
	verb, job := "disable", "stop"
	if enable {
		verb, job = "enable", "start"
	}
	for _, u := range units {
		s, ok := c.unit(u)
		if !ok {
			c.errf("Failed to %s unit: Unit file %s does not exist.\n", verb, u)
			return 1
		}
		if enable && !s.Enabled {
			c.errf("Created symlink /etc/systemd/system/multi-user.target.wants/%s → /lib/systemd/system/%s.\n", u, u)
		}
		if !enable && s.Enabled {
			c.errf("Removed \"/etc/systemd/system/multi-user.target.wants/%s\".\n", u)
		}
		s.Enabled = enable
		c.ct.Guest.Services[u] = s
		c.dirty = true
		if now {
			if code := c.unitJob(job, u); code != 0 {
				return code
			}
		}
	}
	return 0
}

// unitJob runs a start, stop or restart job with systemctl's errors.
func (c *call) unitJob(verb, u string) int {
	s, ok := c.unit(u)
	if !ok {
		if verb == "stop" {
			c.errf("Failed to stop %s: Unit %s not loaded.\n", u, u)
		} else {
			c.errf("Failed to %s %s: Unit %s not found.\n", strings.ReplaceAll(verb, "-", " "), u, u)
		}
		return 5
	}
	switch verb {
	case "start":
		if !s.Active {
			c.ct.startService(c.now, u)
		}
	case "stop":
		if s.Active {
			c.ct.stopService(c.now, u)
		}
	case "restart", "reload-or-restart", "force-reload":
		if s.Active {
			c.ct.stopService(c.now, u)
		}
		c.ct.startService(c.now, u)
	case "try-restart":
		if s.Active {
			c.ct.stopService(c.now, u)
			c.ct.startService(c.now, u)
		}
	case "reload":
		if !s.Active {
			c.errf("%s is not active, cannot reload.\n", u)
			return 1
		}
		c.ct.journal(c.now, u, "systemd[1]", fmt.Sprintf("Reloading %s - %s...", u, unitDescription(s)))
		c.ct.journal(c.now, u, "systemd[1]", fmt.Sprintf("Reloaded %s - %s.", u, unitDescription(s)))
	}
	c.dirty = true
	return 0
}

func (c *call) unitStatus(units []string) int {
	code := 0
	for i, u := range units {
		s, ok := c.unit(u)
		if !ok {
			c.errf("Unit %s could not be found.\n", u)
			code = 4
			continue
		}
		if i > 0 {
			c.outf("\n")
		}
		dot, active := "○", "inactive (dead)"
		if s.Active {
			dot, active = "●", "active (running)"
		} else if code == 0 {
			code = 3
		}
		enabled := "disabled"
		if s.Enabled {
			enabled = "enabled"
		}
		c.outf("%s %s - %s\n", dot, u, unitDescription(s))
		c.outf("     Loaded: loaded (/lib/systemd/system/%s; %s; preset: enabled)\n", u, enabled)
		if s.Since.IsZero() {
			c.outf("     Active: %s\n", active)
		} else {
			c.outf("     Active: %s since %s\n", active, systemdTime(s.Since, c.now))
		}
		if s.Active {
			mem := 4 + hashString(u)%180
			c.outf("   Main PID: %d (%s)\n      Tasks: %d (limit: 38329)\n     Memory: %d.%dM\n        CPU: %s\n",
				s.PID, s.Name, 1+hashString(u)%20, mem, hashString(u)%10, cpuTime(20+c.now.Sub(s.Since).Milliseconds()/900))
			c.outf("     CGroup: /system.slice/%s\n             └─%d /usr/bin/%s\n", u, s.PID, s.Name)
		}
		var tail []journalLine
		for _, l := range c.ct.Journal {
			if l.Unit == u {
				tail = append(tail, l)
			}
		}
		if len(tail) > 10 {
			tail = tail[len(tail)-10:]
		}
		if len(tail) > 0 {
			c.outf("\n")
		}
		for _, l := range tail {
			c.outf("%s\n", c.journalLine(l))
		}
	}
	return code
}

// cpuTime formats CPU use as systemctl status does: 230ms, 12.486s, 3min 2.100s.
func cpuTime(ms int64) string {
	switch {
	case ms < 1000:
		return fmt.Sprintf("%dms", ms)
	case ms < 60000:
		return fmt.Sprintf("%.3fs", float64(ms)/1000)
	}
	return fmt.Sprintf("%dmin %.3fs", ms/60000, float64(ms%60000)/1000)
}

// systemdTime formats a timestamp as systemctl status does:
// "Sat 2024-11-30 10:11:12 UTC; 2h 3min ago".
func systemdTime(t, now time.Time) string {
	d := now.Sub(t)
	var rel string
	switch {
	case d < time.Minute:
		rel = fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		rel = fmt.Sprintf("%dmin %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		rel = fmt.Sprintf("%dh %dmin", int(d.Hours()), int(d.Minutes())%60)
	default:
		days := int(d.Hours()) / 24
		rel = fmt.Sprintf("%d day%s %dh", days, plural(days), int(d.Hours())%24)
	}
	return fmt.Sprintf("%s; %s ago", t.UTC().Format("Mon 2006-01-02 15:04:05 MST"), rel)
}

func (c *call) listUnits(all bool) int {
	c.outf("  %-40s %-6s %-8s %-7s %s\n", "UNIT", "LOAD", "ACTIVE", "SUB", "DESCRIPTION")
	n := 0
	for _, u := range slices.Sorted(maps.Keys(c.ct.Guest.Services)) {
		s := c.ct.Guest.Services[u]
		if !s.Active && !all {
			continue
		}
		active, sub := "inactive", "dead"
		if s.Active {
			active, sub = "active", "running"
		}
		c.outf("  %-40s %-6s %-8s %-7s %s\n", u, "loaded", active, sub, unitDescription(s))
		n++
	}
	c.outf("\nLOAD   = Reflects whether the unit definition was properly loaded.\nACTIVE = The high-level unit activation state, i.e. generalization of SUB.\nSUB    = The low-level unit activation state, values depend on unit type.\n%d loaded units listed.\n", n)
	return 0
}

// serviceCmd is the sysvinit wrapper: service nginx restart.
func serviceCmd(c *call) int {
	if len(c.args) < 2 {
		c.errf("Usage: service < option > | --status-all | [ service_name [ command | --full-restart ] ]\n")
		return 1
	}
	name, verb := c.args[0], c.args[1]
	if _, ok := c.unit(name); !ok {
		c.errf("%s: unrecognized service\n", name)
		return 1
	}
	c.args = []string{verb, name}
	return systemctlCmd(c)
}

// apt and dpkg

func aptCmd(c *call) int {
	if c.name == "apt" {
		c.errf("\nWARNING: apt does not have a stable CLI interface. Use with caution in scripts.\n\n")
	}
	var verb string
	var pkgs []string
	yes, simulate := false, false
	for i := 0; i < len(c.args); i++ {
		a := c.args[i]
		switch {
		case a == "-o" || a == "-c" || a == "-t" || a == "--target-release":
			i++
		case a == "-s" || a == "--simulate" || a == "--just-print" || a == "--dry-run" || a == "--recon" || a == "--no-act":
			simulate = true
		case a == "-y" || a == "--yes" || a == "--assume-yes" || strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "y"):
			yes = true
		case strings.HasPrefix(a, "-"):
		case verb == "":
			verb = a
		default:
			pkgs = append(pkgs, a)
		}
	}
	tpl := templates[c.ct.Conf.Template]
	switch verb {
	case "update":
		return c.aptUpdate(tpl)
	case "install", "reinstall":
		return c.aptInstall(tpl, pkgs, yes)
	case "remove", "purge":
		return c.aptRemove(pkgs, yes)
	case "upgrade", "dist-upgrade", "full-upgrade":
		return c.aptUpgrade(tpl, simulate, yes)
	case "autoremove":
		c.outf("Reading package lists...\nBuilding dependency tree...\nReading state information...\n")
		c.outf("0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\n")
		return 0
	case "clean", "autoclean":
		return 0
	case "list":
		if c.name == "apt" {
			return c.aptList(tpl)
		}
	case "":
		c.errf("E: No operation specified\n")
		return 100
	}
	c.errf("E: Invalid operation %s\n", verb)
	return 100
}

func (c *call) aptUpdate(tpl ctTemplate) int {
	mirrorHost, mirror := tpl.mirror()
	secHost, sec := "security.debian.org", "http://security.debian.org"
	if tpl.distro == "ubuntu" {
		secHost, sec = "security.ubuntu.com", "http://security.ubuntu.com/ubuntu"
	}
	sources := []struct{ host, url, suite string }{
		{mirrorHost, mirror, tpl.codename},
		{mirrorHost, mirror, tpl.codename + "-updates"},
		{secHost, sec, tpl.codename + "-security"},
	}
	if c.dnsOK() {
		for i, s := range sources {
			c.outf("Hit:%d %s %s InRelease\n", i+1, s.url, s.suite)
		}
		c.outf("Reading package lists...\n")
		return 0
	}
	for i, s := range sources {
		c.outf("Err:%d %s %s InRelease\n  Temporary failure resolving '%s'\n", i+1, s.url, s.suite, s.host)
	}
	c.outf("Reading package lists...\n")
	for _, s := range sources {
		c.errf("W: Failed to fetch %s/dists/%s/InRelease  Temporary failure resolving '%s'\n", s.url, s.suite, s.host)
	}
	c.errf("E: Some index files failed to download. They have been ignored, or old ones used instead.\n")
	return 100
}

// aptList is apt list: --upgradable shows the point release's updates of
// an Outdated container (updates.go), nothing otherwise; --installed
// shows what is installed; otherwise every package the mirror carries.
func (c *call) aptList(tpl ctTemplate) int {
	upgradable := slices.Contains(c.args, "--upgradable") || slices.Contains(c.args, "--upgradeable")
	installed := slices.Contains(c.args, "--installed")
	c.outf("Listing...\n")
	if upgradable {
		c.upgradableList(tpl)
		return 0
	}
	for _, n := range slices.Sorted(maps.Keys(packages)) {
		p := packages[n]
		_, have := c.ct.Guest.Packages[n]
		if installed && !have {
			continue
		}
		mark := ""
		if have {
			mark = " [installed]"
		}
		c.outf("%s/%s %s %s%s\n", n, tpl.codename, plainVersion(p.Version), cmp.Or(p.Arch, "amd64"), mark)
	}
	return 0
}

func debName(name string, p pkgInfo) string {
	return fmt.Sprintf("%s_%s_%s.deb", name, strings.ReplaceAll(p.Version, ":", "%3a"), cmp.Or(p.Arch, "amd64"))
}

func plainVersion(v string) string {
	if _, after, ok := strings.Cut(v, ":"); ok {
		return after
	}
	return v
}

func (c *call) aptInstall(tpl ctTemplate, names []string, yes bool) int {
	c.outf("Reading package lists...\nBuilding dependency tree...\nReading state information...\n")
	todo, extra, code := c.aptPlan(names)
	if code != 0 {
		return code
	}
	if len(todo) == 0 {
		c.outf("0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\n")
		return 0
	}
	if len(extra) > 0 {
		c.outf("The following additional packages will be installed:\n  %s\n", strings.Join(extra, " "))
	}
	c.outf("The following NEW packages will be installed:\n  %s\n", strings.Join(slices.Sorted(slices.Values(todo)), " "))
	size := 0
	for _, n := range todo {
		size += packages[n].SizeKB
	}
	c.outf("0 upgraded, %d newly installed, 0 to remove and 0 not upgraded.\n", len(todo))
	c.outf("Need to get %s kB of archives.\nAfter this operation, %s kB of additional disk space will be used.\n", thousands(size), thousands(size*3))
	if !yes {
		c.outf("Do you want to continue? [Y/n] Abort.\n")
		return 1
	}
	if !c.dnsOK() {
		return c.aptFetchFailed(tpl, todo)
	}
	c.aptUnpack(tpl, todo, size)
	if c.env.faults.inContainer(FaultAptFail, c.ct.VMID) {
		n := todo[len(todo)-1]
		c.outf("Setting up %s (%s) ...\n", n, plainVersion(packages[n].Version))
		c.errf("dpkg: error processing package %s (--configure):\n installed %s package post-installation script subprocess returned error exit status 1\n", n, n)
		c.outf("Errors were encountered while processing:\n %s\n", n)
		c.errf("E: Sub-process /usr/bin/dpkg returned an error code (1)\n")
		return 100
	}
	c.aptSetUp(todo)
	return 0
}

// aptPlan resolves what installing names brings in: every package to
// install, and those among them pulled in as dependencies.
func (c *call) aptPlan(names []string) (todo, extra []string, code int) {
	var want []string
	for _, n := range names {
		n, _, _ = strings.Cut(n, "=")
		n, _, _ = strings.Cut(n, "/")
		if _, ok := packages[n]; !ok {
			c.errf("E: Unable to locate package %s\n", n)
			return nil, nil, 100
		}
		want = append(want, n)
	}
	for _, n := range want {
		if v, ok := c.ct.Guest.Packages[n]; ok {
			c.outf("%s is already the newest version (%s).\n", n, plainVersion(v))
			continue
		}
		for _, d := range packages[n].Deps {
			if _, ok := c.ct.Guest.Packages[d]; !ok && !slices.Contains(todo, d) && !slices.Contains(want, d) {
				todo = append(todo, d)
				extra = append(extra, d)
			}
		}
		if !slices.Contains(todo, n) {
			todo = append(todo, n)
		}
	}
	return todo, extra, 0
}

func (c *call) aptFetchFailed(tpl ctTemplate, todo []string) int {
	mirrorHost, mirror := tpl.mirror()
	for i, n := range todo {
		p := packages[n]
		c.outf("Err:%d %s %s/main amd64 %s %s %s\n  Temporary failure resolving '%s'\n", i+1, mirror, tpl.codename, n, cmp.Or(p.Arch, "amd64"), plainVersion(p.Version), mirrorHost)
	}
	for _, n := range todo {
		c.errf("E: Failed to fetch %s/pool/main/%s/%s/%s  Temporary failure resolving '%s'\n", mirror, n[:1], n, debName(n, packages[n]), mirrorHost)
	}
	c.errf("E: Unable to fetch some archives, maybe run apt-get update or try with --fix-missing?\n")
	return 100
}

// aptUnpack prints the download and unpacking of todo, size kB in all.
func (c *call) aptUnpack(tpl ctTemplate, todo []string, size int) {
	_, mirror := tpl.mirror()
	for i, n := range todo {
		p := packages[n]
		c.outf("Get:%d %s %s/main amd64 %s %s %s [%s kB]\n", i+1, mirror, tpl.codename, n, cmp.Or(p.Arch, "amd64"), plainVersion(p.Version), thousands(p.SizeKB))
	}
	c.outf("debconf: delaying package configuration, since apt-utils is not installed\nFetched %s kB in 1s (%s kB/s)\n", thousands(size), thousands(size*9/10))
	files := 18452
	for _, n := range todo {
		p := packages[n]
		c.outf("Selecting previously unselected package %s.\n(Reading database ... %d files and directories currently installed.)\n", n, files)
		c.outf("Preparing to unpack .../%s ...\nUnpacking %s (%s) ...\n", debName(n, p), n, plainVersion(p.Version))
		files += 3 + p.SizeKB/40
	}
}

// aptSetUp installs todo: packages recorded, their units enabled and started.
func (c *call) aptSetUp(todo []string) {
	for _, n := range todo {
		p := packages[n]
		c.outf("Setting up %s (%s) ...\n", n, plainVersion(p.Version))
		c.ct.Guest.Packages[n] = p.Version
		if p.Unit == "" {
			continue
		}
		s, ok := c.ct.Guest.Services[p.Unit]
		if !ok {
			s = svcState{Unit: p.Unit, Name: strings.TrimSuffix(p.Unit, ".service"), Description: p.Description, Port: p.Port}
			c.outf("Created symlink /etc/systemd/system/multi-user.target.wants/%s → /lib/systemd/system/%s.\n", p.Unit, p.Unit)
		}
		s.Enabled = true
		c.ct.Guest.Services[p.Unit] = s
		if !s.Active {
			c.ct.startService(c.now, p.Unit)
		}
	}
	c.outf("Processing triggers for man-db (2.11.2-2) ...\n")
	c.dirty = true
}

func (c *call) aptRemove(names []string, yes bool) int {
	c.outf("Reading package lists...\nBuilding dependency tree...\nReading state information...\n")
	var todo []string
	for _, n := range names {
		if _, ok := packages[n]; !ok {
			c.errf("E: Unable to locate package %s\n", n)
			return 100
		}
		if _, ok := c.ct.Guest.Packages[n]; !ok {
			c.outf("Package '%s' is not installed, so not removed\n", n)
			continue
		}
		todo = append(todo, n)
	}
	if len(todo) == 0 {
		c.outf("0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\n")
		return 0
	}
	c.outf("The following packages will be REMOVED:\n  %s\n0 upgraded, 0 newly installed, %d to remove and 0 not upgraded.\n", strings.Join(todo, " "), len(todo))
	if !yes {
		c.outf("Do you want to continue? [Y/n] Abort.\n")
		return 1
	}
	c.outf("(Reading database ... 18452 files and directories currently installed.)\n")
	for _, n := range todo {
		p := packages[n]
		c.outf("Removing %s (%s) ...\n", n, plainVersion(p.Version))
		if s, ok := c.ct.Guest.Services[p.Unit]; ok && p.Unit != "" {
			if s.Active {
				c.ct.stopService(c.now, p.Unit)
			}
			delete(c.ct.Guest.Services, p.Unit)
		}
		delete(c.ct.Guest.Packages, n)
	}
	c.dirty = true
	return 0
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func dpkgCmd(c *call) int {
	if len(c.args) == 0 {
		c.errf("dpkg: error: need an action option\n\nType dpkg --help for help about installing and deinstalling packages [*];\n")
		return 2
	}
	names := c.args[1:]
	switch c.args[0] {
	case "-s", "--status":
		code := 0
		for _, n := range names {
			v, ok := c.ct.Guest.Packages[n]
			if !ok {
				c.errf("dpkg-query: package '%s' is not installed and no information is available\nUse dpkg --info (= dpkg-deb --info) to examine archive files.\n", n)
				code = 1
				continue
			}
			p := packages[n]
			c.outf("Package: %s\nStatus: install ok installed\nArchitecture: %s\nVersion: %s\n", n, cmp.Or(p.Arch, "amd64"), v)
			if p.Description != "" {
				c.outf("Description: %s\n", p.Description)
			}
		}
		return code
	case "-l", "--list":
		sel := slices.Sorted(maps.Keys(c.ct.Guest.Packages))
		if len(names) > 0 {
			var keep []string
			for _, n := range names {
				if _, ok := c.ct.Guest.Packages[n]; !ok {
					c.errf("dpkg-query: no packages found matching %s\n", n)
					continue
				}
				keep = append(keep, n)
			}
			if len(keep) < len(names) {
				return 1
			}
			sel = keep
		}
		c.outf("Desired=Unknown/Install/Remove/Purge/Hold\n| Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend\n|/ Err?=(none)/Reinst-required (Status,Err: uppercase=bad)\n")
		c.outf("||/ %-24s %-24s %-12s %s\n", "Name", "Version", "Architecture", "Description")
		c.outf("+++-%s-%s-%s-%s\n", strings.Repeat("=", 24), strings.Repeat("=", 24), strings.Repeat("=", 12), strings.Repeat("=", 40))
		for _, n := range sel {
			p := packages[n]
			c.outf("ii  %-24s %-24s %-12s %s\n", n, plainVersion(c.ct.Guest.Packages[n]), cmp.Or(p.Arch, "amd64"), cmp.Or(p.Description, n))
		}
		return 0
	}
	c.errf("dpkg: error: unknown option %s\n", c.args[0])
	return 2
}
