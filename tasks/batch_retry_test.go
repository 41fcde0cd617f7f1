package tasks_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/tasks"
)

// TestResultRetryDelay: a report that met Postgres away is tried again
// 100 ms later, growing to every 2 s while a restart lasts, then less
// often, and on asynq's long schedule last, so a restart delays a result
// by at most 2 s and a long outage loses none.
func TestResultRetryDelay(t *testing.T) {
	task := asynq.NewTask(tasks.TypeExecutionResult, nil)
	err := errors.New("postgres away")
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}
	for range 10 {
		want = append(want, 2*time.Second)
	}
	var total time.Duration
	for n, w := range want {
		if d := tasks.ResultRetryDelay(n, err, task); d != w {
			t.Errorf("retry %d waits %s, want %s", n, d, w)
		}
		total += w
	}
	if total > 30*time.Second {
		t.Errorf("the retries at most 2 s apart span %s; a restart should be over in them", total)
	}
	var later time.Duration
	for n := len(want); n < 22; n++ {
		d := tasks.ResultRetryDelay(n, err, task)
		if d <= 2*time.Second || d > 10*time.Minute {
			t.Errorf("retry %d waits %s, want between 2 s and 10 min", n, d)
		}
		later += d
	}
	if later < 10*time.Minute {
		t.Errorf("the retries before asynq's schedule span %s, want at least 10 min", total+later)
	}
	if d := tasks.ResultRetryDelay(24, err, task); d < time.Hour {
		t.Errorf("retry 24 waits %s, want asynq's long schedule (hours)", d)
	}
	cfg := tasks.ResultsServerConfig(asynq.Config{})
	if cfg.RetryDelayFunc == nil {
		t.Fatal("ResultsServerConfig sets no RetryDelayFunc")
	}
	if d := cfg.RetryDelayFunc(0, err, task); d != 100*time.Millisecond {
		t.Errorf("the results server's first retry waits %s, want 100ms", d)
	}
}
