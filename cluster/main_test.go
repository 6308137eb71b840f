package cluster

import (
	"testing"

	"go.uber.org/goleak"
)

// perBroker starts a goroutine per broker: none may outlive its call.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
