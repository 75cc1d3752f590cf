package logical

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/tags"
)

// relation maps the columns of the events table, as a pgoutput Relation
// message describes it, to their places in an Insert's tuple.
type relation struct {
	events bool // the store's events table
	col    map[string]int
}

func newRelation(m *pglogrepl.RelationMessage, schema string) *relation {
	r := &relation{events: m.Namespace == schema && m.RelationName == "events", col: map[string]int{}}
	for i, c := range m.Columns {
		r.col[c.Name] = i
	}
	return r
}

// eventColumns are the columns an event is decoded from.
var eventColumns = []string{"position", "transaction_id", "type", "tags", "data", "metadata", "event_id", "occurred_at"}

func (r *relation) check() error {
	for _, c := range eventColumns {
		if _, ok := r.col[c]; !ok {
			return fmt.Errorf("pgdcb: logical: the events table's relation has no column %q", c)
		}
	}
	return nil
}

// decodeEvent decodes an inserted row (pgoutput's text format, the same output
// functions as a plain SELECT's) into the event ReadTail would return.
func decodeEvent(r *relation, m *pgtype.Map, t *pglogrepl.TupleData) (eventstore.StoredEvent, error) {
	var ev eventstore.StoredEvent
	col := func(name string) (*pglogrepl.TupleDataColumn, error) {
		i := r.col[name]
		if i >= len(t.Columns) {
			return nil, fmt.Errorf("pgdcb: logical: inserted row has no column %q", name)
		}
		c := t.Columns[i]
		if c.DataType != pglogrepl.TupleDataTypeText && c.DataType != pglogrepl.TupleDataTypeNull {
			return nil, fmt.Errorf("pgdcb: logical: column %q arrived as %q, want text", name, c.DataType)
		}
		return c, nil
	}
	text := func(name string) (string, bool, error) {
		c, err := col(name)
		if err != nil || c.DataType == pglogrepl.TupleDataTypeNull {
			return "", false, err
		}
		return string(c.Data), true, nil
	}
	var err error
	s, ok, err := text("position")
	if err != nil || !ok {
		return ev, fmtErr("position", err)
	}
	if ev.Position, err = strconv.ParseInt(s, 10, 64); err != nil {
		return ev, fmtErr("position", err)
	}
	if s, ok, err = text("transaction_id"); err != nil || !ok {
		return ev, fmtErr("transaction_id", err)
	}
	if ev.TransactionID, err = strconv.ParseUint(s, 10, 64); err != nil {
		return ev, fmtErr("transaction_id", err)
	}
	if ev.Type, ok, err = text("type"); err != nil || !ok {
		return ev, fmtErr("type", err)
	}
	if s, ok, err = text("tags"); err != nil || !ok {
		return ev, fmtErr("tags", err)
	}
	var ts []string
	if err := m.Scan(pgtype.TextArrayOID, pgtype.TextFormatCode, []byte(s), &ts); err != nil {
		return ev, fmtErr("tags", err)
	}
	if ev.Tags, err = tags.ParseSet(ts...); err != nil {
		return ev, fmtErr("tags", err)
	}
	if s, ok, err = text("data"); err != nil || !ok {
		return ev, fmtErr("data", err)
	}
	ev.Data = json.RawMessage(s)
	if s, ok, err = text("metadata"); err != nil {
		return ev, fmtErr("metadata", err)
	} else if ok {
		ev.Metadata = json.RawMessage(s)
	}
	if s, ok, err = text("event_id"); err != nil {
		return ev, fmtErr("event_id", err)
	} else if ok {
		if ev.ID, err = uuid.Parse(s); err != nil {
			return ev, fmtErr("event_id", err)
		}
	}
	if s, ok, err = text("occurred_at"); err != nil || !ok {
		return ev, fmtErr("occurred_at", err)
	}
	var at time.Time
	if err := m.Scan(pgtype.TimestamptzOID, pgtype.TextFormatCode, []byte(s), &at); err != nil {
		return ev, fmtErr("occurred_at", err)
	}
	ev.OccurredAt = at
	return ev, nil
}

func fmtErr(col string, err error) error {
	if err == nil {
		return fmt.Errorf("pgdcb: logical: inserted event without %s", col)
	}
	return fmt.Errorf("pgdcb: logical: decoding %s: %w", col, err)
}

func parseTags(ts []string) (tags.Set, error) { return tags.ParseSet(ts...) }
