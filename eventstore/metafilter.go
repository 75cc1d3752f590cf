package eventstore

import (
	"bytes"
	"encoding/json"
	"strings"
)

// metadataContains renders "the event's metadata contains m" (jsonb @>) on
// alias e, with m written into the statement as a literal, not a parameter:
// the planner can then prove that a partial index whose predicate is the
// same containment (runstore's events_runstore_log_order) serves the read,
// in a generic plan too. m must be a JSON object (pgjson.ValidateObject).
func metadataContains(m json.RawMessage) string {
	var b bytes.Buffer
	_ = json.Compact(&b, m)
	// An escape string literal: its meaning does not depend on
	// standard_conforming_strings.
	lit := strings.ReplaceAll(b.String(), `\`, `\\`)
	lit = strings.ReplaceAll(lit, `'`, `''`)
	return "e.metadata @> E'" + lit + "'::jsonb"
}
