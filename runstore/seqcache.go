package runstore

import (
	"sync"

	"github.com/pgdcb/pgdcb/cursor"
)

// seqHint is what this process last knew of a run: its last runSeq and a log
// point at (or after) the event carrying it. Used as the AppendIf decision
// cursor: if another writer appended to the run since, the condition fails
// and the store reads the run's last runSeq afresh. A stale hint costs one
// failed attempt, never a wrong runSeq.
type seqHint struct {
	seq int64
	cur cursor.Cursor
}

// seqCache is a bounded map of hints (an arbitrary entry is evicted when full).
type seqCache struct {
	mu   sync.Mutex
	max  int
	runs map[string]seqHint
}

func newSeqCache(size int, disabled bool) *seqCache {
	if disabled {
		return nil
	}
	return &seqCache{max: size, runs: make(map[string]seqHint)}
}

func (c *seqCache) get(runID string) (seqHint, bool) {
	if c == nil {
		return seqHint{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.runs[runID]
	return h, ok
}

func (c *seqCache) put(runID string, h seqHint) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.runs[runID]; ok && old.seq >= h.seq {
		return
	}
	if _, ok := c.runs[runID]; !ok && len(c.runs) >= c.max {
		for k := range c.runs {
			delete(c.runs, k)
			break
		}
	}
	c.runs[runID] = h
}

func (c *seqCache) drop(runID string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.runs, runID)
}
