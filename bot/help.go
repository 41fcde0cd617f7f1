package bot

import (
	"slices"
	"strings"
)

// ShortHelp is the answer to a message Nomos did not understand.
func ShortHelp() string {
	return "I didn't understand that. Try: status · problems · list guests · show <name> · logs <service> · restart <service> · " +
		"start|shutdown|stop|reboot <lxc|vm> · snapshot <lxc|vm> · rollback <lxc|vm> <snapshot> · destroy <lxc|vm> · upgrade <lxc> · " +
		"exec <lxc|vm> <command> · pending · history · help <verb>"
}

// helpEntry is one line of help: the form, one example that works on the
// demo fleet, what it does, and what `help <verb>` adds.
type helpEntry struct {
	usage, example, what, more string
}

// verbs are the words an entry is found by with `help <verb>`: those of
// its usage before the first argument, such as start, stop and reboot of
// "start | stop | reboot <lxc>".
func (e helpEntry) verbs() []string {
	head, _, _ := strings.Cut(e.usage, "<")
	head, _, _ = strings.Cut(head, "[")
	var out []string
	for _, w := range strings.FieldsFunc(head, func(r rune) bool { return r == ' ' || r == '|' || r == '/' }) {
		out = append(out, strings.ToLower(w))
	}
	return out
}

var helpSections = []struct {
	title   string
	entries []helpEntry
}{
	{"Look", []helpEntry{
		{"status", "status", "the fleet at a glance", ""},
		{"problems", "what's wrong",
			"what needs attention, worst first: open signals, then what is unhealthy, degraded or stale (also: what's wrong, what is unhealthy)", ""},
		{"list containers", "list containers", "containers and the services in them (also: ls, list lxcs)", ""},
		{"list vms / list guests", "list guests", "the virtual machines, with run state and whether a guest agent is set; guests lists containers and VMs together", ""},
		{"show <name>", "show jellyfin", "one host, container, VM or service; a service is shown with its container and host, a VM with whether its guest agent answers",
			"Name it by name, vmid or slug (show 101, show lxc:strong/101). When the name means things that are not one stack, I ask which."},
		{"snapshots <lxc|vm>", "snapshots 101", "a guest's snapshots, newest first, and who made each",
			"The names are those rollback takes. Snapshots Nomos did not make are listed too, and Nomos never deletes them."},
		{"logs <service|lxc> [N lines]", "logs jellyfin 20 lines", "the last lines of a service's journal, or a container's whole journal",
			"50 lines by default, at most 100. It is a read: it runs at once, through the same gate as any plan, and the card shows the output with secrets redacted."},
		{"probe <lxc|vm>", "probe 101", "ask the guest's host now whether it runs", ""},
		{"pending", "pending", "plans waiting for a decision, with their codes", ""},
		{"history [name]", "history jellyfin", "recent executions", ""},
		{"brief [weekly]", "brief", "the daily brief now: the last 24 h, open signals, what is wrong, plans waiting; weekly adds the week's trends", ""},
	}},
	{"Change (each makes a plan that waits for approval)", []helpEntry{
		{"restart <service>", "restart jellyfin", "restart a service's unit inside its container",
			"Asking again while the plan waits does not make a second card: I point at the first."},
		{"start | stop | reboot <lxc|vm>", "reboot 101", "a container or VM by vmid, slug or name",
			"stop of a VM is a hard power-off, like pulling the plug, so it is destructive and needs the phrase; shutdown asks it nicely."},
		{"shutdown <lxc|vm> [within <seconds>]", "shutdown opnsense within 120s", "ask a guest to shut down (a VM over ACPI or its guest agent) and wait up to 60 s, or the seconds given (at most 600)",
			"A guest that ignores it stays up and the plan fails with \"did not shut down within 60 s\" (or the bound you gave); nothing is forced."},
		{"reboot host <host>", "reboot host strong", "reboot a Proxmox node (destructive: type the phrase)",
			"The node runs shutdown -r +1. Every container on it stops, and only those set to start at boot come back."},
		{"snapshot <lxc|vm> [name]", "snapshot 101 before-upgrade", "take a snapshot", ""},
		{"rollback <lxc|vm> <snapshot>", "rollback 101 before-upgrade", "roll back to a snapshot (destructive)",
			"On ZFS the newer snapshots are deleted first; the card names them."},
		{"destroy <lxc|vm>", "destroy 131", "destroy a container or VM with its disks, stopping it first if it runs (destructive)", ""},
		{"exec <lxc|vm> <command>", "exec 101 df -h", "run a shell command in a container, or in a VM through its guest agent", "The card shows the command exactly as it runs; it always waits for a person."},
		{"run <host> <command>", "run strong uptime", "run a shell command on a node itself",
			"Refused by the node's gate unless its rules file sets host_shell: true."},
		{"reload | enable | disable <service>", "reload caddy", "one systemctl verb on a service's unit", ""},
		{"check updates on <lxc|host>", "check updates on 102", "list pending package upgrades in a container or on a node; installs nothing", ""},
		{"check updates on all", "check updates on all", "the same on every running container at once, in one reply: per container the upgradable and security counts and what needs a restart, worst first, then the totals",
			"A few containers are read at a time; one that fails or does not answer in time is named with why. Each read is its own execution in history and needs no approval; nothing is installed."},
		{"upgrade <lxc> | upgrade host <host>", "upgrade 102", "install the pending upgrades (a node gets dist-upgrade)",
			"A container is snapshotted first where it can be. A runbook for upgrade, such as the demo's, wins over this."},
		{"create lxc <name> on <host> [cores N] [memory 2G] [disk 20G] [ip CIDR gw IP] [template debian-13] [storage ID]",
			"create lxc wiki on hubris cores 2 memory 2G", "provision a container",
			"template takes a short name (debian-13, debian-12, ubuntu-24.04, alpine-3.20) that the node's template storage has, or a full volume id; " +
				"without one, the newest Debian template on the node."},
	}},
	{"Maintenance windows", []helpEntry{
		{"windows", "windows", "the open maintenance windows, what each holds back, and any standing approval", ""},
		{"window <target> <duration> [allow <class>] <reason>", "window service:jellyfin 2h swapping the disk", "hold back alerts for a target for a while",
			"allow reversible_low (or read_only, config_mutation; never destructive) asks for a standing approval, which an operator grants with the typed phrase its notice shows."},
		{"end window [name or target]", "end window", "end a window now; what it held back is summed up", ""},
		{"allow <class> <target> <code>", "", "the typed phrase that grants a window's standing approval, as its notice shows", ""},
	}},
	{"Decide", []helpEntry{
		{"✅ or 👍 on the plan", "", "approve; ❌ or 👎 deny", ""},
		{"go ahead / yes / lgtm", "", "approve the one pending plan if you asked for it yourself; no / stop / cancel deny it", ""},
		{"reply \"go ahead\" to a card", "", "approve that plan, whoever asked for it (the agent, an MCP client, another operator)", ""},
		{"approve <code> / deny <code>", "approve k7q2", "decide one plan by the code its card shows; the code alone approves it too", ""},
		{"<verb> <target> <code>", "", "the typed phrase a destructive plan shows; only it approves such a plan", ""},
		{"resolve <code> <note>", "resolve k7q2 it did restart", "record what really happened to an execution whose outcome is unknown", ""},
	}},
	{"The agent's sessions", []helpEntry{
		{"forget session <id>", "", "delete an agent session's transcript now (its id is on the status page's Agent page)",
			"The audit log keeps its own entries. Sessions untouched for agent.session_retention (30 days by default) go by themselves."},
	}},
}

// line is one entry as help shows it.
func (e helpEntry) line() (plain, html string) {
	plain, html = e.usage+" — "+e.what, "<code>"+escape(e.usage)+"</code> — "+escape(e.what)
	if e.example != "" && e.example != e.usage {
		plain += " (e.g. " + e.example + ")"
		html += " (e.g. <code>" + escape(e.example) + "</code>)"
	}
	return plain, html
}

// Help is the full command reference, as plain text and HTML.
func Help() (plain, html string) {
	var p, h strings.Builder
	p.WriteString("Nomos commands. Phrases like \"jellyfin is down\" work too. help <verb> tells more.\n")
	h.WriteString("<p><strong>Nomos commands.</strong> Phrases like “jellyfin is down” work too. <code>help &lt;verb&gt;</code> tells more.</p>\n")
	for _, s := range helpSections {
		p.WriteString("\n" + s.title + ":\n")
		h.WriteString("<p><strong>" + escape(s.title) + "</strong></p>\n<ul>\n")
		for _, e := range s.entries {
			lp, lh := e.line()
			p.WriteString("  " + lp + "\n")
			h.WriteString("<li>" + lh + "</li>\n")
		}
		h.WriteString("</ul>\n")
	}
	return strings.TrimRight(p.String(), "\n"), strings.TrimRight(h.String(), "\n")
}

// HelpFor is what `help <verb>` answers: every entry of the verb (any of
// its words finds it), with what more there is to say; ok is false when
// no entry has the verb.
func HelpFor(verb string) (plain, html string, ok bool) {
	verb = strings.ToLower(verb)
	words := []string{verb}
	if v, known := grammarByWord[verb]; known {
		words = v.words
	}
	var p, h strings.Builder
	for _, s := range helpSections {
		for _, e := range s.entries {
			if !slices.ContainsFunc(e.verbs(), func(w string) bool { return slices.Contains(words, w) }) {
				continue
			}
			lp, lh := e.line()
			p.WriteString(lp + "\n")
			h.WriteString("<p>" + lh + "</p>\n")
			if e.more != "" {
				p.WriteString("  " + e.more + "\n")
				h.WriteString("<p>" + escape(e.more) + "</p>\n")
			}
		}
	}
	if p.Len() == 0 {
		return "", "", false
	}
	return strings.TrimRight(p.String(), "\n"), strings.TrimRight(h.String(), "\n"), true
}
