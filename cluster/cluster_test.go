package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The tools' three requests, built by wire, against kfake: a Fetch reads
// the batches produced, ListOffsets EARLIEST names the log start, and
// OffsetsForLeaderEpoch the end of the current epoch (the log end); a
// broker that cannot be reached fails its queries with what and where, and
// every partition asked gets an answer. Metadata names each partition's
// leader, and says why a topic or partition it does not know has none.
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
	meta, err := LoadMetadata(ctx, cl, []string{"t", "nope"})
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := meta.Partitions("t"); !ok || n != 2 || meta.TopicError("t") != nil {
		t.Fatalf("topic t: %d partitions (listed %v), error %v; want 2, no error", n, ok, meta.TopicError("t"))
	}
	if _, ok := meta.Partitions("nope"); ok || !errors.Is(meta.TopicError("nope"), kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: listed %v, error %v; want UNKNOWN_TOPIC_OR_PARTITION", ok, meta.TopicError("nope"))
	}
	if _, err := meta.Lookup(wire.TopicPartition{Topic: "nope", Partition: 0}); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("lookup of an unknown topic: %v", err)
	}
	if _, err := meta.Lookup(wire.TopicPartition{Topic: "t", Partition: 7}); err == nil || !strings.Contains(err.Error(), "not in the cluster's metadata") {
		t.Fatalf("lookup of a partition the topic lacks: %v", err)
	}
	tp0, tp1 := wire.TopicPartition{Topic: "t", Partition: 0}, wire.TopicPartition{Topic: "t", Partition: 1}
	p0, err := meta.Lookup(tp0)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := meta.Lookup(tp1)
	if err != nil {
		t.Fatal(err)
	}

	fp, err := Fetch(ctx, cl, tp0, p0, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := ChunkOf(tp0, fp, 0)
	if err != nil {
		t.Fatal(err)
	}
	var records int
	for _, h := range ch.Headers {
		records += int(h.RecordCount)
	}
	if records != 5 || ch.Next != 5 || ch.HighWatermark != 5 {
		t.Fatalf("fetch from 0: %d records, next %d, high watermark %d; want 5, 5, 5", records, ch.Next, ch.HighWatermark)
	}
	fp, err = Fetch(ctx, cl, tp0, p0, 5, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if ch, err := ChunkOf(tp0, fp, 5); err != nil || len(ch.Headers) != 0 || ch.Next != 5 {
		t.Fatalf("fetch at the high watermark: %+v, %v; want no batches, next 5", ch, err)
	}

	queries := map[int32][]Query{
		p0.Leader: {{TP: tp0, CurrentEpoch: p0.LeaderEpoch, Epoch: p0.LeaderEpoch}, {TP: tp1, CurrentEpoch: p1.LeaderEpoch, Epoch: p1.LeaderEpoch}},
	}
	starts := LogStartOffsets(ctx, cl, queries)
	if len(starts) != 2 || starts[tp0].Err != nil || starts[tp0].Offset != 0 || starts[tp1].Err != nil || starts[tp1].Offset != 0 {
		t.Fatalf("log starts %+v, want 0 for both", starts)
	}
	ends := OffsetsForLeaderEpoch(ctx, cl, queries)
	if a := ends[tp0]; a.Err != nil || a.Epoch != p0.LeaderEpoch || a.Offset != 5 {
		t.Fatalf("%s: epoch %d ends at %d (err %v); want epoch %d ending at the log end 5", tp0, a.Epoch, a.Offset, a.Err, p0.LeaderEpoch)
	}
	if a := ends[tp1]; a.Err != nil || a.Offset != 0 {
		t.Fatalf("%s: %+v, want the empty log's end 0", tp1, a)
	}

	// A leader epoch newer than the broker's is fenced (KIP-320), and the
	// error names the request, the partition and the broker.
	ahead := map[int32][]Query{p0.Leader: {{TP: tp0, CurrentEpoch: p0.LeaderEpoch + 1, Epoch: p0.LeaderEpoch}}}
	for name, got := range map[string]map[wire.TopicPartition]Answer{
		"OffsetsForLeaderEpoch": OffsetsForLeaderEpoch(ctx, cl, ahead),
		"ListOffsets":           LogStartOffsets(ctx, cl, ahead),
	} {
		if a := got[tp0]; !errors.Is(a.Err, kerr.UnknownLeaderEpoch) || !wire.RetryAfterMetadata(a.Err) || !strings.Contains(a.Err.Error(), name+" for t-0 on broker") {
			t.Fatalf("%s with a leader epoch ahead of the broker's: %+v", name, got)
		}
	}

	unreachable := map[int32][]Query{99: {{TP: tp0, CurrentEpoch: p0.LeaderEpoch, Epoch: p0.LeaderEpoch}}}
	for name, got := range map[string]map[wire.TopicPartition]Answer{
		"OffsetsForLeaderEpoch": OffsetsForLeaderEpoch(ctx, cl, unreachable),
		"ListOffsets":           LogStartOffsets(ctx, cl, unreachable),
	} {
		if a := got[tp0]; a.Err == nil || !strings.Contains(a.Err.Error(), name+" to broker 99") {
			t.Fatalf("%s to an unknown broker: %+v", name, got)
		}
	}
}
