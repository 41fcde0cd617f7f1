package inventory

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDiscoveredAttrs: a full listing replaces what the host's values
// were, dropping a value the node no longer has; a partial one (the
// configuration unread) keeps the old values it cannot know. Neither
// touches the live facts, which LiveAttrs owns.
func TestDiscoveredAttrs(t *testing.T) {
	t.Parallel()
	old := map[string]any{"ip": "10.0.0.5/24", "gateway": "10.0.0.1", "cores": float64(2), "hostname": "web", "lock": "backup", "owner": "alice"}
	for _, tt := range []struct {
		name string
		c    Container
		want map[string]any
	}{
		{"full", Container{VMID: 150, Hostname: "web2", IP: "10.0.0.6/24", Cores: 4},
			map[string]any{"discovered": true, "vmid": float64(150), "host": "strong", "hostname": "web2", "ip": "10.0.0.6/24", "cores": float64(4), "lock": "backup"}},
		{"partial", Container{VMID: 150, Partial: true},
			map[string]any{"discovered": true, "vmid": float64(150), "host": "strong", "hostname": "web", "ip": "10.0.0.5/24", "gateway": "10.0.0.1", "cores": float64(2), "lock": "backup"}},
	} {
		if diff := cmp.Diff(tt.want, DiscoveredAttrs("strong", tt.c, old)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestLiveAttrs: every live key is present, onboot false when Proxmox
// leaves it unset, lists empty rather than missing; a partial listing keeps
// the old values of what only the configuration says.
func TestLiveAttrs(t *testing.T) {
	t.Parallel()
	got := LiveAttrs(Container{VMID: 101, Lock: "backup"}, nil)
	for _, k := range LiveKeys {
		if _, ok := got[k]; !ok {
			t.Errorf("LiveAttrs lacks %s: %v", k, got)
		}
	}
	if got["onboot"] != false || !cmp.Equal(got["tags"], []any{}) || got["lock"] != "backup" {
		t.Errorf("LiveAttrs of a bare listing = %v; want onboot false, tags [] and the lock", got)
	}
	old := map[string]any{"onboot": true, "protection": true, "root_storage": "local-zfs"}
	partial := LiveAttrs(Container{VMID: 101, Partial: true, Snapshots: []string{"nomos-1"}}, old)
	if partial["onboot"] != true || partial["protection"] != true || partial["root_storage"] != "local-zfs" || !cmp.Equal(partial["snapshots"], []any{"nomos-1"}) {
		t.Errorf("LiveAttrs of a partial listing = %v; want the old onboot, protection and root_storage kept", partial)
	}
}

// TestWithoutLive leaves exactly what the seeds or an earlier discovery
// said.
func TestWithoutLive(t *testing.T) {
	t.Parallel()
	attrs := LiveAttrs(Container{VMID: 101, Onboot: new(true)}, nil)
	attrs["ip"], attrs["unit"] = "10.0.0.5/24", "jellyfin.service"
	got := WithoutLive(attrs)
	if diff := cmp.Diff(map[string]any{"ip": "10.0.0.5/24", "unit": "jellyfin.service"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, k := range AuditedLiveKeys {
		if !slices.Contains(LiveKeys, k) {
			t.Errorf("audited key %s is not a live key", k)
		}
	}
}
