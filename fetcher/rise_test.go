package fetcher

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
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
	step := func(cmd, args, input string) string {
		d := &datadriven.TestData{Pos: "rise_test", Cmd: cmd, Input: input}
		for _, a := range strings.Fields(args) {
			k, v, _ := strings.Cut(a, "=")
			d.CmdArgs = append(d.CmdArgs, datadriven.CmdArg{Key: k, Vals: []string{v}})
		}
		return e.handle(t, d)
	}
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
