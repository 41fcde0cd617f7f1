package actuator

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// TestOrderTakenByADeadActuatorIsSentAgain: an actuator that took an order
// and died before it began it (here one that holds it and never takes the
// order's lease) would keep it from running until asynq's own recoverer
// gave it up, a minute or more later. The actuator that runs sees the
// order taken without a lease, sends a copy of the same signed order, and
// runs it once; what the journal has begun is never sent again.
func TestOrderTakenByADeadActuatorIsSentAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(func(c *Config) { c.OrderLease = 300 * time.Millisecond }))
	b.stopActuator()

	// The dead actuator: it takes one order and never lets it go.
	opt, err := asynq.ParseRedisURI(b.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	taken := make(chan string, 1)
	release := make(chan struct{})
	dead := asynq.NewServer(opt, asynq.Config{Concurrency: 1, Queues: map[string]int{tasks.OrderQueue(tasks.DefaultSite): 1},
		TaskCheckInterval: 10 * time.Millisecond, LogLevel: asynq.ErrorLevel})
	if err := dead.Start(asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		taken <- tasks.Claimed(task.Payload()).ExecutionID
		<-release
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(release); dead.Shutdown() })
	o := b.order(t, "x-orphan", policy.RestartParams{}, b.jellyfin())
	b.send(t, o)
	select {
	case id := <-taken:
		diff(t, "the order the dead actuator took", o.ExecutionID, id)
	case <-time.After(waitTimeout):
		t.Fatal("the dead actuator never took the order")
	}
	dead.Stop() // it takes nothing more, and holds the order

	before := len(b.commands(t))
	b.start(t)
	res := b.results.result(t, o.ExecutionID)
	diff(t, "the order taken by a dead actuator", tasks.StatusSucceeded, res.Status)
	diff(t, "commands it sent", before+1, len(b.commands(t)))

	// Begun and journaled, it is never sent again, though asynq still
	// shows the dead actuator's copy as taken.
	time.Sleep(5 * b.cfg.OrderLease)
	diff(t, "results for it", 1, len(results(b.results.wait(t, "nothing", func([]message) bool { return true }), o.ExecutionID)))
	diff(t, "commands after it ran", before+1, len(b.commands(t)))
}
