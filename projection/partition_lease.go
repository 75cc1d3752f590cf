package projection

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/retry"
)

// heldPartition is a partition a worker claimed, with the epoch of its
// claim: a batch commits only while the row still carries that epoch.
type heldPartition struct {
	partition int
	epoch     int64
}

// leaseWorker is one Run of a Partitioned: its unique name among the
// projection's workers, and the partitions it holds. Used by Run's goroutine
// only.
type leaseWorker struct {
	p       *Partitioned
	id      string
	schema  string
	ensured bool
	held    map[int]*heldPartition
	// deferRelease: rebalance leaves the partitions above the share in
	// excess, still held, for the caller to stop and release (logical
	// mode, where each runs in a goroutine of its own).
	deferRelease bool
	excess       []int
	// stale: partitions whose batch in flight has run too long (logical
	// mode): rebalance neither renews nor claims them, and does not renew
	// the worker's registration while there are any.
	stale []int
}

// partitions returns the held partitions in order.
func (lw *leaseWorker) partitions() []int {
	ps := make([]int, 0, len(lw.held))
	for p := range lw.held {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// share is the number of partitions of n that the worker of rank (0-based,
// in the order of the live workers' names) among live workers should hold:
// n/live, one more for the first n%live. The shares add up to n.
func share(n, live, rank int) int {
	if live <= 0 {
		return n
	}
	s := n / live
	if rank < n%live {
		s++
	}
	return s
}

// ensure creates the projection's partition rows, and refuses a worker
// whose key or partition count differs from the stored ones.
func (lw *leaseWorker) ensure(ctx context.Context) error {
	p := lw.p
	if err := ValidateName(p.name); err != nil {
		return err
	}
	// projection_partitions primary key.
	if _, err := p.store.Pool().Exec(ctx, `INSERT INTO `+lw.schema+`.projection_partitions (name, partition, partitions, key)
		SELECT $1, g, $2, $3 FROM generate_series(0, $2 - 1) g ON CONFLICT (name, partition) DO NOTHING`, p.name, p.n, p.key); err != nil {
		return fmt.Errorf("pgdcb: projection %q: creating partitions: %w", p.name, err)
	}
	var (
		rows, parts int
		key         string
	)
	// projection_partitions primary key (its name prefix).
	if err := p.store.Pool().QueryRow(ctx, `SELECT count(*), max(partitions), max(key) FROM `+lw.schema+`.projection_partitions WHERE name = $1`, p.name).
		Scan(&rows, &parts, &key); err != nil {
		return fmt.Errorf("pgdcb: projection %q: reading partitions: %w", p.name, err)
	}
	if rows != p.n || parts != p.n || key != p.key {
		return fmt.Errorf("pgdcb: projection %q: %w", p.name, &pgdcb.InvalidArgumentError{Name: "PartitionConfig",
			Reason: fmt.Sprintf("the projection is split by key %q into %d partitions; this worker has key %q and %d (start a new projection name to change them)", key, parts, p.key, p.n)})
	}
	if p.cfg.Logical != nil {
		if err := lw.checkSlots(ctx); err != nil {
			return err
		}
	}
	lw.ensured = true
	return nil
}

// rebalance is one lease round, in one transaction: register (or renew) the
// worker, renew its leases (dropping those another worker took), count the
// live workers, and release the partitions above the worker's share or
// claim free ones (never claimed, released, or whose lease ran out) up to
// it. Run calls it every Lease/4, between batches.
func (lw *leaseWorker) rebalance(ctx context.Context) error {
	p := lw.p
	if !lw.ensured {
		if err := lw.ensure(ctx); err != nil {
			return err
		}
	}
	lease := p.lease.Seconds()
	// projection_workers primary key. Committed on its own, before the
	// round: workers that start together see each other when they count.
	// Not while a batch is stale: as a tail-mode worker stuck in a batch,
	// the worker then drops out of the count, so that the others take the
	// stale partition's share.
	if len(lw.stale) == 0 {
		if _, err := p.store.Pool().Exec(ctx, `INSERT INTO `+lw.schema+`.projection_workers (name, worker, lease_until)
			VALUES ($1, $2, now() + make_interval(secs => $3))
			ON CONFLICT (name, worker) DO UPDATE SET lease_until = excluded.lease_until`, p.name, lw.id, lease); err != nil {
			return err
		}
	}
	return pgx.BeginTxFunc(ctx, p.store.Pool(), pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		// The delete scans the projection's workers (a handful).
		if _, err := tx.Exec(ctx, `DELETE FROM `+lw.schema+`.projection_workers
			WHERE name = $1 AND lease_until < now() - make_interval(secs => $2)`, p.name, 10*lease); err != nil {
			return err
		}
		// projection_partitions primary key (name prefix): renew what this
		// worker still owns, but the stale.
		stale := make([]int32, len(lw.stale))
		for i, part := range lw.stale {
			stale[i] = int32(part)
		}
		rows, err := tx.Query(ctx, `UPDATE `+lw.schema+`.projection_partitions
			SET lease_until = now() + make_interval(secs => $3)
			WHERE name = $1 AND owner = $2 AND partition <> ALL($4) RETURNING partition, epoch`, p.name, lw.id, lease, stale)
		if err != nil {
			return err
		}
		owned, err := collectHeld(rows)
		if err != nil {
			return err
		}
		var live []string
		rows, err = tx.Query(ctx, `SELECT worker FROM `+lw.schema+`.projection_workers
			WHERE name = $1 AND lease_until > now() ORDER BY worker`, p.name)
		if err != nil {
			return err
		}
		if live, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		want := share(p.n, len(live), max(0, slices.Index(live, lw.id)))
		lw.excess = nil
		if len(owned) > want {
			slices.SortFunc(owned, func(a, b *heldPartition) int { return a.partition - b.partition })
			var free []int
			for _, h := range owned[want:] {
				free = append(free, h.partition)
			}
			owned = owned[:want]
			if lw.deferRelease {
				lw.excess = free
			} else if err := lw.releaseIn(ctx, tx, free); err != nil {
				return err
			}
		}
		if len(owned) < want {
			// projection_partitions primary key; SKIP LOCKED passes over a
			// partition another worker claims or commits a batch of right
			// now, and the row lock re-checks the condition on the newest
			// row version (READ COMMITTED), so one claim wins.
			rows, err := tx.Query(ctx, `UPDATE `+lw.schema+`.projection_partitions p
				SET owner = $2, epoch = p.epoch + 1, lease_until = now() + make_interval(secs => $3), updated_at = now()
				FROM (SELECT partition FROM `+lw.schema+`.projection_partitions
				      WHERE name = $1 AND (owner IS NULL OR lease_until < now()) AND partition <> ALL($5)
				      ORDER BY partition LIMIT $4 FOR UPDATE SKIP LOCKED) f
				WHERE p.name = $1 AND p.partition = f.partition
				RETURNING p.partition, p.epoch`, p.name, lw.id, lease, want-len(owned), stale)
			if err != nil {
				return err
			}
			claimed, err := collectHeld(rows)
			if err != nil {
				return err
			}
			owned = append(owned, claimed...)
		}
		held := make(map[int]*heldPartition, len(owned))
		for _, h := range owned {
			held[h.partition] = h
		}
		lw.held = held
		return nil
	})
}

// releaseIn releases the worker's partitions parts through db.
func (lw *leaseWorker) releaseIn(ctx context.Context, db dbexec, parts []int) error {
	ps := make([]int32, len(parts))
	for i, part := range parts {
		ps[i] = int32(part)
	}
	// projection_partitions primary key.
	_, err := db.Exec(ctx, `UPDATE `+lw.schema+`.projection_partitions
		SET owner = NULL, lease_until = NULL, updated_at = now()
		WHERE name = $1 AND owner = $2 AND partition = ANY($3)`, lw.p.name, lw.id, ps)
	return err
}

// release releases the worker's partitions parts (rebalance's excess, once
// their goroutines stopped). Best effort: what fails here is released at
// a later round, or ends with the lease.
func (lw *leaseWorker) release(ctx context.Context, parts []int) {
	if err := lw.releaseIn(ctx, lw.p.store.Pool(), parts); err != nil && ctx.Err() == nil {
		lw.p.cfg.Logger.WarnContext(ctx, "pgdcb: projection: releasing partitions failed", "name", lw.p.name, "partitions", parts, "err", err)
	}
}

func collectHeld(rows pgx.Rows) ([]*heldPartition, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*heldPartition, error) {
		var (
			h    heldPartition
			part int32
		)
		err := row.Scan(&part, &h.epoch)
		h.partition = int(part)
		return &h, err
	})
}

// leave releases the worker's partitions and removes it from the live
// workers, so that the others take its share at their next round instead
// of after the lease. Best effort: what fails here ends with the lease.
func (lw *leaseWorker) leave(ctx context.Context) {
	if !lw.ensured {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	pool := lw.p.store.Pool()
	// projection_partitions and projection_workers primary keys.
	if _, err := pool.Exec(ctx, `UPDATE `+lw.schema+`.projection_partitions
		SET owner = NULL, lease_until = NULL, updated_at = now() WHERE name = $1 AND owner = $2`, lw.p.name, lw.id); err != nil {
		lw.p.cfg.Logger.WarnContext(ctx, "pgdcb: projection: releasing partitions failed", "name", lw.p.name, "err", err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM `+lw.schema+`.projection_workers WHERE name = $1 AND worker = $2`, lw.p.name, lw.id); err != nil {
		lw.p.cfg.Logger.WarnContext(ctx, "pgdcb: projection: leaving failed", "name", lw.p.name, "err", err)
	}
	lw.held = map[int]*heldPartition{}
}

// renewFailed logs the failures-th failed lease renewal in a row, err, and
// returns the backoff before the next.
func (lw *leaseWorker) renewFailed(ctx context.Context, failures int, err error) time.Duration {
	p := lw.p
	d := retry.Delay(failures, p.cfg.RetryMin, p.cfg.RetryMax)
	p.cfg.Logger.WarnContext(ctx, "pgdcb: projection: partition lease renewal failed", "name", p.name, "err", err, "retry_in", d)
	return d
}
