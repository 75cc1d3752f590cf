package eventstore

import "github.com/pgdcb/pgdcb"

var _ pgdcb.Store = (*Store)(nil)
