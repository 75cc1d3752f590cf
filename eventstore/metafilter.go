package eventstore

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/pgjson"
)

// metadataContains renders "the event's metadata contains m" (jsonb @>) on
// alias e, with m written into the statement as a literal, not a parameter:
// the planner can then prove that a partial index whose predicate is the
// same containment (runstore's events_runstore_log_order) serves the read,
// in a generic plan too. m must be a JSON object (validateMetadataFilter).
func metadataContains(m json.RawMessage) string {
	var b bytes.Buffer
	_ = json.Compact(&b, m)
	// An escape string literal: its meaning does not depend on
	// standard_conforming_strings.
	lit := strings.ReplaceAll(b.String(), `\`, `\\`)
	lit = strings.ReplaceAll(lit, `'`, `''`)
	return "e.metadata @> E'" + lit + "'::jsonb"
}

// validateMetadataFilter refuses a filter that is not a JSON object jsonb
// accepts. name names the option in the error.
func validateMetadataFilter(name string, m json.RawMessage) error {
	if len(m) == 0 {
		return nil
	}
	if err := pgjson.Validate(m); err != nil {
		return &pgdcb.InvalidArgumentError{Name: name, Reason: "not valid JSON for PostgreSQL's jsonb: " + err.Error()}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(m, &obj); err != nil || obj == nil {
		return &pgdcb.InvalidArgumentError{Name: name, Reason: "must be a JSON object"}
	}
	return nil
}
