package logical

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"regexp"
	"time"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/cfgcheck"
)

// defaultStatusInterval is Config.StatusInterval's default.
const defaultStatusInterval = 10 * time.Second

// defaultCatchUpBytes is Config.CatchUpBytes's default.
const defaultCatchUpBytes = 4 << 20

// defaultCatchUpChunk is Config.CatchUpChunk's default.
const defaultCatchUpChunk = 2_000_000

// Config configures a logical reader. nil or the zero value means every
// default.
type Config struct {
	// Slot names the reader's replication slot: lower-case letters, digits
	// and underscores, at most 63 bytes, unique in the cluster. Default
	// SlotName(schema, reader name).
	Slot string
	// Publication names the publication on the events table (one per schema,
	// shared by every logical reader of the store; created if missing).
	// Default PublicationName(schema).
	Publication string
	// StatusInterval is how often the reader reports its position to the
	// server when nothing else made it do so; keep it well below the server's
	// wal_sender_timeout (60s by default). 0: the default, 10s.
	StatusInterval time.Duration
	// CatchUpBytes: a reader that starts (or restarts, or falls behind
	// while streaming) at least this many bytes of WAL behind the server
	// reads that backlog through the SQL interface (pgoutput decoded in a
	// backend, on a temporary copy of its slot, in calls of CatchUpChunk
	// changes), then switches to the stream; while streaming, it switches
	// back when it is 8 times as far behind (docs/SUBSCRIPTIONS.md "Logical
	// decoding mode"). 0: the default, 4 MiB.
	CatchUpBytes int
	// CatchUpChunk is how many changes (pgoutput messages: an event, a
	// BEGIN, a COMMIT) one SQL call of a catch-up reads at most; a call
	// ends at a transaction's end, so it may return more. Every call
	// decodes the WAL again from the temporary slot's restart point, which
	// moves only at the server's running-transactions records (about every
	// 15 s of writing): small chunks decode a backlog many times over. The
	// catch-up switches to the stream only after a call returned fewer than
	// CatchUpChunk changes, so a chunk smaller than what the writers commit
	// between two calls keeps the reader catching up for as long as they
	// write (delivering, but never streaming). 0: the default, 2,000,000.
	CatchUpChunk int
}

var slotNameRE = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// Validate refuses a negative StatusInterval and slot or publication names
// the server would refuse, with a *pgdcb.InvalidArgumentError.
func (c *Config) Validate() error {
	if c == nil {
		return nil
	}
	if err := cfgcheck.NonNegative(cfgcheck.Duration("StatusInterval", c.StatusInterval, defaultStatusInterval),
		cfgcheck.Int("CatchUpBytes", c.CatchUpBytes, defaultCatchUpBytes),
		cfgcheck.Int("CatchUpChunk", c.CatchUpChunk, defaultCatchUpChunk)); err != nil {
		return err
	}
	if c.Slot != "" && !slotNameRE.MatchString(c.Slot) {
		return &pgdcb.InvalidArgumentError{Name: "logical.Config.Slot",
			Reason: fmt.Sprintf("%q: want 1..63 of [a-z0-9_]", c.Slot)}
	}
	if c.Publication != "" && !slotNameRE.MatchString(c.Publication) {
		return &pgdcb.InvalidArgumentError{Name: "logical.Config.Publication",
			Reason: fmt.Sprintf("%q: want 1..63 of [a-z0-9_]", c.Publication)}
	}
	return nil
}

func (c *Config) withDefaults(schema, name string) Config {
	var o Config
	if c != nil {
		o = *c
	}
	if o.Slot == "" {
		o.Slot = SlotName(schema, name)
	}
	if o.Publication == "" {
		o.Publication = PublicationName(schema)
	}
	if o.StatusInterval <= 0 {
		o.StatusInterval = defaultStatusInterval
	}
	o.CatchUpBytes = cmp.Or(o.CatchUpBytes, defaultCatchUpBytes)
	o.CatchUpChunk = cmp.Or(o.CatchUpChunk, defaultCatchUpChunk)
	return o
}

// SlotName is the default replication slot of reader name on schema:
// "pgdcb_" and 16 hex digits of an FNV-64a hash of both.
func SlotName(schema, name string) string {
	return hashName("pgdcb.logical.slot\x00" + schema + "\x00" + name)
}

// PublicationName is the default publication of schema's events table.
func PublicationName(schema string) string {
	return hashName("pgdcb.logical.publication\x00" + schema)
}

func hashName(s string) string {
	h := fnv.New64a()
	h.Write([]byte(s))
	return fmt.Sprintf("pgdcb_%016x", h.Sum64())
}
