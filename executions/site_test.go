package executions_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/seeds"
	"github.com/nomoshq/nomos/tasks"
)

// withEastSite re-seeds the demo fleet with hubris in site "east" and
// strong left in the default site.
func withEastSite(t *testing.T, b *bundle) {
	t.Helper()
	seed, err := fleetseed.Load(seeds.FS)
	if err != nil {
		t.Fatal(err)
	}
	for i := range seed.Hosts {
		if seed.Hosts[i].Name == "hubris" {
			seed.Hosts[i].Site = "east"
		}
	}
	if _, err := b.store.ApplySeed(b.ctx, seed); err != nil {
		t.Fatal(err)
	}
	sites, err := b.store.Sites(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default", "east"}, sites); diff != "" {
		t.Fatalf("sites (-want +got):\n%s", diff)
	}
}

// pending returns the payloads waiting on a queue.
func (b *bundle) pending(t *testing.T, queue string) [][]byte {
	t.Helper()
	infos, err := b.inspector.ListPendingTasks(queue, asynq.PageSize(1000))
	if err != nil {
		t.Fatalf("list %s: %v", queue, err)
	}
	var out [][]byte
	for _, info := range infos {
		out = append(out, info.Payload)
	}
	return out
}

// An approved order goes on the queue of its target host's site, signed
// for that site, so only that site's actuator runs it.
func TestOrdersGoToTheirHostsSite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withEastSite(t, b)

	for _, tc := range []struct{ target, site, other string }{
		{"vaultwarden", "east", tasks.DefaultSite},
		{"jellyfin", tasks.DefaultSite, "east"},
	} {
		x := b.request(t, "restart", tc.target, "").Execution
		if _, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: x.ID, By: operator, Method: policy.MethodReaction, EventID: "$" + tc.target}); err != nil {
			t.Fatal(err)
		}
		info, err := b.inspector.GetTaskInfo(tasks.OrderQueue(tc.site), x.ID.String())
		if err != nil {
			t.Fatalf("%s: not on %s's queue: %v", tc.target, tc.site, err)
		}
		o, err := tasks.VerifyOrder(tasks.VerifyKeys{b.pub}, info.Payload, b.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if o.Site != tc.site {
			t.Errorf("%s: order signed for site %q, want %q", tc.target, o.Site, tc.site)
		}
		if _, err := b.inspector.GetTaskInfo(tasks.OrderQueue(tc.other), x.ID.String()); err == nil {
			t.Errorf("%s: also queued for site %s", tc.target, tc.other)
		}
	}
}

// Probes and inventory requests go to the probes queue of their host's
// site, each signed for that site.
func TestProbesAndInventoryGoToTheirHostsSite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withEastSite(t, b)

	rep, err := b.svc.ProbeDue(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.RequestInventory(b.ctx, operator); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.DiscoverDue(b.ctx); err != nil {
		t.Fatal(err)
	}
	sent := 0
	for _, site := range []string{tasks.DefaultSite, "east"} {
		wantHost := map[string]string{tasks.DefaultSite: "strong", "east": "hubris"}[site]
		hosts := map[string]int{}
		for _, payload := range b.pending(t, tasks.ProbeQueue(site)) {
			if c, err := tasks.VerifyCheckRun(tasks.VerifyKeys{b.pub}, payload, b.clock.Now()); err == nil {
				if c.Site != site {
					t.Errorf("probe %s on %s's queue is signed for site %q", c.CheckID, site, c.Site)
				}
				hosts[c.Target.Host]++
				sent++
				continue
			}
			r, err := tasks.VerifyInventoryRun(tasks.VerifyKeys{b.pub}, payload, b.clock.Now())
			if err != nil {
				t.Fatalf("a request on %s's queue verifies as neither probe nor inventory: %v", site, err)
			}
			if r.Site != site {
				t.Errorf("inventory of %s on %s's queue is signed for site %q", r.Host, site, r.Site)
			}
			hosts[r.Host]++
		}
		if len(hosts) != 1 || hosts[wantHost] == 0 {
			t.Errorf("site %s's probes queue holds requests for hosts %v, want only %s", site, hosts, wantHost)
		}
	}
	if sent != rep.Sent {
		t.Errorf("%d probes on the sites' queues, want the %d sent", sent, rep.Sent)
	}
}
