package actuator

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// startSite runs a second actuator on b's Redis and labsim that serves
// another site, with a journal of its own.
func (b *bundle) startSite(t *testing.T, site string) {
	t.Helper()
	cfg := b.cfg
	cfg.Site = site
	cfg.JournalPath = filepath.Join(b.dir, "actuator-"+site, "journal")
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run of site %s: %v", site, err)
		}
	})
}

// A Redis writer who moves an order signed for a host of site east onto
// site west's queue gets nothing run: west refuses it by the site the bot
// signed, without a plan hash (so the bot does not take the refusal for
// the order's outcome) and without a journal entry, so east still runs
// it, once, when it arrives on east's own queue.
func TestOrderForAnotherSiteIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(func(c *Config) { c.Site = "west" }))

	o := b.order(t, "x-moved", policy.PctExecParams{Command: "cat /etc/hostname"}, b.lxc(101, "jellyfin"))
	o.Site = "east"
	env := b.sign(t, o)
	if _, err := b.queue.Enqueue(asynq.NewTask(tasks.TypeExecutionRun, env, asynq.Queue(tasks.OrderQueue("west")), asynq.MaxRetry(0))); err != nil {
		t.Fatal(err)
	}
	res := b.results.result(t, o.ExecutionID)
	diff(t, "status", tasks.StatusRefused, res.Status)
	diff(t, "refusal", tasks.RefusedWrongSite, res.Refusal)
	contains(t, "error", res.Error, "Nothing ran", `site "east"`, `serves "west"`)
	diff(t, "vouches for a plan", false, res.PlanHash != "")
	diff(t, "labsim ran nothing", 0, len(b.commands(t)))

	// The same order, delivered on its own site's queue, as the bot's
	// reconciler would send it again.
	b.startSite(t, "east")
	if _, err := b.queue.Enqueue(tasks.NewRunTask(o.Site, o.ExecutionID, env)); err != nil {
		t.Fatal(err)
	}
	second := b.results.nthResult(t, o.ExecutionID, 2)
	diff(t, "status on its own site", tasks.StatusSucceeded, second.Status)
	diff(t, "plan hash on its own site", o.PlanHash, second.PlanHash)
	diff(t, "labsim ran it once", o.Steps, commandLines(b.commands(t)))
}

// Each site's actuator consumes only its own queues: west leaves an order
// on east's queue alone, and runs its own.
func TestActuatorConsumesOnlyItsSitesQueue(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(func(c *Config) { c.Site = "west" }))

	east := b.order(t, "x-east", policy.PctExecParams{Command: "cat /etc/hostname"}, b.lxc(101, "jellyfin"))
	east.Site = "east"
	b.send(t, east)
	west := b.order(t, "x-west", policy.PctExecParams{Command: "cat /etc/hostname"}, b.lxc(102, "web"))
	west.Site = "west"
	diff(t, "west's own order", tasks.StatusSucceeded, b.run(t, west).Status)

	opt, err := asynq.ParseRedisURI(b.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	inspector := asynq.NewInspector(opt)
	defer inspector.Close()
	info, err := inspector.GetTaskInfo(tasks.OrderQueue("east"), east.ExecutionID)
	if err != nil {
		t.Fatalf("east's order left its queue: %v", err)
	}
	diff(t, "east's order is still waiting", asynq.TaskStatePending, info.State)
	diff(t, "labsim ran only west's order", west.Steps, commandLines(b.commands(t)))
}

// A probe or an inventory request for a host of another site, moved onto
// this site's probes queue, runs nothing and is not answered.
func TestProbeForAnotherSiteIsDropped(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(func(c *Config) { c.Site, c.ProbeConcurrency = "west", 1 }))

	now := time.Now()
	moved, err := tasks.SignCheckRun(b.signKey, tasks.CheckRun{CheckID: "check-east", TargetID: "ct-101", Actuator: tasks.DefaultActuator,
		Site: "east", Kind: "pct_status", Target: b.lxc(101, "jellyfin"), IssuedAt: now, ExpiresAt: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.queue.Enqueue(asynq.NewTask(tasks.TypeCheckRun, moved, asynq.Queue(tasks.ProbeQueue("west")), asynq.MaxRetry(0))); err != nil {
		t.Fatal(err)
	}
	inv, err := tasks.SignInventoryRun(b.signKey, tasks.InventoryRun{RunID: "run-east", HostID: "node-pve1", Actuator: tasks.DefaultActuator,
		Site: "east", Host: "pve1", Node: "pve1", HostAddr: b.addr, IssuedAt: now, ExpiresAt: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.queue.Enqueue(asynq.NewTask(tasks.TypeInventoryRun, inv, asynq.Queue(tasks.ProbeQueue("west")), asynq.MaxRetry(0))); err != nil {
		t.Fatal(err)
	}
	// With one probe worker, west's own probe is served after both.
	b.probe(t, tasks.CheckRun{CheckID: "check-west", TargetID: "ct-102", Site: "west", Kind: "pct_status", Target: b.lxc(102, "web")})
	b.results.check(t, "check-west")
	for _, m := range b.results.wait(t, "west's probe", func([]message) bool { return true }) {
		if m.Check.CheckID == "check-east" || m.Inventory.RunID == "run-east" {
			t.Errorf("a request for site east was answered: %+v", m)
		}
	}
	for _, line := range commandLines(b.commands(t)) {
		if !strings.Contains(line, "102") {
			t.Errorf("labsim ran %q, which is not west's probe", line)
		}
	}
}
