package runstore_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/pgdcb/pgdcb/runstore"
)

// A stored run snapshot (the run_snapshots row's JSON), whatever its bytes,
// either does not decode (GetSnapshot then reports ErrCorruptEvent) or
// decodes to a snapshot that encodes stably, and that Observe and Fold
// handle without panicking: Observe applies the event only as the next
// runSeq and otherwise changes nothing; Fold applies only events past
// LastEventSeq.
func FuzzRunSnapshotJSON(f *testing.F) {
	snap := runstore.NewSnapshot("run-1")
	snap.Fold(runstore.CanonicalEngineEvent{RunID: "run-1", RunSeq: 1, EventType: "RunStarted", EmittedAt: "2026-02-11T10:00:00Z"}, nil)
	snap.Fold(runstore.CanonicalEngineEvent{RunID: "run-1", RunSeq: 4, EventType: "StepCompleted", StepID: "s1", EventData: json.RawMessage(`{"ok":true}`)}, nil)
	good, err := json.Marshal(snap)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range [][]byte{good, []byte(`{}`), []byte(`null`), []byte(`{"runId":"r","lastEventSeq":9223372036854775807}`),
		[]byte(`{"gaps":[{"from":5,"to":2}],"lastEventSeq":3}`), []byte(`{"steps":{"s":{"status":"RUNNING","attempts":-1}}}`),
		[]byte(`{"data":{"a":[1,2]},"steps":null}`), []byte(`{"lastEventSeq":"1"}`), []byte(`[]`)} {
		for _, typ := range []string{"StepStarted", "RunCompleted", "Other"} {
			f.Add(s, int64(2), typ, "s1")
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, seq int64, typ, step string) {
		var s runstore.RunSnapshot
		if json.Unmarshal(b, &s) != nil {
			return
		}
		enc, err := json.Marshal(&s)
		if err != nil {
			t.Fatalf("snapshot decoded from %q does not encode: %v", b, err)
		}
		var again runstore.RunSnapshot
		if err := json.Unmarshal(enc, &again); err != nil {
			t.Fatalf("its own encoding %s refused: %v", enc, err)
		}
		if enc2, err := json.Marshal(&again); err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("not stable: %s then %s (%v)", enc, enc2, err)
		}
		ev := runstore.CanonicalEngineEvent{RunID: s.RunID, RunSeq: seq, EventType: typ, StepID: step,
			EventData: json.RawMessage(`{"n":1}`), EmittedAt: "2026-02-11T10:00:00Z"}
		last, count := again.LastEventSeq, again.EventCount
		switch o := again.Observe(ev, nil); o {
		case runstore.ObservedNext:
			if again.LastEventSeq != seq || again.EventCount != count+1 {
				t.Fatalf("applied runSeq %d after %d: last %d, count %d (was %d)", seq, last, again.LastEventSeq, again.EventCount, count)
			}
		case runstore.ObservedHeld, runstore.ObservedGap, runstore.ObservedFill:
			if after, _ := json.Marshal(&again); !bytes.Equal(after, enc) {
				t.Fatalf("Observe %s of runSeq %d changed the snapshot: %s became %s", o, seq, enc, after)
			}
		default:
			t.Fatalf("Observe returned %s", o)
		}
		if _, err := json.Marshal(&again); err != nil {
			t.Fatalf("after Observe the snapshot does not encode: %v", err)
		}
		before := again.LastEventSeq
		if applied := again.Fold(ev, nil); applied != (seq > before) {
			t.Fatalf("Fold of runSeq %d after %d applied: %v", seq, before, applied)
		}
	})
}
