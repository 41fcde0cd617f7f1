package labsim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Backups: the cluster's scheduled vzdump jobs (pvesh get /cluster/backup,
// pve-manager's PVE::API2::Backup index over jobs.cfg) and the vzdump
// archives on a storage (pvesm list STORAGE --content backup, pve-storage's
// print_content). labsim runs no job: the archives are the ones its
// configuration says were made before it started.

// BackupJob is a scheduled vzdump job of the node's cluster.
type BackupJob struct {
	// ID is the job's id, such as backup-5f1e2d3c-a1b2.
	ID string
	// Schedule is a systemd-like calendar event: "21:00", "sun 01:00".
	Schedule string
	// Storage holds the archives; default local.
	Storage string
	// All selects every guest but those in Exclude; otherwise VMIDs.
	All     bool
	VMIDs   []int
	Exclude []int
	// Node, when set, limits the job to that node's guests.
	Node     string
	Disabled bool
}

// backupVol is one vzdump archive on a node's storage.
type backupVol struct {
	Storage string    `json:"storage"`
	VMID    int       `json:"vmid"`
	Taken   time.Time `json:"taken"`
}

// volid is the archive's volume id, in vzdump's standard name.
func (b backupVol) volid() string {
	return fmt.Sprintf("%s:backup/vzdump-lxc-%d-%s.tar.zst", b.Storage, b.VMID, b.Taken.UTC().Format("2006_01_02-15_04_05"))
}

// size is the archive's size in bytes, stable for a volume.
func (b backupVol) size() int64 {
	return 300<<20 + int64(hashString(b.volid())%(900<<20))
}

// clusterBackupJobs lists the jobs of host's cluster: a job configured on
// any of its nodes is the cluster's.
func (st *simState) clusterBackupJobs(host string) []BackupJob {
	var jobs []BackupJob
	for _, n := range st.clusterNodes(host) {
		jobs = append(jobs, st.Hosts[n].BackupJobs...)
	}
	return jobs
}

// pveshBackupJobs answers pvesh get /cluster/backup: one object a job,
// with jobs.cfg's keys, vzdump's defaults as the GUI writes them, and
// next-run computed from the schedule where labsim can.
func pveshBackupJobs(c *call, format string) int {
	var out []map[string]any
	for _, j := range c.st.clusterBackupJobs(c.env.host) {
		m := map[string]any{
			"id": j.ID, "type": "vzdump", "schedule": j.Schedule, "storage": cmp.Or(j.Storage, "local"),
			"mode": "snapshot", "compress": "zstd", "enabled": 1, "notes-template": "{{guestname}}",
		}
		if j.Disabled {
			m["enabled"] = 0
		}
		if j.All {
			m["all"] = 1
		} else {
			m["vmid"] = joinInts(j.VMIDs)
		}
		if len(j.Exclude) > 0 {
			m["exclude"] = joinInts(j.Exclude)
		}
		if j.Node != "" {
			m["node"] = j.Node
		}
		if next, ok := nextRun(j.Schedule, c.now); ok {
			m["next-run"] = next.Unix()
		}
		out = append(out, m)
	}
	if format != "json" && format != "json-pretty" {
		c.errf("labsim: pvesh get /cluster/backup answers --output-format json only\n")
		return 255
	}
	if out == nil {
		out = []map[string]any{}
	}
	data, _ := json.Marshal(out)
	c.outf("%s\n", data)
	return 0
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// nextRun is the next time a "HH:MM" or "DOW HH:MM" schedule fires after
// now; other calendar events are not computed.
func nextRun(schedule string, now time.Time) (time.Time, bool) {
	f := strings.Fields(schedule)
	dow := -1
	if len(f) == 2 {
		days := []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}
		dow = slices.Index(days, strings.ToLower(f[0]))
		if dow < 0 {
			return time.Time{}, false
		}
		f = f[1:]
	}
	if len(f) != 1 {
		return time.Time{}, false
	}
	at, err := time.Parse("15:04", f[0])
	if err != nil {
		return time.Time{}, false
	}
	now = now.UTC()
	t := time.Date(now.Year(), now.Month(), now.Day(), at.Hour(), at.Minute(), 0, 0, time.UTC)
	for !t.After(now) || (dow >= 0 && int(t.Weekday()) != dow) {
		t = t.AddDate(0, 0, 1)
	}
	return t, true
}

// pvesmList is pvesm list STORAGE [--content backup] [--vmid N]: the
// node's archives on that storage, as print_content lays them out.
func pvesmList(c *call) int {
	const usage = "pvesm list <storage> [OPTIONS]"
	if len(c.args) < 2 || strings.HasPrefix(c.args[1], "-") {
		c.errf("400 not enough arguments\n%s\n", usage)
		return 255
	}
	id := c.args[1]
	var content string
	vmid := 0
	for i := 2; i < len(c.args); i++ {
		name, val, ok := strings.Cut(strings.TrimLeft(c.args[i], "-"), "=")
		if (name != "content" && name != "vmid") || !strings.HasPrefix(c.args[i], "-") {
			c.errf("Unknown option: %s\n400 unable to parse option\n%s\n", strings.TrimLeft(c.args[i], "-"), usage)
			return 255
		}
		if !ok {
			if i+1 == len(c.args) {
				c.errf("Option %s requires an argument\n400 unable to parse option\n%s\n", name, usage)
				return 255
			}
			i++
			val = c.args[i]
		}
		if name == "content" {
			content = val
			continue
		}
		n, err := strconv.Atoi(val)
		if err != nil || n < minVMID {
			c.errf("400 Parameter verification failed.\nvmid: type check ('integer') failed - got '%s'\n%s\n", val, usage)
			return 255
		}
		vmid = n
	}
	if content != "" && !slices.Contains(storageContents, content) {
		c.errf("400 Parameter verification failed.\ncontent: invalid format - invalid content type '%s'\n%s\n", content, usage)
		return 255
	}
	st, ok := storageByID(c.hs, id)
	switch {
	case !ok:
		c.errf("storage '%s' does not exist\n", id)
		return 255
	case st.disabled:
		c.errf("storage '%s' is disabled\n", id)
		return 255
	}
	var list []backupVol
	if (content == "" || content == "backup") && slices.Contains(st.content, "backup") {
		for _, b := range c.hs.Backups {
			if b.Storage == id && (vmid == 0 || b.VMID == vmid) {
				list = append(list, b)
			}
		}
	}
	slices.SortFunc(list, func(a, b backupVol) int { return strings.Compare(a.volid(), b.volid()) })
	width, biggest := 0, int64(0)
	for _, b := range list {
		width, biggest = max(width, len(b.volid())), max(biggest, b.size())
	}
	digits := len(strconv.FormatInt(biggest, 10))
	c.outf("%-*s %-7s %-9s %*s %s\n", width, "Volid", "Format", "Type", digits, "Size", "VMID")
	for _, b := range list {
		c.outf("%-*s %-7s %-9s %*d %d\n", width, b.volid(), "tar.zst", "backup", digits, b.size(), b.VMID)
	}
	return 0
}
