package bot

import "strings"

// ShortHelp is the answer to a message Nomos did not understand.
func ShortHelp() string {
	return "I didn't understand that. Try: status · problems · list containers · show <name> · restart <service> · " +
		"start|stop|reboot <lxc> · snapshot <lxc> · rollback <lxc> <snapshot> · destroy <lxc> · " +
		"exec <lxc> <command> · pending · history · help"
}

type helpEntry struct{ usage, what string }

var helpSections = []struct {
	title   string
	entries []helpEntry
}{
	{"Look", []helpEntry{
		{"status", "the fleet at a glance"},
		{"problems", "what needs attention, worst first: open signals, then what is unhealthy, degraded or stale (also: what's wrong)"},
		{"list containers", "containers and the services in them (also: ls, list lxcs)"},
		{"show <name>", "one host, container or service, e.g. show jellyfin, show lxc:101"},
		{"snapshots <lxc>", "a container's snapshots, newest first, and who made each"},
		{"pending", "plans waiting for a decision"},
		{"history [name]", "recent executions"},
		{"brief [weekly]", "the daily brief now: the last 24 h, open signals, what is wrong, plans waiting; weekly adds the week's trends"},
	}},
	{"Change (each makes a plan that waits for approval)", []helpEntry{
		{"restart <service>", "restart a service's unit, e.g. restart jellyfin"},
		{"start | stop | reboot <lxc>", "a container by vmid, slug or hostname, e.g. reboot 101"},
		{"snapshot <lxc> [name]", "take a snapshot"},
		{"rollback <lxc> <snapshot>", "roll back to a snapshot (destructive)"},
		{"destroy <lxc>", "destroy a container, stopping it first if it runs (destructive)"},
		{"exec <lxc> <command>", "run a shell command in a container, e.g. exec 101 df -h"},
		{"reload | enable | disable <service>", "one systemctl verb on a service's unit"},
		{"check updates on <lxc> / upgrade <lxc>", "list pending package upgrades, or install them"},
		{"create lxc <name> on <host> [cores N] [memory 2G] [disk 20G] [ip CIDR gw IP]", "provision a container, e.g. create lxc wiki on hubris cores 2"},
	}},
	{"Maintenance windows", []helpEntry{
		{"windows", "the open maintenance windows, what each holds back, and any standing approval"},
		{"window <target> <duration> [allow <class>] <reason>", "hold back alerts for a target for a while, e.g. window jellyfin 2h disk swap; allow reversible_low asks for a standing approval"},
		{"end window [name or target]", "end a window now; what it held back is summed up"},
		{"allow <class> <target> <code>", "the typed phrase that grants a window's standing approval, as its notice shows"},
	}},
	{"Decide", []helpEntry{
		{"✅ or 👍 on the plan", "approve; ❌ or 👎 deny"},
		{"go ahead / yes / lgtm", "approve the one pending plan if you asked for it yourself; no / stop / cancel deny it"},
		{"reply \"go ahead\" to a card", "approve that plan, whoever asked for it (the agent, an MCP client, another operator)"},
		{"approve <code> / deny <code>", "decide one plan by the code its card shows; the code alone approves it too"},
		{"<verb> <target> <code>", "the typed phrase a destructive plan shows; only it approves such a plan"},
		{"resolve <code> <note>", "record what really happened to an execution whose outcome is unknown"},
	}},
}

// Help is the full command reference, as plain text and HTML.
func Help() (plain, html string) {
	var p, h strings.Builder
	p.WriteString("Nomos commands. Phrases like \"jellyfin is down\" work too.\n")
	h.WriteString("<p><strong>Nomos commands.</strong> Phrases like “jellyfin is down” work too.</p>\n")
	for _, s := range helpSections {
		p.WriteString("\n" + s.title + ":\n")
		h.WriteString("<p><strong>" + escape(s.title) + "</strong></p>\n<ul>\n")
		for _, e := range s.entries {
			p.WriteString("  " + e.usage + " — " + e.what + "\n")
			h.WriteString("<li><code>" + escape(e.usage) + "</code> — " + escape(e.what) + "</li>\n")
		}
		h.WriteString("</ul>\n")
	}
	return strings.TrimRight(p.String(), "\n"), strings.TrimRight(h.String(), "\n")
}
