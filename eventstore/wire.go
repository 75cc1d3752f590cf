package eventstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The append call on the wire (issue #26 §2, bench/PROFILE.md "The client's
// encoding of the append call"). pgx encodes each of the call's 17 or 19
// parameters through its type map: a plan per parameter, an ArrayGetter
// wrapper and a boxed value per array element, and it plans the scan of each
// result column at every call; that was a fifth of the client's CPU per
// append and most of its allocations. The store writes the parameters itself,
// in PostgreSQL's binary format, into one buffer, and sends them with
// pgconn's ExecStatement (a statement prepared once per connection, when the
// pool caches statements, as pgx would; ExecParams with the parameter types
// otherwise); it reads the one result row in binary format itself. The
// statements, the functions and what the server receives are unchanged.
//
// Only on the store's own pooled connections (its pool's settings known);
// AppendTx and AppendIfTx, on the caller's transaction, go through pgx.

// Type OIDs of the append calls' parameters and results.
const (
	oidBool           = 16
	oidInt8           = 20
	oidInt4           = 23
	oidText           = 25
	oidBoolArr        = 1000
	oidInt4Arr        = 1007
	oidTextArr        = 1009
	oidInt8Arr        = 1016
	oidUUID           = 2950
	oidUUIDArr        = 2951
	oidJSONB          = 3802
	oidJSONBArr       = 3807
	oidXID8           = 5069
	oidTimestamptz    = 1184
	oidTimestamptzArr = 1185
	binaryFormat      = 1
)

// binaryFormats: every parameter, or every result column, in binary format
// (one format code applies to all).
var binaryFormats = []int16{binaryFormat}

// wireStmt is one of the store's append statements with the name it is
// prepared under and its parameter types (for ExecParams).
type wireStmt struct {
	sql  string
	name string
	oids []uint32
}

func newWireStmt(sql string, oids ...uint32) wireStmt {
	sum := sha256.Sum256([]byte(sql))
	return wireStmt{sql: sql, name: "pgdcb_" + hex.EncodeToString(sum[:12]), oids: oids}
}

// wireConfig is what the store knows of its pool's connections: whether they
// cache prepared statements, and their statement tracer.
type wireConfig struct {
	prepare bool
	tracer  pgx.QueryTracer
}

func newWireConfig(cc *pgx.ConnConfig) wireConfig {
	return wireConfig{prepare: cc.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement, tracer: cc.Tracer}
}

// wireParams are a call's parameters in binary format, written one after
// another into buf.
type wireParams struct {
	buf    []byte
	bounds [][2]int // each parameter's [start, end) in buf; start -1: NULL
	vals   [][]byte // values' result
	arr    int      // start of the array being written
	n      int32    // its elements so far
	nulls  bool     // whether one of them is NULL
}

// wireParamsPool keeps the buffers of calls that returned: pgconn has
// written a call's parameters to the connection before callRow returns.
var wireParamsPool = sync.Pool{New: func() any {
	return &wireParams{buf: make([]byte, 0, 1024), bounds: make([][2]int, 0, 18), vals: make([][]byte, 0, 18)}
}}

// maxPooledParams: a larger buffer (a large batch's) is left to the
// collector rather than kept.
const maxPooledParams = 64 << 10

func getWireParams() *wireParams {
	p := wireParamsPool.Get().(*wireParams)
	p.buf, p.bounds, p.vals = p.buf[:0], p.bounds[:0], p.vals[:0]
	return p
}

func putWireParams(p *wireParams) {
	if cap(p.buf) <= maxPooledParams {
		clear(p.vals[:cap(p.vals)])
		wireParamsPool.Put(p)
	}
}

// values returns the parameters as pgconn takes them (nil: NULL), valid
// until p is reused.
func (p *wireParams) values() [][]byte {
	p.vals = p.vals[:0]
	for _, b := range p.bounds {
		var v []byte
		if b[0] >= 0 {
			v = p.buf[b[0]:b[1]:b[1]]
		}
		p.vals = append(p.vals, v)
	}
	return p.vals
}

func (p *wireParams) null() { p.bounds = append(p.bounds, [2]int{-1, -1}) }

func (p *wireParams) int8(v int64) {
	s := len(p.buf)
	p.buf = binary.BigEndian.AppendUint64(p.buf, uint64(v))
	p.bounds = append(p.bounds, [2]int{s, len(p.buf)})
}

func (p *wireParams) text(v string) {
	s := len(p.buf)
	p.buf = append(p.buf, v...)
	p.bounds = append(p.bounds, [2]int{s, len(p.buf)})
}

// begin starts a one-dimensional array of elements of type elem; its
// elements follow, then end.
func (p *wireParams) begin(elem uint32) {
	p.arr, p.n, p.nulls = len(p.buf), 0, false
	// ndim, flags (has nulls), element type, length of the dimension, its
	// lower bound; patched by end.
	p.buf = binary.BigEndian.AppendUint32(p.buf, 1)
	p.buf = binary.BigEndian.AppendUint32(p.buf, 0)
	p.buf = binary.BigEndian.AppendUint32(p.buf, elem)
	p.buf = binary.BigEndian.AppendUint32(p.buf, 0)
	p.buf = binary.BigEndian.AppendUint32(p.buf, 1)
}

func (p *wireParams) end() {
	if p.n == 0 {
		// The empty array has no dimension.
		binary.BigEndian.PutUint32(p.buf[p.arr:], 0)
		p.buf = p.buf[:p.arr+12]
	} else {
		binary.BigEndian.PutUint32(p.buf[p.arr+12:], uint32(p.n))
		if p.nulls {
			binary.BigEndian.PutUint32(p.buf[p.arr+4:], 1)
		}
	}
	p.bounds = append(p.bounds, [2]int{p.arr, len(p.buf)})
}

func (p *wireParams) elemNull() {
	p.buf = binary.BigEndian.AppendUint32(p.buf, 0xFFFFFFFF)
	p.n++
	p.nulls = true
}

func (p *wireParams) elemText(v string) {
	p.buf = binary.BigEndian.AppendUint32(p.buf, uint32(len(v)))
	p.buf = append(p.buf, v...)
	p.n++
}

func (p *wireParams) elemBytes(v []byte) {
	p.buf = binary.BigEndian.AppendUint32(p.buf, uint32(len(v)))
	p.buf = append(p.buf, v...)
	p.n++
}

// elemJSONB is a jsonb element: format version 1, then the JSON text.
func (p *wireParams) elemJSONB(v []byte) {
	p.buf = binary.BigEndian.AppendUint32(p.buf, uint32(len(v)+1))
	p.buf = append(p.buf, 1)
	p.buf = append(p.buf, v...)
	p.n++
}

func (p *wireParams) elemUUID(v [16]byte) {
	p.buf = binary.BigEndian.AppendUint32(p.buf, 16)
	p.buf = append(p.buf, v[:]...)
	p.n++
}

func (p *wireParams) elemInt4(v int32) {
	p.buf = binary.BigEndian.AppendUint32(p.buf, 4)
	p.buf = binary.BigEndian.AppendUint32(p.buf, uint32(v))
	p.n++
}

func (p *wireParams) elemInt8(v int64) {
	p.buf = binary.BigEndian.AppendUint32(p.buf, 8)
	p.buf = binary.BigEndian.AppendUint64(p.buf, uint64(v))
	p.n++
}

func (p *wireParams) elemBool(v bool) {
	p.buf = binary.BigEndian.AppendUint32(p.buf, 1)
	b := byte(0)
	if v {
		b = 1
	}
	p.buf = append(p.buf, b)
	p.n++
}

// int8Array and boolArray are whole arrays.
func (p *wireParams) int8Array(vs []int64) {
	p.begin(oidInt8)
	for _, v := range vs {
		p.elemInt8(v)
	}
	p.end()
}

func (p *wireParams) boolArray(vs []bool) {
	p.begin(oidBool)
	for _, v := range vs {
		p.elemBool(v)
	}
	p.end()
}

// errWireRow: the call returned no row, or more than one.
var errWireRow = errors.New("expected one row")

// callRow runs st with params on conn and gives its one row (binary format,
// cols columns; a nil column is NULL) to row, whose slices are valid only
// during the call. Errors are pgconn's, as pgx's QueryRow returns them.
// The pool's statement tracer, if any, sees the statement with its
// parameters as sent (binary, nil for NULL).
func (s *Store) callRow(ctx context.Context, conn *pgxpool.Conn, st *wireStmt, params *wireParams, row func(cols [][]byte) error) (err error) {
	var tag pgconn.CommandTag
	c := conn.Conn()
	values := params.values()
	if t := s.wire.tracer; t != nil {
		args := make([]any, len(values))
		for i, v := range values {
			args[i] = bytes.Clone(v) // the tracer may keep them; the buffer is reused
		}
		ctx = t.TraceQueryStart(ctx, c, pgx.TraceQueryStartData{SQL: st.sql, Args: args})
		defer func() { t.TraceQueryEnd(ctx, c, pgx.TraceQueryEndData{CommandTag: tag, Err: err}) }()
	}
	for try := 0; ; try++ {
		var rowErr error
		var n int
		tag, rowErr, n, err = s.execRow(ctx, c, st, values, row)
		if err != nil {
			var pgErr *pgconn.PgError
			if !s.wire.prepare || !errors.As(err, &pgErr) || pgErr.Code != "26000" && pgErr.Code != "0A000" {
				return err
			}
			// The prepared statement is gone (DEALLOCATE, DISCARD:
			// 26000, refused at Bind, before anything ran) or stale (its
			// result type changed after a migration: 0A000). Forget it
			// (a Close message, which succeeds for a statement the server
			// lacks); a statement that was gone is prepared and sent again
			// at once, once.
			if derr := c.Deallocate(ctx, st.name); derr != nil || pgErr.Code != "26000" || try > 0 {
				return err
			}
			continue
		}
		if rowErr != nil {
			return rowErr
		}
		if n != 1 {
			return fmt.Errorf("%w, got %d", errWireRow, n)
		}
		return nil
	}
}

// execRow sends st once and reads its result: the first row goes to row
// (rowErr its error), n counts the rows, err is the statement's.
func (s *Store) execRow(ctx context.Context, c *pgx.Conn, st *wireStmt, values [][]byte, row func(cols [][]byte) error) (tag pgconn.CommandTag, rowErr error, n int, err error) {
	var rr *pgconn.ResultReader
	if s.wire.prepare {
		sd, err := c.Prepare(ctx, st.name, st.sql)
		if err != nil {
			return tag, nil, 0, err
		}
		rr = c.PgConn().ExecStatement(ctx, sd, values, binaryFormats, binaryFormats)
	} else {
		rr = c.PgConn().ExecParams(ctx, st.sql, values, st.oids, binaryFormats, binaryFormats)
	}
	for rr.NextRow() {
		if n == 0 {
			rowErr = row(rr.Values())
		}
		n++
	}
	tag, err = rr.Close()
	return tag, rowErr, n, err
}

// Result decoding, binary format.

var errWireFormat = errors.New("malformed result")

// colString reads a text column (status values are constants: no copy).
func colString(b []byte) string {
	switch string(b) {
	case "ok":
		return "ok"
	case "idempotent":
		return "idempotent"
	case "condition":
		return "condition"
	}
	return string(b)
}

// colInt8 reads a bigint or xid8 column; ok is false for NULL.
func colInt8(b []byte) (int64, bool, error) {
	if b == nil {
		return 0, false, nil
	}
	if len(b) != 8 {
		return 0, false, errWireFormat
	}
	return int64(binary.BigEndian.Uint64(b)), true, nil
}

// colArray walks a one-dimensional array column, calling elem with each
// element (nil: NULL); a NULL array has no elements.
func colArray(b []byte, elem func(e []byte) error) error {
	if b == nil {
		return nil
	}
	if len(b) < 12 {
		return errWireFormat
	}
	ndim := binary.BigEndian.Uint32(b)
	if ndim == 0 {
		return nil
	}
	if ndim != 1 || len(b) < 20 {
		return errWireFormat
	}
	n := int(binary.BigEndian.Uint32(b[12:]))
	rest := b[20:]
	for range n {
		if len(rest) < 4 {
			return errWireFormat
		}
		l := int32(binary.BigEndian.Uint32(rest))
		rest = rest[4:]
		if l < 0 {
			if err := elem(nil); err != nil {
				return err
			}
			continue
		}
		if int(l) > len(rest) {
			return errWireFormat
		}
		if err := elem(rest[:l]); err != nil {
			return err
		}
		rest = rest[l:]
	}
	return nil
}

// arrayLen is the number of elements of a one-dimensional array column.
func arrayLen(b []byte) int {
	if len(b) < 20 || binary.BigEndian.Uint32(b) != 1 {
		return 0
	}
	return int(binary.BigEndian.Uint32(b[12:]))
}

// colInt8Array reads a bigint[] column without NULL elements (nil for NULL).
func colInt8Array(b []byte) ([]int64, error) {
	if b == nil {
		return nil, nil
	}
	out := make([]int64, 0, arrayLen(b))
	err := colArray(b, func(e []byte) error {
		v, ok, err := colInt8(e)
		if err != nil || !ok {
			return errWireFormat
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// appendRow reads append_events' row from cols (status, tx, positions,
// conflict_position, occurred_at), as appendOutcome takes it; off is the
// first column.
func appendRow(cols [][]byte, off int) (status *string, txID *uint64, pos []int64, conflict *int64, at int64, err error) {
	if len(cols) != off+5 {
		return nil, nil, nil, nil, 0, errWireFormat
	}
	if cols[off] != nil {
		st := colString(cols[off])
		status = &st
	}
	if v, ok, err := colInt8(cols[off+1]); err != nil {
		return nil, nil, nil, nil, 0, err
	} else if ok {
		u := uint64(v)
		txID = &u
	}
	if pos, err = colInt8Array(cols[off+2]); err != nil {
		return nil, nil, nil, nil, 0, err
	}
	if v, ok, err := colInt8(cols[off+3]); err != nil {
		return nil, nil, nil, nil, 0, err
	} else if ok {
		conflict = &v
	}
	if at, err = colTimestamptz(cols[off+4]); err != nil {
		return nil, nil, nil, nil, 0, err
	}
	return status, txID, pos, conflict, at, nil
}

// pgEpochMicros is PostgreSQL's epoch (2000-01-01 UTC) in microseconds
// since the Unix epoch: a timestamptz's binary form counts from it.
const pgEpochMicros = 946684800_000000

// colTimestamptz reads a timestamptz column as microseconds since the Unix
// epoch (0 for NULL or an infinite value, as unixMicros).
func colTimestamptz(b []byte) (int64, error) {
	v, ok, err := colInt8(b)
	if err != nil || !ok || v == math.MaxInt64 || v == math.MinInt64 {
		return 0, err
	}
	return v + pgEpochMicros, nil
}

// timestamptz writes a timestamptz parameter given in microseconds since
// the Unix epoch.
func (p *wireParams) timestamptz(unixMicros int64) { p.int8(unixMicros - pgEpochMicros) }
