package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/config"
	"github.com/nomoshq/nomos/internal/metrics"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// lifecycle is what every role that plans executions needs: the store, the
// queue to the actuator, and the executions service that signs orders.
type lifecycle struct {
	store *store.Store
	redis asynq.RedisConnOpt
	queue *asynq.Client
	// inspector lets the reconciler replace an order asynq archived.
	inspector *asynq.Inspector
	execs     *executions.Service
	// metrics are the process's own figures, fed by every part it builds.
	metrics *metrics.Metrics
}

func openLifecycle(ctx context.Context, cfg *config.Config, logger *slog.Logger) (*lifecycle, error) {
	st, err := store.Open(ctx, store.Config{URL: cfg.Database.URL, Logger: logger})
	if err != nil {
		return nil, err
	}
	redisOpt, err := tasks.ParseRedisURL(cfg.Redis.URL)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("redis.url: %w", err)
	}
	l := &lifecycle{store: st, redis: redisOpt, queue: asynq.NewClient(redisOpt), inspector: asynq.NewInspector(redisOpt), metrics: metrics.New()}
	signingKey, err := tasks.LoadSigningKey(cfg.Orders.SigningKeyFile)
	if err != nil {
		l.Close()
		return nil, err
	}
	// Only a role that consumes the results queue needs the actuator's
	// report key; without one, every report would be refused.
	var reportKey, previousReportKey ed25519.PublicKey
	if cfg.Reports.VerifyKeyFile != "" {
		if reportKey, err = tasks.LoadVerifyKey(cfg.Reports.VerifyKeyFile); err != nil {
			l.Close()
			return nil, fmt.Errorf("reports.verify_key_file: %w", err)
		}
		if cfg.Reports.PreviousVerifyKeyFile != "" {
			if previousReportKey, err = tasks.LoadVerifyKey(cfg.Reports.PreviousVerifyKeyFile); err != nil {
				l.Close()
				return nil, fmt.Errorf("reports.previous_verify_key_file: %w", err)
			}
			logger.Info("key rotation: reports signed with the previous report key are accepted too",
				"previous_verify_key_file", cfg.Reports.PreviousVerifyKeyFile)
		}
	}
	rules, err := policy.NewRules(policy.RulesConfig{Operators: cfg.Matrix.Operators})
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("matrix.operators: %w", err)
	}
	if q := cfg.Approvals.DestructiveQuorum; q < 1 || q > len(cfg.Matrix.Operators) {
		l.Close()
		return nil, fmt.Errorf("approvals.destructive_quorum: %d needs between 1 and the %d operators in matrix.operators", q, len(cfg.Matrix.Operators))
	}
	l.execs, err = executions.New(executions.Config{
		Store: st, Queue: l.queue, Inspector: l.inspector, SigningKey: signingKey, ReportVerifyKey: reportKey, PreviousReportVerifyKey: previousReportKey, Actuator: cfg.Actuator.Name, Rules: rules,
		OrderTTL: cfg.Orders.TTL, AckTimeout: cfg.Orders.AckTimeout, ReconcileInterval: cfg.Orders.ReconcileInterval, InventoryInterval: cfg.Inventory.Interval, Metrics: l.metrics, Logger: logger.With("component", "executions"),
		ForbidSelfApproval: !cfg.Approvals.SelfApproval, DestructiveQuorum: cfg.Approvals.DestructiveQuorum,
		SnapshotKeep: cfg.Snapshots.Keep, RequireSnapshot: cfg.Snapshots.Require, LockWait: cfg.Snapshots.LockWait,
	})
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (l *lifecycle) Close() {
	l.queue.Close()
	l.inspector.Close()
	l.store.Close()
}
