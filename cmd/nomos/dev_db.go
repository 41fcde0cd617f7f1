//go:build nomosdev

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/internal/devstack"
	"github.com/nomoshq/nomos/tasks"
)

// The dev stack's directory, database and queues: what it owns, and how
// -reset clears them.

// devDirIntact reports whether dir still holds what its stack id was
// made with: the pickle key that encrypts the bot's keys in the database,
// and the homeserver that knows the bot's device. Without either, the
// database cannot be used with the directory.
func devDirIntact(dir string, s devState) bool {
	if s.StackID == "" {
		return false
	}
	for _, p := range []string{filepath.Join("keys", "pickle_key"), "dendrite"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			return false
		}
	}
	return true
}

// ensureDevDatabase makes sure database name exists and belongs to the
// dev directory whose stack id is stackID. A database of another stack id,
// or one from before stack ids, is dropped and made afresh. Any other
// database is left alone.
func ensureDevDatabase(ctx context.Context, pg *devstack.Postgres, name, stackID string) (recreated bool, err error) {
	comment, exists, err := pg.DatabaseComment(ctx, name)
	if err != nil {
		return false, err
	}
	want := devStackComment + stackID
	if exists && comment == want {
		return false, nil
	}
	if exists {
		if err := devDatabaseOwned(name, comment); err != nil {
			return false, err
		}
		if err := pg.DropDatabase(ctx, name); err != nil {
			return false, err
		}
	}
	if err := pg.EnsureDatabase(ctx, name); err != nil {
		return false, err
	}
	return exists, pg.SetDatabaseComment(ctx, name, want)
}

// devDatabaseOwned refuses a database that `nomos dev` did not make: one
// it marked, or one of its names from before it marked them.
func devDatabaseOwned(name, comment string) error {
	if strings.HasPrefix(comment, devStackComment) || comment == "" && strings.HasPrefix(name, devDatabase) {
		return nil
	}
	return fmt.Errorf("the database %s exists and was not made by nomos dev, so it is left alone: pass -database with another name (the default is %s)", name, devDatabase)
}

// resetDev deletes the dev directory and the dev database, after checking
// that both are the dev stack's and that no stack runs from the directory.
func resetDev(ctx context.Context, pg *devstack.Postgres, dir, database string) error {
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() || !looksLikeDevDir(dir) {
			return fmt.Errorf("-reset: %s does not look like a nomos dev directory (it has no dev.json), so it is left alone; remove it yourself if it should go", dir)
		}
		if devstack.DendriteInUse(filepath.Join(dir, "dendrite")) {
			return fmt.Errorf("-reset: a dev stack is running from %s: stop it first (Ctrl-C where it runs)", dir)
		}
	}
	comment, exists, err := pg.DatabaseComment(ctx, database)
	if err != nil {
		return err
	}
	if exists {
		if err := devDatabaseOwned(database, comment); err != nil {
			return fmt.Errorf("-reset: %w", err)
		}
		if err := pg.DropDatabase(ctx, database); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("-reset: %w", err)
	}
	return nil
}

func looksLikeDevDir(dir string) bool {
	if filepath.Base(dir) == devDir {
		return true
	}
	if _, err := os.Stat(filepath.Join(dir, "dev.json")); err == nil {
		return true
	}
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) == 0
}

// clearDevQueues deletes the stack's queues from Redis. It only logs what
// it cannot delete: a stale message is refused, not run.
func clearDevQueues(redisURL string, logger *slog.Logger) {
	opt, err := tasks.ParseRedisURL(redisURL)
	if err != nil {
		logger.Warn("cannot clear the old stack's queues", "err", err)
		return
	}
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	queues := []string{tasks.OrderQueue(tasks.DefaultSite), tasks.ProbeQueue(tasks.DefaultSite), tasks.QueueResults}
	// Every site's queues: a stack of several sites has more.
	if all, err := insp.Queues(); err == nil {
		for _, q := range all {
			if strings.HasPrefix(q, "nomos:") && !slices.Contains(queues, q) {
				queues = append(queues, q)
			}
		}
	}
	for _, q := range queues {
		if err := insp.DeleteQueue(q, true); err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
			logger.Warn("cannot clear the old stack's queue", "queue", q, "err", err)
		}
	}
}
