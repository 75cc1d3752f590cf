// Package eventversion reads and writes the version an event was written
// with, recorded in its metadata (package upcast): shared by the registry
// and the stores' appends.
package eventversion

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Key is the metadata key (upcast.MetadataKey).
const Key = "pgdcb_version"

var keyBytes = []byte(`"` + Key + `"`)

// Recorded returns the version recorded in metadata (1 without it).
func Recorded(meta json.RawMessage) (int, error) {
	if !bytes.Contains(meta, keyBytes) {
		return 1, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(meta, &m); err != nil {
		return 1, nil // not an object: the key is inside a value
	}
	raw, ok := m[Key]
	if !ok {
		return 1, nil
	}
	v, err := strconv.Atoi(string(raw))
	if err != nil || v < 1 {
		return 1, fmt.Errorf("metadata %s is %s, want an integer from 1", Key, raw)
	}
	return v, nil
}

// errNotObject is Set's error for metadata that is not a JSON object.
var errNotObject = errors.New("metadata is not a JSON object, so it cannot record the version (" + Key + ")")

// Set returns meta with Key set to v (meta empty or null:
// an object with that key alone). Metadata that is not an object cannot
// carry it: an error.
func Set(meta json.RawMessage, v int) (json.RawMessage, error) {
	t := bytes.TrimSpace(meta)
	if len(t) == 0 || string(t) == "null" {
		return json.RawMessage(`{"` + Key + `": ` + strconv.Itoa(v) + `}`), nil
	}
	if t[0] != '{' {
		return nil, errNotObject
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(t, &m); err != nil {
		return nil, errNotObject
	}
	m[Key] = json.RawMessage(strconv.Itoa(v))
	return json.Marshal(m)
}

// Has reports whether meta records a version (Key).
func Has(meta json.RawMessage) bool {
	if !bytes.Contains(meta, keyBytes) {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return false
	}
	_, ok := m[Key]
	return ok
}
