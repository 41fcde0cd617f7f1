package tasks

import (
	"cmp"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// Probe results travel in batches. Each check:result is enqueued in the
// CheckResultGroup of the results queue, and the bot's results server has
// asynq aggregate the group into one check:results task (a batch) once no
// result has come for a second, two seconds have passed, or
// MaxCheckResultBatch are waiting. The bot then verifies each result on
// its own and writes the whole batch in one transaction, so Postgres work
// per result falls as the fleet grows. The group lives in Redis: a bot
// that stops finds its results there when it is back.
const (
	TypeCheckResults = "check:results"
	// CheckResultGroup is the asynq group of probe results.
	CheckResultGroup = "check_results"
	// MaxCheckResultBatch bounds a batch. A larger one is malformed.
	MaxCheckResultBatch = 500
)

// AggregateCheckResults is the results server's asynq.GroupAggregator:
// it puts the signed payloads of a group's probe results into one batch.
// Nothing is verified here; the bot verifies each payload of a batch.
var AggregateCheckResults = asynq.GroupAggregatorFunc(func(_ string, ts []*asynq.Task) *asynq.Task {
	payloads := make([][]byte, len(ts))
	for i, t := range ts {
		payloads[i] = t.Payload()
	}
	// [][]byte encodes as base64 strings, so any bytes a writer to Redis
	// put in the group make a batch that still decodes.
	body, _ := json.Marshal(payloads)
	return asynq.NewTask(TypeCheckResults, body, asynq.MaxRetry(3))
})

// SplitCheckResults returns the signed payloads of a batch, each still to
// be verified with VerifyCheckResult.
func SplitCheckResults(payload []byte) ([][]byte, error) {
	var payloads [][]byte
	if err := json.Unmarshal(payload, &payloads); err != nil {
		return nil, fmt.Errorf("%w: a batch of probe results: %v", ErrMalformed, err)
	}
	if len(payloads) > MaxCheckResultBatch {
		return nil, fmt.Errorf("%w: a batch of %d probe results, more than %d", ErrMalformed, len(payloads), MaxCheckResultBatch)
	}
	return payloads, nil
}

// PollInterval is how often the bot's results server and the actuator's
// order server poll an idle queue: asynq polls rather than blocks, and
// sleeps between half and one and a half of this, so a task waits about
// two thirds of it on average. 10ms keeps that under the chat path's
// budget (docs/architecture.md, "Latency, measured") at a hundred cheap
// Redis calls a second per idle server.
const PollInterval = 10 * time.Millisecond

// ResultsConcurrency is how many reports the bot applies at once. Each
// is a short Postgres transaction; four queued the reports of a burst of
// approvals behind each other (docs/operations.md, "Latency, measured").
const ResultsConcurrency = 16

// ResultsServerConfig is cfg for a server that consumes the results
// queue: the queue, and the aggregation of probe results into batches.
// Every consumer of the results queue must use it: without an aggregator
// probe results wait in their group.
func ResultsServerConfig(cfg asynq.Config) asynq.Config {
	if cfg.Queues == nil {
		cfg.Queues = map[string]int{QueueResults: 1}
	}
	cfg.GroupAggregator = AggregateCheckResults
	cfg.GroupGracePeriod = cmp.Or(cfg.GroupGracePeriod, time.Second)
	cfg.GroupMaxDelay = cmp.Or(cfg.GroupMaxDelay, 2*time.Second)
	cfg.GroupMaxSize = cmp.Or(cfg.GroupMaxSize, MaxCheckResultBatch)
	if cfg.RetryDelayFunc == nil {
		cfg.RetryDelayFunc = ResultRetryDelay
	}
	return cfg
}

// ResultRetryDelay is how long a report that could not be stored waits
// before it is tried again. A report fails when Postgres is away, most
// often for a restart of seconds: it is tried again after 100, 200, 400,
// 800 ms and then every 2 s for 20 s, so results reach their cards within
// 2 s of the database's return (the 1, 2, 4 … s it replaced left them
// waiting up to 4 s after a 3 s restart); then after 4, 8 … 512 s, and
// from the 22nd retry on asynq's own schedule, which stretches over days,
// so a long outage loses no result either.
func ResultRetryDelay(n int, err error, t *asynq.Task) time.Duration {
	switch {
	case n < 4:
		return 100 * time.Millisecond << n
	case n < 14:
		return 2 * time.Second
	case n < 22:
		return 2 * time.Second << (n - 13)
	}
	return asynq.DefaultRetryDelayFunc(n, err, t)
}
