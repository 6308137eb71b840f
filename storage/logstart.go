package storage

import (
	"fmt"
)

// LogStartFile holds the log start offset once DeleteBefore moved it.
const LogStartFile = "kfollower-log-start-offset"

// formatLogStart / ParseLogStart hold the log start offset when it lies
// inside the first segment (after DeleteBefore); Kafka keeps the same
// number in the log dir's log-start-offset-checkpoint. The framing is that
// of Kafka's OffsetCheckpointFile: version, count 1, the offset.
func formatLogStart(off int64) []byte { return fmt.Appendf(nil, "0\n1\n%d\n", off) }

func ParseLogStart(data []byte) (int64, error) {
	lines := splitLines(string(data))
	if len(lines) != 3 || lines[0] != "0" || lines[1] != "1" {
		return 0, fmt.Errorf("log start offset file %q: bad framing", data)
	}
	n, err := parseJavaInt(lines[2], 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("log start offset file %q: bad offset", data)
	}
	return n, nil
}
