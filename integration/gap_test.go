package integration

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kadm"
)

// DeleteRecords on the leader past our log end while kfollower is stopped:
// after restart it keeps the history it holds, reports the gap exactly, and
// continues from the leader's log start (docs/kafka.md §7).
func TestRetentionGap(t *testing.T) {
	ctx := context.Background()
	c := kafka.Start(t, kafka.Options{NeedsFaults: true})
	const topic = "gap"
	c.CreateTopic(ctx, topic, [][]int32{{1, 2, 3}}, nil)
	dir := t.TempDir()
	s := follow(t, c, dir, topic)
	produceTo(ctx, t, c, topic, 0, "kept", 1000)
	s.waitLogEnd(t, topic, 0, 1000)
	s.stop()

	produceTo(ctx, t, c, topic, 0, "missed", 1000)
	const deleteTo = 1500
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: deleteTo})
	res, err := c.Admin().DeleteRecords(ctx, offs)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("DeleteRecords to %d: %v", deleteTo, err)
	}

	s = follow(t, c, dir, topic)
	produceTo(ctx, t, c, topic, 0, "after", 500)
	s.waitCaughtUp(ctx, c, topic, 1)
	evs := s.Events()
	if len(evs) != 1 {
		t.Fatalf("want one gap event, got %v", evs)
	}
	gap, ok := evs[0].(*follower.GapEvent)
	if !ok || gap.From != 1000 || gap.To != deleteTo || gap.Discarded {
		t.Fatalf("want a gap event [1000,%d) keeping our history, got %+v", deleteTo, evs[0])
	}
	st, _ := s.status(topic, 0)
	if st.LogStartOffset != 0 {
		t.Fatalf("our log start moved to %d: the history we held was dropped", st.LogStartOffset)
	}
	compareBatches(ctx, t, c, dir, topic, 0)
}

// compareBatches asserts that every batch we hold is, byte for byte, the
// batch the leader holds at the same base offset (on disk), whatever gaps
// lie between them.
func compareBatches(ctx context.Context, t *testing.T, c *kafka.Cluster, dataDir, topic string, p int32) {
	t.Helper()
	st, err := c.Partition(ctx, topic, p)
	if err != nil {
		t.Fatal(err)
	}
	leader := map[int64][]byte{}
	sc := batch.NewScanner(readSegments(t, filepath.Join(c.Node(st.Leader).DataDir(), fmt.Sprintf("%s-%d", topic, p))))
	for sc.Next() {
		leader[sc.Header().BaseOffset] = sc.Batch()
	}
	sc = batch.NewScanner(readSegments(t, storage.PartitionDir(dataDir, topic, p)))
	n := 0
	for sc.Next() {
		h := sc.Header()
		if lb, ok := leader[h.BaseOffset]; !ok || !bytes.Equal(lb, sc.Batch()) {
			t.Fatalf("%s-%d: our batch at offset %d (%d bytes) is not the leader's (present %v)", topic, p, h.BaseOffset, len(sc.Batch()), ok)
		}
		n++
	}
	if err := sc.Err(); err != nil || n == 0 {
		t.Fatalf("%s-%d: scanning our log: %d batches, %v", topic, p, n, err)
	}
}
