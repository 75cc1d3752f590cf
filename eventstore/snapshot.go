package eventstore

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/query"
)

// Defaults of the snapshot settings of Config.
const (
	defaultSnapshotEvery        = 100
	defaultSnapshotWriteTimeout = 5 * time.Second
	// maxPendingSnapshotWrites bounds the background writes in flight.
	maxPendingSnapshotWrites = 4
)

// snapshotEvery is how many events between automatic snapshot writes (New
// filled the default); 0 with SnapshotsManual.
func (sn *snapshotState) snapshotEvery() int {
	s := sn.s
	if s.cfg.SnapshotsManual {
		return 0 // no automatic writes
	}
	return s.cfg.SnapshotEvery
}

// SnapshotStats counts what the store did with decision snapshots since it
// was made.
type SnapshotStats struct {
	// Loaded: snapshots a Project started from.
	Loaded int64
	// IgnoredVersion: stored snapshots of another version of a model, seen
	// and ignored.
	IgnoredVersion int64
	// IgnoredCorrupt: snapshots that failed to decode, ignored.
	IgnoredCorrupt int64
	// IgnoredStale: snapshots discarded because retention ran between their
	// load and the read (the Project then read from the start).
	IgnoredStale int64
	// LoadFailures: loads that failed (the Project read from the start).
	LoadFailures int64
	// Written: snapshots stored.
	Written int64
	// WritesSkipped: writes not made: one was already in flight for the same
	// model and query, too many were pending, or the stored one was newer,
	// or retention had run since the read.
	WritesSkipped int64
	// WriteFailures: writes that failed (logged; never returned by Project).
	WriteFailures int64
}

type snapshotState struct {
	s *Store // the store whose snapshots these are

	loaded, ignoredVersion, ignoredCorrupt, ignoredStale, loadFailures atomic.Int64
	written, writesSkipped, writeFailures                              atomic.Int64

	pending  atomic.Int64
	inflight sync.Map // snapshotWrite.id() → struct{}
	wg       sync.WaitGroup
}

// SnapshotStats returns the snapshot counters.
func (s *Store) SnapshotStats() SnapshotStats {
	c := &s.snap
	return SnapshotStats{
		Loaded: c.loaded.Load(), IgnoredVersion: c.ignoredVersion.Load(), IgnoredCorrupt: c.ignoredCorrupt.Load(),
		IgnoredStale: c.ignoredStale.Load(), LoadFailures: c.loadFailures.Load(),
		Written: c.written.Load(), WritesSkipped: c.writesSkipped.Load(), WriteFailures: c.writeFailures.Load(),
	}
}

// canonicalQuery is an injective text form of q that does not depend on the
// order of its items or of their types and tags, and its sha256.
func canonicalQuery(q query.Query) (string, []byte) {
	items := make([]string, 0, len(q.Items()))
	for _, it := range q.Items() {
		types := slices.Clone(it.Types)
		slices.Sort(types)
		types = slices.Compact(types)
		tg := it.Tags.Strings()
		slices.Sort(tg)
		b, _ := json.Marshal(struct {
			Types []string `json:"types"`
			Tags  []string `json:"tags"`
		}{append([]string{}, types...), append([]string{}, tg...)})
		items = append(items, string(b))
	}
	slices.Sort(items)
	items = slices.Compact(items)
	text := "[" + strings.Join(items, ",") + "]"
	sum := sha256.Sum256([]byte(text))
	return text, sum[:]
}

// snapshotWrite is one snapshot to store.
type snapshotWrite struct {
	name     string
	version  int
	qtext    string
	qkey     []byte
	tx       uint64
	position int64
	state    []byte
	epoch    int64
}

func (w *snapshotWrite) id() string {
	return fmt.Sprintf("%s\x00%d\x00%x", w.name, w.version, w.qkey)
}

func (sn *snapshotState) snapshotsTable() string { s := sn.s; return s.schema + ".decision_snapshots" }

// writeSnapshot stores w unless a newer snapshot of the same key is stored
// or retention ran since w's read (the epoch moved). It reports whether a
// row was written.
func (sn *snapshotState) writeSnapshot(ctx context.Context, w *snapshotWrite) (bool, error) {
	s := sn.s
	t := s.snap.snapshotsTable()
	tag, err := s.pool.Exec(ctx, `INSERT INTO `+t+` AS k
			(name, version, query_key, query_text, transaction_id, position, state, epoch)
		SELECT $1, $2, $3, $4, $5::text::xid8, $6, $7, x.epoch
		  FROM `+s.schema+`.decision_snapshot_epoch x WHERE x.epoch = $8
		ON CONFLICT (name, query_key, version) DO UPDATE
		   SET transaction_id = EXCLUDED.transaction_id, position = EXCLUDED.position,
		       state = EXCLUDED.state, epoch = EXCLUDED.epoch, query_text = EXCLUDED.query_text, saved_at = now()
		 WHERE (k.transaction_id, k.position) < (EXCLUDED.transaction_id, EXCLUDED.position)
		    OR k.epoch <> EXCLUDED.epoch
		    OR NOT EXISTS (SELECT 1 FROM `+s.sql.events+` e WHERE e.position = k.position AND e.transaction_id = k.transaction_id)`,
		w.name, int64(w.version), w.qkey, w.qtext, fmt.Sprint(w.tx), w.position, w.state, w.epoch)
	if err != nil {
		return false, errf("write snapshot", err)
	}
	return tag.RowsAffected() == 1, nil
}

// scheduleSnapshotWrite writes w in the background, with its own context
// (ctx's values, not its cancellation) and a bounded timeout; failures are
// logged and counted, never returned. Close waits for it; once the store is
// closing, no write starts.
func (sn *snapshotState) scheduleSnapshotWrite(ctx context.Context, w *snapshotWrite) {
	s := sn.s
	c := &s.snap
	id := w.id()
	if _, busy := c.inflight.LoadOrStore(id, struct{}{}); busy {
		c.writesSkipped.Add(1)
		return
	}
	if c.pending.Add(1) > maxPendingSnapshotWrites {
		c.pending.Add(-1)
		c.inflight.Delete(id)
		c.writesSkipped.Add(1)
		return
	}
	c.wg.Add(1)
	started := s.bg.run(ctx, true, func(bg context.Context) {
		defer c.wg.Done()
		defer c.pending.Add(-1)
		defer c.inflight.Delete(id)
		ctx, cancel := context.WithTimeout(bg, s.cfg.SnapshotWriteTimeout)
		defer cancel()
		ok, err := s.snap.writeSnapshot(ctx, w)
		s.snap.recordWrite(ctx, ok, err)
	})
	if !started {
		c.wg.Done()
		c.pending.Add(-1)
		c.inflight.Delete(id)
		c.writesSkipped.Add(1)
	}
}

func (sn *snapshotState) recordWrite(ctx context.Context, ok bool, err error) {
	s := sn.s
	c := &s.snap
	switch {
	case err != nil:
		c.writeFailures.Add(1)
		s.cfg.Logger.WarnContext(ctx, "pgdcb: decision snapshot not written", "err", err)
	case ok:
		c.written.Add(1)
	default:
		c.writesSkipped.Add(1)
	}
}

// waitSnapshotWrites waits for the background writes in flight (tests).
func (sn *snapshotState) waitSnapshotWrites() { s := sn.s; s.snap.wg.Wait() }

// SaveSnapshot projects the model as Project does (from its newest usable
// snapshot) and stores its state at the newest point of the log before which
// every transaction has ended, synchronously; it returns the write's error,
// if any. The model then holds the state of the whole read, as after
// Project. It needs a model with a snapshot name (Snapshottable).
func (s *Store) SaveSnapshot(ctx context.Context, model pgdcb.Snapshottable) error {
	if name, _ := model.SnapshotKey(); name == "" {
		return errors.New("pgdcb: save snapshot: the model has no snapshot name")
	}
	_, err := s.projectSnapshots(ctx, s.pool, []pgdcb.Projector{model}, projectOpts{save: true})
	return err
}
