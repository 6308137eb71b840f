package integration

import (
	"os"
	"testing"

	"github.com/kfollower/kfollower/integration/kafka"
)

func TestMain(m *testing.M) {
	// A test re-executes this binary as a kfollower process it can SIGKILL.
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	kafka.Main(m)
}
