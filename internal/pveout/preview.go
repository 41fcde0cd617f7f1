package pveout

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// What a plan's preview reads: apt's simulation of an upgrade, a
// container's snapshots with their times, the cluster's backup jobs and a
// storage's backups of one guest.

// AptChange is one package apt's simulation would upgrade or install.
type AptChange struct {
	Name string
	// From is the installed version; empty for a new package.
	From string
	To   string
	// Origins are the archives the new version comes from, as apt names
	// them: "Debian-Security:12/stable-security", "Debian:12.9/stable".
	Origins []string
}

// Security says the new version comes from a security archive.
func (c AptChange) Security() bool {
	for _, o := range c.Origins {
		if strings.Contains(strings.ToLower(o), "security") {
			return true
		}
	}
	return false
}

// AptSimulation is what `apt-get -s upgrade` says it would do.
type AptSimulation struct {
	Changes []AptChange
	// Held is the "N not upgraded" of its summary line.
	Held int
}

// aptInstRE is apt-pkg's pkgSimulate::RealInstall line (algorithms.cc,
// Describe with VerIterator::RelStr): "Inst NAME [OLD] (NEW
// LABEL:VERSION/ARCHIVE[, …] [ARCH])", "[OLD]" absent for a new package,
// and after it " [PKG on DEP]" or a list of breaks, which are not read.
var (
	aptInstRE = regexp.MustCompile(`^Inst (\S+)(?: \[([^\]]*)\])? \((\S+) (.*) \[([^\]]*)\]\)`)
	// aptSummaryRE is private-output.cc's Stats line, the reinstalled
	// and downgraded counts printed only when not zero; aptSummary30RE
	// the same at APT::Output-Version 30 (apt 3's apt, or apt-get so
	// configured).
	aptSummaryRE   = regexp.MustCompile(`^(\d+) upgraded, (\d+) newly installed, (?:(\d+) reinstalled, )?(?:(\d+) downgraded, )?\d+ to remove and (\d+) not upgraded\.$`)
	aptSummary30RE = regexp.MustCompile(`^Upgrading: (\d+), Installing: (\d+), (?:Reinstalling: (\d+), )?(?:Downgrading: (\d+), )?Removing: \d+, Not Upgrading: (\d+)$`)
)

// ParseAptSimulation reads `apt-get -s upgrade`. It needs apt's summary
// line ("N upgraded, … not upgraded."), so output cut short or of
// another command fails, and checks that the Inst lines number what the
// summary says. Conf and Remv lines and apt's progress are skipped.
func ParseAptSimulation(out string) (AptSimulation, error) {
	var sim AptSimulation
	summary := false
	listed := 0
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\r\n")
		if m := aptInstRE.FindStringSubmatch(line); m != nil {
			c := AptChange{Name: m[1], From: m[2], To: m[3]}
			for o := range strings.SplitSeq(m[4], ", ") {
				if o = strings.TrimSpace(o); o != "" {
					c.Origins = append(c.Origins, o)
				}
			}
			sim.Changes = append(sim.Changes, c)
			continue
		}
		m := aptSummaryRE.FindStringSubmatch(line)
		if m == nil {
			m = aptSummary30RE.FindStringSubmatch(line)
		}
		if m != nil {
			summary = true
			for _, n := range m[1:5] {
				k, _ := strconv.Atoi(n)
				listed += k
			}
			sim.Held, _ = strconv.Atoi(m[5])
		}
	}
	if !summary {
		return AptSimulation{}, fmt.Errorf("not the output of apt-get -s upgrade: no summary line")
	}
	if len(sim.Changes) != listed {
		return AptSimulation{}, fmt.Errorf("apt-get -s upgrade lists %d packages and counts %d", len(sim.Changes), listed)
	}
	return sim, nil
}

// Snapshot is one snapshot of `pct listsnapshot`.
type Snapshot struct {
	Name string
	// Taken is the time printed, in the node's local time read as UTC;
	// zero when none was printed.
	Taken       time.Time
	Description string
}

// snapshotTimeRE is print_snapshot_tree's "%-23s" time: localtime's
// "YYYY-MM-DD HH:MM:SS".
var snapshotTimeRE = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\s*(.*)$`)

// ParseSnapshots reads `pct listsnapshot <vmid>` with each snapshot's time
// and description (pve-guest-common's print_snapshot_tree: "`-> NAME TIME
// DESCRIPTION", indented by depth, "no-description" when there is none).
// "current" is left out. The order is the listing's: oldest first along
// each branch.
func ParseSnapshots(out string) ([]Snapshot, error) {
	var snaps []Snapshot
	for line := range strings.Lines(out) {
		t := strings.TrimSpace(line)
		if t == "" {
			continue
		}
		rest, ok := strings.CutPrefix(t, "`->")
		f := strings.Fields(rest)
		if !ok || len(f) == 0 {
			return nil, fmt.Errorf("not the output of pct listsnapshot: %.40q", t)
		}
		if f[0] == "current" {
			continue
		}
		s := Snapshot{Name: f[0]}
		after := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), f[0]))
		if m := snapshotTimeRE.FindStringSubmatch(after); m != nil {
			s.Taken, _ = time.Parse(time.DateTime, m[1])
			after = m[2]
		}
		if after != "no-description" {
			s.Description = after
		}
		snaps = append(snaps, s)
	}
	return snaps, nil
}

// BackupJob is one vzdump job of `pvesh get /cluster/backup`.
type BackupJob struct {
	ID       string
	Schedule string
	Storage  string
	Enabled  bool
	// All, VMIDs, Exclude, Node and Pool select the guests: every guest
	// but those in Exclude, or those in VMIDs, or those in Pool; on Node
	// only when it is set.
	All     bool
	VMIDs   []int
	Exclude []int
	Node    string
	Pool    string
}

// Covers says whether the job backs up guest vmid on node. A job that
// selects by pool is not judged (ok false): its members are not in the
// job.
func (j BackupJob) Covers(vmid int, node string) (covers, ok bool) {
	if j.Node != "" && node != "" && j.Node != node {
		return false, true
	}
	switch {
	case j.Pool != "":
		return false, false
	case j.All:
		return !slices.Contains(j.Exclude, vmid), true
	}
	return slices.Contains(j.VMIDs, vmid), true
}

// ParseBackupJobs reads `pvesh get /cluster/backup --output-format json`:
// pve-manager's PVE::API2::Backup index, an array of jobs whose
// selection is all (0/1), vmid and exclude (comma-separated vmids), node
// and pool, and whose enabled defaults to 1.
func ParseBackupJobs(out []byte) ([]BackupJob, error) {
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(out, &raw); err != nil {
		return nil, fmt.Errorf("not the output of pvesh get /cluster/backup: %v", err)
	}
	jobs := make([]BackupJob, 0, len(raw))
	for _, r := range raw {
		j := BackupJob{Enabled: true}
		j.ID, _ = jsonString(r["id"])
		j.Schedule, _ = jsonString(r["schedule"])
		j.Storage, _ = jsonString(r["storage"])
		j.Node, _ = jsonString(r["node"])
		j.Pool, _ = jsonString(r["pool"])
		if b, ok := jsonBool(r["enabled"]); ok {
			j.Enabled = b
		}
		j.All, _ = jsonBool(r["all"])
		var err error
		if j.VMIDs, err = vmidList(r["vmid"]); err != nil {
			return nil, fmt.Errorf("backup job %q: vmid: %v", j.ID, err)
		}
		if j.Exclude, err = vmidList(r["exclude"]); err != nil {
			return nil, fmt.Errorf("backup job %q: exclude: %v", j.ID, err)
		}
		if j.ID == "" {
			return nil, fmt.Errorf("a backup job without an id")
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// vmidList reads a pve-vmid-list: "101,102" (or a number alone).
func vmidList(v json.RawMessage) ([]int, error) {
	if len(v) == 0 {
		return nil, nil
	}
	s, ok := jsonString(v)
	if !ok {
		return nil, fmt.Errorf("%.40s is not a list of vmids", v)
	}
	var ids []int
	for f := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == ',' || r == ';' || r == ' ' }) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a vmid", f)
		}
		ids = append(ids, n)
	}
	return ids, nil
}

// Backup is one backup volume of `pvesm list STORAGE --content backup`.
type Backup struct {
	Volid string
	VMID  int
	// Taken is read from vzdump's standard name,
	// vzdump-lxc-VMID-YYYY_MM_DD-HH_MM_SS, in the node's local time read
	// as UTC (pve-storage's archive_info); zero for another name.
	Taken time.Time
}

// vzdumpNameRE is archive_info's standard vzdump name.
var vzdumpNameRE = regexp.MustCompile(`/vzdump-(?:lxc|openvz|qemu)-([1-9][0-9]{2,8})-(\d{4}_\d{2}_\d{2}-\d{2}_\d{2}_\d{2})\.`)

// ParseBackupList reads `pvesm list STORAGE --content backup [--vmid N]`:
// pve-storage's print_content, a header "Volid Format Type Size VMID",
// then one volume a line.
func ParseBackupList(out string) ([]Backup, error) {
	var list []Backup
	header := false
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
			continue
		case !header:
			if len(f) < 5 || f[0] != "Volid" || f[2] != "Type" {
				return nil, fmt.Errorf("not the output of pvesm list: it starts %.40q", strings.TrimSpace(line))
			}
			header = true
			continue
		case len(f) < 4:
			return nil, fmt.Errorf("not the output of pvesm list: %.40q", strings.TrimSpace(line))
		}
		if f[2] != "backup" {
			continue
		}
		b := Backup{Volid: f[0]}
		if len(f) >= 5 {
			b.VMID, _ = strconv.Atoi(f[4])
		}
		if m := vzdumpNameRE.FindStringSubmatch(f[0]); m != nil {
			b.Taken, _ = time.Parse("2006_01_02-15_04_05", m[2])
			if b.VMID == 0 {
				b.VMID, _ = strconv.Atoi(m[1])
			}
		}
		list = append(list, b)
	}
	if !header {
		return nil, fmt.Errorf("not the output of pvesm list: it is empty")
	}
	return list, nil
}

// aptListRE is one line of `apt list --upgradable`, as apt's
// ListSingleVersion (apt-private/private-output.cc) prints it:
// "NAME/SUITE[,SUITE…] VERSION ARCH [upgradable from: OLD]".
var aptListRE = regexp.MustCompile(`^([a-z0-9][a-z0-9+.-]+)/(\S+) (\S+) (\S+) \[upgradable from: ([^\]]+)\]$`)

// AptList is what `apt list --upgradable` printed.
type AptList struct {
	// Changes are the upgradable packages; Origins holds the suites.
	Changes []AptChange
	// Complete says apt's "Listing..." header was there, so no line was
	// cut from the front of the output; without it the list is a tail.
	Complete bool
}

// ParseAptList reads `apt list --upgradable`, after whatever came before
// it in the same output (apt-get update's lines). Lines that are not
// upgradable packages are skipped.
func ParseAptList(out string) AptList {
	var l AptList
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\r\n")
		if line == "Listing..." || line == "Listing... Done" {
			l.Complete, l.Changes = true, nil
			continue
		}
		if m := aptListRE.FindStringSubmatch(line); m != nil {
			l.Changes = append(l.Changes, AptChange{Name: m[1], From: m[5], To: m[3], Origins: strings.Split(m[2], ",")})
		}
	}
	return l
}

// ReplicationJob is one job of `pvesh get /nodes/NODE/replication`: a
// storage replication job of a guest on that node.
type ReplicationJob struct {
	ID     string
	Guest  int
	Target string
	// Schedule is as configured; empty means Proxmox's default, */15.
	Schedule string
	Disabled bool
	// LastSync is when the last successful sync started; zero: never.
	LastSync  time.Time
	FailCount int
	// Error is the last failed sync's error, if the last one failed.
	Error string
}

// ParseReplicationJobs reads `pvesh get /nodes/NODE/replication
// --output-format json`: pve-manager's PVE/API2/Replication.pm status,
// each job's configuration (id, guest, target, schedule, disable) with
// its state's last_sync (a Unix time, 0 for never), fail_count and
// error.
func ParseReplicationJobs(out []byte) ([]ReplicationJob, error) {
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(out, &raw); err != nil {
		return nil, fmt.Errorf("not the output of pvesh get /nodes/NODE/replication: %v", err)
	}
	jobs := make([]ReplicationJob, 0, len(raw))
	for _, r := range raw {
		var j ReplicationJob
		j.ID, _ = jsonString(r["id"])
		var ok bool
		if j.Guest, ok = jsonInt(r["guest"]); !ok || j.ID == "" || j.Guest == 0 {
			return nil, fmt.Errorf("a replication job without an id or guest")
		}
		j.Target, _ = jsonString(r["target"])
		j.Schedule, _ = jsonString(r["schedule"])
		j.Disabled, _ = jsonBool(r["disable"])
		j.FailCount, _ = jsonInt(r["fail_count"])
		j.Error, _ = jsonString(r["error"])
		if at, _ := jsonInt(r["last_sync"]); at > 0 {
			j.LastSync = time.Unix(int64(at), 0).UTC()
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}
