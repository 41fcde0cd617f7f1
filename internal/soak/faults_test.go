package soak

import (
	"testing"

	"github.com/nomoshq/nomos/internal/testenv"
)

// TestFaults runs every case on one stack, one after another: each case
// leaves the stack whole again for the next. A case's name selects it
// alone, as in -run 'TestFaults/redis'.
func TestFaults(t *testing.T) {
	testenv.SkipIfShort(t, "the fault suite runs the whole stack, Dendrite included")
	s := newStack(t, stackOptions{operators: 3})
	cases := []struct {
		name string
		run  func(*testing.T, *stack)
	}{
		{"actuator_killed", actuatorKilled},
		{"bot_killed", botKilled},
		{"redis_flushed", redisFlushed},
		{"redis_restarted", redisRestarted},
		{"postgres_restarted", postgresRestarted},
		{"homeserver_stopped", homeserverStopped},
		{"ssh_dropped", sshDropped},
		{"concurrent_plans", concurrentPlans},
	}
	for _, c := range cases {
		ok := t.Run(c.name, func(t *testing.T) {
			s.use(t)
			c.run(t, s)
			s.checkReplies()
		})
		s.use(t)
		if !ok {
			// A case that failed may have left a part down.
			t.Fatalf("%s failed; the later cases would run on a broken stack", c.name)
		}
	}
}
