package main

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/nomoshq/nomos/tasks"
)

// redisProbe is one thing a role does, or must not do, in Redis, as one
// command whose keys stand for all of that kind.
type redisProbe struct {
	what string
	cmd  []any
}

// redisAccess is what a role's Redis user must be allowed, and what it
// must be refused: deploy/redis/users.acl gives each role the first and
// none of the second.
type redisAccess struct{ needs, mustNot []redisProbe }

// asynqQueueKey is a key of queue q in asynq's layout (v0.26,
// internal/base/base.go).
func asynqQueueKey(q, rest string) string { return "asynq:{" + q + "}:" + rest }

// probeID stands for a task or an execution in a probe. No probe runs,
// so it names nothing that exists.
const probeID = "nomos-doctor-probe"

// redisAccessOf is the access of role, for the actuator's site and name.
func redisAccessOf(role, site, actuator string) redisAccess {
	orders, probes, results := tasks.OrderQueue(site), tasks.ProbeQueue(site), tasks.QueueResults
	take := func(q string) []any {
		return []any{"rpoplpush", asynqQueueKey(q, "pending"), asynqQueueKey(q, "active")}
	}
	admin := []redisProbe{
		{"cancel a running task (asynq:cancel)", []any{"publish", "asynq:cancel", probeID}},
		{"rewrite Redis's config (CONFIG SET)", []any{"config", "set", "dir", "/tmp"}},
		{"empty Redis (FLUSHALL)", []any{"flushall"}},
		{"change Redis's users (ACL SETUSER)", []any{"acl", "setuser", probeID}},
	}
	register := redisProbe{"register as an asynq server", []any{"zadd", "asynq:servers", "0", probeID}}
	hearCancels := redisProbe{"hear asynq's cancellations (asynq:cancel)", []any{"subscribe", "asynq:cancel"}}
	if role == "bot" {
		return redisAccess{
			needs: []redisProbe{
				{"send an order to " + orders, []any{"lpush", asynqQueueKey(orders, "pending"), probeID}},
				{"withdraw an order from " + orders, []any{"lrem", asynqQueueKey(orders, "pending"), "0", probeID}},
				{"send a probe to " + probes, []any{"lpush", asynqQueueKey(probes, "pending"), probeID}},
				{"take a result from " + results, take(results)},
				{"run asynq's scripts on " + results, []any{"evalsha", strings.Repeat("0", 40), "1", asynqQueueKey(results, "pending")}},
				{"pop the actuators' questions (" + tasks.ApprovalChecks + ")", []any{"blpop", tasks.ApprovalChecks, "1"}},
				{"answer an actuator (" + tasks.ApprovalQueue(site, actuator) + ")", []any{"rpush", tasks.ApprovalQueue(site, actuator), probeID}},
				register,
				hearCancels,
			},
			mustNot: append([]redisProbe{
				{"take an order from " + orders, take(orders)},
				{"read an answer it sent (" + tasks.ApprovalQueue(site, actuator) + ")", []any{"lpop", tasks.ApprovalQueue(site, actuator)}},
				{"drop an actuator's order lease", []any{"del", tasks.OrderLease(site, probeID)}},
			}, admin...),
		}
	}
	other := "nomos-doctor-other-site"
	return redisAccess{
		needs: []redisProbe{
			{"take an order from " + orders, take(orders)},
			{"take a probe from " + probes, take(probes)},
			{"resend an order on " + orders, []any{"lpush", asynqQueueKey(orders, "pending"), probeID}},
			{"send a result to " + results, []any{"lpush", asynqQueueKey(results, "pending"), probeID}},
			{"run asynq's scripts on " + orders, []any{"evalsha", strings.Repeat("0", 40), "1", asynqQueueKey(orders, "pending")}},
			{"ask the bot about an approval (" + tasks.ApprovalChecks + ")", []any{"rpush", tasks.ApprovalChecks, probeID}},
			{"read its answers (" + tasks.ApprovalQueue(site, actuator) + ")", []any{"blpop", tasks.ApprovalQueue(site, actuator), "1"}},
			{"hold an order's lease", []any{"set", tasks.OrderLease(site, probeID), actuator}},
			register,
			hearCancels,
		},
		mustNot: append([]redisProbe{
			{"take a result from " + results, take(results)},
			{"delete a result", []any{"del", asynqQueueKey(results, "t:"+probeID)}},
			{"take an order of another site", take(tasks.OrderQueue(other))},
			{"read another actuator's answers", []any{"lpop", tasks.ApprovalQueue(site, probeID)}},
			{"answer a question as the bot would", []any{"rpush", tasks.ApprovalQueue(site, actuator), probeID}},
			{"pop the questions of the actuators", []any{"lpop", tasks.ApprovalChecks}},
		}, admin...),
	}
}

// checkRedisAccess checks, for the one role of this config, that its
// Redis user may do what the role needs and nothing it must not. Each
// probe is queued in a transaction that is then discarded: Redis checks
// a command's permissions when it is queued, so nothing runs, whatever
// the user may do. A config for both the bot and the actuator shares one
// user, so there is nothing to check.
func (d *doctor) checkRedisAccess(ctx context.Context) []checkLine {
	role := "bot"
	if d.hasRole("actuator") {
		role = "actuator"
	}
	opt, err := tasks.ParseRedisURL(d.cfg.Redis.URL)
	if err != nil {
		return nil // checkRedis says so
	}
	user := cmp.Or(opt.Username, "default")
	c := redis.NewClient(&redis.Options{Addr: opt.Addr, Username: opt.Username, Password: opt.Password, DB: opt.DB, TLSConfig: opt.TLSConfig})
	defer c.Close()
	conn := c.Conn()
	defer conn.Close()
	if err := conn.Do(ctx, "multi").Err(); err != nil {
		return []checkLine{fail(fmt.Sprintf("redis access: cannot check what user %s may do: %v", user, err),
			"give the user the rules of nomos-"+role+" in deploy/redis/users.acl (it needs MULTI)")}
	}
	defer conn.Do(context.WithoutCancel(ctx), "discard")
	access := redisAccessOf(role, cmp.Or(d.cfg.Actuator.Site, tasks.DefaultSite), cmp.Or(d.cfg.Actuator.Name, tasks.DefaultActuator))
	var cannot, can []string
	for _, p := range access.needs {
		ok, err := queues(ctx, conn, p.cmd)
		if err != nil {
			return []checkLine{fail(fmt.Sprintf("redis access: cannot check what user %s may do: %v", user, err), "run the doctor again once Redis answers")}
		}
		if !ok {
			cannot = append(cannot, p.what)
		}
	}
	for _, p := range access.mustNot {
		ok, err := queues(ctx, conn, p.cmd)
		if err != nil {
			return []checkLine{fail(fmt.Sprintf("redis access: cannot check what user %s may do: %v", user, err), "run the doctor again once Redis answers")}
		}
		if ok {
			can = append(can, p.what)
		}
	}
	var lines []checkLine
	if len(cannot) > 0 {
		lines = append(lines, fail(fmt.Sprintf("redis access: as user %s the %s cannot %s", user, role, strings.Join(cannot, "; ")),
			fmt.Sprintf("give user %s the rules of nomos-%s in deploy/redis/users.acl; for another site or actuator name, its keys name them", user, role)))
	}
	if len(can) > 0 {
		lines = append(lines, fail(fmt.Sprintf("redis access: as user %s the %s can %s, which it must not", user, role, strings.Join(can, "; ")),
			fmt.Sprintf("log the %s in as a Redis user of its own, redis://nomos-%s:PASSWORD@HOST:6379/0, made from deploy/redis/users.acl (docs/install.md)", role, role)))
	}
	if len(lines) == 0 {
		lines = append(lines, pass(fmt.Sprintf("redis access: as user %s the %s may do the %d things it needs and none of the %d it must not",
			user, role, len(access.needs), len(access.mustNot))))
	}
	return lines
}

// queues sends cmd inside a transaction and says whether Redis queued it
// (the user may run it) or refused it for want of permission. Any other
// answer means the connection is not in the transaction, and ends the
// check before another probe could run. (A broken connection is not
// replaced: go-redis's Conn fails every later command instead.)
func queues(ctx context.Context, conn *redis.Conn, cmd []any) (bool, error) {
	v, err := conn.Do(ctx, cmd...).Result()
	switch {
	case err == nil && v == "QUEUED":
		return true, nil
	case err == nil:
		return false, fmt.Errorf("%v answered %v, not QUEUED: the connection left its transaction", cmd[0], v)
	case strings.HasPrefix(err.Error(), "NOPERM"):
		return false, nil
	}
	return false, err
}
