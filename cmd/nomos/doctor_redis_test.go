package main

import (
	"strings"
	"testing"

	"github.com/nomoshq/nomos/internal/testenv"
)

// TestDoctorRedisAccess runs the doctor's Redis access check against a
// Redis whose users are the shipped deploy/redis/users.acl: each role as
// its own user passes; a role logged in as the other's user, an actuator
// of a site its user was not made for, and a user allowed everything
// each fail, naming what is wrong.
func TestDoctorRedisAccess(t *testing.T) {
	t.Parallel()
	r := testenv.NewACLRedis(t, map[string]string{"nomos-bot": "bot-pw-" + randomToken(8), "nomos-actuator": "act-pw-" + randomToken(8)})
	unrestricted := testenv.RedisURL(t)
	for _, c := range []struct {
		name, role, url, site string
		want                  []string
	}{
		{"bot as its user", "bot", r.URL("nomos-bot"), "",
			[]string{"✓ redis access: as user nomos-bot the bot may do the 8 things it needs and none of the 7 it must not"}},
		{"actuator as its user", "actuator", r.URL("nomos-actuator"), "",
			[]string{"✓ redis access: as user nomos-actuator the actuator may do the 9 things it needs and none of the 10 it must not"}},
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
		t.Run(c.name, func(t *testing.T) {
			cfg := &Config{Redis: RedisConfig{URL: c.url}, Actuator: ActuatorConfig{Site: c.site}}
			d := newDoctor(cfg, []string{c.role}, testenv.Logger(t))
			var b strings.Builder
			printCheckLines(&b, d.scrub(d.checkRedisAccess(testenv.Context(t))))
			got := doctorLines(b.String())
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}
