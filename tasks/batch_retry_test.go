package tasks_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/tasks"
)

// TestResultRetryDelay: a report that met Postgres away is tried again
// within seconds at first, and on asynq's long schedule after that, so a
// restart delays a result by seconds and a long outage loses none.
func TestResultRetryDelay(t *testing.T) {
	task := asynq.NewTask(tasks.TypeExecutionResult, nil)
	err := errors.New("postgres away")
	var total time.Duration
	for n := range 8 {
		d := tasks.ResultRetryDelay(n, err, task)
		if d != time.Duration(1<<n)*time.Second {
			t.Errorf("retry %d waits %s, want %s", n, d, time.Duration(1<<n)*time.Second)
		}
		total += d
	}
	if total > 5*time.Minute {
		t.Errorf("the first 8 retries span %s, want a few minutes at most", total)
	}
	if d := tasks.ResultRetryDelay(20, err, task); d < time.Hour {
		t.Errorf("retry 20 waits %s, want asynq's long schedule (hours)", d)
	}
	cfg := tasks.ResultsServerConfig(asynq.Config{})
	if cfg.RetryDelayFunc == nil {
		t.Fatal("ResultsServerConfig sets no RetryDelayFunc")
	}
	if d := cfg.RetryDelayFunc(0, err, task); d != time.Second {
		t.Errorf("the results server's first retry waits %s, want 1s", d)
	}
}
