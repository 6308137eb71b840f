package audit

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// audit's three requests, built by wire, against kfake: a Fetch reads the
// batches produced, ListOffsets EARLIEST names the log start, and
// OffsetsForLeaderEpoch the end of the current epoch (the log end); a
// broker that cannot be reached fails its queries with what and where, and
// every partition asked gets an answer.
func TestClusterRequests(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	meta, err := loadMetadata(ctx, cl, []string{"t"})
	if err != nil {
		t.Fatal(err)
	}
	tp0, tp1 := topicPartition{Topic: "t", Partition: 0}, topicPartition{Topic: "t", Partition: 1}
	pm0, err := meta.lookup(tp0)
	if err != nil {
		t.Fatal(err)
	}
	pm1, err := meta.lookup(tp1)
	if err != nil {
		t.Fatal(err)
	}

	p, err := fetchOnce(ctx, cl, tp0, pm0, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := chunkOf(tp0, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	var records int
	for _, h := range ch.headers {
		records += int(h.RecordCount)
	}
	if records != 5 || ch.next != 5 || ch.highWatermark != 5 || ch.logStart != 0 {
		t.Fatalf("fetch from 0: %d records, next %d, high watermark %d, log start %d; want 5, 5, 5, 0", records, ch.next, ch.highWatermark, ch.logStart)
	}

	queries := map[int32][]epochQuery{
		pm0.leader: {{tp: tp0, currentEpoch: pm0.leaderEpoch, epoch: pm0.leaderEpoch}, {tp: tp1, currentEpoch: pm1.leaderEpoch, epoch: pm1.leaderEpoch}},
	}
	starts := listStartOffsets(ctx, cl, queries)
	if len(starts) != 2 || starts[tp0].err != nil || starts[tp0].endOffset != 0 || starts[tp1].err != nil || starts[tp1].endOffset != 0 {
		t.Fatalf("log starts %+v, want 0 for both", starts)
	}
	ends := offsetsForLeaderEpoch(ctx, cl, queries)
	if a := ends[tp0]; a.err != nil || a.epoch != pm0.leaderEpoch || a.endOffset != 5 {
		t.Fatalf("%s: epoch %d ends at %d (err %v); want epoch %d ending at the log end 5", tp0, a.epoch, a.endOffset, a.err, pm0.leaderEpoch)
	}
	if a := ends[tp1]; a.err != nil || a.endOffset != 0 {
		t.Fatalf("%s: %+v, want the empty log's end 0", tp1, a)
	}

	unreachable := map[int32][]epochQuery{99: {{tp: tp0, currentEpoch: pm0.leaderEpoch, epoch: pm0.leaderEpoch}}}
	for name, got := range map[string]map[topicPartition]epochAnswer{
		"OffsetsForLeaderEpoch": offsetsForLeaderEpoch(ctx, cl, unreachable),
		"ListOffsets":           listStartOffsets(ctx, cl, unreachable),
	} {
		if a := got[tp0]; a.err == nil || !strings.Contains(a.err.Error(), name+" to broker 99") {
			t.Fatalf("%s to an unknown broker: %+v", name, got)
		}
	}
}
