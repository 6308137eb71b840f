package bench

import (
	"os"
	"strings"
	"testing"

	"github.com/kfollower/kfollower/integration/kafka"
)

func TestMain(m *testing.M) { kafka.Main(m) }

// loadAverage is the machine's 1, 5 and 15 minute load average
// (/proc/loadavg), printed beside every figure: on a shared machine a
// figure means little without it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
