package main

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/pgdcb/pgdcb/tags"
)

// The log's shape. Each stage appends Count events after the log's From
// events: a few special entities placed at fixed slots spread over the stage
// (the decision rows' entities and the type-stream marker), the rest from a
// pool of background entities interleaved at random, as many writers would
// have appended them.
//
//   - probes: entities of exactly probeEvents events (tag account=p<stage>-<i>),
//     each event at a random slot of the stage; a decision on a short entity
//     takes a fresh one, so every measured decision folds exactly 10 events;
//   - two long entities of LongEvents events each (account=L<stage>-off and
//     account=L<stage>-on), evenly spread over the stage;
//   - markerEvents events of type ScaleMarker<stage>, evenly spread;
//   - background: entities of one of len(kinds) kinds; 90% have 1..30 events
//     (mean 5), 9.5% 20..200, 0.5% 200..5000; each event has its entity's
//     tag, tenant=<0..299>, and with probability 1/2 region=<0..15> and 1/4
//     user=<0..99999> (2-4 tags); types <Kind>E00 (the first event) to
//     <Kind>E39, Zipf-distributed: 8 kinds × 40 = 320 types.
const (
	probeEvents  = 10
	markerEvents = 1000
	typesPerKind = 40
	tenants      = 300
	activePool   = 2000
)

var kinds = []string{"Account", "Order", "Cart", "Device", "Invoice", "Ticket", "Shipment", "Session"}

// stageSpec says what one stage appends.
type stageSpec struct {
	Stage      int   // 0-based; names the stage's entities
	From       int64 // events in the log before the stage
	Count      int64 // events the stage appends
	Probes     int   // entities of exactly probeEvents events
	LongEvents int   // events of each of the two long entities (0: none)
	Seed       uint64
}

// markers is the number of marker events of the stage: markerEvents, or
// fewer when the stage is small.
func (s stageSpec) markers() int { return int(min(int64(markerEvents), s.Count/100)) }

func probeTag(stage, i int) string       { return "account=p" + strconv.Itoa(stage) + "-" + strconv.Itoa(i) }
func longTag(stage int, s string) string { return "account=L" + strconv.Itoa(stage) + "-" + s }
func markerType(stage int) string        { return "ScaleMarker" + strconv.Itoa(stage) }

// genEvent is one generated event, its tags in canonical order.
type genEvent struct {
	Type string
	Tags []string
	Data []byte
}

type special struct {
	slot int64
	typ  string
	tag  string // the entity tag
	idx  int    // the event's index in its entity
}

type bgEntity struct {
	kind  int
	id    string
	left  int
	count int
}

// generator yields a stage's events in log order.
type generator struct {
	spec    stageSpec
	rng     *rand.Rand
	zipf    *rand.Zipf
	special []special
	next    int
	emitted int64
	active  []bgEntity
	nextID  int64
}

func newGenerator(spec stageSpec) *generator {
	g := &generator{spec: spec, rng: rand.New(rand.NewPCG(spec.Seed, uint64(spec.Stage)+1))}
	g.zipf = rand.NewZipf(g.rng, 1.2, 1, typesPerKind-2)
	n := spec.Count
	for i := range spec.Probes {
		for k := range probeEvents {
			g.special = append(g.special, special{slot: g.rng.Int64N(n), typ: "AccountE" + twoDigits(k), tag: probeTag(spec.Stage, i), idx: k})
		}
	}
	for j, which := range []string{"off", "on"} {
		for k := range spec.LongEvents {
			slot := int64(k)*n/int64(spec.LongEvents) + int64(j)
			g.special = append(g.special, special{slot: min(slot, n-1), typ: "AccountE" + twoDigits(k%typesPerKind), tag: longTag(spec.Stage, which), idx: k})
		}
	}
	m := spec.markers()
	for k := range m {
		g.special = append(g.special, special{slot: int64(k)*n/int64(m) + 2, typ: markerType(spec.Stage), tag: "marker=" + strconv.Itoa(spec.Stage), idx: k})
	}
	// Stable: an entity's events keep their order among equal slots.
	slices.SortStableFunc(g.special, func(a, b special) int {
		switch {
		case a.slot < b.slot:
			return -1
		case a.slot > b.slot:
			return 1
		}
		return 0
	})
	// Probe events at random slots: renumber each probe's events in slot
	// order, so the entity's first event is its E00.
	seen := map[string]int{}
	for i := range g.special {
		s := &g.special[i]
		if strings.HasPrefix(s.tag, "account=p") {
			s.idx = seen[s.tag]
			seen[s.tag]++
			s.typ = "AccountE" + twoDigits(s.idx)
		}
	}
	g.active = make([]bgEntity, activePool)
	for i := range g.active {
		g.active[i] = g.newEntity()
	}
	return g
}

func twoDigits(i int) string {
	if i < 10 {
		return "0" + strconv.Itoa(i)
	}
	return strconv.Itoa(i)
}

// entitySize draws a background entity's number of events.
func (g *generator) entitySize() int {
	u := g.rng.Float64()
	switch {
	case u < 0.90:
		return min(30, 1+int(g.rng.ExpFloat64()*4))
	case u < 0.995:
		return 20 + g.rng.IntN(181)
	}
	return 200 + g.rng.IntN(4801)
}

func (g *generator) newEntity() bgEntity {
	k := g.rng.IntN(len(kinds))
	id := strconv.Itoa(g.spec.Stage) + "-" + strconv.FormatInt(g.nextID, 10)
	g.nextID++
	n := g.entitySize()
	return bgEntity{kind: k, id: id, left: n, count: 0}
}

// done says whether the stage's events are all out.
func (g *generator) done() bool { return g.emitted >= g.spec.Count }

// nextEvent returns the next event in log order; call only while !done().
func (g *generator) nextEvent() genEvent {
	pos := g.spec.From + g.emitted + 1
	remaining := g.spec.Count - g.emitted
	var ev genEvent
	if g.next < len(g.special) && (g.special[g.next].slot <= g.emitted || int64(len(g.special)-g.next) >= remaining) {
		s := g.special[g.next]
		g.next++
		ev = genEvent{Type: s.typ, Tags: g.tagSet(s.tag, pos)}
	} else {
		i := g.rng.IntN(len(g.active))
		e := &g.active[i]
		typ := kinds[e.kind] + "E00"
		if e.count > 0 {
			typ = kinds[e.kind] + "E" + twoDigits(1+int(g.zipf.Uint64()))
		}
		ev = genEvent{Type: typ, Tags: g.tagSet(lower(kinds[e.kind])+"="+e.id, pos)}
		e.count++
		e.left--
		if e.left == 0 {
			*e = g.newEntity()
		}
	}
	ev.Data = []byte(`{"n":` + strconv.FormatInt(pos, 10) + `,"amount":` + strconv.Itoa(g.rng.IntN(10_000)) + `,"note":"scale study payload"}`)
	g.emitted++
	return ev
}

// tagSet is the entity tag plus tenant and, at random, region and user, in
// the store's canonical order.
func (g *generator) tagSet(entity string, pos int64) []string {
	ts := []string{entity, "tenant=" + strconv.Itoa(int(pos%tenants))}
	if g.rng.IntN(2) == 0 {
		ts = append(ts, "region="+strconv.Itoa(g.rng.IntN(16)))
	}
	if g.rng.IntN(4) == 0 {
		ts = append(ts, "user="+strconv.Itoa(g.rng.IntN(100_000)))
	}
	return tags.MustParseSet(ts...).Strings()
}

func lower(s string) string {
	b := []byte(s)
	if len(b) > 0 && b[0] >= 'A' && b[0] <= 'Z' {
		b[0] += 'a' - 'A'
	}
	return string(b)
}
