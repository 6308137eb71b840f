package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var rf3x4 = [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}, {1, 3, 2}}

// Follow three topics of four RF-3 partitions while producers write: each
// codec on its own partition, a transactional producer that commits and
// aborts (control batches and aborted data are copied too, as a broker
// follower copies them), and a compacted topic whose gaps we copy as they
// are. Each partition ends as a byte-exact prefix of its leader's log.
func TestFollowWhileProducing(t *testing.T) {
	ctx := context.Background()
	c := kafka.Start(t, kafka.Options{NeedsFaults: true, Config: map[string]string{
		"log.cleaner.backoff.ms": "200",
	}})
	c.CreateTopic(ctx, "codecs", rf3x4, nil)
	c.CreateTopic(ctx, "txn", rf3x4, nil)
	c.CreateTopic(ctx, "compacted", rf3x4, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "1048576", "min.cleanable.dirty.ratio": "0.01",
		"min.compaction.lag.ms": "0", "segment.ms": "100", "delete.retention.ms": "100",
	})

	// The compacted topic is compacted before we follow it, then compaction
	// is switched off so the leader's log stops changing under the check.
	// 1 MiB is the smallest segment.bytes; 1 KiB values on 50 keys fill
	// one segment and start a second, and the cleaner keeps little of the
	// first: small batches (about 100 records) so whole batches go and
	// leave gaps between the ones kept. Little to clean keeps the wait
	// short on a loaded machine.
	pad := strings.Repeat("x", 1000)
	for p := int32(0); p < 4; p++ {
		produceTo(ctx, t, c, "compacted", p, "old"+pad, 1500, kgo.ProducerBatchMaxBytes(100_000))
	}
	compacted := waitCompacted(ctx, t, c, "compacted", 4)
	del := "delete"
	res, err := c.Admin().AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: &del}}, "compacted")
	if err == nil {
		_, err = res.On("compacted", nil)
	}
	if err != nil {
		t.Fatalf("switching compaction off: %v", err)
	}
	waitStable(ctx, t, c, "compacted", 4)

	s := follow(t, c, "", "codecs", "txn", "compacted")
	var wg sync.WaitGroup
	codecs := []kgo.CompressionCodec{kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
	for p, codec := range codecs {
		wg.Go(func() {
			produceTo(ctx, t, c, "codecs", int32(p), "codec", 5000, kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(5*time.Millisecond))
		})
	}
	wg.Go(func() { produceTransactions(ctx, t, c, "txn", 4, 12) })
	for p := int32(0); p < 4; p++ {
		wg.Go(func() { produceTo(ctx, t, c, "compacted", p, "new", 500) })
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, topic := range []string{"codecs", "txn", "compacted"} {
		s.waitCaughtUp(ctx, c, topic, 4)
		for p := int32(0); p < 4; p++ {
			if n := s.compareWithLeader(ctx, c, topic, p); n == 0 {
				t.Fatalf("%s-%d: nothing copied", topic, p)
			}
			if p == 0 || topic == "codecs" {
				checkWithDumpLogSegments(t, s.dir, topic, p, topic == "compacted")
			}
			if topic == "compacted" && compacted[p] && !skipsOffsets(readSegments(t, storage.PartitionDir(s.dir, topic, p))) {
				t.Fatalf("%s-%d: our copy of a compacted log has no gaps", topic, p)
			}
		}
	}
	if evs := s.Events(); len(evs) != 0 {
		t.Fatalf("no leader changed, yet events were reported: %v", evs)
	}
}

// produceTransactions runs n transactions over the topic's partitions,
// committing even ones and aborting odd ones.
func produceTransactions(ctx context.Context, t *testing.T, c *kafka.Cluster, topic string, partitions int32, n int) {
	cl := c.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID("kfollower-test-txn"), kgo.TransactionTimeout(30*time.Second))
	defer cl.Close()
	for i := range n {
		if err := cl.BeginTransaction(); err != nil {
			t.Errorf("begin transaction %d: %v", i, err)
			return
		}
		for p := range partitions {
			for j := range 50 {
				cl.Produce(ctx, &kgo.Record{Partition: p, Value: []byte{byte(i), byte(j)}}, nil)
			}
		}
		if err := cl.Flush(ctx); err != nil {
			t.Errorf("flush in transaction %d: %v", i, err)
			return
		}
		commit := kgo.TransactionEndTry(i%2 == 0)
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Errorf("end transaction %d (commit %v): %v", i, commit, err)
			return
		}
	}
}

// waitCompacted waits until the partitions' leader logs, on disk, skip
// offsets (the cleaner has run), and returns which do. The broker's cleaner
// takes its logs one at a time in its own order, and on a busy machine may
// not reach all of them soon: after the first is compacted, the others get
// a grace period, and at least one must be.
func waitCompacted(ctx context.Context, t *testing.T, c *kafka.Cluster, topic string, partitions int32) map[int32]bool {
	t.Helper()
	done := map[int32]bool{}
	deadline := time.Now().Add(180 * time.Second)
	for len(done) < int(partitions) && time.Now().Before(deadline) {
		for p := range partitions {
			if !done[p] && hasOffsetGap(t, c, ctx, topic, p) {
				done[p] = true
				if g := time.Now().Add(30 * time.Second); g.Before(deadline) {
					deadline = g
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(done) == 0 {
		t.Fatalf("no partition of %s was compacted within the deadline", topic)
	}
	t.Logf("%s: %d of %d partitions compacted before following", topic, len(done), partitions)
	return done
}

// waitStable waits until no leader log of topic changes on disk for a
// second and no cleaning is under way (.cleaned or .swap files), so that a
// cleaning that began before compaction was switched off cannot rewrite
// what we are about to copy.
func waitStable(ctx context.Context, t *testing.T, c *kafka.Cluster, topic string, partitions int32) {
	t.Helper()
	snapshot := func() string {
		var b strings.Builder
		for p := range partitions {
			st, err := c.Partition(ctx, topic, p)
			if err != nil {
				return "error"
			}
			files, _ := filepath.Glob(filepath.Join(c.Node(st.Leader).DataDir(), fmt.Sprintf("%s-%d", topic, p), "*"))
			for _, f := range files {
				if strings.HasSuffix(f, ".cleaned") || strings.HasSuffix(f, ".swap") {
					return "cleaning"
				}
				if fi, err := os.Stat(f); err == nil {
					fmt.Fprintf(&b, "%s %d\n", f, fi.Size())
				}
			}
		}
		return b.String()
	}
	deadline := time.Now().Add(60 * time.Second)
	prev := snapshot()
	for {
		time.Sleep(time.Second)
		cur := snapshot()
		if cur == prev && cur != "cleaning" && cur != "error" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leader logs of %s kept changing for 60 s after compaction was switched off", topic)
		}
		prev = cur
	}
}

// hasOffsetGap reports whether the leader's log of topic-p, on disk, skips
// offsets.
func hasOffsetGap(t *testing.T, c *kafka.Cluster, ctx context.Context, topic string, p int32) bool {
	t.Helper()
	st, err := c.Partition(ctx, topic, p)
	if err != nil || st.Leader < 0 {
		return false
	}
	return skipsOffsets(readSegments(t, filepath.Join(c.Node(st.Leader).DataDir(), fmt.Sprintf("%s-%d", topic, p))))
}

// skipsOffsets reports whether a log's batches skip offsets: the cleaner
// removed whole batches, or records inside one (v2 batches it keeps keep
// their base and last offsets, MemoryRecords.filterTo). Nothing was deleted
// from the start of these logs, so they should start at 0.
func skipsOffsets(raw []byte) bool {
	sc := batch.NewScanner(raw)
	next := int64(0)
	for sc.Next() {
		h := sc.Header()
		if h.BaseOffset != next || int64(h.RecordCount) < int64(h.LastOffsetDelta)+1 {
			return true
		}
		next = h.NextOffset()
	}
	return false
}
