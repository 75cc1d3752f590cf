package eventstore_test

import (
	"testing"

	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
