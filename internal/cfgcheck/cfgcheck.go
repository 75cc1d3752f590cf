// Package cfgcheck refuses negative numbers and durations in the Config
// structs of pgdcb's packages, where 0 means the default.
package cfgcheck

import (
	"strconv"
	"time"

	"github.com/pgdcb/pgdcb"
)

// Field is one numeric Config field: its name, its value and what 0 means.
type Field struct {
	name  string
	value int64
	dur   bool
	def   string
}

// Int is an integer field whose 0 means def.
func Int(name string, v, def int) Field {
	return Field{name: name, value: int64(v), def: strconv.Itoa(def)}
}

// Duration is a duration field whose 0 means def.
func Duration(name string, v, def time.Duration) Field {
	return Field{name: name, value: int64(v), dur: true, def: def.String()}
}

// Note returns f with a note added to what 0 means (for example how to get
// the behaviour a negative value used to select).
func (f Field) Note(note string) Field {
	f.def += "; " + note
	return f
}

// NonNegative returns a *pgdcb.InvalidArgumentError named "Config.<name>" for
// the first negative field, or nil.
func NonNegative(fields ...Field) error {
	for _, f := range fields {
		if f.value >= 0 {
			continue
		}
		got := strconv.FormatInt(f.value, 10)
		if f.dur {
			got = time.Duration(f.value).String()
		}
		return &pgdcb.InvalidArgumentError{Name: "Config." + f.name,
			Reason: "must not be negative (got " + got + "; 0 means the default, " + f.def + ")"}
	}
	return nil
}
