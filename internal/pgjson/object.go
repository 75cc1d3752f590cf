package pgjson

import (
	"encoding/json"

	"github.com/pgdcb/pgdcb/internal/errs"
)

// ValidateObject refuses m unless it is empty or a JSON object that jsonb
// accepts (a metadata filter: ReadOptions.MetadataContains,
// projection.Config.MetadataContains); name names the option in the
// *errs.InvalidArgumentError.
func ValidateObject(name string, m json.RawMessage) error {
	if len(m) == 0 {
		return nil
	}
	if err := Validate(m); err != nil {
		return &errs.InvalidArgumentError{Name: name, Reason: "not valid JSON for PostgreSQL's jsonb: " + err.Error()}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(m, &obj); err != nil || obj == nil {
		return &errs.InvalidArgumentError{Name: name, Reason: "must be a JSON object"}
	}
	return nil
}
