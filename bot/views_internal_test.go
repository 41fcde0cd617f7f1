package bot

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nomoshq/nomos/internal/fleetgen"
	"github.com/nomoshq/nomos/store"
)

// fleetEntities is the generated fleet's containers as the store returns
// them: all running, one in twenty-five unhealthy, one in ten not checked.
func fleetEntities(n int) []store.Entity {
	seed := fleetgen.Seed(fleetgen.Config{Containers: n})
	var es []store.Entity
	i := 0
	for _, h := range seed.Hosts {
		for _, c := range h.Containers {
			health := "healthy"
			switch {
			case i%25 == 0:
				health = "unhealthy"
			case i%10 == 0:
				health = "unknown"
			}
			es = append(es, store.Entity{
				Slug: fmt.Sprintf("lxc:%d", c.VMID), Type: "lxc", Name: c.Hostname, Lifecycle: "active", Health: health, RunState: "running",
				Attrs: map[string]any{"vmid": float64(c.VMID), "host": h.Name, "ip": c.IP},
			})
			i++
		}
	}
	return es
}

// maxEventBytes is what a Matrix event's content may take, leaving room
// for the rest of the event (the spec's limit is 65,536 bytes in all).
const maxEventBytes = 60 << 10

// A thousand containers still make one card a homeserver accepts: every
// container in trouble keeps its row, and the quiet ones are folded by
// host. A small fleet keeps a row for every container.
func TestContainersCardFitsAMatrixEvent(t *testing.T) {
	t.Parallel()
	plain, htm := containersCard(fleetEntities(1000))
	if n := len(plain) + len(htm); n > maxEventBytes {
		t.Errorf("the card for 1,000 containers is %d bytes; a Matrix event holds %d", n, maxEventBytes)
	}
	for _, want := range []string{"1000 containers", "🔴 1001 ct1001 on node00", "🔴 1026 ct1026",
		"running and healthy, by host", "• node00: 1002-1010, 1012-1020", "running, not checked yet, by host", "• node09: "} {
		if !strings.Contains(plain, want) {
			t.Errorf("the card for 1,000 containers lacks %q:\n%s", want, plain)
		}
	}
	if strings.Contains(plain, "1002 ct1002") {
		t.Errorf("a healthy container has a row of its own in a folded card:\n%s", plain)
	}

	small, _ := containersCard(fleetEntities(13))
	for vmid := 1001; vmid <= 1013; vmid++ {
		if !strings.Contains(small, fmt.Sprintf(" %d ct%d on ", vmid, vmid)) {
			t.Errorf("container %d has no row in the card for 13:\n%s", vmid, small)
		}
	}
	if strings.Contains(small, "by host") {
		t.Errorf("the card for 13 containers is folded:\n%s", small)
	}
}

// BenchmarkContainersCard renders "list containers" for the generated
// fleet of 1,000 containers and reports the card's size.
func BenchmarkContainersCard(b *testing.B) {
	es := fleetEntities(1000)
	var size int
	for b.Loop() {
		plain, htm := containersCard(es)
		size = len(plain) + len(htm)
	}
	b.ReportMetric(float64(size), "card-bytes")
}

// TestRelatedIsOneStack: show groups a service, its container and its
// host, and asks about anything else, such as two containers on one host
// or a service and an unrelated container.
func TestRelatedIsOneStack(t *testing.T) {
	t.Parallel()
	rels := []store.Relationship{
		{From: "host:strong", To: "lxc:strong/101", Type: "hosts"},
		{From: "host:strong", To: "lxc:strong/102", Type: "hosts"},
		{From: "lxc:strong/101", To: "service:jellyfin", Type: "runs"},
		{From: "lxc:strong/102", To: "service:gitea", Type: "runs"},
		{From: "service:gitea", To: "service:jellyfin", Type: "depends_on"},
	}
	es := func(slugs ...string) []store.Entity {
		var out []store.Entity
		for _, s := range slugs {
			out = append(out, store.Entity{Slug: s})
		}
		return out
	}
	for _, tc := range []struct {
		slugs []string
		want  bool
	}{
		{[]string{"service:jellyfin", "lxc:strong/101"}, true},
		{[]string{"lxc:strong/101", "service:jellyfin", "host:strong"}, true},
		{[]string{"lxc:strong/101", "lxc:strong/102"}, false},
		{[]string{"service:jellyfin", "lxc:strong/102"}, false},
		{[]string{"service:gitea", "service:jellyfin"}, false},
	} {
		if got := related(es(tc.slugs...), rels); got != tc.want {
			t.Errorf("related(%v) = %v, want %v", tc.slugs, got, tc.want)
		}
	}
}

// TestVMViews: a VM's show says whether its guest agent answers, from
// the run-state check that pings it, and says when it has none; lists
// count containers and VMs apart and mark the VMs.
func TestVMViews(t *testing.T) {
	t.Parallel()
	at := time.Now()
	withAgent := store.Entity{Slug: "vm:hubris/200", Type: "vm", Name: "homeassistant", Attrs: map[string]any{"agent": true, "vmid": 200.0, "host": "hubris"}, RunState: "running", Lifecycle: "active", Health: "healthy"}
	noAgent := store.Entity{Slug: "vm:hubris/201", Type: "vm", Name: "opnsense", Attrs: map[string]any{"agent": false, "vmid": 201.0, "host": "hubris"}, RunState: "stopped", Lifecycle: "active"}
	for name, tc := range map[string]struct {
		e      store.Entity
		checks []store.CheckView
		want   string
	}{
		"answers": {withAgent, []store.CheckView{{Kind: "http", LastDetail: "GET answered 200", LastResultAt: &at},
			{Kind: "pct_status", LastDetail: "VM 200 is running and its guest agent answers", LastResultAt: &at}}, "Guest agent: answers"},
		"hung": {withAgent, []store.CheckView{{Kind: "pct_status", LastDetail: "VM 200 is running, but its guest agent does not answer: QEMU guest agent is not running", LastResultAt: &at}},
			"Guest agent: does not answer: VM 200 is running, but its guest agent does not answer: QEMU guest agent is not running"},
		"stopped":     {withAgent, []store.CheckView{{Kind: "pct_status", LastDetail: "VM 200 is stopped", LastResultAt: &at}}, "not asked, since VM 200 is stopped"},
		"not checked": {withAgent, []store.CheckView{{Kind: "pct_status"}}, "not checked yet"},
		"none":        {noAgent, nil, "Guest agent: not enabled"},
	} {
		if got := agentLine(tc.e, tc.checks); !strings.Contains(got, tc.want) {
			t.Errorf("%s: agentLine = %q, want %q in it", name, got, tc.want)
		}
	}
	ct := store.Entity{Slug: "lxc:hubris/111", Type: "lxc", Name: "mqtt", Attrs: map[string]any{"vmid": 111.0, "host": "hubris"}, RunState: "running", Lifecycle: "active"}
	plain, _ := containersCard([]store.Entity{ct, withAgent, noAgent})
	for _, want := range []string{"1 container and 2 VMs", "200 homeassistant on hubris, , running, VM with guest agent", "201 opnsense on hubris, , stopped, VM,"} {
		if !strings.Contains(plain, want) {
			t.Errorf("list guests lacks %q:\n%s", want, plain)
		}
	}
	if got := guestCount([]store.Entity{withAgent}); got != "1 VM" {
		t.Errorf("guestCount = %q, want 1 VM", got)
	}
}

// TestCardNamesAVMAsOne: a plan card on a VM says "VM 200", not "CT 200",
// reading the vmid from the slug when the entity has none.
func TestCardNamesAVMAsOne(t *testing.T) {
	t.Parallel()
	vm := cardTarget{slug: "vm:hubris/201", typ: "vm", name: "opnsense", display: "opnsense", host: "hubris", vmid: 201}
	plain, _ := vm.describe()
	if !strings.Contains(plain, "opnsense (vm:hubris/201) · VM 201 · host hubris") {
		t.Errorf("describe = %q", plain)
	}
	ct := cardTarget{slug: "lxc:strong/101", typ: "lxc", name: "jellyfin", display: "jellyfin", host: "strong", vmid: 101}
	if plain, _ := ct.describe(); !strings.Contains(plain, "· CT 101") {
		t.Errorf("describe = %q", plain)
	}
}
