package actuator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/internal/logctx"
	"github.com/nomoshq/nomos/internal/pveout"
	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// previewer reads, for one action, what its plan would change, and fills
// res with it. It runs only read-only commands, through readOnly.
type previewer func(ctx context.Context, a *Actuator, r tasks.PreviewRun, res *tasks.PreviewResult) error

// previewers are the host previews, by action (tasks.PreviewActions).
var previewers = map[policy.Action]previewer{
	policy.ActionAptUpgrade:  previewUpgrade,
	policy.ActionPctDestroy:  previewDestroy,
	policy.ActionPctRollback: previewSnapshots,
	policy.ActionPctCreate:   previewCreate,
}

// errNotReadOnly marks a preview command the classifier would not call
// read_only: it is refused before it reaches the host.
var errNotReadOnly = errors.New("not read-only")

// maxPreviewBytes bounds what one preview command may print.
const maxPreviewBytes = 1 << 20

// handlePreview verifies a preview request, runs its action's reads
// within Config.PreviewTimeout and reports what it read or why it could
// not, signed, on the results queue. A request that does
// not verify, is for another actuator or has expired runs nothing and is
// not answered.
func (a *Actuator) handlePreview(taskCtx context.Context, t *asynq.Task) error {
	defer a.enter()()
	r, err := tasks.VerifyPreviewRun(a.orderKeys, t.Payload(), a.now())
	if errors.Is(err, tasks.ErrExpired) {
		a.metrics.refuse(kindPreview, tasks.RefusedExpired)
		a.log.Debug("preview request expired before it could run", "execution_id", r.ExecutionID, "expired_at", r.ExpiresAt)
		return nil
	}
	if err != nil {
		a.metrics.refuse(kindPreview, refusalFor(err))
		claims := tasks.Claimed(t.Payload())
		a.log.Warn("preview request refused: it is not signed by the bot", "execution_id", claims.ExecutionID, "err", err)
		return fmt.Errorf("refuse preview %s: %v: %w", claims.ExecutionID, err, asynq.SkipRetry)
	}
	log := a.log.With("execution_id", r.ExecutionID, "action", r.Action, "host", r.Target.Host)
	if err := a.misaddressed(log, kindPreview, r.ExecutionID, r.Actuator, r.Site); err != nil {
		return err
	}
	release, err := a.probeHosts.acquire(r.Target.HostAddr, kindPreview, a.now())
	if errors.Is(err, errHostBusy) {
		return a.deferProbe(taskCtx, log, t)
	}
	a.metrics.verify(kindPreview)
	ctx, cancel := context.WithTimeoutCause(logctx.With(a.workCtx, log), a.cfg.PreviewTimeout,
		fmt.Errorf("%w after %s", ErrTimedOut, a.cfg.PreviewTimeout))
	defer cancel()
	res := tasks.PreviewResult{ExecutionID: r.ExecutionID, Actuator: a.cfg.Name, Action: r.Action}
	if err != nil {
		// The host has not answered the reads it holds: say so now.
		a.metrics.heldBack.WithLabelValues(heldHostNotAnswering).Inc()
	} else {
		err = a.preview(ctx, r, &res)
		release()
	}
	if err != nil {
		log.Warn("preview unavailable", "err", err)
		res = tasks.PreviewResult{ExecutionID: r.ExecutionID, Actuator: a.cfg.Name, Action: r.Action,
			Error: clipString(redact.String(err.Error()), tasks.MaxPreviewError)}
	}
	res.At = a.now()
	task, err := tasks.NewPreviewResultTask(a.cfg.ReportSigningKey, res)
	if err != nil {
		return fmt.Errorf("report preview %s: %w", r.ExecutionID, err)
	}
	if err := a.enqueue(a.reportCtx, task); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		log.Warn("could not enqueue a preview", "err", err)
		return fmt.Errorf("report preview %s: %w", r.ExecutionID, err)
	}
	return nil
}

// preview runs r's action's previewer; ctx's end, the timeout among
// them, fails it.
func (a *Actuator) preview(ctx context.Context, r tasks.PreviewRun, res *tasks.PreviewResult) error {
	p, ok := previewers[policy.Action(r.Action)]
	if !ok {
		return fmt.Errorf("%s has no preview the actuator reads", r.Action)
	}
	err := p(ctx, a, r, res)
	if err != nil && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// readOnly runs one preview command on the target's host, after the
// classifier has called it read_only (on the host, the stricter reading):
// a preview never sends anything else, whatever builds its command. The
// host's gate checks it again. A non-zero exit fails it.
func (a *Actuator) readOnly(ctx context.Context, r tasks.PreviewRun, cmd string) (string, error) {
	if risk := policy.ClassifyCommand(cmd, policy.TargetHost); risk.Class != policy.ReadOnly {
		return "", fmt.Errorf("refused %q: %w (%s)", cmd, errNotReadOnly, strings.Join(risk.Reasons, "; "))
	}
	out, errOut, code, err := a.capture(ctx, r.Target.HostAddr, cmd, maxPreviewBytes)
	if err != nil {
		return "", fmt.Errorf("%s: %w", cmd, err)
	}
	if code != 0 {
		return "", fmt.Errorf("%s exited %d: %s", cmd, code, cmp.Or(lastLine(errOut), lastLine(out)))
	}
	return out, nil
}

// container is the vmid a container's preview reads, or an error for a
// target without one.
func container(r tasks.PreviewRun) (int, error) {
	if policy.ValidateVMID(r.Target.VMID) != nil {
		return 0, fmt.Errorf("%s targets no container", r.Action)
	}
	return r.Target.VMID, nil
}

// guestTool is the command that reads the guest's config and snapshots:
// qm for a VM, pct for a container. Both print snapshots alike
// (PVE::GuestHelpers::print_snapshot_tree) and their configs as key:
// value lines.
func guestTool(r tasks.PreviewRun) string {
	if r.Target.Type == string(policy.TargetVM) {
		return "qm"
	}
	return "pct"
}

// previewUpgrade reads what apt would upgrade in the container, from the
// package lists it has now (apt-get -s upgrade; the plan's own apt-get
// update may find more).
func previewUpgrade(ctx context.Context, a *Actuator, r tasks.PreviewRun, res *tasks.PreviewResult) error {
	vmid, err := container(r)
	if err != nil {
		return err
	}
	out, err := a.readOnly(ctx, r, "pct exec "+strconv.Itoa(vmid)+" -- apt-get -s upgrade")
	if err != nil {
		return err
	}
	sim, err := pveout.ParseAptSimulation(out)
	if err != nil {
		return err
	}
	res.Held = sim.Held
	var dropped []string
	for _, c := range sim.Changes {
		p := tasks.PackageChange{Name: c.Name, From: c.From, To: c.To, Security: c.Security()}
		if p.Validate() != nil || len(res.Packages) == tasks.MaxPreviewListed {
			dropped = append(dropped, c.Name)
			continue
		}
		res.Packages = append(res.Packages, p)
	}
	if len(dropped) > 0 {
		// Never shown: a name apt printed that Debian would not allow is
		// not passed on to the room, and a list without it would not be
		// the whole upgrade.
		return fmt.Errorf("apt listed %d packages whose name or version Debian would not allow", len(dropped))
	}
	return nil
}

// previewSnapshots reads the guest's snapshots with their times and
// descriptions: what a rollback discards and how old its target is.
func previewSnapshots(ctx context.Context, a *Actuator, r tasks.PreviewRun, res *tasks.PreviewResult) error {
	vmid, err := container(r)
	if err != nil {
		return err
	}
	out, err := a.readOnly(ctx, r, guestTool(r)+" listsnapshot "+strconv.Itoa(vmid))
	if err != nil {
		return err
	}
	snaps, err := pveout.ParseSnapshots(out)
	if err != nil {
		return err
	}
	for _, s := range snaps {
		info := tasks.SnapshotInfo{Name: s.Name, Taken: s.Taken, Description: s.Description}
		if tasks.ValidatePreviewText(info.Description) != nil {
			// A description that is not one short printable line is
			// left out; the snapshot is still listed.
			info.Description = ""
		}
		if info.Validate() != nil || len(res.Snapshots) == tasks.MaxPreviewListed {
			continue
		}
		res.Snapshots = append(res.Snapshots, info)
	}
	return nil
}

// previewDestroy reads what goes with the guest, a container or a VM:
// its snapshots, its volumes, the backup jobs that include it and its
// newest backup on their storages, and its replication jobs.
func previewDestroy(ctx context.Context, a *Actuator, r tasks.PreviewRun, res *tasks.PreviewResult) error {
	vmid, err := container(r)
	if err != nil {
		return err
	}
	if err := previewSnapshots(ctx, a, r, res); err != nil {
		return err
	}
	out, err := a.readOnly(ctx, r, guestTool(r)+" config "+strconv.Itoa(vmid)+" --current 1")
	if err != nil {
		return err
	}
	conf, err := pveout.ParseConfig(out)
	if err != nil {
		logctx.From(ctx).Warn("preview read what it could of a guest's configuration", "err", err)
	}
	// A container's root disk and mount points, a VM's disks.
	for _, v := range append(append([]pveout.Volume{deref(conf.RootFS)}, conf.Mounts...), conf.Disks...) {
		// Bind and device mounts are the host's: destroy leaves them.
		if v.Kind == "volume" && tasks.ValidateVolume(v.Source) == nil && len(res.Volumes) < tasks.MaxPreviewListed {
			res.Volumes = append(res.Volumes, v.Source)
		}
	}
	backup, err := a.backupStatus(ctx, r, vmid)
	if err != nil {
		return err
	}
	res.Backup = backup
	res.Replication, err = a.replicationStatus(ctx, r, vmid)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		// The rest of the preview stands; the card says this part is
		// missing.
		logctx.From(ctx).Warn("preview could not read the replication jobs", "err", err)
	}
	return nil
}

// replicationStatus reads the storage replication jobs of the guest's
// node and keeps vmid's: pct destroy refuses a container with one unless
// --purge, which removes them with it.
func (a *Actuator) replicationStatus(ctx context.Context, r tasks.PreviewRun, vmid int) (*tasks.ReplicationStatus, error) {
	node := cmp.Or(r.Target.Node, r.Target.Host)
	if tasks.ValidateNode(node) != nil {
		return nil, fmt.Errorf("no node name to read replication jobs on")
	}
	out, err := a.readOnly(ctx, r, nodeReplicationCmd(node))
	if err != nil {
		return nil, err
	}
	jobs, err := pveout.ParseReplicationJobs([]byte(out))
	if err != nil {
		return nil, err
	}
	st := &tasks.ReplicationStatus{}
	for _, j := range jobs {
		if j.Guest != vmid {
			continue
		}
		job := tasks.ReplicationJob{ID: j.ID, Target: j.Target, Schedule: j.Schedule, Enabled: !j.Disabled, LastSync: j.LastSync, FailCount: j.FailCount}
		if (tasks.ReplicationStatus{Jobs: []tasks.ReplicationJob{job}}).Validate() != nil || len(st.Jobs) == tasks.MaxPreviewListed {
			return nil, fmt.Errorf("replication job %.20q is not one Proxmox would write", j.ID)
		}
		st.Jobs = append(st.Jobs, job)
	}
	return st, nil
}

func deref(v *pveout.Volume) pveout.Volume {
	if v == nil {
		return pveout.Volume{}
	}
	return *v
}

// backupStatus reads the cluster's backup jobs, keeps those that include
// vmid on its node, and finds its newest backup on their storages.
func (a *Actuator) backupStatus(ctx context.Context, r tasks.PreviewRun, vmid int) (*tasks.BackupStatus, error) {
	out, err := a.readOnly(ctx, r, listBackupJobs)
	if err != nil {
		return nil, err
	}
	jobs, err := pveout.ParseBackupJobs([]byte(out))
	if err != nil {
		return nil, err
	}
	return guestBackup(ctx, jobs, vmid, cmp.Or(r.Target.Node, r.Target.Host), func(storage string) ([]pveout.Backup, error) {
		out, err := a.readOnly(ctx, r, "pvesm list "+storage+" --content backup --vmid "+strconv.Itoa(vmid))
		if err != nil {
			return nil, err
		}
		return pveout.ParseBackupList(out)
	})
}

// guestBackup is what backs guest vmid on node up: the jobs that select
// it and its newest backup that list finds on their storages. A storage
// that cannot be listed is named in Unread; only the end of ctx fails.
// Only a job id and a storage id Proxmox would accept are kept, so
// nothing else reaches a command or the room.
func guestBackup(ctx context.Context, jobs []pveout.BackupJob, vmid int, node string, list func(storage string) ([]pveout.Backup, error)) (*tasks.BackupStatus, error) {
	st := &tasks.BackupStatus{}
	var storages []string
	for _, j := range jobs {
		covers, ok := j.Covers(vmid, node)
		if !ok && (tasks.BackupStatus{ByPool: []string{j.ID}}).Validate() == nil {
			st.ByPool = append(st.ByPool, j.ID)
		}
		if !covers {
			continue
		}
		job := tasks.BackupJob{ID: j.ID, Schedule: j.Schedule, Storage: cmp.Or(j.Storage, "local"), Enabled: j.Enabled}
		if (tasks.BackupStatus{Jobs: []tasks.BackupJob{job}}).Validate() != nil {
			job.Schedule = ""
			if (tasks.BackupStatus{Jobs: []tasks.BackupJob{job}}).Validate() != nil {
				continue
			}
		}
		st.Jobs = append(st.Jobs, job)
		if !slices.Contains(storages, job.Storage) {
			storages = append(storages, job.Storage)
		}
	}
	for _, s := range storages {
		backups, err := list(s)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			logctx.From(ctx).Warn("could not list a storage's backups", "storage", s, "err", err)
			st.Unread = append(st.Unread, s)
			continue
		}
		for _, b := range backups {
			if b.VMID == vmid && b.Taken.After(st.Last) && tasks.ValidateVolume(b.Volid) == nil {
				st.Last, st.LastVolume = b.Taken, b.Volid
			}
		}
	}
	return st, nil
}

// previewCreate reads the vmid the cluster would give a new container
// now; pct_create asks for the next free one when it runs.
func previewCreate(ctx context.Context, a *Actuator, r tasks.PreviewRun, res *tasks.PreviewResult) error {
	out, err := a.readOnly(ctx, r, "pvesh get /cluster/nextid")
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.Trim(strings.TrimSpace(out), `"`))
	if err != nil || policy.ValidateVMID(n) != nil {
		return fmt.Errorf("pvesh get /cluster/nextid printed %.20q, not a vmid", strings.TrimSpace(out))
	}
	res.NextID = n
	return nil
}
