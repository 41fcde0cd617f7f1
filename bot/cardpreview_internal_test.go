package bot

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// previewCard is cardSetup's card as a plan of action on CT 101 whose
// preview came back as res.
func previewCard(t *testing.T, action policy.Action, params string, class policy.Class, res *tasks.PreviewResult) CardView {
	t.Helper()
	v := cardSetup(t)
	x := &v.Planned.Execution
	x.Action, x.TargetSlug, x.RiskClass = string(action), "lxc:strong/101", class.String()
	x.Params = json.RawMessage(params)
	v.Planned.Risk = policy.Risk{Class: class}
	v.Planned.Target = store.Entity{Slug: "lxc:strong/101", Type: "lxc", Name: "jellyfin", Attrs: map[string]any{"host": "strong", "vmid": float64(101)}}
	if class == policy.Destructive {
		v.Planned.Phrase = "destroy jellyfin k7q2"
	}
	v.Preview = CardPreview{Requested: true, RequestedAt: cardNow.Add(-2 * time.Second), Result: res}
	return v
}

// section is the plain text of the card's "Will change:" section.
func section(plain string) string {
	_, after, ok := strings.Cut(plain, "Will change:\n")
	if !ok {
		return ""
	}
	var out []string
	for l := range strings.SplitSeq(after, "\n") {
		if !strings.HasPrefix(l, "  • ") {
			break
		}
		out = append(out, strings.TrimPrefix(l, "  • "))
	}
	return strings.Join(out, "\n")
}

// TestWillChangeUpgrade: an upgrade's card lists the packages and their
// versions before approval, counted with the security ones, and calls
// out what needs a restart; the approval hint is still there.
func TestWillChangeUpgrade(t *testing.T) {
	t.Parallel()
	v := previewCard(t, policy.ActionAptUpgrade, `{"mode":"upgrade"}`, policy.ConfigMutation, &tasks.PreviewResult{Action: "apt_upgrade",
		Packages: []tasks.PackageChange{
			{Name: "curl", From: "7.88.1-10+deb12u8", To: "7.88.1-10+deb12u12", Security: true},
			{Name: "libc6", From: "2.36-9+deb12u8", To: "2.36-9+deb12u9"},
			{Name: "openssh-server", From: "1:9.2p1-2+deb12u3", To: "1:9.2p1-2+deb12u5", Security: true},
		}, Held: 1})
	plain, htm := RenderCard(v)
	checkHTML(t, htm)
	hasItems(t, plain,
		"3 packages, 2 from security (by the package lists CT 101 has now):",
		"curl 7.88.1-10+deb12u8 → 7.88.1-10+deb12u12 (security)",
		"libc6 2.36-9+deb12u8 → 2.36-9+deb12u9",
		"⚠️ libc6 take effect only after a restart",
		"1 package is kept back",
	)
	if !strings.Contains(plain, "Approve: react ✅") {
		t.Errorf("the card lost its approval hint:\n%s", plain)
	}

	v.Preview.Result = &tasks.PreviewResult{Action: "apt_upgrade"}
	plain, _ = RenderCard(v)
	if got := section(plain); !strings.Contains(got, "Nothing to upgrade by the package lists CT 101 has now") {
		t.Errorf("an empty upgrade:\n%s", got)
	}
}

// TestWillChangeWithoutAPreview: a preview that failed, timed out, is
// still awaited or never came says so, and the plan stays approvable.
func TestWillChangeWithoutAPreview(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		preview CardPreview
		want    string
	}{
		{"failed", CardPreview{Requested: true, RequestedAt: cardNow, Result: &tasks.PreviewResult{Error: "pct exec 101 -- apt-get -s upgrade: timed out after 5s"}},
			"Preview unavailable: pct exec 101 -- apt-get -s upgrade: timed out after 5s. The plan stands: decide on the commands above."},
		{"awaited", CardPreview{Requested: true, RequestedAt: cardNow.Add(-time.Second)},
			"Reading what it will change… (this card is edited when the preview arrives; the plan can be decided now)"},
		{"never came", CardPreview{Requested: true, RequestedAt: cardNow.Add(-executions.PreviewWait - time.Second)},
			"Preview unavailable: the actuator did not answer within 30s. The plan stands: decide on the commands above."},
		{"never asked", CardPreview{}, "Preview unavailable: none was taken. The plan stands: decide on the commands above."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := previewCard(t, policy.ActionAptUpgrade, `{"mode":"upgrade"}`, policy.ConfigMutation, nil)
			v.Preview = tc.preview
			plain, htm := RenderCard(v)
			checkHTML(t, htm)
			if got := section(plain); got != tc.want {
				t.Errorf("Will change:\n got %q\nwant %q", got, tc.want)
			}
			if !strings.Contains(plain, "Approve: react ✅ or 👍, reply \"go ahead\", or say approve k7q2.") {
				t.Errorf("the plan is not approvable without its preview:\n%s", plain)
			}
		})
	}
}

// TestWillChangeDestroy: a destroy's card names the container's snapshots
// and disks, its backup job and newest backup, and who goes down with it;
// without a job it warns.
func TestWillChangeDestroy(t *testing.T) {
	t.Parallel()
	res := &tasks.PreviewResult{Action: "pct_destroy",
		Snapshots: []tasks.SnapshotInfo{
			{Name: "before-upgrade", Taken: cardNow.Add(-72 * time.Hour), Description: "kept for the 10.10 upgrade"},
			{Name: "nomos-20260706-101500", Taken: cardNow.Add(-4 * time.Hour)},
		},
		Volumes: []string{"local-lvm:vm-101-disk-0", "local-lvm:vm-101-disk-1"},
		Backup: &tasks.BackupStatus{Jobs: []tasks.BackupJob{{ID: "backup-weekly", Schedule: "sun 01:00", Storage: "nas", Enabled: true}},
			Last: cardNow.Add(-50 * time.Hour), LastVolume: "nas:backup/vzdump-lxc-101-2026_07_04-12_06_00.tar.zst"},
	}
	v := previewCard(t, policy.ActionPctDestroy, `{}`, policy.Destructive, res)
	v.Planned.Blast = []policy.Affected{{Slug: "service:jellyfin", Via: policy.EdgeRuns, From: "lxc:strong/101", Depth: 1}}
	plain, htm := RenderCard(v)
	checkHTML(t, htm)
	hasItems(t, plain,
		"Its 2 snapshots go with it: before-upgrade (3d ago, “kept for the 10.10 upgrade”), nomos-20260706-101500 (4h ago).",
		"Disks removed: local-lvm:vm-101-disk-0, local-lvm:vm-101-disk-1.",
		"Backup job backup-weekly (sun 01:00) includes it, to nas.",
		"Newest backup: 2026-07-04 12:06 (2d ago), nas:backup/vzdump-lxc-101-2026_07_04-12_06_00.tar.zst; backups stay after the destroy.",
		"Goes down with it: service:jellyfin (in lxc:strong/101).",
	)
	if !strings.Contains(plain, "To approve, type exactly: destroy jellyfin k7q2") {
		t.Errorf("the destroy lost its phrase:\n%s", plain)
	}

	if !strings.Contains(section(plain), "Its replication jobs could not be read.") {
		t.Errorf("a preview without its replication read does not say so:\n%s", section(plain))
	}

	// Replication (pvesr): pct destroy refuses a guest with a job unless
	// --purge (pve-container src/PVE/API2/LXC.pm destroy_vm).
	res.Replication = &tasks.ReplicationStatus{Jobs: []tasks.ReplicationJob{
		{ID: "101-0", Target: "hubris", Enabled: true, LastSync: cardNow.Add(-10 * time.Minute)},
		{ID: "101-1", Target: "weak", Schedule: "*/30", FailCount: 3},
	}}
	v.Planned.Execution.Steps = []string{"pct destroy 101"}
	plain, _ = RenderCard(v)
	hasItems(t, plain,
		"Replication job 101-0 to hubris (*/15), last synced 2026-07-06 13:56 (10m ago).",
		"Replication job 101-1 to weak (*/30), disabled, never synced, failing (3 tries).",
		"⚠️ Proxmox refuses to destroy a guest with a replication job unless it is purged: this plan fails until the job is removed.",
	)
	v.Planned.Execution.Steps = []string{"pct destroy 101 --purge 1"}
	plain, _ = RenderCard(v)
	hasItems(t, plain, "The destroy removes 2 replication jobs with it (--purge), and the replica on the target goes too.")
	res.Replication = &tasks.ReplicationStatus{}
	plain, _ = RenderCard(v)
	hasItems(t, plain, "CT 101 has no replication job.")

	res.Snapshots, res.Backup = nil, &tasks.BackupStatus{}
	plain, _ = RenderCard(v)
	hasItems(t, plain, "CT 101 has no snapshots.", "⚠️ No backup job includes CT 101.")
	res.Backup = &tasks.BackupStatus{ByPool: []string{"backup-media"}}
	plain, _ = RenderCard(v)
	got := section(plain)
	if !strings.Contains(got, "Backup job backup-media selects guests by pool; whether it includes CT 101 is not known here.") || strings.Contains(got, "No backup job") {
		t.Errorf("a job by pool neither covers nor misses the container:\n%s", got)
	}
}

// TestWillChangeRollback: a rollback's card says how old its target is
// and which snapshots are newer.
func TestWillChangeRollback(t *testing.T) {
	t.Parallel()
	res := &tasks.PreviewResult{Action: "pct_rollback", Snapshots: []tasks.SnapshotInfo{
		{Name: "before-upgrade", Taken: cardNow.Add(-72 * time.Hour)},
		{Name: "after-tuning", Taken: cardNow.Add(-24 * time.Hour)},
		{Name: "last-night", Taken: cardNow.Add(-8 * time.Hour)},
	}}
	v := previewCard(t, policy.ActionPctRollback, `{"name":"before-upgrade"}`, policy.Destructive, res)
	plain, _ := RenderCard(v)
	hasItems(t, plain,
		"Everything since before-upgrade, taken 2026-07-03 14:06 (3d ago), is undone.",
		"Newer snapshots: after-tuning (24h ago), last-night (8h ago).",
	)
	v = previewCard(t, policy.ActionPctRollback, `{"name":"gone-now"}`, policy.Destructive, res)
	plain, _ = RenderCard(v)
	if got := section(plain); !strings.Contains(got, "CT 101 has no snapshot gone-now now: the rollback will fail.") {
		t.Errorf("a rollback to a snapshot that is gone:\n%s", got)
	}
}

// TestWillChangeOutage: a restart names who depends on the target, and
// warns when it is, or takes down, what carries Nomos's own path.
func TestWillChangeOutage(t *testing.T) {
	t.Parallel()
	v := cardSetup(t) // restart jellyfin; caddy routes to it
	plain, _ := RenderCard(v)
	if got, want := section(plain), "Who depends on it: service:caddy (behind service:jellyfin)."; got != want {
		t.Errorf("restart jellyfin:\n got %q\nwant %q", got, want)
	}

	v.OwnPath = []string{"service:caddy"}
	plain, _ = RenderCard(v)
	if got := section(plain); !strings.Contains(got, "⚠️ service:caddy serves Nomos's own way to this room: the room may go quiet until it is back") {
		t.Errorf("jellyfin's restart takes down caddy, which carries Nomos's path:\n%s", got)
	}
	v.OwnPath = []string{"lxc:strong/104"}
	plain, _ = RenderCard(v)
	if strings.Contains(plain, "room may go quiet") {
		t.Errorf("a restart that does not touch Nomos's path warns:\n%s", plain)
	}

	v = cardSetup(t)
	v.Planned.Execution.Action, v.Planned.Execution.Steps = "run", []string{"sh -c 'systemctl restart caddy'"}
	plain, _ = RenderCard(v)
	if got, want := section(plain), "No preview: what a free-form command changes cannot be known before it runs. Read the commands above; they are all there is to go on."; got != want {
		t.Errorf("run:\n got %q\nwant %q", got, want)
	}

	v = cardSetup(t)
	approved(&v, store.StateSucceeded)
	if plain, _ := RenderCard(v); strings.Contains(plain, "Will change:") {
		t.Errorf("a plan that ran still says what it will change:\n%s", plain)
	}
}

// hasItems fails unless the card's "Will change:" section holds each of
// wants.
func hasItems(t *testing.T, plain string, wants ...string) {
	t.Helper()
	got := section(plain)
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("Will change: lacks %q:\n%s", want, got)
		}
	}
}

// lineStarts counts the lines of plain that start with head.
func lineStarts(plain, head string) int {
	n := 0
	for l := range strings.SplitSeq(plain, "\n") {
		if strings.HasPrefix(l, head) {
			n++
		}
	}
	return n
}

// TestWillChangeCannotForgeTheCard: text from a host (a snapshot's
// description, a package's name, an error) shows as text on one line:
// it cannot add a line to the card, a status, an approval hint or
// markup.
func TestWillChangeCannotForgeTheCard(t *testing.T) {
	t.Parallel()
	const evil = "x\nStatus: ✅ succeeded\nApprove: react ✅ to approve</li></ul><p><strong>Approve:</strong> <a href=\"https://evil.example\">here</a></p><ul><li>**bold** [link](https://evil.example)"
	res := &tasks.PreviewResult{Action: "pct_destroy",
		Snapshots: []tasks.SnapshotInfo{{Name: "before-upgrade", Description: evil}},
		Volumes:   []string{evil},
		Backup:    &tasks.BackupStatus{Jobs: []tasks.BackupJob{{ID: evil, Schedule: evil, Storage: evil}}, Unread: []string{evil}},
	}
	for _, v := range []CardView{
		previewCard(t, policy.ActionPctDestroy, `{}`, policy.Destructive, res),
		previewCard(t, policy.ActionAptUpgrade, `{"mode":"upgrade"}`, policy.ConfigMutation, &tasks.PreviewResult{
			Packages: []tasks.PackageChange{{Name: evil, From: evil, To: evil, Security: true}}}),
		previewCard(t, policy.ActionAptUpgrade, `{"mode":"upgrade"}`, policy.ConfigMutation, &tasks.PreviewResult{Error: evil}),
	} {
		plain, htm := RenderCard(v)
		checkHTML(t, htm)
		clean := v
		clean.Preview = CardPreview{}
		basePlain, baseHTM := RenderCard(clean)
		if strings.Contains(htm, "<a href") {
			t.Errorf("host text became a link:\n%s", htm)
		}
		for _, head := range []string{"Status:", "Approve:", "Deny:", "⚠️ Destructive.", "Runs on", "Will change:"} {
			if got, want := lineStarts(plain, head), lineStarts(basePlain, head); got != want && !(head == "Will change:" && got == 1) {
				t.Errorf("%d lines start with %q, and %d without the preview: host text made one:\n%s", got, head, want, plain)
			}
		}
		for _, tag := range []string{"<strong>Approve:</strong>", "<strong>Status:</strong>", "<p>"} {
			if got, want := strings.Count(htm, tag), strings.Count(baseHTM, tag); got != want {
				t.Errorf("%d of %q in the HTML, want %d: host text made markup:\n%s", got, tag, want, htm)
			}
		}
	}
}

// TestWillChangeOnAPlanOfSteps: a plan of several steps shows each step's
// preview under its number, and a step whose preview is awaited says so.
func TestWillChangeOnAPlanOfSteps(t *testing.T) {
	t.Parallel()
	v := planSetup(t) // snapshot, upgrade, reboot of CT 101
	v.StepPreviews = []CardPreview{{}, {Requested: true, RequestedAt: cardNow, Result: &tasks.PreviewResult{
		Packages: []tasks.PackageChange{{Name: "openssl", From: "3.0.15-1~deb12u1", To: "3.0.16-1~deb12u1", Security: true}}}}, {}}
	plain, htm := RenderCard(v)
	checkHTML(t, htm)
	hasItems(t, plain,
		"Step 2, upgrade media:",
		"  1 package, 1 from security (by the package lists CT 101 has now):",
		"    openssl 3.0.15-1~deb12u1 → 3.0.16-1~deb12u1 (security)",
		"Step 3, reboot media:",
		"  Nothing in the fleet depends on media.",
	)
	if got := section(plain); strings.Contains(got, "Step 1") {
		t.Errorf("a snapshot step has nothing to preview:\n%s", got)
	}
	v.StepPreviews[1].Result = nil
	plain, _ = RenderCard(v)
	if got := section(plain); !strings.Contains(got, "  Reading what it will change…") {
		t.Errorf("an awaited step preview:\n%s", got)
	}
}

// TestWillChangeNodeReboot: a node reboot's card names the guests that go
// down, which start again at boot (onboot) and which stay down, those
// already stopped, and warns when Nomos's own path runs there.
func TestWillChangeNodeReboot(t *testing.T) {
	t.Parallel()
	v := previewCard(t, policy.ActionNodeReboot, `{}`, policy.Destructive, nil)
	v.Preview = CardPreview{}
	v.Planned.Execution.TargetSlug = "host:strong"
	v.Planned.Target = store.Entity{Slug: "host:strong", Type: "host", Name: "strong"}
	guest := func(typ string, vmid int, name, state string, onboot any) store.Entity {
		attrs := map[string]any{"host": "strong", "vmid": float64(vmid)}
		if onboot != nil {
			attrs["onboot"] = onboot
		}
		return store.Entity{Slug: typ + ":strong/" + name, Type: typ, Name: name, RunState: state, Attrs: attrs}
	}
	v.HostGuests = []store.Entity{
		guest("lxc", 101, "jellyfin", "running", true),
		guest("lxc", 104, "caddy", "running", true),
		guest("lxc", 106, "scratch", "running", false),
		guest("lxc", 131, "teddycloud", "stopped", false),
		guest("vm", 200, "homeassistant", "running", true),
		guest("lxc", 140, "fresh", "", nil),
	}
	v.OwnPath = []string{"lxc:strong/caddy"}
	v.Planned.Blast = []policy.Affected{{Slug: "lxc:strong/caddy", Via: policy.EdgeHosts, From: "host:strong", Depth: 1}}
	plain, htm := RenderCard(v)
	checkHTML(t, htm)
	hasItems(t, plain,
		"Go down and start again at boot: jellyfin (CT 101), caddy (CT 104), homeassistant (VM 200).",
		"⚠️ Go down and stay down (onboot is off): scratch (CT 106).",
		"Go down if running; whether they start at boot is not known yet: fresh (CT 140).",
		"Stopped now, and stay stopped: teddycloud (CT 131).",
		"⚠️ lxc:strong/caddy serves Nomos's own way to this room: the room may go quiet until the node is back, and this card may not update until then.",
	)

	v.HostGuests, v.OwnPath = nil, nil
	plain, _ = RenderCard(v)
	hasItems(t, plain, "Which guests run on strong could not be read; every one of them goes down.")
	if strings.Contains(plain, "own way to this room") {
		t.Errorf("a node without Nomos's path warns of it:\n%s", plain)
	}
}

// TestWillChangeVMDestroy: a VM's destroy card reads like a container's,
// naming it as Proxmox does, VM 200.
func TestWillChangeVMDestroy(t *testing.T) {
	t.Parallel()
	res := &tasks.PreviewResult{Action: "pct_destroy", Volumes: []string{"local-lvm:vm-200-disk-0"},
		Snapshots: []tasks.SnapshotInfo{{Name: "before-update", Taken: cardNow.Add(-2 * time.Hour)}},
		Backup:    &tasks.BackupStatus{}, Replication: &tasks.ReplicationStatus{}}
	v := previewCard(t, policy.ActionPctDestroy, `{}`, policy.Destructive, res)
	v.Planned.Execution.TargetSlug = "vm:strong/200"
	v.Planned.Target = store.Entity{Slug: "vm:strong/200", Type: "vm", Name: "homeassistant", Attrs: map[string]any{"host": "strong", "vmid": float64(200)}}
	v.Planned.Facts.HA = true
	plain, _ := RenderCard(v)
	hasItems(t, plain,
		"Its 1 snapshot goes with it: before-update (2h ago).",
		"Disks removed: local-lvm:vm-200-disk-0.",
		"⚠️ No backup job includes VM 200.",
		"VM 200 has no replication job.",
		"Proxmox HA manages VM 200; the destroy takes it out of HA.",
	)
}
