package tasks

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hibiken/asynq"
	"github.com/nomoshq/nomos/policy"
)

// A plan's preview: when a plan is made, the bot asks the actuator what it
// would change (PreviewRun, signed with the order key, on the probes
// queue); the actuator runs fixed, read-only commands and answers with
// what it read (PreviewResult, signed with its report key, on the results
// queue). Nothing is changed on any host.
const (
	TypePreviewRun    = "preview:run"
	TypePreviewResult = "preview:result"
)

// PreviewActions are the actions whose preview the actuator reads from
// the host, keyed by action so that another kind of guest can add its
// own. Every other action's preview, if it has one, needs no host: the
// bot writes it from the fleet it knows.
var PreviewActions = []policy.Action{
	policy.ActionAptUpgrade, policy.ActionPctDestroy, policy.ActionPctRollback, policy.ActionPctCreate,
}

// PreviewTimeout bounds the actuator's reads for one preview, connection
// included. A preview that takes longer is reported as unavailable; the
// plan stands either way.
const PreviewTimeout = 5 * time.Second

// Bounds of a preview result. A result past them is malformed.
const (
	// MaxPreviewListed bounds each list: packages, snapshots, volumes,
	// backup jobs.
	MaxPreviewListed = 500
	// MaxPreviewError bounds the error text of a failed preview.
	MaxPreviewError = 512
	// MaxPreviewText bounds a snapshot's description and a job's
	// schedule.
	MaxPreviewText = 120
)

// PreviewRun asks the actuator for a plan's preview. Action picks the
// reads; only the validated target (host address, node, vmid) and, for a
// rollback, the snapshot name are ever put into a command.
type PreviewRun struct {
	Version     int    `json:"v"`
	ExecutionID string `json:"execution_id"`
	// Actuator names the actuator the request is for.
	Actuator string `json:"actuator"`
	// Site is the target's host's site; another site's actuator drops it.
	Site     string    `json:"site,omitempty"`
	Action   string    `json:"action"`
	Target   Target    `json:"target"`
	IssuedAt time.Time `json:"issued_at"`
	// ExpiresAt is when the preview is no longer worth taking: the bot
	// has stopped waiting for it. Required.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// PreviewResult is what the actuator read for a plan. With Error set the
// preview could not be taken and the rest says nothing. Every field is a
// number, a time, a name checked against what Proxmox or Debian allows,
// or a short line of printable text: the bot shows it as text, never as
// markup.
type PreviewResult struct {
	Version     int    `json:"v"`
	ExecutionID string `json:"execution_id"`
	Actuator    string `json:"actuator"`
	Action      string `json:"action"`
	Error       string `json:"error,omitempty"`
	// Packages are what an upgrade would install, in apt's order.
	Packages []PackageChange `json:"packages,omitempty"`
	// Held counts the packages apt would keep back.
	Held int `json:"held,omitempty"`
	// Snapshots are the container's snapshots, oldest first.
	Snapshots []SnapshotInfo `json:"snapshots,omitempty"`
	// Volumes are the volumes a destroy removes: the root disk and the
	// mount points on storage (bind mounts are the host's and stay).
	Volumes []string `json:"volumes,omitempty"`
	// Backup says what backs the container up; nil when not read.
	Backup *BackupStatus `json:"backup,omitempty"`
	// Replication lists the container's storage replication jobs; nil
	// when not read.
	Replication *ReplicationStatus `json:"replication,omitempty"`
	// NextID is the vmid the cluster would give a new container now.
	NextID int       `json:"next_id,omitempty"`
	At     time.Time `json:"at"`
}

// PackageChange is one package an upgrade moves from one version to
// another. Security says it comes from a security archive.
type PackageChange struct {
	Name     string `json:"name"`
	From     string `json:"from,omitempty"`
	To       string `json:"to"`
	Security bool   `json:"security,omitempty"`
}

// SnapshotInfo is one snapshot as pct listsnapshot prints it.
type SnapshotInfo struct {
	Name string `json:"name"`
	// Taken is when it was taken, in the node's clock; zero when the
	// listing gave no time.
	Taken       time.Time `json:"taken,omitzero"`
	Description string    `json:"description,omitempty"`
}

// BackupStatus is what backs a container up: the scheduled jobs that
// include it and its newest backup on those jobs' storages.
type BackupStatus struct {
	Jobs []BackupJob `json:"jobs,omitempty"`
	// Last is the newest backup found, zero when none is.
	Last time.Time `json:"last,omitzero"`
	// LastVolume is that backup's volume id.
	LastVolume string `json:"last_volume,omitempty"`
	// Unread names storages whose backup list could not be read.
	Unread []string `json:"unread,omitempty"`
	// ByPool names the jobs that select guests by pool: whether they
	// include the container, /cluster/backup does not say.
	ByPool []string `json:"by_pool,omitempty"`
}

// BackupJob is a scheduled vzdump job that includes the container.
type BackupJob struct {
	ID       string `json:"id"`
	Schedule string `json:"schedule,omitempty"`
	Storage  string `json:"storage,omitempty"`
	Enabled  bool   `json:"enabled"`
}

// ReplicationStatus is a container's storage replication jobs (pvesr);
// Jobs is empty when it has none.
type ReplicationStatus struct {
	Jobs []ReplicationJob `json:"jobs,omitempty"`
}

// ReplicationJob is one storage replication job of the container.
type ReplicationJob struct {
	ID     string `json:"id"`
	Target string `json:"target"`
	// Schedule is empty for Proxmox's default, */15.
	Schedule string `json:"schedule,omitempty"`
	Enabled  bool   `json:"enabled"`
	// LastSync is its last successful sync; zero when it never had one.
	LastSync  time.Time `json:"last_sync,omitzero"`
	FailCount int       `json:"fail_count,omitempty"`
}

// ValidateReplicationID checks a storage replication job id: GUEST-JOBNUM.
func ValidateReplicationID(id string) error {
	if !isReplicationID(id) {
		return fmt.Errorf("%q is not a replication job id", id)
	}
	return nil
}

// Validate checks the jobs' ids, target nodes and schedules.
func (s ReplicationStatus) Validate() error {
	if len(s.Jobs) > MaxPreviewListed {
		return fmt.Errorf("more than %d replication jobs", MaxPreviewListed)
	}
	for _, j := range s.Jobs {
		switch {
		case !isReplicationID(j.ID):
			return fmt.Errorf("%q is not a replication job id", j.ID)
		case ValidateNode(j.Target) != nil:
			return fmt.Errorf("replication job %s: %q is not a node", j.ID, j.Target)
		case j.FailCount < 0:
			return fmt.Errorf("replication job %s: fail count %d", j.ID, j.FailCount)
		}
		if err := ValidatePreviewText(j.Schedule); err != nil {
			return fmt.Errorf("replication job %s: schedule: %w", j.ID, err)
		}
	}
	return nil
}

func (r PreviewRun) version() int    { return r.Version }
func (r PreviewResult) version() int { return r.Version }

// ValidatePreviewText checks a short line of text from a host: printable,
// one line, no more than MaxPreviewText bytes.
func ValidatePreviewText(s string) error {
	switch {
	case len(s) > MaxPreviewText:
		return fmt.Errorf("%d bytes of text", len(s))
	case !utf8.ValidString(s):
		return errors.New("text is not UTF-8")
	case strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return fmt.Errorf("text %q holds a control character or a line break", s)
	}
	return nil
}

func (r PreviewRun) validate() error {
	switch {
	case r.ExecutionID == "" || r.Actuator == "" || r.Action == "" || r.IssuedAt.IsZero() || r.ExpiresAt.IsZero():
		return errors.New("execution id, actuator, action, issue time and expiry are required")
	case r.Target.HostAddr == "":
		return errors.New("a host address is required")
	case r.Target.VMID != 0 && policy.ValidateVMID(r.Target.VMID) != nil:
		return fmt.Errorf("vmid %d is out of range", r.Target.VMID)
	}
	if r.Target.Node != "" {
		if err := ValidateNode(r.Target.Node); err != nil {
			return err
		}
	}
	return policy.ValidateSiteName(siteOf(r.Site))
}

func (r PreviewResult) validate() error {
	switch {
	case r.ExecutionID == "" || r.Actuator == "" || r.Action == "" || r.At.IsZero():
		return errors.New("execution id, actuator, action and time are required")
	case len(r.Error) > MaxPreviewError || !utf8.ValidString(r.Error):
		return fmt.Errorf("an error of %d bytes", len(r.Error))
	case r.Error != "" && (len(r.Packages) > 0 || len(r.Snapshots) > 0 || len(r.Volumes) > 0 || r.Backup != nil || r.Replication != nil || r.NextID != 0):
		return errors.New("a failed preview carries findings")
	case len(r.Packages) > MaxPreviewListed || len(r.Snapshots) > MaxPreviewListed || len(r.Volumes) > MaxPreviewListed:
		return fmt.Errorf("more than %d packages, snapshots or volumes", MaxPreviewListed)
	case r.Held < 0 || r.Held > 1<<20:
		return fmt.Errorf("%d held packages", r.Held)
	case r.NextID != 0 && policy.ValidateVMID(r.NextID) != nil:
		return fmt.Errorf("next id %d is out of range", r.NextID)
	}
	for _, p := range r.Packages {
		if err := p.Validate(); err != nil {
			return err
		}
	}
	for _, s := range r.Snapshots {
		if err := s.Validate(); err != nil {
			return err
		}
	}
	for _, v := range r.Volumes {
		if err := ValidateVolume(v); err != nil {
			return err
		}
	}
	if r.Replication != nil {
		if err := r.Replication.Validate(); err != nil {
			return err
		}
	}
	if r.Backup != nil {
		return r.Backup.Validate()
	}
	return nil
}

// Validate checks a package change against Debian's rules for names and
// versions.
func (p PackageChange) Validate() error {
	switch {
	case !isDebPackage(p.Name):
		return fmt.Errorf("%q is not a Debian package name", p.Name)
	case !debVersion.match(p.To) || (p.From != "" && !debVersion.match(p.From)):
		return fmt.Errorf("package %s: %q or %q is not a Debian version", p.Name, p.From, p.To)
	}
	return nil
}

// Validate checks a snapshot's name against Proxmox's rule and its
// description as a short line of text.
func (s SnapshotInfo) Validate() error {
	if err := policy.ValidateSnapshotName(s.Name); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if err := ValidatePreviewText(s.Description); err != nil {
		return fmt.Errorf("snapshot %s: %w", s.Name, err)
	}
	return nil
}

// Validate checks a backup status: job ids, storages and a volume id
// Proxmox would accept.
func (b BackupStatus) Validate() error {
	if len(b.Jobs) > MaxPreviewListed || len(b.Unread) > MaxPreviewListed || len(b.ByPool) > MaxPreviewListed {
		return fmt.Errorf("more than %d backup jobs or storages", MaxPreviewListed)
	}
	for _, j := range b.Jobs {
		switch {
		case !jobID.match(j.ID):
			return fmt.Errorf("%q is not a backup job id", j.ID)
		case j.Storage != "" && policy.ValidateStorage(j.Storage) != nil:
			return fmt.Errorf("backup job %s: %q is not a storage id", j.ID, j.Storage)
		}
		if err := ValidatePreviewText(j.Schedule); err != nil {
			return fmt.Errorf("backup job %s: schedule: %w", j.ID, err)
		}
	}
	for _, id := range b.ByPool {
		if !jobID.match(id) {
			return fmt.Errorf("%q is not a backup job id", id)
		}
	}
	for _, s := range b.Unread {
		if policy.ValidateStorage(s) != nil {
			return fmt.Errorf("%q is not a storage id", s)
		}
	}
	if b.LastVolume != "" {
		return ValidateVolume(b.LastVolume)
	}
	return nil
}

// ValidateVolume checks a Proxmox volume id, STORAGE:NAME.
func ValidateVolume(v string) error {
	if !isVolume(v) {
		return fmt.Errorf("%q is not a volume id", v)
	}
	return nil
}

// SignPreviewRun encodes and signs a preview request with the bot's order
// key.
func SignPreviewRun(key ed25519.PrivateKey, r PreviewRun) ([]byte, error) {
	r.Version = Version
	r.Site = siteOf(r.Site)
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("sign preview run: %w: %v", ErrMalformed, err)
	}
	return seal(key, TypePreviewRun, r)
}

// VerifyPreviewRun checks a preview request's signature, fields and
// expiry. An expired request is returned with ErrExpired.
func VerifyPreviewRun(keys VerifyKeys, payload []byte, now time.Time) (PreviewRun, error) {
	r, err := open[PreviewRun](keys, TypePreviewRun, payload)
	if err != nil {
		return PreviewRun{}, err
	}
	if err := r.validate(); err != nil {
		return PreviewRun{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	r.Site = siteOf(r.Site)
	if !now.Before(r.ExpiresAt) {
		return r, fmt.Errorf("the preview request %w at %s", ErrExpired, r.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return r, nil
}

// NewPreviewRunTask signs a preview request and wraps it for its site's
// probes queue, whose workers never hold up an order.
func NewPreviewRunTask(key ed25519.PrivateKey, r PreviewRun) (*asynq.Task, error) {
	env, err := SignPreviewRun(key, r)
	if err != nil {
		return nil, err
	}
	return asynq.NewTask(TypePreviewRun, env, asynq.Queue(ProbeQueue(siteOf(r.Site))), asynq.MaxRetry(0),
		asynq.TaskID("preview:"+r.ExecutionID), asynq.Retention(time.Hour)), nil
}

// SignPreviewResult encodes and signs a preview with the actuator's
// report key. A result that breaks the bounds is refused here, before it
// is sent.
func SignPreviewResult(key ed25519.PrivateKey, r PreviewResult) ([]byte, error) {
	r.Version = Version
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("sign preview result: %w: %v", ErrMalformed, err)
	}
	return seal(key, TypePreviewResult, r)
}

// VerifyPreviewResult checks a preview's signature and every field.
func VerifyPreviewResult(keys VerifyKeys, payload []byte) (PreviewResult, error) {
	r, err := open[PreviewResult](keys, TypePreviewResult, payload)
	if err != nil {
		return PreviewResult{}, err
	}
	if err := r.validate(); err != nil {
		return PreviewResult{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return r, nil
}

// NewPreviewResultTask signs a preview and wraps it for the results queue.
// Its task id makes a second enqueue of one execution's preview a no-op
// while the first is retained.
func NewPreviewResultTask(key ed25519.PrivateKey, r PreviewResult) (*asynq.Task, error) {
	env, err := SignPreviewResult(key, r)
	if err != nil {
		return nil, err
	}
	return asynq.NewTask(TypePreviewResult, env, asynq.Queue(QueueResults), asynq.MaxRetry(3),
		asynq.TaskID("preview-result:"+r.ExecutionID), asynq.Retention(time.Hour)), nil
}
