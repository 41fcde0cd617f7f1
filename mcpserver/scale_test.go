package mcpserver_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nomoshq/nomos/internal/fleetgen"
	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

// generatedFleet is n containers spread over ten hosts, one service each.
func generatedFleet(n int) *fleetseed.Seed {
	seed := &fleetseed.Seed{}
	const hosts = 10
	vmid := 1000
	for h := range hosts {
		host := fleetseed.Host{Name: fmt.Sprintf("node%02d", h), Cluster: fleetgen.Cluster, SSH: fmt.Sprintf("127.0.0.1:%d", 2200+h), Cores: 32, MemoryMB: 131072, Storage: "local-zfs"}
		for i := range n / hosts {
			vmid++
			host.Containers = append(host.Containers, fleetseed.Container{
				VMID: vmid, Hostname: fmt.Sprintf("ct%d", vmid), IP: fmt.Sprintf("10.%d.%d.%d/16", 50+h, i/250, 1+i%250),
				Gateway: fmt.Sprintf("10.%d.0.1", 50+h), Cores: 1, MemoryMB: 512, DiskGB: 8, Status: "running",
				Services: []fleetseed.Service{{Name: fmt.Sprintf("app%d", vmid), Unit: "app.service", Port: 8080, HealthPath: "/"}},
			})
		}
		seed.Hosts = append(seed.Hosts, host)
	}
	return seed
}

func TestListLXCsFoldsALargeFleet(t *testing.T) {
	t.Parallel()
	b := setupWithSeed(t, generatedFleet(400))
	now := time.Now()
	// Half the fleet checked healthy, three containers in trouble, the
	// rest never checked.
	for vmid := 1001; vmid <= 1200; vmid++ {
		b.observe(t, policy.ContainerSlug(fleetgen.Cluster, vmid), "healthy", "running", now.Add(-time.Minute), nil)
	}
	b.observe(t, "lxc:gen/1005", "unhealthy", "container 1005 is stopped", now, nil)
	b.observe(t, "lxc:gen/1333", "degraded", "disk 91% full", now, nil)
	b.observe(t, "service:app1100", "unhealthy", "GET / timed out", now, nil)

	text := b.ok(t, "list_lxcs", nil)
	if len(text) > 4<<10 {
		t.Errorf("list_lxcs for 400 containers is %d bytes; folding should keep it small:\n%s", len(text), text)
	}
	containsAll(t, "list_lxcs of 400", text,
		"400 containers on 10 hosts",
		"1005 ct1005 node00 10.50.0.5/16 unhealthy app1005 — container 1005 is stopped",
		"1333 ct1333 node08",
		"1100 ct1100 node02 10.52.0.20/16 healthy app1100(unhealthy)",
		"healthy, folded by host", "node00: 1001-1004, 1006-1040",
		"never checked, folded by host", "node09: 1361-1400")
	containsNone(t, "list_lxcs of 400", text, "\n1006 ", "[cut at")
	t.Logf("list_lxcs for 400 containers: %d bytes", len(text))

	one := b.ok(t, "list_lxcs", map[string]any{"host": "node01"})
	containsAll(t, "one host", one, "40 containers", "1041 ct1041 node01")
	if strings.Contains(one, "folded") {
		t.Errorf("a host's list is folded:\n%s", one)
	}
}

// BenchmarkBulkTools measures the bulk tools a model should reach for
// first, for the demo fleet and the generated fleet (internal/fleetgen) of
// 10 hosts, 1,000 containers, 3,000 services and 5,000 checks, a tenth of
// them answered: the latency of one in-process call (list_lxcs is the one
// call the agent makes for a fleet-wide question), and the size of its
// answer in bytes and in tokens (estimated at 4 bytes a token).
func BenchmarkBulkTools(b *testing.B) {
	fleets := []struct {
		name string
		seed func() *fleetseed.Seed
	}{
		{"demo", func() *fleetseed.Seed { return nil }},
		{"1000lxc", func() *fleetseed.Seed { return fleetgen.Seed(fleetgen.Config{}) }},
	}
	for _, f := range fleets {
		bb := setupWithSeed(b, f.seed())
		answerATenth(b, bb)
		for _, tool := range []string{"list_lxcs", "get_state_snapshot", "get_health_summary"} {
			b.Run(f.name+"/"+tool, func(b *testing.B) {
				var size int
				var took []time.Duration
				for b.Loop() {
					t0 := time.Now()
					text, _ := bb.call(b, bb.ctx, tool, nil)
					took = append(took, time.Since(t0))
					size = len(text)
				}
				testenv.ReportPercentiles(b, "call", took)
				b.ReportMetric(float64(size), "bytes")
				b.ReportMetric(float64(size)/4, "tokens")
			})
		}
	}
}

// answerATenth records a result for a tenth of the fleet's checks, one in
// twenty-five of them unhealthy, as a fleet that has run a while has.
func answerATenth(b *testing.B, bb *bundle) {
	b.Helper()
	all, err := bb.store.ClaimDueChecks(bb.ctx, time.Now(), 10000)
	if err != nil {
		b.Fatal(err)
	}
	var obs []store.CheckObservation
	for i, c := range all {
		if i%10 != 0 {
			continue
		}
		health := "healthy"
		if i%250 == 0 {
			health = "unhealthy"
		}
		obs = append(obs, store.CheckObservation{CheckID: c.ID.String(), TargetID: c.TargetID.String(), Health: health, Detail: "probe said so", At: time.Now()})
	}
	if _, err := bb.store.RecordChecks(bb.ctx, obs); err != nil {
		b.Fatal(err)
	}
}
