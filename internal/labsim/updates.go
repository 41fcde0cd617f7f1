package labsim

import (
	"cmp"
	"maps"
	"slices"
	"strings"
)

// Pending updates: a container configured Outdated has the packages of
// an older point release, so apt sees newer versions of some of them, in
// the mirror's stable or security archive. apt-get -s upgrade lists them
// as apt-pkg's pkgSimulate prints them, apt list --upgradable shows them,
// and apt-get upgrade installs them.

// pendingUpdate is a newer version the mirror carries of an installed
// package.
type pendingUpdate struct {
	Version  string
	Security bool
}

// pointRelease is what an Outdated container can upgrade, from the
// versions in packages.
var pointRelease = map[string]pendingUpdate{
	"libc6":          {Version: "2.36-9+deb12u9"},
	"libc-bin":       {Version: "2.36-9+deb12u9"},
	"openssh-server": {Version: "1:9.2p1-2+deb12u5", Security: true},
	"curl":           {Version: "7.88.1-10+deb12u12", Security: true},
}

// upgrade is one package an upgrade moves.
type upgrade struct {
	name, from, to string
	security       bool
}

// upgradable lists, sorted by name, what apt would upgrade in ct now.
func (ct *ctState) upgradable() []upgrade {
	if !ct.Outdated {
		return nil
	}
	var out []upgrade
	for _, n := range slices.Sorted(maps.Keys(pointRelease)) {
		u := pointRelease[n]
		if v, ok := ct.Guest.Packages[n]; ok && v == packages[n].Version {
			out = append(out, upgrade{name: n, from: v, to: u.Version, security: u.Security})
		}
	}
	return out
}

// releaseOf is VerIterator::RelStr's LABEL:VERSION/ARCHIVE of the archive
// an update comes from, for the template's distribution.
func releaseOf(tpl ctTemplate, security bool) string {
	if tpl.distro == "ubuntu" {
		if security {
			return "Ubuntu:24.04/" + tpl.codename + "-security"
		}
		return "Ubuntu:24.04/" + tpl.codename + "-updates"
	}
	major := map[string]string{"bookworm": "12", "trixie": "13"}[tpl.codename]
	major = cmp.Or(major, "12")
	if security {
		return "Debian-Security:" + major + "/stable-security"
	}
	return "Debian:" + major + map[string]string{"12": ".9", "13": ".2"}[major] + "/stable"
}

// upgradeHeader is what apt-get prints before an upgrade's summary: the
// list of packages it upgrades, two spaces in, wrapped short of 80
// columns as ShowList does.
func (c *call) upgradeHeader(ups []upgrade) {
	if len(ups) == 0 {
		return
	}
	c.outf("The following packages will be upgraded:\n")
	line := " "
	for _, u := range ups {
		if len(line)+1+len(u.name) > 79 {
			c.outf("%s\n", line)
			line = " "
		}
		line += " " + u.name
	}
	c.outf("%s\n", line)
}

// aptUpgrade is apt-get upgrade, dist-upgrade and full-upgrade: with
// simulate, pkgSimulate's Inst and Conf lines; without, the packages
// fetched, unpacked and set up.
func (c *call) aptUpgrade(tpl ctTemplate, simulate, yes bool) int {
	c.outf("Reading package lists...\nBuilding dependency tree...\nReading state information...\nCalculating upgrade...\n")
	ups := c.ct.upgradable()
	c.upgradeHeader(ups)
	c.outf("%d upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\n", len(ups))
	if len(ups) == 0 {
		return 0
	}
	if simulate {
		for _, u := range ups {
			c.outf("Inst %s [%s] (%s %s [%s])\n", u.name, u.from, u.to, releaseOf(tpl, u.security), cmp.Or(packages[u.name].Arch, "amd64"))
		}
		for _, u := range ups {
			c.outf("Conf %s (%s %s [%s])\n", u.name, u.to, releaseOf(tpl, u.security), cmp.Or(packages[u.name].Arch, "amd64"))
		}
		return 0
	}
	size := 0
	for _, u := range ups {
		size += packages[u.name].SizeKB
	}
	c.outf("Need to get %s kB of archives.\nAfter this operation, 0 B of additional disk space will be used.\n", thousands(size))
	if !yes {
		c.outf("Do you want to continue? [Y/n] Abort.\n")
		return 1
	}
	if !c.dnsOK() {
		names := make([]string, len(ups))
		for i, u := range ups {
			names[i] = u.name
		}
		return c.aptFetchFailed(tpl, names)
	}
	_, mirror := tpl.mirror()
	for i, u := range ups {
		c.outf("Get:%d %s %s/main amd64 %s %s %s [%s kB]\n", i+1, mirror, tpl.codename, u.name, cmp.Or(packages[u.name].Arch, "amd64"), plainVersion(u.to), thousands(packages[u.name].SizeKB))
	}
	c.outf("Fetched %s kB in 1s (%s kB/s)\n(Reading database ... 18452 files and directories currently installed.)\n", thousands(size), thousands(size*9/10))
	for _, u := range ups {
		p := packages[u.name]
		p.Version = u.to
		c.outf("Preparing to unpack .../%s ...\nUnpacking %s (%s) over (%s) ...\n", debName(u.name, p), u.name, plainVersion(u.to), plainVersion(u.from))
	}
	for _, u := range ups {
		c.outf("Setting up %s (%s) ...\n", u.name, plainVersion(u.to))
		c.ct.Guest.Packages[u.name] = u.to
	}
	c.dirty = true
	return 0
}

// upgradableList is apt list --upgradable's lines for ct.
func (c *call) upgradableList(tpl ctTemplate) {
	for _, u := range c.ct.upgradable() {
		suite := tpl.codename
		if u.security {
			suite += "-security"
		}
		c.outf("%s/%s %s %s [upgradable from: %s]\n", u.name, strings.TrimSuffix(suite, "/"), plainVersion(u.to), cmp.Or(packages[u.name].Arch, "amd64"), plainVersion(u.from))
	}
}
