package tags

// The limits the external tests check against.
const (
	MaxKeyLen   = maxKeyLen
	MaxValueLen = maxValueLen
)
