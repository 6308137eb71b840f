package kafka_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kfollower/kfollower/integration/kafka"
)

// An extra broker starts empty, takes a copy of a partition by
// reassignment (proved by electing it leader and reading every record back
// from it), and gives the partition back: the reassignment away from it
// moves leadership home and its copy is deleted.
func TestReassignOntoExtraBroker(t *testing.T) {
	ctx := context.Background()
	c := kafka.Start(t, kafka.Options{ExtraBrokers: 1, NeedsFaults: true,
		// The deferred delete of a removed replica, 60 s by default, and
		// LogManager's first run of its delete task after start-up, 30 s
		// by default (it then runs as deletes fall due): the delete
		// waited out the second in 25 of this test's 35 s. Kafka's own
		// tests of deletion set both (DeleteTopicTest).
		Config: map[string]string{"log.segment.delete.delay.ms": "500", "log.initial.task.delay.ms": "100"}})
	var ids []int32
	for _, n := range c.Brokers() {
		ids = append(ids, n.ID)
	}
	if !slices.Equal(ids, []int32{1, 2, 3, 4}) {
		t.Fatalf("brokers %v, want 1-4", ids)
	}
	const topic, extra = "reassign", int32(4)
	c.CreateTopic(ctx, topic, [][]int32{{1}}, nil)
	if _, err := os.Stat(filepath.Join(c.Node(extra).DataDir(), topic+"-0")); !os.IsNotExist(err) {
		t.Fatalf("the extra broker holds %s-0 before any reassignment (stat: %v)", topic, err)
	}
	acked := produce(ctx, t, c, topic, "r", 2000)

	c.Reassign(ctx, topic, map[int32][]int32{0: {extra, 1}})
	c.WaitReassigned(ctx, topic, 20*time.Millisecond)
	// Done means caught up: broker 4 holds the leader's bytes now, not
	// only once the brokers' metadata says so.
	want, err := c.Node(1).LogBytes(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Node(extra).LogBytes(topic, 0); err != nil || got != want || want == 0 {
		t.Fatalf("once the reassignment ended broker 4 holds %d bytes of %s-0 (%v), the leader %d", got, topic, err, want)
	}
	c.WaitPartition(ctx, topic, 0, "replicas and ISR {4,1}", func(s kafka.PartitionState) bool {
		return slices.Equal(s.Replicas, []int32{extra, 1}) && kafka.SameSet(s.ISR, []int32{extra, 1})
	})
	if s := c.ElectPreferred(ctx, topic, 0); s.Leader != extra {
		t.Fatalf("after the preferred election the leader is %d, want %d", s.Leader, extra)
	}
	checkSame(t, consume(ctx, t, c, topic, len(acked)), acked)

	c.Reassign(ctx, topic, map[int32][]int32{0: {1}})
	c.WaitReassigned(ctx, topic, 20*time.Millisecond)
	c.WaitPartition(ctx, topic, 0, "replicas {1}, led by 1", func(s kafka.PartitionState) bool {
		return slices.Equal(s.Replicas, []int32{1}) && s.Leader == 1
	})
	c.WaitPartitionGone(ctx, extra, topic, 0)
	checkSame(t, consume(ctx, t, c, topic, len(acked)), acked)
}
