package logical

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/tags"
)

// relation maps the columns of the events table, as a pgoutput Relation
// message describes it, to their places in an Insert's tuple.
type relation struct {
	events bool // the store's events table
	col    map[string]int
	// idx: the tuple index of each of eventColumns (set by check).
	idx [nEventColumns]int
}

func newRelation(m *pglogrepl.RelationMessage, schema string) *relation {
	r := &relation{events: m.Namespace == schema && m.RelationName == "events", col: map[string]int{}}
	for i, c := range m.Columns {
		r.col[c.Name] = i
	}
	return r
}

// eventColumns are the columns an event is decoded from, in the order of
// the c… constants.
var eventColumns = [nEventColumns]string{"position", "transaction_id", "type", "tags", "data", "metadata", "event_id", "occurred_at"}

const (
	cPosition = iota
	cTransactionID
	cType
	cTags
	cData
	cMetadata
	cEventID
	cOccurredAt
	nEventColumns
)

func (r *relation) check() error {
	for i, c := range eventColumns {
		j, ok := r.col[c]
		if !ok {
			return fmt.Errorf("pgdcb: logical: the events table's relation has no column %q", c)
		}
		r.idx[i] = j
	}
	return nil
}

// column is a column of an inserted tuple: its kind (pgoutput's n, u, t or
// b) and, for t and b, its bytes (in the message's buffer).
type column struct {
	kind byte
	data []byte
}

const (
	kindNull   = 'n'
	kindToast  = 'u'
	kindText   = 't'
	kindBinary = 'b'
)

var errMalformed = errors.New("pgdcb: logical: malformed insert message")

// parseInsert reads an Insert message of protocol version 1 ('I', the
// relation id, 'N', then the tuple: a column count, and per column its
// kind and, for t and b, a length and the bytes) into cols, reused, without
// copying the bytes.
func parseInsert(data []byte, cols []column) (relID uint32, _ []column, _ error) {
	if len(data) < 8 || data[0] != 'I' || data[5] != 'N' {
		return 0, cols, errMalformed
	}
	relID = binary.BigEndian.Uint32(data[1:])
	n := int(binary.BigEndian.Uint16(data[6:]))
	b := data[8:]
	cols = cols[:0]
	for range n {
		if len(b) < 1 {
			return 0, cols, errMalformed
		}
		k := b[0]
		b = b[1:]
		switch k {
		case kindNull, kindToast:
			cols = append(cols, column{kind: k})
		case kindText, kindBinary:
			if len(b) < 4 {
				return 0, cols, errMalformed
			}
			l := int(binary.BigEndian.Uint32(b))
			b = b[4:]
			if l < 0 || l > len(b) {
				return 0, cols, errMalformed
			}
			cols = append(cols, column{kind: k, data: b[:l:l]})
			b = b[l:]
		default:
			return 0, cols, errMalformed
		}
	}
	return relID, cols, nil
}

// pgEpoch is PostgreSQL's timestamp epoch (2000-01-01 UTC) in Unix seconds.
const pgEpoch = 946684800

// decodeEvent decodes an inserted row into the event ReadTail would return.
// A column comes in binary (pgoutput's binary option, send functions) or in
// text (the same output functions as a plain SELECT's), each decoded in its
// form. The tuple's bytes belong to the message buffer: everything kept is
// copied.
func decodeEvent(r *relation, m *pgtype.Map, t []column) (pgdcb.StoredEvent, error) {
	var (
		ev   pgdcb.StoredEvent
		cols [nEventColumns]column
	)
	for i, j := range r.idx {
		if j >= len(t) {
			return ev, fmt.Errorf("pgdcb: logical: inserted row has no column %q", eventColumns[i])
		}
		c := t[j]
		switch c.kind {
		case kindNull:
			continue
		case kindText, kindBinary:
			cols[i] = c
		default:
			return ev, fmt.Errorf("pgdcb: logical: column %q arrived as %q, want text or binary", eventColumns[i], c.kind)
		}
	}
	for _, i := range [...]int{cPosition, cTransactionID, cType, cTags, cData, cOccurredAt} {
		if cols[i].kind == 0 {
			return ev, fmt.Errorf("pgdcb: logical: inserted event without %s", eventColumns[i])
		}
	}
	var err error
	if ev.Position, err = int8Col(cols[cPosition]); err != nil {
		return ev, fmtErr(cPosition, err)
	}
	if ev.TransactionID, err = xid8Col(cols[cTransactionID]); err != nil {
		return ev, fmtErr(cTransactionID, err)
	}
	ev.Type = string(cols[cType].data) // text's send form is its text
	if ev.Tags, err = tagsCol(m, cols[cTags]); err != nil {
		return ev, fmtErr(cTags, err)
	}
	if ev.Data, err = jsonbCol(cols[cData]); err != nil {
		return ev, fmtErr(cData, err)
	}
	if c := cols[cMetadata]; c.kind != 0 {
		if ev.Metadata, err = jsonbCol(c); err != nil {
			return ev, fmtErr(cMetadata, err)
		}
	}
	if c := cols[cEventID]; c.kind != 0 {
		if ev.ID, err = uuidCol(c); err != nil {
			return ev, fmtErr(cEventID, err)
		}
	}
	if ev.OccurredAt, err = timestamptzCol(m, cols[cOccurredAt]); err != nil {
		return ev, fmtErr(cOccurredAt, err)
	}
	return ev, nil
}

var errShort = errors.New("binary value of the wrong length")

func int8Col(c column) (int64, error) {
	if c.kind == kindText {
		return strconv.ParseInt(string(c.data), 10, 64)
	}
	if len(c.data) != 8 {
		return 0, errShort
	}
	return int64(binary.BigEndian.Uint64(c.data)), nil
}

func xid8Col(c column) (uint64, error) {
	if c.kind == kindText {
		return strconv.ParseUint(string(c.data), 10, 64)
	}
	if len(c.data) != 8 {
		return 0, errShort
	}
	return binary.BigEndian.Uint64(c.data), nil
}

// jsonbCol: jsonb's binary form is a version byte (1) and the text.
func jsonbCol(c column) (json.RawMessage, error) {
	b := c.data
	if c.kind == kindBinary {
		if len(b) == 0 || b[0] != 1 {
			return nil, errors.New("unknown jsonb binary version")
		}
		b = b[1:]
	}
	return json.RawMessage(append([]byte(nil), b...)), nil
}

func uuidCol(c column) (uuid.UUID, error) {
	if c.kind == kindText {
		return uuid.Parse(string(c.data))
	}
	if len(c.data) != 16 {
		return uuid.UUID{}, errShort
	}
	return uuid.UUID(c.data), nil
}

func timestamptzCol(m *pgtype.Map, c column) (time.Time, error) {
	if c.kind == kindText {
		var at time.Time
		err := m.Scan(pgtype.TimestamptzOID, pgtype.TextFormatCode, c.data, &at)
		return at, err
	}
	if len(c.data) != 8 {
		return time.Time{}, errShort
	}
	us := int64(binary.BigEndian.Uint64(c.data))
	if us == 1<<63-1 || us == -1<<63 {
		return time.Time{}, errors.New("infinite timestamp")
	}
	// As pgx decodes a timestamptz: the instant, in time.Local.
	return time.Unix(pgEpoch+us/1e6, (us%1e6)*1e3), nil
}

// tagsCol decodes a text[] column: in binary, ndim, a null flag, the element
// type, per dimension its length and lower bound, then each element as a
// length and its bytes.
func tagsCol(m *pgtype.Map, c column) (tags.Set, error) {
	if c.kind == kindText {
		var ts []string
		if err := m.Scan(pgtype.TextArrayOID, pgtype.TextFormatCode, c.data, &ts); err != nil {
			return tags.Set{}, err
		}
		return tags.ParseSet(ts...)
	}
	b := c.data
	if len(b) < 12 {
		return tags.Set{}, errShort
	}
	ndim := binary.BigEndian.Uint32(b)
	if ndim == 0 {
		return tags.ParseSet()
	}
	if ndim != 1 || len(b) < 20 {
		return tags.Set{}, fmt.Errorf("array of %d dimensions", ndim)
	}
	n := int(int32(binary.BigEndian.Uint32(b[12:])))
	b = b[20:]
	if n < 0 || n > len(b)/4 {
		return tags.Set{}, errShort
	}
	ts := make([]string, n)
	for i := range ts {
		if len(b) < 4 {
			return tags.Set{}, errShort
		}
		l := int(int32(binary.BigEndian.Uint32(b)))
		b = b[4:]
		if l < 0 || l > len(b) {
			return tags.Set{}, errors.New("null or truncated tag")
		}
		ts[i] = string(b[:l])
		b = b[l:]
	}
	return tags.ParseSet(ts...)
}

func fmtErr(col int, err error) error {
	return fmt.Errorf("pgdcb: logical: decoding %s: %w", eventColumns[col], err)
}

func parseTags(ts []string) (tags.Set, error) { return tags.ParseSet(ts...) }
