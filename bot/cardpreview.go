package bot

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/humantime"
	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// CardPreview is what a card knows of its plan's preview: what the plan
// will change, read before approval.
type CardPreview struct {
	// Requested says the actuator was asked for one, at RequestedAt.
	Requested   bool
	RequestedAt time.Time
	// Result is the actuator's verified answer; nil while awaited.
	Result *tasks.PreviewResult
}

// pending says the card still waits for the preview at now.
func (p CardPreview) pending(now time.Time) bool {
	return p.Requested && p.Result == nil && now.Before(p.RequestedAt.Add(executions.PreviewWait))
}

// Limits of the "Will change:" section.
const (
	maxPreviewItems = 12
	previewTextLen  = 80
)

// previewLines writes, for one action, what its plan will change, from
// the preview the actuator read and what the bot knows of the fleet. Each
// returns plain-text items; the card escapes them. Keyed by action, so
// that another kind of guest adds its own.
var previewLines = map[policy.Action]func(v CardView, t cardTarget) []string{
	policy.ActionAptUpgrade:  upgradeLines,
	policy.ActionPctDestroy:  destroyLines,
	policy.ActionPctRollback: rollbackLines,
	policy.ActionPctCreate:   createLines,
	policy.ActionRestart:     outageLines,
	policy.ActionPctStop:     outageLines,
	policy.ActionPctReboot:   outageLines,
	policy.ActionSystemctl:   systemctlLines,
	policy.ActionNodeReboot:  nodeRebootLines,
	policy.ActionRun:         untrustedLines,
	policy.ActionPctExec:     untrustedLines,
}

// willChange adds the card's "Will change:" section to a plan of one step
// awaiting its decision. Text from a host is shown as text only: one line
// each, escaped, never markup.
func willChange(m *bodies, v CardView, t cardTarget) {
	x := v.Planned.Execution
	lines, ok := previewLines[policy.Action(x.Action)]
	if !ok || x.State != store.StateAwaitingApproval {
		return
	}
	changeSection(m, lines(v, t))
}

// planWillChange adds the "Will change:" section of a plan of several
// steps awaiting its decision: each step's items under its number.
func planWillChange(m *bodies, v CardView) {
	if v.Planned.Execution.State != store.StateAwaitingApproval {
		return
	}
	var items []string
	for i, st := range v.Planned.Steps {
		lines, ok := previewLines[policy.Action(st.Execution.Action)]
		if !ok {
			continue
		}
		sv := v
		sv.Planned = executions.Planned{Execution: st.Execution, Risk: st.Risk, Target: st.Target, Facts: st.Facts, Blast: v.Planned.Blast}
		if i < len(v.StepPreviews) {
			sv.Preview = v.StepPreviews[i]
		}
		t := stepTarget(st)
		step := lines(sv, t)
		if len(step) == 0 {
			continue
		}
		items = append(items, fmt.Sprintf("Step %d, %s %s:", i+1, stepVerb(st.Execution), t.display))
		for _, it := range step {
			items = append(items, "  "+it)
		}
	}
	changeSection(m, items)
}

// changeSection writes the "Will change:" items.
func changeSection(m *bodies, items []string) {
	if len(items) == 0 {
		return
	}
	for i, it := range items {
		items[i] = oneLine(it)
	}
	htm := make([]string, len(items))
	for i, it := range items {
		htm[i] = escape(it)
	}
	m.para("Will change:", "<strong>Will change:</strong>")
	m.list(items, htm)
}

// oneLine keeps a preview item on one line of printable text.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
}

// hostPreview is the items of a host preview that is not there: awaited,
// failed, never asked for. ok says the result is there to read.
func hostPreview(v CardView) (items []string, ok bool) {
	p := v.Preview
	switch {
	case p.Result != nil && p.Result.Error != "":
		return []string{"Preview unavailable: " + clip(redact.String(p.Result.Error), errorBytes) + ". The plan stands: decide on the commands above."}, false
	case p.Result != nil:
		return nil, true
	case p.pending(v.Now):
		return []string{"Reading what it will change… (this card is edited when the preview arrives; the plan can be decided now)"}, false
	case p.Requested:
		return []string{"Preview unavailable: the actuator did not answer within " + humantime.Duration(executions.PreviewWait) + ". The plan stands: decide on the commands above."}, false
	}
	return []string{"Preview unavailable: none was taken. The plan stands: decide on the commands above."}, false
}

// upgradeLines: the packages and versions, counted, with what needs a
// restart.
func upgradeLines(v CardView, t cardTarget) []string {
	items, ok := hostPreview(v)
	if !ok {
		return items
	}
	r := v.Preview.Result
	if len(r.Packages) == 0 {
		items = append(items, "Nothing to upgrade by the package lists "+ctName(t)+" has now; the plan's apt-get update may find more.")
	} else {
		sec := 0
		var restart []string
		for _, p := range r.Packages {
			if p.Security {
				sec++
			}
			if needsRestart(p.Name) {
				restart = append(restart, p.Name)
			}
		}
		head := plural(len(r.Packages), "package", "packages")
		if sec > 0 {
			head += ", " + strconv.Itoa(sec) + " from security"
		}
		items = append(items, head+" (by the package lists "+ctName(t)+" has now):")
		for i, p := range r.Packages {
			if i == maxPreviewItems {
				items = append(items, fmt.Sprintf("… and %d more", len(r.Packages)-maxPreviewItems))
				break
			}
			s := "  " + p.Name + " " + cmp.Or(p.From, "(new)") + " → " + p.To
			if p.Security {
				s += " (security)"
			}
			items = append(items, s)
		}
		if len(restart) > 0 {
			items = append(items, "⚠️ "+strings.Join(restart, ", ")+" take effect only after a restart: running services keep the old "+
				"library until they restart, and a kernel only when the host reboots.")
		}
	}
	if r.Held > 0 {
		items = append(items, plural(r.Held, "package is", "packages are")+" kept back: apt upgrade does not install or remove others to reach them.")
	}
	return items
}

// needsRestart says a package's new version takes effect only after a
// restart: the C library, the kernel, systemd.
func needsRestart(name string) bool {
	name, _, _ = strings.Cut(name, ":")
	switch {
	case name == "libc6" || name == "libc-bin" || name == "systemd" || name == "dbus":
		return true
	case strings.HasPrefix(name, "linux-image-"), strings.HasPrefix(name, "pve-kernel-"), strings.HasPrefix(name, "proxmox-kernel-"):
		return true
	}
	return false
}

// destroyLines: the snapshots and disks that go with the container, its
// backups, and who goes down with it.
func destroyLines(v CardView, t cardTarget) []string {
	items, ok := hostPreview(v)
	if ok {
		r := v.Preview.Result
		if len(r.Snapshots) == 0 {
			items = append(items, ctName(t)+" has no snapshots.")
		} else {
			items = append(items, "Its "+plural(len(r.Snapshots), "snapshot goes", "snapshots go")+" with it: "+snapshotList(r.Snapshots, v.Now)+".")
		}
		if len(r.Volumes) > 0 {
			items = append(items, "Disks removed: "+strings.Join(r.Volumes, ", ")+".")
		}
		items = append(items, backupLines(r.Backup, t, v.Now)...)
		items = append(items, replicationLines(r.Replication, purges(v), t, v.Now)...)
	}
	if v.Planned.Facts.HA {
		items = append(items, "Proxmox HA manages "+ctName(t)+"; the destroy takes it out of HA.")
	}
	return append(items, dependants(v, "Goes down with it")...)
}

// backupLines says what backs the container up and its newest backup.
func backupLines(b *tasks.BackupStatus, t cardTarget, now time.Time) []string {
	if b == nil {
		return nil
	}
	var items []string
	if len(b.Jobs) == 0 && len(b.ByPool) == 0 {
		items = append(items, "⚠️ No backup job includes "+ctName(t)+".")
	}
	if len(b.ByPool) > 0 {
		items = append(items, "Backup job "+strings.Join(b.ByPool, ", ")+" selects guests by pool; whether it includes "+ctName(t)+" is not known here.")
	}
	for _, j := range b.Jobs {
		s := "Backup job " + j.ID
		if j.Schedule != "" {
			s += " (" + j.Schedule + ")"
		}
		s += " includes it, to " + j.Storage
		if !j.Enabled {
			s += ", but the job is disabled"
		}
		items = append(items, s+".")
	}
	switch {
	case !b.Last.IsZero():
		items = append(items, "Newest backup: "+b.Last.Format("2006-01-02 15:04")+" ("+humantime.Ago(now, b.Last)+"), "+b.LastVolume+"; backups stay after the destroy.")
	case len(b.Jobs) > 0 && len(b.Unread) == 0:
		items = append(items, "⚠️ No backup of "+ctName(t)+" was found on the jobs' storage.")
	}
	if len(b.Unread) > 0 {
		items = append(items, "Could not read the backups on "+strings.Join(b.Unread, ", ")+".")
	}
	return items
}

// purges says the plan's destroy runs with --purge, which takes the
// guest out of its replication jobs, backup jobs and HA.
func purges(v CardView) bool {
	return slices.ContainsFunc(v.Planned.Execution.Steps, func(s string) bool { return strings.Contains(s, "destroy") && strings.Contains(s, "--purge") })
}

// replicationLines names the guest's storage replication jobs: where
// each replicates to, how often, and its last sync. pct destroy refuses
// a guest with one unless --purge (pve-container API2/LXC.pm
// destroy_vm), which removes them.
func replicationLines(rs *tasks.ReplicationStatus, purge bool, t cardTarget, now time.Time) []string {
	switch {
	case rs == nil:
		return []string{"Its replication jobs could not be read."}
	case len(rs.Jobs) == 0:
		return []string{ctName(t) + " has no replication job."}
	}
	var items []string
	for _, j := range rs.Jobs {
		s := "Replication job " + j.ID + " to " + j.Target + " (" + cmp.Or(j.Schedule, "*/15") + ")"
		if !j.Enabled {
			s += ", disabled"
		}
		if j.LastSync.IsZero() {
			s += ", never synced"
		} else {
			s += ", last synced " + j.LastSync.Format("2006-01-02 15:04") + " (" + humantime.Ago(now, j.LastSync) + ")"
		}
		if j.FailCount > 0 {
			s += fmt.Sprintf(", failing (%d tries)", j.FailCount)
		}
		items = append(items, s+".")
	}
	if purge {
		items = append(items, "The destroy removes "+plural(len(rs.Jobs), "replication job", "replication jobs")+" with it (--purge), and the replica on the target goes too.")
	} else {
		items = append(items, "⚠️ Proxmox refuses to destroy a guest with a replication job unless it is purged: this plan fails until the job is removed.")
	}
	return items
}

// rollbackLines: the target snapshot's age and the snapshots newer than
// it.
func rollbackLines(v CardView, t cardTarget) []string {
	items, ok := hostPreview(v)
	if !ok {
		return items
	}
	var target string
	if p, err := policy.ParseParams(policy.ActionPctRollback, v.Planned.Execution.Params); err == nil {
		target = p.(policy.PctRollbackParams).Name
	}
	snaps := v.Preview.Result.Snapshots
	i := slices.IndexFunc(snaps, func(s tasks.SnapshotInfo) bool { return s.Name == target })
	if i < 0 {
		return append(items, "⚠️ "+ctName(t)+" has no snapshot "+target+" now: the rollback will fail.")
	}
	s := "Everything since " + target
	if taken := snaps[i].Taken; !taken.IsZero() {
		s += ", taken " + taken.Format("2006-01-02 15:04") + " (" + humantime.Ago(v.Now, taken) + "),"
	}
	items = append(items, s+" is undone.")
	newer := snaps[i+1:]
	if taken := snaps[i].Taken; !taken.IsZero() {
		// By time where the listing gives it: a tree of branches lists
		// another branch's older snapshots after this one.
		newer = slices.DeleteFunc(slices.Clone(snaps), func(s tasks.SnapshotInfo) bool { return !s.Taken.After(taken) })
	}
	if len(newer) > 0 {
		items = append(items, "Newer snapshots: "+snapshotList(newer, v.Now)+".")
	}
	return items
}

// createLines: what the new container will be.
func createLines(v CardView, t cardTarget) []string {
	params, err := policy.ParseParams(policy.ActionPctCreate, v.Planned.Execution.Params)
	if err != nil {
		return nil
	}
	p := params.(policy.PctCreateParams)
	host, _ := hostPreview(v)
	var items []string
	switch {
	case p.VMID != 0:
		items = append(items, "vmid "+strconv.Itoa(p.VMID)+".")
	case v.Preview.Result != nil && v.Preview.Result.NextID != 0:
		items = append(items, "vmid "+strconv.Itoa(v.Preview.Result.NextID)+", the next free one now (taken again when it runs).")
	default:
		items = append(items, host...)
		items = append(items, "vmid: the next free one when it runs.")
	}
	items = append(items, "A container "+p.Hostname+" on "+cmp.Or(t.host, t.display)+": template "+cmp.Or(p.Template, "the newest Debian on the host")+
		", storage "+cmp.Or(p.Storage, "local-lvm")+", "+plural(cmp.Or(p.Cores, 1), "core", "cores")+", "+strconv.Itoa(cmp.Or(p.Memory, 512))+" MB of memory, a "+
		strconv.Itoa(cmp.Or(p.DiskGB, 8))+" GB disk.")
	addr := cmp.Or(p.IP, "dhcp")
	if addr == "dhcp" {
		addr = "an address from DHCP (read after it starts)"
	}
	return append(items, "Address: "+addr+".")
}

// systemctlLines: a stop or restart takes the unit down; enable,
// disable, start and reload do not.
func systemctlLines(v CardView, t cardTarget) []string {
	params, err := policy.ParseParams(policy.ActionSystemctl, v.Planned.Execution.Params)
	if err != nil {
		return nil
	}
	switch params.(policy.SystemctlParams).Verb {
	case "stop", "restart":
		return outageLines(v, t)
	}
	return nil
}

// outageLines: who depends on what goes down, and whether Nomos's own
// path to the room is among it.
func outageLines(v CardView, t cardTarget) []string {
	items := dependants(v, "Who depends on it")
	if len(items) == 0 {
		items = append(items, "Nothing in the fleet depends on "+t.display+".")
	}
	if path := v.ownPath(t); path != "" {
		items = append(items, "⚠️ "+path+" serves Nomos's own way to this room: the room may go quiet until it is back, and this card may not update until then.")
	}
	return items
}

// nodeRebootLines: the guests that go down with the node, which come
// back at boot and which do not, and whether Nomos's own path is among
// them.
func nodeRebootLines(v CardView, t cardTarget) []string {
	var up, down, stopped, unknown []string
	for _, g := range v.HostGuests {
		name := g.Name + " (" + guestName(g) + ")"
		onboot, known := g.Attrs["onboot"].(bool)
		switch {
		case g.RunState == "stopped":
			stopped = append(stopped, name)
		case g.RunState == "":
			unknown = append(unknown, name)
		case known && onboot:
			up = append(up, name)
		case known:
			down = append(down, name)
		default:
			unknown = append(unknown, name)
		}
	}
	var items []string
	switch running := len(up) + len(down); {
	case v.HostGuests == nil:
		items = append(items, "Which guests run on "+t.display+" could not be read; every one of them goes down.")
	case running == 0 && len(unknown) == 0:
		items = append(items, "No guest runs on "+t.display+".")
	default:
		if len(up) > 0 {
			items = append(items, "Go down and start again at boot: "+strings.Join(up, ", ")+".")
		}
		if len(down) > 0 {
			items = append(items, "⚠️ Go down and stay down (onboot is off): "+strings.Join(down, ", ")+".")
		}
		if len(unknown) > 0 {
			items = append(items, "Go down if running; whether they start at boot is not known yet: "+strings.Join(unknown, ", ")+".")
		}
	}
	if len(stopped) > 0 {
		items = append(items, "Stopped now, and stay stopped: "+strings.Join(stopped, ", ")+".")
	}
	if path := v.ownPath(t); path != "" {
		items = append(items, "⚠️ "+path+" serves Nomos's own way to this room: the room may go quiet until the node is back, and this card may not update until then.")
	}
	return items
}

// guestName is a guest as Proxmox names it: CT 101 or VM 200.
func guestName(g store.Entity) string {
	kind := "CT "
	if g.Type == string(policy.TargetVM) {
		kind = "VM "
	}
	return kind + strconv.Itoa(g.AttrInt("vmid"))
}

// untrustedLines: a free-form command's effect cannot be read ahead.
func untrustedLines(CardView, cardTarget) []string {
	return []string{"No preview: what a free-form command changes cannot be known before it runs. Read the commands above; they are all there is to go on."}
}

// dependants names what the blast radius reaches, with how.
func dependants(v CardView, label string) []string {
	if len(v.Planned.Blast) == 0 {
		return nil
	}
	plain, _ := blastLine(v.Planned.Blast)
	return []string{label + ": " + plain + "."}
}

// ownPath is the entity of Nomos's own path (CardView.OwnPath) that the
// target is or takes down, or "".
func (v CardView) ownPath(t cardTarget) string {
	for _, s := range v.OwnPath {
		if s == t.slug || slices.ContainsFunc(v.Planned.Blast, func(a policy.Affected) bool { return a.Slug == s }) {
			return s
		}
	}
	return ""
}

// snapshotList names snapshots with their times and descriptions, capped.
func snapshotList(snaps []tasks.SnapshotInfo, now time.Time) string {
	var parts []string
	for i, s := range snaps {
		if i == maxPreviewItems {
			parts = append(parts, fmt.Sprintf("and %d more", len(snaps)-maxPreviewItems))
			break
		}
		p := s.Name
		var about []string
		if !s.Taken.IsZero() {
			about = append(about, humantime.Ago(now, s.Taken))
		}
		if s.Description != "" {
			about = append(about, "“"+clip(redact.String(s.Description), previewTextLen)+"”")
		}
		if len(about) > 0 {
			p += " (" + strings.Join(about, ", ") + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// ctName names the guest as Proxmox does: CT 101, VM 200.
func ctName(t cardTarget) string {
	switch {
	case t.vmid != 0 && t.typ == string(policy.TargetVM):
		return "VM " + strconv.Itoa(t.vmid)
	case t.vmid != 0:
		return "CT " + strconv.Itoa(t.vmid)
	}
	return t.display
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// cardPreview reads the execution's preview for its card.
func (b *Bot) cardPreview(ctx context.Context, id uuid.UUID) CardPreview {
	p, err := b.store.ExecutionPreview(ctx, id)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			b.logger.Warn("read a plan's preview", "execution_id", id, "err", err)
		}
		return CardPreview{}
	}
	cp := CardPreview{Requested: true, RequestedAt: p.RequestedAt}
	if len(p.Result) > 0 {
		var r tasks.PreviewResult
		if json.Unmarshal(p.Result, &r) == nil {
			cp.Result = &r
		}
	}
	return cp
}

// awaitPreview edits the card once more when a preview it shows is still
// awaited: when it arrives the store's notice edits it, and at the end of
// the wait the card says it is unavailable.
func (b *Bot) awaitPreview(ctx context.Context, v CardView) {
	now := b.now()
	shown := append([]CardPreview{v.Preview}, v.StepPreviews...)
	ids := []uuid.UUID{v.Planned.Execution.ID}
	for _, st := range v.Planned.Steps {
		ids = append(ids, st.Execution.ID)
	}
	for i, p := range shown {
		if !p.pending(now) || i >= len(ids) {
			continue
		}
		head := v.Planned.Execution.ID
		if cur := b.cardPreview(ctx, ids[i]); cur.Result != nil {
			// It arrived while the card was being posted.
			b.cards.update(head)
			return
		}
		b.cards.schedule(head, p.RequestedAt.Add(executions.PreviewWait).Sub(now)+time.Second)
		return
	}
}
