package labsim

import (
	"maps"
	"slices"
	"time"
)

// This file holds what a node runs for itself: apt on the node (a
// Proxmox VE 8 node is Debian 12 with the Proxmox repository), the
// scheduled reboot, and the node's journal.

// nodeRepos are the indexes apt-get update reads on a node with the
// no-subscription repository.
var nodeRepos = []struct{ url, suite string }{
	{"http://deb.debian.org/debian", "bookworm"},
	{"http://deb.debian.org/debian", "bookworm-updates"},
	{"http://security.debian.org/debian-security", "bookworm-security"},
	{"http://download.proxmox.com/debian/pve", "bookworm"},
}

// nodeAptCmd is apt and apt-get on the node: the node is kept up to date,
// so there is nothing to upgrade.
func nodeAptCmd(c *call) int {
	if c.name == "apt" {
		c.errf("\nWARNING: apt does not have a stable CLI interface. Use with caution in scripts.\n\n")
	}
	verb := ""
	for i := 0; i < len(c.args) && verb == ""; i++ {
		switch a := c.args[i]; {
		case a == "-o" || a == "-c" || a == "-t":
			i++
		case len(a) > 0 && a[0] == '-':
		default:
			verb = a
		}
	}
	switch verb {
	case "update":
		for i, r := range nodeRepos {
			c.outf("Hit:%d %s %s InRelease\n", i+1, r.url, r.suite)
		}
		c.outf("Reading package lists...\n")
		return 0
	case "list":
		if c.name == "apt" {
			c.outf("Listing...\n")
			return 0
		}
	case "upgrade", "dist-upgrade", "full-upgrade":
		c.outf("Reading package lists...\nBuilding dependency tree...\nReading state information...\nCalculating upgrade...\n")
		c.outf("0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\n")
		return 0
	case "":
		c.errf("E: No operation specified\n")
		return 100
	}
	c.errf("E: Invalid operation %s\n", verb)
	return 100
}

// shutdownCmd is systemd's shutdown. -r schedules a reboot and says when,
// as systemctl's logind_show_shutdown does; labsim then reboots the node
// at once rather than after the delay, so a test need not wait: every
// running container stops, and those with onboot start again, as
// pve-guests.service starts them at boot.
func shutdownCmd(c *call) int {
	reboot, when := false, ""
	for _, a := range c.args {
		switch {
		case a == "-r" || a == "--reboot":
			reboot = true
		case len(a) > 0 && a[0] == '-':
			c.errf("shutdown: labsim simulates only shutdown -r [TIME]\n")
			return 1
		case when == "":
			when = a
		}
	}
	if !reboot {
		c.errf("shutdown: labsim simulates only shutdown -r [TIME]\n")
		return 1
	}
	at := c.now
	switch when {
	case "", "+1":
		at = c.now.Add(time.Minute).Truncate(time.Minute)
	case "now", "+0":
	default:
		c.errf("Failed to parse time specification: %s\n", when)
		return 1
	}
	if at.After(c.now) {
		c.errf("Reboot scheduled for %s, use 'shutdown -c' to cancel.\n", at.UTC().Format("Mon 2006-01-02 15:04:05 MST"))
	}
	rebootNode(c)
	return 0
}

// rebootNode stops every running container on the node and starts those
// set to start at boot, in vmid order.
func rebootNode(c *call) {
	for _, vmid := range slices.Sorted(maps.Keys(c.hs.Containers)) {
		if ct := c.hs.Containers[vmid]; ct.running() {
			ct.halt(c.now)
		}
	}
	c.hs.Booted = c.now
	for _, vmid := range slices.Sorted(maps.Keys(c.hs.Containers)) {
		if ct := c.hs.Containers[vmid]; ct.Conf.Onboot && !ct.Conf.IsTemplate {
			applyPending(c, ct)
			ct.boot(c.now)
		}
	}
	c.dirty = true
}

// nodeJournalctl is journalctl on the node. labsim keeps no journal for
// the node itself, so it has no entries, as for a unit it never ran.
func nodeJournalctl(c *call) int {
	c.outf("-- No entries --\n")
	return 0
}
