package pveout

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ParseStorageStatus reads `pvesm status`: a header (Name Type Status
// Total Used Available %), then one storage a line. It returns each
// storage's type by its id.
func ParseStorageStatus(out string) (map[string]string, error) {
	rows, err := storageRows(out)
	if err != nil {
		return nil, err
	}
	types := map[string]string{}
	for _, f := range rows {
		types[f[0]] = f[1]
	}
	return types, nil
}

// ParseStorageFree reads `pvesm status` for what each active storage has
// available, in KiB as pvesm prints it (pve-storage src/PVE/CLI/pvesm.pm
// $print_status). A storage that is not active, or whose line has no
// number there, is left out: its space is unknown.
func ParseStorageFree(out string) (map[string]int64, error) {
	rows, err := storageRows(out)
	if err != nil {
		return nil, err
	}
	free := map[string]int64{}
	for _, f := range rows {
		if len(f) < 6 || f[2] != "active" {
			continue
		}
		if n, err := strconv.ParseInt(f[5], 10, 64); err == nil && n >= 0 {
			free[f[0]] = n
		}
	}
	return free, nil
}

// storageRows are the fields of `pvesm status`'s lines after its header.
func storageRows(out string) ([][]string, error) {
	var rows [][]string
	header := false
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
			continue
		case !header:
			if f[0] != "Name" || len(f) < 2 || f[1] != "Type" {
				return nil, fmt.Errorf("not the output of pvesm status: it starts %.40q", strings.TrimSpace(line))
			}
			header = true
		case len(f) < 3:
			return nil, fmt.Errorf("not the output of pvesm status: %.40q", strings.TrimSpace(line))
		default:
			rows = append(rows, f)
		}
	}
	if !header {
		return nil, fmt.Errorf("not the output of pvesm status: it is empty")
	}
	return rows, nil
}

// ParseSnapshotList reads `pct listsnapshot <vmid>` for the snapshots'
// names alone, in its order (ParseSnapshots).
func ParseSnapshotList(out string) ([]string, error) {
	snaps, err := ParseSnapshots(out)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range snaps {
		names = append(names, s.Name)
	}
	return names, nil
}

// snapshotsOn says which storage types can snapshot a container volume,
// from pve-storage's volume_has_feature of each plugin: for true, every
// volume can; for a format list, only volumes of those formats (by their
// file's extension, raw when it has none). A type not named is one Nomos
// cannot judge.
var snapshotsOn = map[string][]string{
	"zfspool": nil, "zfs": nil, "lvmthin": nil, "rbd": nil,
	"btrfs": {"raw", "subvol", "qcow2"},
	// The plain Plugin's rule: qcow2 only. Container volumes there are
	// raw or subvol, so in practice never.
	"dir": {"qcow2"}, "nfs": {"qcow2"}, "cifs": {"qcow2"}, "glusterfs": {"qcow2"}, "cephfs": {"qcow2"}, "lvm": {"qcow2"},
	"iscsi": {}, "iscsidirect": {}, "pbs": {}, "esxi": {},
}

var (
	mountPathRE = regexp.MustCompile(`^/[A-Za-z0-9._/+-]{0,200}$`)
	formatRE    = regexp.MustCompile(`\.(raw|qcow2|subvol|vmdk)$`)
)

// SnapshotBlocker says why `pct snapshot` would fail with "snapshot
// feature is not available" for a container with this configuration,
// given each storage's type (from ParseStorageStatus), or "" when
// nothing stands in the way that Nomos can see. As Proxmox does, it looks
// at the rootfs and every mount point: a bind or device mount can never
// be snapshotted, and a volume only where its storage type can. A
// storage whose type is not known is not judged.
func SnapshotBlocker(c Config, storageTypes map[string]string) string {
	vols := c.Mounts
	if c.RootFS != nil {
		vols = append([]Volume{*c.RootFS}, vols...)
	}
	var why []string
	for _, v := range vols {
		switch v.Kind {
		case "bind", "device":
			s := v.Kind + " mount " + v.Key
			if mountPathRE.MatchString(v.Source) {
				s += " (" + v.Source + ")"
			}
			why = append(why, s)
			continue
		}
		typ, known := storageTypes[v.Storage]
		formats, judged := snapshotsOn[typ]
		if !known || !judged || formats == nil {
			continue // not judged, or every volume of the type can
		}
		format := "raw"
		if m := formatRE.FindStringSubmatch(v.Volname); m != nil {
			format = m[1]
		}
		if slices.Contains(formats, format) {
			continue
		}
		where := " on "
		if v.Key != "rootfs" {
			where = " " + v.Key + " on "
		}
		why = append(why, format+" volume"+where+typ+" storage "+v.Storage)
	}
	return strings.Join(why, "; ")
}
