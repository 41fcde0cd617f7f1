package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/nomoshq/nomos/internal/config"
	"github.com/nomoshq/nomos/internal/testenv"
)

// TestDoctorRedisAccess runs the doctor's Redis access check against a
// Redis whose users are the shipped deploy/redis/users.acl: each role as
// its own user passes; a role logged in as the other's user, an actuator
// of a site its user was not made for, and a user allowed everything
// each fail, naming what is wrong; so does a user without the channel
// asynq's servers listen on.
func TestDoctorRedisAccess(t *testing.T) {
	t.Parallel()
	r := testenv.NewACLRedis(t, map[string]string{"nomos-bot": "bot-pw-" + randomToken(8), "nomos-actuator": "act-pw-" + randomToken(8)})
	unrestricted := testenv.RedisURL(t)
	for _, c := range []struct {
		name, role, url, site string
		want                  []string
	}{
		{"bot as its user", "bot", r.URL("nomos-bot"), "",
			[]string{"✓ redis access: as user nomos-bot the bot may do the 9 things it needs and none of the 7 it must not"}},
		{"actuator as its user", "actuator", r.URL("nomos-actuator"), "",
			[]string{"✓ redis access: as user nomos-actuator the actuator may do the 10 things it needs and none of the 10 it must not"}},
		{"actuator as the bot's user", "actuator", r.URL("nomos-bot"), "", []string{
			"✗ redis access: as user nomos-bot the actuator cannot take an order from nomos:orders:default; take a probe from nomos:probes:default; " +
				"ask the bot about an approval (nomos:approval-checks); read its answers (nomos:approvals:default:actuator); hold an order's lease",
			"✗ redis access: as user nomos-bot the actuator can take a result from nomos:results; delete a result; answer a question as the bot would, which it must not",
		}},
		{"bot as the actuator's user", "bot", r.URL("nomos-actuator"), "", []string{
			"✗ redis access: as user nomos-actuator the bot cannot take a result from nomos:results; " +
				"pop the actuators' questions (nomos:approval-checks); answer an actuator (nomos:approvals:default:actuator)",
			"✗ redis access: as user nomos-actuator the bot can take an order from nomos:orders:default; drop an actuator's order lease, which it must not",
		}},
		{"actuator of another site", "actuator", r.URL("nomos-actuator"), "east", []string{
			"✗ redis access: as user nomos-actuator the actuator cannot take an order from nomos:orders:east; take a probe from nomos:probes:east; " +
				"resend an order on nomos:orders:east; run asynq's scripts on nomos:orders:east; read its answers (nomos:approvals:east:actuator); hold an order's lease",
		}},
		{"actuator as the default user", "actuator", unrestricted, "", []string{
			"✗ redis access: as user default the actuator can take a result from nomos:results; delete a result; take an order of another site; " +
				"read another actuator's answers; answer a question as the bot would; pop the questions of the actuators; cancel a running task (asynq:cancel); " +
				"rewrite Redis's config (CONFIG SET); empty Redis (FLUSHALL); change Redis's users (ACL SETUSER), which it must not",
		}},
	} {
		t.Run(c.name, func(t *testing.T) { wantRedisAccess(t, c.role, c.url, c.site, c.want) })
	}
	// A channel is checked too: without asynq:cancel, asynq's servers
	// cannot hear a cancellation.
	if err := r.Admin.Do(testenv.Context(t), "acl", "setuser", "nomos-bot", "resetchannels").Err(); err != nil {
		t.Fatal(err)
	}
	wantRedisAccess(t, "bot", r.URL("nomos-bot"), "", []string{"✗ redis access: as user nomos-bot the bot cannot hear asynq's cancellations (asynq:cancel)"})
}

// TestDoctorChecksRedisAccessPerRole: the access check runs for a config
// of the bot or of the actuator, and not for one of both, whose roles
// would share one Redis user.
func TestDoctorChecksRedisAccessPerRole(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Redis: config.RedisConfig{URL: "redis://nomos-bot:pw@127.0.0.1:6379/0"}}
	for roles, want := range map[string]bool{"bot": true, "actuator": true, "bot,mcp": true, "bot,actuator": false, "mcp": false} {
		got := slices.ContainsFunc(newDoctor(cfg, strings.Split(roles, ","), testenv.Logger(t)).checks(), func(c doctorCheck) bool { return c.name == "redis access" })
		if got != want {
			t.Errorf("roles %s: redis access checked = %v, want %v", roles, got, want)
		}
	}
}

// wantRedisAccess runs the access check for role and wants exactly the
// lines want.
func wantRedisAccess(t *testing.T, role, url, site string, want []string) {
	t.Helper()
	cfg := &config.Config{Redis: config.RedisConfig{URL: url}, Actuator: config.ActuatorConfig{Site: site}}
	d := newDoctor(cfg, []string{role}, testenv.Logger(t))
	var b strings.Builder
	printCheckLines(&b, d.scrub(d.checkRedisAccess(testenv.Context(t))))
	if got := doctorLines(b.String()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
