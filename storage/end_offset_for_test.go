package storage

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// endOffsetForTable holds Kafka's LeaderEpochFileCache.endOffsetFor answers,
// one case per Kafka test. follower's TestMemLogEndOffsetFor reads the same
// file for memLog, the in-memory log its stories and reconciliation oracle
// run over; with this test, that double and Epochs cannot disagree without
// one of the two failing.
const endOffsetForTable = "../follower/testdata/end_offset_for.txt"

// TestEndOffsetForTable builds each case's cache with NewEpochs, which
// assigns the entries in order as Kafka replays a checkpoint, and checks
// EndOffsetFor against Kafka's answer.
func TestEndOffsetForTable(t *testing.T) {
	datadriven.RunTest(t, endOffsetForTable, func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "end-offset-for" {
			d.Fatalf(t, "unknown command %q", d.Cmd)
		}
		if d.Rewrite {
			d.Fatalf(t, "%s holds Kafka's answers; it is not rewritten from an implementation", endOffsetForTable)
		}
		var leo int64
		var epoch int
		d.ScanArgs(t, "leo", &leo)
		d.ScanArgs(t, "epoch", &epoch)
		var entries []EpochEntry
		for line := range strings.SplitSeq(strings.TrimSpace(d.Input), "\n") {
			if line = strings.TrimSpace(line); line == "" {
				continue
			}
			var e EpochEntry
			if _, err := fmt.Sscanf(line, "%d %d", &e.Epoch, &e.StartOffset); err != nil {
				d.Fatalf(t, "assign line %q: %v", line, err)
			}
			entries = append(entries, e)
		}
		c, err := NewEpochs(entries...)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		found, end := c.EndOffsetFor(int32(epoch), leo)
		return fmt.Sprintf("(%d, %d)", found, end)
	})
}
