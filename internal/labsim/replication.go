package labsim

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// Replication: storage replication jobs of a container to another node
// of its cluster (pvesr). A job's id is "<vmid>-<jobnum>", and:
//   - pvesh get /cluster/replication lists every job's configuration
//     (pve-manager PVE/API2/ReplicationConfig.pm index over
//     replication.cfg, which pve-guest-common ReplicationConfig.pm
//     parse_config gives guest, jobnum and id; source is written the
//     first time the node looks at the job);
//   - pvesh get /nodes/<node>/replication lists the status of the jobs
//     of the node's guests, disabled ones too (PVE/API2/Replication.pm
//     status over ReplicationState::job_status(1)): the configuration
//     with vmtype and next_sync, and from the job's state last_sync,
//     last_try, fail_count and duration;
//   - pct destroy without --purge refuses a container with a job
//     (pve-container API2/LXC.pm destroy_vm's early checks:
//     check_for_existing_jobs), and with --purge removes its jobs;
//   - pct delsnapshot without --force fails while a sync holds the guest
//     migration lock (API2/LXC/Snapshot.pm delsnapshot).
// labsim runs no sync: a job's last sync is the one its configuration
// says happened before labsim started.

// Replication is a storage replication job of a container.
type Replication struct {
	// Target is the node it replicates to.
	Target string
	// Schedule is a calendar event; empty means Proxmox's default,
	// */15, and is not written to the configuration.
	Schedule string
	// LastSync is when its last successful sync started; zero: never.
	LastSync time.Time
	// Disabled sets disable: 1.
	Disabled bool
	// Syncing says a sync runs now and holds the guest migration lock.
	Syncing bool
}

// replJob is a container's replication job in labsim's state.
type replJob struct {
	JobNum   int       `json:"jobnum"`
	Target   string    `json:"target"`
	Schedule string    `json:"schedule,omitempty"`
	LastSync time.Time `json:"last_sync,omitzero"`
	Disabled bool      `json:"disabled,omitempty"`
	Syncing  bool      `json:"syncing,omitempty"`
}

// replicationJobs makes the state's jobs of a container's configuration.
func replicationJobs(rs []Replication) []replJob {
	var out []replJob
	for i, r := range rs {
		out = append(out, replJob{JobNum: i, Target: r.Target, Schedule: r.Schedule, LastSync: r.LastSync, Disabled: r.Disabled, Syncing: r.Syncing})
	}
	return out
}

func (j replJob) id(vmid int) string { return strconv.Itoa(vmid) + "-" + strconv.Itoa(j.JobNum) }

// config is the job as replication.cfg holds it, for a guest on source.
func (j replJob) config(vmid int, source string) map[string]any {
	m := map[string]any{"id": j.id(vmid), "type": "local", "target": j.Target, "guest": vmid, "jobnum": j.JobNum, "source": source}
	if j.Schedule != "" {
		m["schedule"] = j.Schedule
	}
	if j.Disabled {
		m["disable"] = 1
	}
	return m
}

// nextSync is job_status's next_sync for a job that has not failed: the
// schedule's next event after the last try. labsim computes the */N
// minute schedules, Proxmox's default among them; others give 0.
func (j replJob) nextSync() int64 {
	sched := j.Schedule
	if sched == "" {
		sched = "*/15"
	}
	m := everyMinutesRE.FindStringSubmatch(sched)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	step := int64(n) * 60
	last := j.LastSync.Unix()
	if j.LastSync.IsZero() {
		last = 0
	}
	return (last/step + 1) * step
}

var everyMinutesRE = regexp.MustCompile(`^\*/([1-9][0-9]?)$`)

// replicatedCT is a container with replication jobs and its node.
type replicatedCT struct {
	node string
	ct   *ctState
}

// replicated lists the cluster's containers with jobs, by vmid, with
// the node each is on.
func (st *simState) replicated(host string) []replicatedCT {
	var out []replicatedCT
	for _, n := range st.clusterNodes(host) {
		for _, vmid := range slices.Sorted(maps.Keys(st.Hosts[n].Containers)) {
			if ct := st.Hosts[n].Containers[vmid]; len(ct.Replication) > 0 {
				out = append(out, replicatedCT{n, ct})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b replicatedCT) int { return a.ct.VMID - b.ct.VMID })
	return out
}

// pveshClusterReplication answers pvesh get /cluster/replication.
func pveshClusterReplication(c *call, format string) int {
	out := []map[string]any{}
	for _, g := range c.st.replicated(c.env.host) {
		for _, j := range g.ct.Replication {
			out = append(out, j.config(g.ct.VMID, g.node))
		}
	}
	return printJSONOnly(c, "/cluster/replication", format, out)
}

// pveshNodeReplication answers pvesh get /nodes/<node>/replication: the
// status of the jobs of that node's guests.
func pveshNodeReplication(c *call, node, format string) int {
	if !slices.Contains(c.st.clusterNodes(c.env.host), node) {
		c.errf("hostname lookup '%s' failed - failed to get address info for: %s: Name or service not known\n", node, node)
		return 255
	}
	out := []map[string]any{}
	for _, g := range c.st.replicated(c.env.host) {
		if g.node != node {
			continue
		}
		for _, j := range g.ct.Replication {
			m := j.config(g.ct.VMID, g.node)
			m["vmtype"] = "lxc"
			m["next_sync"] = j.nextSync()
			m["fail_count"] = 0
			m["last_sync"], m["last_try"] = int64(0), int64(0)
			if !j.LastSync.IsZero() {
				m["last_sync"], m["last_try"] = j.LastSync.Unix(), j.LastSync.Unix()
				m["duration"] = 2.41
			}
			if j.Syncing {
				m["pid"] = 4242
			}
			out = append(out, m)
		}
	}
	return printJSONOnly(c, "/nodes/"+node+"/replication", format, out)
}

// printJSONOnly prints v as pvesh's --output-format json does; labsim
// prints these paths in no other format.
func printJSONOnly(c *call, path, format string, v any) int {
	if format != "json" && format != "json-pretty" {
		c.errf("labsim: pvesh get %s answers --output-format json only\n", path)
		return 255
	}
	data, _ := json.Marshal(v)
	c.outf("%s\n", data)
	return 0
}

// replicationRefusal is destroy_vm's check_for_existing_jobs message for
// a container with a job, or "".
func (ct *ctState) replicationRefusal() string {
	if len(ct.Replication) == 0 {
		return ""
	}
	return fmt.Sprintf("There is a replication job '%s' for guest '%d' - Please remove that first.\n", ct.Replication[0].id(ct.VMID), ct.VMID)
}

// replicationSyncing says a sync of the container holds its guest
// migration lock.
func (ct *ctState) replicationSyncing() bool {
	return slices.ContainsFunc(ct.Replication, func(j replJob) bool { return j.Syncing })
}
