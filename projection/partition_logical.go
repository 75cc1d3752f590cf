package projection

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/retry"
	"github.com/pgdcb/pgdcb/logical"
)

// Logical decoding mode of a Partitioned (PartitionConfig.Logical).
//
// Each partition streams from a replication slot of its own
// (partitionSlot), and its logical checkpoint is stored in its row of
// projection_partitions beside its cursor. A slot decodes the whole query,
// so a partition's stream hands out every partition's events; its batch
// keeps its own and moves its checkpoint past the others. One slot per
// partition, not one per worker, because a slot's position is one point
// of the stream: partitions that move from worker to worker with their own
// checkpoints could not share one. So a partition that moves resumes from
// its committed checkpoint on its own slot, and a lost slot resynchronises
// from the log as a Runner's does (logical.Open). The cost: one slot, one
// WAL sender and one decoding pass of the whole WAL per partition.
//
// A worker runs one goroutine per partition it holds (a stream cannot be
// shared), each a loop of batches as the Runner's batchLogical; the lease
// round stops a partition's goroutine before it releases the partition.

// errLost: a partition's stream found its row claimed by another worker.
var errLost = errors.New("pgdcb: projection: partition claimed by another worker")

// partitionSlot is the replication slot of partition part of projection
// name: logical.SlotName of the name and the index, apart by a NUL (which
// no projection name holds, so that no Runner's default slot is the same).
func partitionSlot(schema, name string, part int) string {
	return logical.SlotName(schema, name+"\x00"+strconv.Itoa(part))
}

// checkSlots refuses a logical mode that the server cannot serve: every
// partition needs a replication slot and a WAL sender of its own (when one
// worker holds them all), and wal_level=logical.
func (lw *leaseWorker) checkSlots(ctx context.Context) error {
	p := lw.p
	var (
		level          string
		slots, senders int
	)
	if err := p.store.Pool().QueryRow(ctx, `SELECT current_setting('wal_level'),
		current_setting('max_replication_slots')::int, current_setting('max_wal_senders')::int`).Scan(&level, &slots, &senders); err != nil {
		return fmt.Errorf("pgdcb: projection %q: reading the replication settings: %w", p.name, err)
	}
	if level != "logical" {
		return fmt.Errorf("pgdcb: projection %q: PartitionConfig.Logical needs wal_level=logical (the server has %s)", p.name, level)
	}
	if slots < p.n || senders < p.n {
		return fmt.Errorf("pgdcb: projection %q: %w", p.name, &pgdcb.InvalidArgumentError{Name: "PartitionConfig.Partitions",
			Reason: fmt.Sprintf("logical mode takes a replication slot and a WAL sender per partition: %d partitions, but the server has max_replication_slots = %d and max_wal_senders = %d (other readers need theirs too)", p.n, slots, senders)})
	}
	return nil
}

// stream is the goroutine of a partition a worker holds in logical mode.
type stream struct {
	partition int
	epoch     int64
	stop      context.CancelFunc // ends it after its batch in flight
	stopped   bool               // stop was called
	done      chan struct{}
	// batchSince: when its batch in flight began (UnixNano), 0 between
	// batches.
	batchSince atomic.Int64
}

func (s *stream) finished() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// runLogical is Run in logical mode: a lease round every Lease/4 (and when
// a partition's goroutine ends), and a goroutine per held partition
// (runPartition). The round never waits for a goroutine: one whose
// partition was taken, or is above the share, is told to stop after its
// batch in flight; a partition is released, or gets a new goroutine, only
// once its last one has ended, so a worker never runs two batches of one
// partition. A batch that has run for Lease/2 is stale: as in tail mode,
// where a batch holds up every renewal, its partition's lease and the
// worker's registration are no longer renewed, so that another worker
// takes the partition after Lease, its claim fencing the stale batch.
func (p *Partitioned) runLogical(ctx context.Context, lw *leaseWorker) error {
	lw.deferRelease = true
	streams := map[int]*stream{}
	ended := make(chan struct{}, 1)
	defer func() { // before Run's leave releases the partitions
		for _, s := range streams {
			s.stop()
		}
		for _, s := range streams {
			<-s.done
		}
	}()
	tick := p.lease / 4
	failures := 0
	for {
		next := time.Now().Add(tick)
		lw.stale = lw.stale[:0]
		for part, s := range streams {
			if s.finished() {
				delete(streams, part)
			} else if t := s.batchSince.Load(); t != 0 && time.Since(time.Unix(0, t)) >= p.lease/2 {
				lw.stale = append(lw.stale, part)
			}
		}
		if err := lw.rebalance(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			failures++
			next = time.Now().Add(min(lw.renewFailed(ctx, failures, err), tick))
		} else {
			failures = 0
			var free []int
			for _, part := range lw.excess {
				if s := streams[part]; s != nil {
					s.stopped = true
					s.stop() // released at a round after it ended
				} else {
					free = append(free, part)
				}
			}
			if len(free) > 0 {
				lw.release(ctx, free)
			}
			for part, s := range streams {
				if hp := lw.held[part]; !s.stopped && (hp == nil || hp.epoch != s.epoch) {
					s.stopped = true
					s.stop() // taken by another worker: its commit is fenced
				}
			}
			for part, hp := range lw.held {
				if streams[part] != nil {
					continue
				}
				sctx, stop := context.WithCancel(ctx)
				s := &stream{partition: part, epoch: hp.epoch, stop: stop, done: make(chan struct{})}
				streams[part] = s
				go func(h heldPartition) {
					defer func() {
						close(s.done)
						select {
						case ended <- struct{}{}:
						default:
						}
					}()
					lw.runPartition(ctx, sctx, h, s)
				}(*hp)
			}
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-ended:
			t.Stop()
		case <-t.C:
		}
	}
}

// runPartition runs the batches of partition hp until stopCtx ends or it
// finds the partition claimed by another worker. A batch in flight
// finishes on ctx (Run's): stopping it commits what it read, or is fenced.
// A failed batch closes the stream, which the next one reopens from the
// stored checkpoint, after a backoff.
func (lw *leaseWorker) runPartition(ctx, stopCtx context.Context, hp heldPartition, s *stream) {
	p := lw.p
	var (
		f         logicalFeed
		lastWrite = time.Now()
		fails     int
		fenced    bool
	)
	defer f.close(ctx)
	for stopCtx.Err() == nil {
		wrote, err := lw.batchLogical(ctx, stopCtx, &hp, &f, s, lastWrite)
		switch {
		case errors.Is(err, errLost):
			if !fenced {
				p.cfg.Logger.InfoContext(ctx, "pgdcb: projection: partition lost (fenced)", "name", p.name, "partition", hp.partition, "worker", lw.id)
			}
			return
		case errors.Is(err, errFenced):
			// Reopened from the stored row, whose owner says whether the
			// partition is still this worker's.
			p.cfg.Logger.InfoContext(ctx, "pgdcb: projection: partition lost (fenced)", "name", p.name, "partition", hp.partition, "worker", lw.id)
			fenced = true
			f.close(ctx)
		case err != nil:
			f.close(ctx)
			if stopCtx.Err() != nil {
				return
			}
			fails++
			d := retry.Delay(fails, p.cfg.RetryMin, p.cfg.RetryMax)
			p.cfg.Logger.WarnContext(ctx, "pgdcb: projection: partition batch failed", "name", p.name, "partition", hp.partition, "err", err, "retry_in", d)
			if retry.Sleep(stopCtx, d) != nil {
				return
			}
		default:
			fails, fenced = 0, false
			if wrote {
				lastWrite = time.Now()
			}
		}
	}
}

// batchLogical is one batch of partition hp from its stream f: Runner's
// batchLogical with the partition's row for the checkpoint row. When the
// stream is closed it reads the row (errLost when another worker claimed
// it) and opens the stream from its logical checkpoint on the partition's
// slot. It then reads the stream's next batch (waiting up to PollInterval),
// keeps the partition's events, and, in one READ COMMITTED transaction,
// calls the handler with them and moves the logical checkpoint and the
// cursor by compare-and-set on the ones stored and on the claim's owner and
// epoch (errFenced when it matches nothing); only after the commit is the
// position confirmed to the server. A batch without events of the
// partition is written only when writeIdle (HeartbeatInterval since
// lastWrite): the stream keeps its position meanwhile.
func (lw *leaseWorker) batchLogical(ctx, stopCtx context.Context, hp *heldPartition, f *logicalFeed, s *stream, lastWrite time.Time) (wrote bool, _ error) {
	p := lw.p
	label := fmt.Sprintf("%s[%d]", p.name, hp.partition)
	if f.reader == nil {
		var (
			text  string
			tail  cursor.Cursor
			owner *string
			epoch int64
		)
		// projection_partitions primary key.
		err := p.store.Pool().QueryRow(stopCtx, `SELECT transaction_id, position, coalesce(logical_checkpoint, ''), owner, epoch
			FROM `+lw.schema+`.projection_partitions WHERE name = $1 AND partition = $2`, p.name, hp.partition).
			Scan(&tail.TransactionID, &tail.Position, &text, &owner, &epoch)
		if err != nil {
			return false, fmt.Errorf("pgdcb: projection %q: reading partition %d: %w", p.name, hp.partition, err)
		}
		if owner == nil || *owner != lw.id || epoch != hp.epoch {
			return false, errLost
		}
		cfg := *p.cfg.Logical
		cfg.Slot = partitionSlot(p.store.Schema(), p.name, hp.partition)
		if err := f.open(stopCtx, p.store, label, p.q, text, tail, &cfg, p.cfg.Logger); err != nil {
			return false, fmt.Errorf("pgdcb: projection %q: partition %d: %w", p.name, hp.partition, err)
		}
	}
	b, err := f.next(stopCtx, p.cfg.BatchSize, p.cfg.PollInterval)
	if err != nil {
		return false, fmt.Errorf("pgdcb: projection %q: partition %d: %w", p.name, hp.partition, err)
	}
	var evs []pgdcb.StoredEvent
	for i := range b.Events {
		if partitionOf(&b.Events[i], p.key, p.n) == hp.partition {
			evs = append(evs, b.Events[i])
		}
	}
	writeIdle := time.Since(lastWrite) >= p.cfg.HeartbeatInterval
	if !b.Moved(f.base, f.baseTail) || (len(evs) == 0 && !writeIdle) {
		return false, nil
	}
	s.batchSince.Store(time.Now().UnixNano())
	defer s.batchSince.Store(0)
	tx, done, err := beginBatch(ctx, p.store.Pool())
	if err != nil {
		return false, err
	}
	defer done()
	if len(evs) > 0 {
		if err := p.h(ctx, tx, evs); err != nil {
			return false, &handlerError{Name: label, Cursor: f.baseTail, Err: err}
		}
	}
	// projection_partitions primary key. Compare-and-set on the stored
	// logical checkpoint and cursor and on the claim's owner and epoch, as
	// in batch.
	tag, err := tx.Exec(ctx, `UPDATE `+lw.schema+`.projection_partitions
		SET transaction_id = $3::xid8, position = $4, logical_checkpoint = nullif($5, ''), updated_at = now()
		WHERE name = $1 AND partition = $2 AND owner = $6 AND epoch = $7
		  AND coalesce(logical_checkpoint, '') = $8 AND transaction_id = $9::xid8 AND position = $10`,
		p.name, hp.partition, b.Tail.TransactionID, b.Tail.Position, b.Checkpoint.String(),
		lw.id, hp.epoch, f.base.String(), f.baseTail.TransactionID, f.baseTail.Position)
	if err != nil {
		return false, fmt.Errorf("pgdcb: projection %q: moving partition %d: %w", p.name, hp.partition, err)
	}
	if tag.RowsAffected() != 1 {
		return false, errFenced
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("pgdcb: projection %q: commit of partition %d: %w", p.name, hp.partition, err)
	}
	f.committed(ctx, b, p.cfg.Logger, label)
	return true, nil
}
