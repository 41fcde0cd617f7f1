package store

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pipeline holds back a transaction's statements whose results nobody
// reads (an insert, its audit row, the change notification) and sends
// them with the transaction's next read as one batch: one round trip
// instead of one each, on the path from a message to its card and from
// an approval to its order. The statements run in the same order, in the
// same transaction; the first that fails fails the read.
type pipeline struct {
	tx    pgx.Tx
	batch *pgx.Batch
}

func newPipeline(tx pgx.Tx) *pipeline { return &pipeline{tx: tx, batch: &pgx.Batch{}} }

// Exec queues sql. Its command tag is empty: a statement whose tag is
// read (RowsAffected) must go to the transaction itself, after flush.
func (p *pipeline) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	p.batch.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

// QueryRow sends what is queued and sql in one batch when its row is
// scanned.
func (p *pipeline) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if p.batch.Len() == 0 {
		return p.tx.QueryRow(ctx, sql, args...)
	}
	b := p.batch
	p.batch = &pgx.Batch{}
	queued := b.Len()
	b.Queue(sql, args...)
	return batchRow{ctx: ctx, tx: p.tx, batch: b, queued: queued}
}

// flush sends what is queued.
func (p *pipeline) flush(ctx context.Context) error {
	if p.batch.Len() == 0 {
		return nil
	}
	b := p.batch
	p.batch = &pgx.Batch{}
	return p.tx.SendBatch(ctx, b).Close()
}

type batchRow struct {
	ctx    context.Context
	tx     pgx.Tx
	batch  *pgx.Batch
	queued int
}

func (r batchRow) Scan(dest ...any) error {
	br := r.tx.SendBatch(r.ctx, r.batch)
	for range r.queued {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return err
		}
	}
	err := br.QueryRow().Scan(dest...)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}
