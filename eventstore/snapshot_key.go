package eventstore

import (
	"fmt"
	"strings"
	"unicode/utf8"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/clip"
)

// MaxSnapshotNameBytes is the longest snapshot name (Model.WithSnapshots,
// Snapshottable.SnapshotKey) the store accepts.
const MaxSnapshotNameBytes = 256

// InvalidSnapshotNameError is returned by Project, ProjectTx and SaveSnapshot
// (of every store, before any statement runs, so the caller's transaction is
// untouched) when a projector's snapshot name is not 1..MaxSnapshotNameBytes
// bytes of valid UTF-8 without NUL. It matches pgdcb.ErrInvalidArgument.
type InvalidSnapshotNameError struct {
	Name   string
	Reason string
}

func (e *InvalidSnapshotNameError) Error() string {
	return fmt.Sprintf("pgdcb: invalid snapshot name %s: %s", clip.Quote(e.Name), e.Reason)
}

// Is makes errors.Is(err, pgdcb.ErrInvalidArgument) true.
func (e *InvalidSnapshotNameError) Is(target error) bool { return target == pgdcb.ErrInvalidArgument }

// ValidateSnapshotName returns an *InvalidSnapshotNameError unless name is a
// valid snapshot name; "" (no snapshots) is valid.
func ValidateSnapshotName(name string) error {
	var reason string
	switch {
	case name == "":
		return nil
	case len(name) > MaxSnapshotNameBytes:
		reason = fmt.Sprintf("longer than %d bytes (%d)", MaxSnapshotNameBytes, len(name))
	case !utf8.ValidString(name):
		reason = "not valid UTF-8"
	case strings.IndexByte(name, 0) >= 0:
		reason = "contains a NUL byte"
	default:
		return nil
	}
	return &InvalidSnapshotNameError{Name: name, Reason: reason}
}

// validateSnapshotKeys checks the snapshot name of every Snapshottable
// projector.
func validateSnapshotKeys(projectors []pgdcb.Projector) error {
	for _, p := range projectors {
		if sp, ok := p.(pgdcb.Snapshottable); ok {
			name, _ := sp.SnapshotKey()
			if err := ValidateSnapshotName(name); err != nil {
				return err
			}
		}
	}
	return nil
}
