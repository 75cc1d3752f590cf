package pgdcb

import (
	"fmt"

	"github.com/pgdcb/pgdcb/internal/clip"
)

// InvalidSnapshotNameError is returned by Project, ProjectTx and SaveSnapshot
// (of every store, before any statement runs, so the caller's transaction is
// untouched) when a projector's snapshot name is not 1..MaxSnapshotNameBytes
// bytes of valid UTF-8 without NUL. It matches ErrInvalidArgument.
type InvalidSnapshotNameError struct {
	Name   string
	Reason string
}

func (e *InvalidSnapshotNameError) Error() string {
	return fmt.Sprintf("pgdcb: invalid snapshot name %s: %s", clip.Quote(e.Name), e.Reason)
}

// Is makes errors.Is(err, ErrInvalidArgument) true.
func (e *InvalidSnapshotNameError) Is(target error) bool { return target == ErrInvalidArgument }
