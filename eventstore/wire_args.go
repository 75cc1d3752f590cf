package eventstore

import (
	"strconv"

	"github.com/google/uuid"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/query"
)

// The arguments of append_events and append_group written in binary format
// (wire.go), the same values appendEventsArgs and tryCall's pgx arguments
// carry: the events column-wise, the lock keys, the check items flattened
// (idempotency items first, see checkItems), the decision's cursor.

// wireCall is one append of a call: its events, its condition (nil: none),
// its call id (uuid.Nil: none; the first event's id when it has none).
type wireCall struct {
	events []pgdcb.Event
	cond   *appendif.Condition
	id     uuid.UUID
	items  []query.Item // cond's items, idempotency first
	nIdem  int          // how many of items are idempotency items
}

// newWireCall collects c's check items.
func newWireCall(events []pgdcb.Event, cond *appendif.Condition, id uuid.UUID) wireCall {
	c := wireCall{events: events, cond: cond, id: id}
	if cond != nil {
		c.items = cond.Idempotency.Items()
		c.nIdem = len(c.items)
		c.items = append(c.items, cond.FailIfEventsMatch.Items()...)
	}
	return c
}

// eventArrays writes the events of the calls, concatenated in call order:
// types, tag counts, tags, data, metadata, event ids (6 parameters).
func (p *wireParams) eventArrays(calls []wireCall) {
	p.begin(oidText)
	for _, c := range calls {
		for _, e := range c.events {
			p.elemText(e.Type)
		}
	}
	p.end()
	p.begin(oidInt4)
	for _, c := range calls {
		for _, e := range c.events {
			p.elemInt4(int32(e.Tags.Len()))
		}
	}
	p.end()
	p.begin(oidText)
	for _, c := range calls {
		for _, e := range c.events {
			for _, t := range e.Tags.Strings() {
				p.elemText(t)
			}
		}
	}
	p.end()
	p.begin(oidJSONB)
	for _, c := range calls {
		for _, e := range c.events {
			p.elemJSONB(e.Data)
		}
	}
	p.end()
	p.begin(oidJSONB)
	for _, c := range calls {
		for _, e := range c.events {
			if len(e.Metadata) > 0 {
				p.elemJSONB(e.Metadata)
			} else {
				p.elemNull()
			}
		}
	}
	p.end()
	p.begin(oidUUID)
	for _, c := range calls {
		for j, e := range c.events {
			switch {
			case e.ID != uuid.Nil:
				p.elemUUID(e.ID)
			case j == 0 && c.id != uuid.Nil:
				p.elemUUID(c.id) // the call's id (settle.go)
			default:
				p.elemNull()
			}
		}
	}
	p.end()
}

// itemArrays writes the check items of the calls, concatenated in call
// order: idempotency flags, type counts, types, tag counts, tags (5
// parameters).
func (p *wireParams) itemArrays(calls []wireCall) {
	p.begin(oidBool)
	for _, c := range calls {
		for i := range c.items {
			p.elemBool(i < c.nIdem)
		}
	}
	p.end()
	p.begin(oidInt4)
	for _, c := range calls {
		for _, it := range c.items {
			p.elemInt4(int32(len(it.Types)))
		}
	}
	p.end()
	p.begin(oidText)
	for _, c := range calls {
		for _, it := range c.items {
			for _, t := range it.Types {
				p.elemText(t)
			}
		}
	}
	p.end()
	p.begin(oidInt4)
	for _, c := range calls {
		for _, it := range c.items {
			p.elemInt4(int32(it.Tags.Len()))
		}
	}
	p.end()
	p.begin(oidText)
	for _, c := range calls {
		for _, it := range c.items {
			for _, t := range it.Tags.Strings() {
				p.elemText(t)
			}
		}
	}
	p.end()
}

// appendEventsStmt: append_events' parameter types ($1 to $17), for
// ExecParams.
var appendEventsOIDs = []uint32{
	oidTextArr, oidInt4Arr, oidTextArr, oidJSONBArr, oidJSONBArr, oidUUIDArr,
	oidInt8Arr, oidBoolArr,
	oidBoolArr, oidInt4Arr, oidTextArr, oidInt4Arr, oidTextArr,
	oidXID8, oidInt8, oidText, oidTimestamptz,
}

// appendGroupOIDs: statements.appendGroupWire's parameter types ($1 to $19).
var appendGroupOIDs = []uint32{
	oidTextArr, oidInt4Arr, oidTextArr, oidJSONBArr, oidJSONBArr, oidUUIDArr, oidInt4Arr,
	oidInt8Arr, oidBoolArr,
	oidBoolArr, oidInt4Arr, oidTextArr, oidInt4Arr, oidTextArr, oidInt4Arr,
	oidTextArr, oidInt8Arr, oidTextArr, oidTimestamptzArr,
}

// appendEventsWire writes append_events' arguments ($1 to $17) for one
// append whose keys are locks: appendEventsArgs' values.
func (p *wireParams) appendEventsWire(call wireCall, locks lockSet) {
	calls := [1]wireCall{call}
	p.eventArrays(calls[:])
	p.int8Array(locks.keys)
	p.boolArray(locks.excl)
	p.itemArrays(calls[:])
	if cond := call.cond; cond != nil && cond.After != nil {
		p.int8(int64(cond.After.TransactionID))
		p.int8(cond.After.Position)
		if sn := afterSnapshotArg(cond.After); sn != nil {
			p.text(*sn)
		} else {
			p.null()
		}
		if at := cond.After.EventTime; at != 0 {
			p.timestamptz(at)
		} else {
			p.null()
		}
	} else {
		p.int8(0)
		p.int8(0)
		p.null()
		p.null()
	}
}

// appendGroupWire writes statements.appendGroupWire's arguments ($1 to $19)
// for the calls, whose keys' union is locks: tryCall's values.
func (p *wireParams) appendGroupWire(calls []wireCall, locks lockSet) {
	p.eventArrays(calls)
	p.begin(oidInt4)
	for _, c := range calls {
		p.elemInt4(int32(len(c.events)))
	}
	p.end()
	p.int8Array(locks.keys)
	p.boolArray(locks.excl)
	p.itemArrays(calls)
	p.begin(oidInt4)
	for _, c := range calls {
		p.elemInt4(int32(len(c.items)))
	}
	p.end()
	var num [20]byte
	p.begin(oidText)
	for _, c := range calls {
		if c.cond != nil && c.cond.After != nil {
			p.elemBytes(strconv.AppendUint(num[:0], c.cond.After.TransactionID, 10))
		} else {
			p.elemText("0")
		}
	}
	p.end()
	p.begin(oidInt8)
	for _, c := range calls {
		var pos int64
		if c.cond != nil && c.cond.After != nil {
			pos = c.cond.After.Position
		}
		p.elemInt8(pos)
	}
	p.end()
	p.begin(oidText)
	for _, c := range calls {
		if c.cond != nil && c.cond.After != nil && c.cond.After.Snapshot != nil {
			p.elemText(c.cond.After.Snapshot.String())
		} else {
			p.elemNull()
		}
	}
	p.end()
	p.begin(oidTimestamptz)
	for _, c := range calls {
		if c.cond != nil && c.cond.After != nil && c.cond.After.EventTime != 0 {
			p.elemInt8(c.cond.After.EventTime - pgEpochMicros)
		} else {
			p.elemNull()
		}
	}
	p.end()
}
