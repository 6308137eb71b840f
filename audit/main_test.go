package audit

import (
	"testing"

	"go.uber.org/goleak"
)

// Verify starts goroutines (its workers, the leader stream): a test that
// runs it must not leak one.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
