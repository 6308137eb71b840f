package fetcher

import (
	"strings"
	"testing"
)

// TestStaleMetadataIgnored: Metadata naming an older leader epoch than
// one already seen (from a broker that has not yet applied the move)
// changes nothing: the partition stays with its new leader's worker and
// reconciles there, and no leader change is reported. Checked that it can
// fail: without the check in Manager.place the stale answer hands the
// partition back to broker 1's worker ("leader changed ... to 1").
func TestStaleMetadataIgnored(t *testing.T) {
	e := newDriverEnv(t)
	defer e.close()
	step := func(cmd, args, input string) string { return e.step(t, "stale_test", cmd, args, input) }
	step("metadata", "", "t-0 leader=1 epoch=1")
	step("reply", "broker=1", "t-0 records=0-4 epoch=1 hw=5")
	if out := step("metadata", "", "t-0 leader=2 epoch=2"); !strings.Contains(out, "broker 2 <- OffsetForLeaderEpoch t-0") {
		t.Fatalf("no epoch query to the new leader:\n%s", out)
	}
	if out := step("metadata", "", "t-0 leader=1 epoch=1"); strings.Contains(out, "leader changed") || strings.Contains(out, "broker 1 <-") {
		t.Fatalf("Metadata at an older epoch was acted on:\n%s", out)
	}
	if out := step("reply", "broker=2", "t-0 epoch=1 end=5"); !strings.Contains(out, "broker 2 <- Fetch t-0@5") {
		t.Fatalf("t-0 does not fetch from its new leader after reconciling:\n%s", out)
	}
}
