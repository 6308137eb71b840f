package bench

import (
	"testing"

	"github.com/kfollower/kfollower/integration/kafka"
)

func TestMain(m *testing.M) { kafka.Main(m) }
