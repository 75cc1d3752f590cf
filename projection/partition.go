package projection

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/cfgcheck"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/retry"
	"github.com/pgdcb/pgdcb/internal/wake"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// Defaults of PartitionConfig.
const (
	defaultPartitions = 16
	defaultLease      = 10 * time.Second
	maxPartitions     = 1024
)

// PartitionConfig configures a Partitioned projection. Key is required; in
// every other field the zero value means the default. Negative numbers are
// refused with a *pgdcb.InvalidArgumentError.
type PartitionConfig struct {
	// Key is the tag key whose value routes an event to its partition. No
	// default: required. An event without a tag of this key is routed as the
	// empty value: all such events share one partition, in log order. An
	// event with several values of the key goes to the partition of the
	// first in canonical (byte) order.
	Key string
	// Partitions is how many partitions the key space is split into: the
	// most workers that can share the projection. Fixed for the life of the
	// projection (a worker configured with another count is refused). 0:
	// the default, 16; at most 1024.
	Partitions int
	// Lease is how long a claimed partition stays its worker's without a
	// renewal: a dead worker's partitions pass to others after at most
	// Lease (plus a renewal interval). A worker renews every Lease/4,
	// between batches, so a batch must take well under Lease, or its commit
	// is refused once another worker claimed the partition (in logical
	// mode, a batch that has run for Lease/2 stops its partition's
	// renewals). 0: the default, 10s.
	Lease time.Duration
	// BatchSize sizes the pages: a worker reads a page of BatchSize ×
	// min(Partitions, 8) events of the query once for all the partitions it
	// holds, and each partition's batch handles its events of the page.
	// 0: the default, 500.
	BatchSize int
	// ReaderConfig: PollInterval, NotifyDisabled, HeartbeatInterval (how
	// often an idle partition's checkpoint catches up with the log), the
	// retry bounds, Identity (the prefix of the worker's name) and Logger
	// apply as in Config. ElectionInterval, MaxAttempts and Tracer are not
	// used: a failed batch is retried with backoff for ever.
	ReaderConfig
	// Logical, when set, feeds every partition from logical decoding, as
	// Config.Logical does a Runner: events in commit order, so that an open
	// transaction of the database delays no partition. Each partition
	// streams from a replication slot of its own, named
	// logical.SlotName(schema, name+"\x00"+index): a slot's position is one
	// point of the stream, and partitions move between workers with their
	// own checkpoints, so they cannot share one. Its logical checkpoint is
	// stored in its row with its cursor, in its batch's transaction, so a
	// partition that moves resumes exactly there, and a lost slot
	// resynchronises from the log as a Runner's does. A slot decodes the
	// whole query: a partition's batch keeps its events and moves past the
	// others'. A worker runs one goroutine per partition it holds, so the
	// handler may be called concurrently for different partitions (never
	// for one). The cost, per partition: a slot (and a temporary one while
	// it catches up a backlog, logical.Config.CatchUpBytes), a WAL sender
	// and a decoding pass of the whole WAL; a worker refuses to start (the
	// error is logged and retried) when max_replication_slots or
	// max_wal_senders is below Partitions. Switching between the modes is
	// exactly once both ways; tail reads drop the abandoned slots.
	// Logical.Slot must be empty. Default nil: tail reads.
	// docs/SUBSCRIPTIONS.md, "Partitioned projections".
	Logical *logical.Config
}

// Partitioned is one worker of a partitioned projection: a read model whose
// events are split by the value of a tag key into partitions, each with its
// checkpoint and its lease in PostgreSQL, shared out among every worker that
// runs (in any process). Events of one key are handled in log order, by one
// worker at a time; events of different partitions concurrently by different
// workers. See docs/SUBSCRIPTIONS.md, "Partitioned projections".
type Partitioned struct {
	store *eventstore.Store
	name  string
	q     query.Query
	h     Handler
	key   string
	n     int
	lease time.Duration
	cfg   Config  // BatchSize and ReaderConfig, with defaults
	r     *Runner // its readTail reads the pages (on a standby with a read pool)
}

// NewPartitioned returns a worker of the partitioned projection name over
// the events matching q, split by cfg.Key. h receives the events of one
// partition per call, in log order, in the transaction that moves that
// partition's checkpoint. It fails as New does, and with a
// *pgdcb.InvalidArgumentError naming a PartitionConfig field out of range.
func NewPartitioned(store *eventstore.Store, name string, q query.Query, h Handler, cfg *PartitionConfig) (*Partitioned, error) {
	if h == nil {
		return nil, errors.New("pgdcb: projection.NewPartitioned: nil handler")
	}
	if err := cfg.validate(); err != nil {
		return nil, errfmt.Errorf("pgdcb: projection.NewPartitioned %q: %w", name, err)
	}
	pc := cfg.withDefaults()
	r, err := newRunner(store, name, q, &Config{BatchSize: pc.BatchSize, ReaderConfig: pc.ReaderConfig, Logical: pc.Logical})
	if err != nil {
		return nil, err
	}
	parts := pc.Partitions
	// The pages its readTail reads: a partition keeps about 1/parts of a
	// page, so a page of BatchSize × parts events (at most 8 × BatchSize)
	// gives it batches of about BatchSize.
	r.cfg.BatchSize *= min(parts, 8)
	return &Partitioned{store: store, name: name, q: q, h: h, key: pc.Key,
		n: parts, lease: pc.Lease, cfg: r.cfg, r: r}, nil
}

// validate refuses a Key that is not a tag key, negative numbers and
// durations, and more than 1024 partitions, with a
// *pgdcb.InvalidArgumentError naming the field; newRunner checks BatchSize
// and ReaderConfig.
func (c *PartitionConfig) validate() error {
	if c == nil {
		return &pgdcb.InvalidArgumentError{Name: "PartitionConfig.Key", Reason: "required"}
	}
	if _, err := tags.Parse(c.Key + "=v"); err != nil || c.Key == "" {
		return &pgdcb.InvalidArgumentError{Name: "PartitionConfig.Key", Reason: fmt.Sprintf("%q is not a tag key", c.Key)}
	}
	if err := cfgcheck.NonNegative(
		cfgcheck.Int("Partitions", c.Partitions, defaultPartitions),
		cfgcheck.Duration("Lease", c.Lease, defaultLease),
	); err != nil {
		return err
	}
	if c.Logical != nil && c.Logical.Slot != "" {
		return &pgdcb.InvalidArgumentError{Name: "PartitionConfig.Logical.Slot",
			Reason: "must be empty: each partition has a slot of its own, named after the projection and the partition"}
	}
	if c.Partitions > maxPartitions {
		return &pgdcb.InvalidArgumentError{Name: "PartitionConfig.Partitions", Reason: fmt.Sprintf("at most %d (got %d)", maxPartitions, c.Partitions)}
	}
	return nil
}

// withDefaults returns c with Partitions and Lease defaulted (c was
// validated: not nil).
func (c *PartitionConfig) withDefaults() PartitionConfig {
	o := *c
	o.Partitions = cmp.Or(o.Partitions, defaultPartitions)
	o.Lease = cmp.Or(o.Lease, defaultLease)
	return o
}

// partitionOf is the partition of ev among n: FNV-1a (64 bits) of the value
// of its first tag of key, modulo n. Stored checkpoints depend on it: it
// never changes.
func partitionOf(ev *pgdcb.StoredEvent, key string, n int) int {
	v, _ := ev.Tags.Get(key)
	h := fnv.New64a()
	h.Write([]byte(v))
	return int(h.Sum64() % uint64(n))
}

// Run takes part in the projection until ctx ends, and returns ctx's error:
// it registers the worker, claims its share of the partitions (and releases
// what is above it when workers join), renews its leases, and runs rounds:
// one read of the log for the partitions it holds, then each one's batch
// over its events, one at a time. In logical mode (PartitionConfig.Logical)
// each held partition runs instead in a goroutine of its own, a batch at a
// time from its stream. When ctx ends it releases its partitions at once
// for the other workers, once their batches in flight have ended.
// Connection and handler failures are logged and retried with backoff.
func (p *Partitioned) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var b [6]byte
	_, _ = rand.Read(b[:])
	lw := &leaseWorker{p: p, id: p.cfg.Identity + "#" + hex.EncodeToString(b[:]), schema: ident.Schema(p.store),
		held: map[int]*heldPartition{}}
	defer lw.leave(ctx)
	if p.cfg.Logical != nil {
		return p.runLogical(ctx, lw) // each stream waits for its events
	}
	w := wake.New(p.store, p.cfg.PollInterval, !p.cfg.NotifyDisabled, p.cfg.Logger)
	w.Start(ctx)
	defer w.Stop()
	tick := p.lease / 4
	var (
		lastTick time.Time
		failures int
		next     int // round robin over the held partitions
		lastIdle = map[int]time.Time{}
		fails    = map[int]int{}       // consecutive failed batches per partition
		retryAt  = map[int]time.Time{} // when a failed partition is tried again
	)
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Since(lastTick) >= tick {
			if err := lw.rebalance(ctx); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				failures++
				if retry.Sleep(ctx, min(lw.renewFailed(ctx, failures, err), tick)) != nil {
					return ctx.Err()
				}
				continue
			}
			failures = 0
			lastTick = time.Now()
		}
		// One read of the log for every held partition not backing off,
		// then each one's batch over its events of the page.
		var parts []int
		for _, part := range lw.partitions() {
			if !time.Now().Before(retryAt[part]) {
				parts = append(parts, part)
			}
		}
		busy := false
		if len(parts) > 0 {
			rd, ok, err := lw.read(ctx, parts)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			for _, part := range rd.fenced {
				p.cfg.Logger.InfoContext(ctx, "pgdcb: projection: partition lost (fenced)", "name", p.name, "partition", part, "worker", lw.id)
				delete(lw.held, part)
			}
			if err != nil {
				for _, part := range parts {
					fails[part]++
					retryAt[part] = time.Now().Add(retry.Delay(fails[part], p.cfg.RetryMin, p.cfg.RetryMax))
				}
				p.cfg.Logger.WarnContext(ctx, "pgdcb: projection: partition read failed", "name", p.name, "partitions", parts, "err", err)
			}
			for i := range parts {
				if !ok {
					break
				}
				hp := lw.held[parts[(next+i)%len(parts)]]
				if hp == nil {
					continue // lost in this round
				}
				writeIdle := time.Since(lastIdle[hp.partition]) >= p.cfg.HeartbeatInterval
				res, err := lw.batch(ctx, hp, &rd, writeIdle)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				switch {
				case errors.Is(err, errFenced):
					p.cfg.Logger.InfoContext(ctx, "pgdcb: projection: partition lost (fenced)", "name", p.name, "partition", hp.partition, "worker", lw.id)
					delete(lw.held, hp.partition)
				case err != nil:
					fails[hp.partition]++
					d := retry.Delay(fails[hp.partition], p.cfg.RetryMin, p.cfg.RetryMax)
					retryAt[hp.partition] = time.Now().Add(d) // the other partitions go on
					p.cfg.Logger.WarnContext(ctx, "pgdcb: projection: partition batch failed", "name", p.name, "partition", hp.partition, "err", err, "retry_in", d)
				default:
					delete(fails, hp.partition)
					delete(retryAt, hp.partition)
					if res.wrote && res.n == 0 {
						lastIdle[hp.partition] = time.Now()
					}
					busy = busy || res.full
				}
				if time.Since(lastTick) >= tick {
					next += i + 1 // the next round starts after the last batch run
					break         // renew the leases before the next batch
				}
			}
		}
		if busy || time.Since(lastTick) >= tick {
			continue
		}
		wait := min(p.cfg.PollInterval, tick-time.Since(lastTick))
		for part, at := range retryAt {
			if lw.held[part] == nil {
				delete(retryAt, part) // released or lost meanwhile
				delete(fails, part)
				continue
			}
			wait = min(wait, time.Until(at))
		}
		if err := w.WaitFor(ctx, max(wait, time.Millisecond)); err != nil {
			return err
		}
	}
}
