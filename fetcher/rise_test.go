package fetcher

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kfollower/kfollower/storage"
)

// TestRiseAllAtOnce: when several partitions of one worker reconcile with
// a new leader in one answer, their served epochs rise in one pass
// (riseAll, side by side) before they are published: each is served at
// the new upstream epoch and has it durable in its directory.
func TestRiseAllAtOnce(t *testing.T) {
	dir := t.TempDir()
	e := newDriverEnvAt(t, dir, slog.New(slog.DiscardHandler))
	defer e.close()
	step := func(cmd, args, input string) string { return e.step(t, "rise_test", cmd, args, input) }
	const n = 5
	var meta, recs, moved, answers []string
	for p := range n {
		meta = append(meta, fmt.Sprintf("t-%d leader=1 epoch=1", p))
		recs = append(recs, fmt.Sprintf("t-%d records=0-4 epoch=1 hw=5", p))
		moved = append(moved, fmt.Sprintf("t-%d leader=2 epoch=7", p))
		answers = append(answers, fmt.Sprintf("t-%d epoch=1 end=5", p))
	}
	step("metadata", "", strings.Join(meta, "\n"))
	step("reply", "broker=1", strings.Join(recs, "\n"))
	if out := step("metadata", "", strings.Join(moved, "\n")); !strings.Contains(out, "broker 2 <- OffsetForLeaderEpoch") {
		t.Fatalf("no epoch query to the new leader:\n%s", out)
	}
	step("reply", "broker=2", strings.Join(answers, "\n"))
	for p := range n {
		_, epoch, ok := e.m.CatalogPartition("t", int32(p))
		if !ok || epoch != 7 {
			t.Errorf("t-%d served at epoch %d (served: %v), want 7", p, epoch, ok)
		}
		se, err := storage.OpenServedEpoch(filepath.Join(dir, fmt.Sprintf("t-%d", p)))
		if err != nil {
			t.Fatal(err)
		}
		if se.Epoch() != 7 {
			t.Errorf("t-%d: served epoch on disk %d, want 7", p, se.Epoch())
		}
	}
}

// TestRiseRetriedWhileIdle: a served epoch whose rise failed (its file
// could not be written) is tried again at the worker's next pass even when
// the partition is idle, its long polls carried unstepped
// (follower.Partition.Unchanged): it is not left behind the upstream epoch
// until new records come. Checked that it can fail: publishing only the
// partitions stepped leaves it at epoch 1.
func TestRiseRetriedWhileIdle(t *testing.T) {
	dir := t.TempDir()
	e := newDriverEnvAt(t, dir, slog.New(slog.DiscardHandler))
	defer e.close()
	step := func(cmd, args, input string) string { return e.step(t, "rise_test", cmd, args, input) }
	step("metadata", "", "t-0 leader=1 epoch=1")
	step("reply", "broker=1", "t-0 records=0-4 epoch=1 hw=5")
	step("reply", "broker=1", "t-0 hw=5")
	// A directory in the way of the served epoch's temporary file: its
	// write fails (as root too, which chmod would not stop).
	block := filepath.Join(dir, "t-0", storage.ServedEpochFile+".tmp")
	if err := os.Mkdir(block, 0o755); err != nil {
		t.Fatal(err)
	}
	step("metadata", "", "t-0 leader=1 epoch=7")
	step("reply", "broker=1 side", "t-0 epoch=1 end=5")
	// The first answers the Fetch of epoch 1 (stale), the next in the new
	// epoch is stepped, the others carried.
	for range 4 {
		step("reply", "broker=1", "t-0 hw=5")
	}
	if _, epoch, _ := e.m.CatalogPartition("t", 0); epoch == 7 {
		t.Fatal("the served epoch rose to 7 with its file blocked")
	}
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	// Idle long polls only: nothing the state machine needs to see.
	step("reply", "broker=1", "t-0 hw=5")
	step("reply", "broker=1", "t-0 hw=5")
	if _, epoch, ok := e.m.CatalogPartition("t", 0); !ok || epoch != 7 {
		t.Errorf("after the file could be written again and idle long polls: served at epoch %d (served: %v), want 7", epoch, ok)
	}
}
