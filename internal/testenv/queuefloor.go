package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hibiken/asynq"
)

// QueueFloor starts a bare asynq server on a queue of its own, polling as
// often as the bot and the actuator do (poll), and returns a function that
// measures one round trip: from enqueuing a task to its handler starting.
// It is the floor a benchmark of a path through Redis compares against.
// Each round trip first leaves the server idle for one to three polls, so
// the task lands at a random point of its poll, as a result or an order
// does.
func QueueFloor(tb testing.TB, opt asynq.RedisConnOpt, poll time.Duration) func() time.Duration {
	tb.Helper()
	queue := fmt.Sprintf("floor-%d", time.Now().UnixNano())
	started := make(chan time.Time, 1)
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: 1, Queues: map[string]int{queue: 1}, TaskCheckInterval: poll, LogLevel: asynq.ErrorLevel})
	if err := srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		started <- time.Now()
		return nil
	})); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Shutdown)
	client := asynq.NewClient(opt)
	tb.Cleanup(func() { _ = client.Close() })
	return func() time.Duration {
		time.Sleep(poll + rand.N(2*poll))
		sent := time.Now()
		if _, err := client.Enqueue(asynq.NewTask("floor", nil), asynq.Queue(queue)); err != nil {
			tb.Fatal(err)
		}
		select {
		case at := <-started:
			return at.Sub(sent)
		case <-time.After(30 * time.Second):
			tb.Fatal("the floor's task never ran")
			return 0
		}
	}
}
