package executions_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// asynqKey is a key of queue q in asynq's layout (v0.26,
// internal/base/base.go): every key of a queue is under asynq:{q}:.
func asynqKey(q, rest string) string { return "asynq:{" + q + "}:" + rest }

// TestLeastPrivilegeRedis runs the bot's side and a real actuator, each
// logged in as its own user of the shipped deploy/redis/users.acl (the
// default user off), through an approved order, an inventory and a round
// of probes, and checks that Redis refused none of what they did. Then
// it tries, as each user, what that role must not do, and wants every
// try refused.
func TestLeastPrivilegeRedis(t *testing.T) {
	t.Parallel()
	r := testenv.NewACLRedis(t, map[string]string{"nomos-bot": "bot-" + t.Name(), "nomos-actuator": "actuator-" + t.Name()})
	b := setupOn(t, r.URL("nomos-bot"))
	b.actuatorRedisURL = r.URL("nomos-actuator")
	fleet := testenv.NewFleet(t)
	if _, err := b.store.ApplySeed(b.ctx, fleet.Seed); err != nil {
		t.Fatal(err)
	}
	b.startWorkers(t, fleet)

	// An order, its approval check and its result.
	x := b.request(t, "restart", "jellyfin", "").Execution
	if _, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: x.ID, By: operator, Method: policy.MethodReaction}); err != nil {
		t.Fatal(err)
	}
	if got := b.waitDone(t, x.ID); got.State != store.StateSucceeded {
		t.Fatalf("as their own Redis users the order ended %s (%s), want succeeded", got.State, got.Error)
	}
	// An inventory of both hosts, through the probe queue.
	b.discover(t, 2)
	// Probes, and their results in a group the bot aggregates.
	if rep, err := b.svc.ProbeDue(b.ctx); err != nil || rep.Sent == 0 {
		t.Fatalf("probes = %+v, %v", rep, err)
	}
	b.waitHealth(t, "service:adguard", func(h string) bool { return h != "unknown" })
	// What the status page's /metrics reads.
	for _, q := range []string{tasks.OrderQueue(tasks.DefaultSite), tasks.ProbeQueue(tasks.DefaultSite), tasks.QueueResults} {
		if _, err := b.inspector.GetQueueInfo(q); err != nil {
			t.Errorf("the bot cannot read queue %s for /metrics: %v", q, err)
		}
	}
	if _, err := b.inspector.Queues(); err != nil {
		t.Errorf("the bot cannot list the queues: %v", err)
	}
	// What the actuator's /healthz reads: its consumer among asynq's servers.
	actOpt, err := tasks.ParseRedisURL(b.actuatorRedisURL)
	if err != nil {
		t.Fatal(err)
	}
	actInspector := asynq.NewInspector(actOpt)
	defer actInspector.Close()
	if servers, err := actInspector.Servers(); err != nil || len(servers) == 0 {
		t.Errorf("the actuator cannot see asynq's servers for its health check: %d, %v", len(servers), err)
	}
	if denied, err := r.Denied(b.ctx); err != nil || len(denied) > 0 {
		t.Errorf("Redis refused the roles what they need (%v):\n%s", err, strings.Join(denied, "\n"))
	}

	bot := redis.NewClient(&redis.Options{Addr: r.Addr, Username: "nomos-bot", Password: "bot-" + t.Name()})
	defer bot.Close()
	act := redis.NewClient(&redis.Options{Addr: r.Addr, Username: "nomos-actuator", Password: "actuator-" + t.Name()})
	defer act.Close()
	orders, results := tasks.OrderQueue(tasks.DefaultSite), tasks.QueueResults
	for _, c := range []struct {
		what string
		as   *redis.Client
		cmd  []any
	}{
		{"the bot takes an order off its queue", bot, []any{"rpoplpush", asynqKey(orders, "pending"), asynqKey(orders, "active")}},
		{"the bot takes an order off its queue with LMOVE", bot, []any{"lmove", asynqKey(orders, "pending"), asynqKey(orders, "active"), "right", "left"}},
		{"the bot reads an answer it sent", bot, []any{"lpop", tasks.ApprovalQueue(tasks.DefaultSite, tasks.DefaultActuator)}},
		{"the bot drops an actuator's order lease", bot, []any{"del", tasks.OrderLease(tasks.DefaultSite, x.ID.String())}},
		{"the bot cancels a running task", bot, []any{"publish", "asynq:cancel", "some-task"}},
		{"the bot rewrites Redis's config", bot, []any{"config", "set", "dir", "/tmp"}},
		{"the bot empties Redis", bot, []any{"flushall"}},
		{"the bot lists every key", bot, []any{"keys", "*"}},
		{"the actuator consumes the results", act, []any{"rpoplpush", asynqKey(results, "pending"), asynqKey(results, "active")}},
		{"the actuator deletes a result", act, []any{"del", asynqKey(results, "t:some-task")}},
		{"the actuator removes a result from the queue", act, []any{"lrem", asynqKey(results, "pending"), "0", "some-task"}},
		{"the actuator takes another site's order", act, []any{"rpoplpush", asynqKey(tasks.OrderQueue("east"), "pending"), asynqKey(tasks.OrderQueue("east"), "active")}},
		{"the actuator sends an order to another site", act, []any{"lpush", asynqKey(tasks.OrderQueue("east"), "pending"), "some-task"}},
		{"the actuator reads another actuator's answers", act, []any{"lpop", tasks.ApprovalQueue(tasks.DefaultSite, "other")}},
		{"the actuator answers a question", act, []any{"rpush", tasks.ApprovalQueue(tasks.DefaultSite, "other"), "yes"}},
		{"the actuator pops another actuator's question", act, []any{"lpop", tasks.ApprovalChecks}},
		{"the actuator cancels a running task", act, []any{"publish", "asynq:cancel", "some-task"}},
		{"the actuator rewrites Redis's config", act, []any{"config", "set", "dir", "/tmp"}},
		{"the actuator gives itself every permission", act, []any{"acl", "setuser", "nomos-actuator", "+@all", "~*"}},
		{"the actuator empties Redis", act, []any{"flushall"}},
		{"the actuator runs a script on the results", act, []any{"eval", "return redis.call('rpoplpush', KEYS[1], KEYS[2])", "2", asynqKey(results, "pending"), asynqKey(results, "active")}},
		{"the actuator runs a script that takes a result", act, []any{"eval", "return redis.call('rpoplpush', '" + asynqKey(results, "pending") + "', '" + asynqKey(results, "active") + "')", "0"}},
	} {
		if err := c.as.Do(b.ctx, c.cmd...).Err(); !refused(err) {
			t.Errorf("%s: %v = %v, want it refused", c.what, c.cmd, err)
		}
	}
	// Without a user, or as the default user, nothing is allowed at all.
	anon := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer anon.Close()
	if err := anon.Ping(b.ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("a client without a user: PING = %v, want NOAUTH", err)
	}
	def := redis.NewClient(&redis.Options{Addr: r.Addr, Username: "default", Password: "anything"})
	defer def.Close()
	if err := def.Ping(b.ctx).Err(); err == nil {
		t.Error("the default user logged in")
	}
}

// refused is whether err is Redis refusing a command to the user: NOPERM,
// or its words for a script that reached a key the user may not touch.
func refused(err error) bool {
	return err != nil && (strings.HasPrefix(err.Error(), "NOPERM") || strings.Contains(err.Error(), "can't access at least one of the keys"))
}

// TestBotCannotConsumeOrders runs a real asynq server as the bot's user
// on a site's order queue: Redis refuses the dequeue, and the order stays
// on the queue for that site's actuator.
func TestBotCannotConsumeOrders(t *testing.T) {
	t.Parallel()
	r := testenv.NewACLRedis(t, map[string]string{"nomos-bot": "bot-" + t.Name()})
	ctx := testenv.Context(t)
	opt, err := tasks.ParseRedisURL(r.URL("nomos-bot"))
	if err != nil {
		t.Fatal(err)
	}
	queue := tasks.OrderQueue(tasks.DefaultSite)
	client := asynq.NewClient(opt)
	defer client.Close()
	info, err := client.Enqueue(tasks.NewRunTask(tasks.DefaultSite, "order-1", []byte(`{}`)))
	if err != nil {
		t.Fatalf("the bot cannot send an order: %v", err)
	}
	ran := make(chan struct{}, 1)
	srv := asynq.NewServer(opt, asynq.Config{Queues: map[string]int{queue: 1}, TaskCheckInterval: 10 * time.Millisecond, LogLevel: asynq.FatalLevel})
	if err := srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { ran <- struct{}{}; return nil })); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	// Wait for Redis to refuse the server's dequeue script.
	for {
		denied, err := r.Denied(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// asynq's dequeue script takes the task with RPOPLPUSH from the
		// pending list, the one key of it the bot may not take from.
		if slices.Contains(denied, "nomos-bot: key "+asynqKey(queue, "pending")+" (lua)") {
			break
		}
		select {
		case <-ran:
			t.Fatal("an asynq server logged in as the bot took an order")
		case <-ctx.Done():
			t.Fatalf("Redis never refused the bot's dequeue; it logged %q", denied)
		case <-time.After(10 * time.Millisecond):
		}
	}
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	got, err := insp.GetTaskInfo(queue, info.ID)
	if err != nil || got.State != asynq.TaskStatePending {
		t.Errorf("the order after the bot's server tried to take it: %+v, %v; want it still pending", got, err)
	}
	select {
	case <-ran:
		t.Error("an asynq server logged in as the bot took an order")
	default:
	}
	// Withdrawing an order not yet taken is the bot's to do.
	if err := insp.DeleteTask(queue, info.ID); err != nil {
		t.Errorf("the bot cannot withdraw an order: %v", err)
	}
}
