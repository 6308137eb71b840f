package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire/batch"
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
	// Segments roll by size only (1 MiB, the smallest segment.bytes 4.x
	// allows; segment.ms stays at its 7 days), so after compactBeforeFollowing
	// the active segment has room for everything written later and the
	// cleaner, which never cleans the active segment, finds nothing more to
	// clean: the leaders' logs below it stay as they are while we copy.
	c.CreateTopic(ctx, "compacted", rf3x4, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "1048576", "min.cleanable.dirty.ratio": "0.01",
		"min.compaction.lag.ms": "0", "delete.retention.ms": "100",
	})
	for p := int32(0); p < 4; p++ {
		compactBeforeFollowing(ctx, t, c, "compacted", p)
	}

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
		// Keys of their own: nothing written now supersedes what the
		// cleaner kept, so no later cleaning could remove copied records.
		wg.Go(func() { produceKeyed(ctx, t, c, "compacted", p, "new", 500, nil) })
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
			if topic == "compacted" && !skipsOffsets(readSegments(t, storage.PartitionDir(s.dir, topic, p))) {
				t.Fatalf("%s-%d: our copy of a compacted log has no gaps", topic, p)
			}
		}
	}
	if evs := s.Events(); len(evs) != 0 {
		t.Fatalf("no leader changed, yet events were reported: %v", evs)
	}
	// The copies above are byte-exact although most of their batches
	// were written as they were read (storage.Log.Stage), compressed,
	// transactional and compacted ones among them.
	if taken, ap := s.m.StagedAppended(), s.appendedBytes.Load(); taken <= ap/2 {
		t.Errorf("%d of %d bytes appended were taken where they were staged as they were read: want most", taken, ap)
	}
	t.Logf("%d of %d bytes appended were taken where they were staged (%d staged)", s.m.StagedAppended(), s.appendedBytes.Load(), s.staged.Load())
}

// compactBeforeFollowing writes 1500 records of 1 KiB over 50 keys to
// topic-p, in batches of about 100 records so the cleaner removes whole
// batches and leaves gaps between the ones it keeps; then records of
// their own keys until the leader rolls a segment after the last keyed
// one, so that every superseded record lies below the active segment, the
// part of the log the cleaner cleans (LogCleanerManager's first
// uncleanable offset). It then waits for the leader's cleaner to report,
// in the cleaner-offset-checkpoint of its log dir, that it has cleaned
// the log up to that segment, and asserts the leader's log has gaps. No
// grace period, no "nothing changed for a while": the cleaner's own
// record says it is done, and there is nothing left for it to clean.
func compactBeforeFollowing(ctx context.Context, t *testing.T, c *kafka.Cluster, topic string, p int32) {
	t.Helper()
	pad := strings.Repeat("x", 1000)
	// Uncompressed, so that 1 KiB is 1 KiB on disk and fills segments.
	plain := []kgo.Opt{kgo.ProducerBatchMaxBytes(100_000), kgo.ProducerBatchCompression(kgo.NoCompression())}
	keyed := produceKeyed(ctx, t, c, topic, p, "old"+pad, 1500, func(i int) string { return fmt.Sprintf("k%d", i%50) }, plain...)
	if len(keyed) == 0 {
		t.FailNow()
	}
	last := keyed[len(keyed)-1].Offset
	st := c.WaitPartition(ctx, topic, p, "a leader", func(s kafka.PartitionState) bool { return s.Leader >= 0 })
	logDir := c.Node(st.Leader).DataDir()
	dir := filepath.Join(logDir, fmt.Sprintf("%s-%d", topic, p))
	var active int64
	for i := 0; ; i++ {
		active = activeSegment(t, dir)
		if active > last {
			break
		}
		if i == 40 {
			t.Fatalf("%s: no segment rolled after offset %d (active segment at %d)", dir, last, active)
		}
		if rs := produceKeyed(ctx, t, c, topic, p, "roll"+pad, 50, func(j int) string { return fmt.Sprintf("roll%d-%d", i, j) }, plain...); rs == nil {
			t.FailNow()
		}
	}
	deadline := time.Now().Add(120 * time.Second)
	for {
		cleaned, ok := cleanerCheckpoint(t, logDir, topic, p)
		if ok && cleaned >= active {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s-%d: the leader's cleaner has not cleaned up to %d within 120 s (its checkpoint: %d, present %v)", topic, p, active, cleaned, ok)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !skipsOffsets(readSegments(t, dir)) {
		t.Fatalf("%s: cleaned up to %d, yet no offset is missing", dir, active)
	}
}

// activeSegment is the base offset of the newest segment in a partition dir.
func activeSegment(t *testing.T, dir string) int64 {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("%s: no segments (%v)", dir, err)
	}
	slices.Sort(logs)
	base, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(logs[len(logs)-1]), ".log"), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", logs[len(logs)-1], err)
	}
	return base
}

// cleanerCheckpoint reads topic-p's entry of a log dir's
// cleaner-offset-checkpoint, which the log cleaner rewrites after each log
// it cleans (LogCleanerManager.updateCheckpoints): version 0, a count,
// then "topic partition offset" lines, the offset being where the cleaned
// part of the log ends.
func cleanerCheckpoint(t *testing.T, logDir, topic string, p int32) (int64, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(logDir, "cleaner-offset-checkpoint"))
	if os.IsNotExist(err) {
		return 0, false // no log cleaned yet
	}
	if err != nil {
		t.Fatal(err)
	}
	ls := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(ls) < 2 || ls[0] != "0" {
		t.Fatalf("%s/cleaner-offset-checkpoint: not a version-0 checkpoint: %q", logDir, b)
	}
	for _, l := range ls[2:] {
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == topic && f[1] == strconv.Itoa(int(p)) {
			off, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				t.Fatalf("%s/cleaner-offset-checkpoint: %q: %v", logDir, l, err)
			}
			return off, true
		}
	}
	return 0, false
}

// produceKeyed writes n records "<prefix>-<i>" to topic-p with acks=all,
// keyed key(i), or "<prefix>-<i>" when key is nil, and returns them acked.
func produceKeyed(ctx context.Context, t *testing.T, c *kafka.Cluster, topic string, p int32, prefix string, n int, key func(int) string, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	if key == nil {
		key = func(i int) string { return fmt.Sprintf("%s-%d", prefix, i) }
	}
	cl := c.Client(append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks())}, opts...)...)
	defer cl.Close()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Partition: p, Key: []byte(key(i)), Value: fmt.Appendf(nil, "%s-%06d", prefix, i)}
	}
	pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(pctx, rs...).FirstErr(); err != nil {
		t.Errorf("producing %s to %s-%d: %v", prefix, topic, p, err)
		return nil
	}
	return rs
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
