package kafka_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A clean leader change: SIGKILL the leader of an RF-3 partition; a new
// leader takes over at a higher epoch and no acknowledged record is lost.
func TestLeaderKillKeepsAckedRecords(t *testing.T) {
	ctx := context.Background()
	c := kafka.Start(t, kafka.Options{NeedsFaults: true})
	const topic = "leader-kill"
	c.CreateTopic(ctx, topic, [][]int32{{1, 2, 3}}, nil)
	before := c.WaitPartition(ctx, topic, 0, "a leader", func(s kafka.PartitionState) bool { return s.Leader >= 0 })

	acked := produce(ctx, t, c, topic, "before", 10_000)
	c.Kill(before.Leader)
	after := c.WaitPartition(ctx, topic, 0, "a new leader at a higher epoch", func(s kafka.PartitionState) bool {
		return s.Leader >= 0 && s.Leader != before.Leader && s.LeaderEpoch > before.LeaderEpoch
	})
	t.Logf("leader %d epoch %d -> leader %d epoch %d", before.Leader, before.LeaderEpoch, after.Leader, after.LeaderEpoch)
	acked = append(acked, produce(ctx, t, c, topic, "after", 1_000)...)

	got := consume(ctx, t, c, topic, len(acked))
	checkSame(t, got, acked)
	for i, r := range got {
		if r.Offset != int64(i) {
			t.Fatalf("record %d has offset %d: a gap", i, r.Offset)
		}
		want := before.LeaderEpoch
		if i >= 10_000 {
			want = after.LeaderEpoch
		}
		if r.LeaderEpoch != want {
			t.Fatalf("record at offset %d carries leader epoch %d, want %d", r.Offset, r.LeaderEpoch, want)
		}
	}
}

// The divergence recipe of docs/testing.md §6.8: the old leader A holds
// committed records that B lacks; B is elected uncleanly and takes new
// records at the same offsets; A restarts, truncates to the divergence point
// and copies B's records.
func TestUncleanElectionDivergence(t *testing.T) {
	ctx := context.Background()
	c := kafka.Start(t, kafka.Options{Layout: kafka.Isolated, NeedsFaults: true})
	const topic = "unclean"
	const a, b = int32(1), int32(2)
	const n1, n2, n3 = 100, 50, 70
	c.CreateTopic(ctx, topic, [][]int32{{a, b}}, map[string]string{
		"min.insync.replicas":            "1",
		"unclean.leader.election.enable": "false", // the test chooses the moment
	})
	s0 := c.WaitPartition(ctx, topic, 0, "leader A", func(s kafka.PartitionState) bool { return s.Leader == a })
	first := produce(ctx, t, c, topic, "n1", n1)

	// B stops fetching; A alone in the ISR still commits (min ISR 1).
	c.Pause(b)
	s1 := c.WaitPartition(ctx, topic, 0, "ISR [A]", func(s kafka.PartitionState) bool { return kafka.SameSet(s.ISR, []int32{a}) })
	lost := produce(ctx, t, c, topic, "n2", n2)
	if lost[0].Offset != n1 || lost[n2-1].Offset != n1+n2-1 {
		t.Fatalf("records only A holds are at %d..%d, want %d..%d", lost[0].Offset, lost[n2-1].Offset, n1, n1+n2-1)
	}
	checkEnd(ctx, t, c, topic, n1+n2)

	// A dies holding them; B comes back and is elected uncleanly.
	c.Kill(a)
	c.WaitPartition(ctx, topic, 0, "no leader", func(s kafka.PartitionState) bool { return s.Leader == -1 })
	c.Resume(b)
	s2 := c.ElectUnclean(ctx, topic, 0)
	if s2.Leader != b || s2.LeaderEpoch <= s1.LeaderEpoch {
		t.Fatalf("after the unclean election: %v; want leader %d above epoch %d", s2, b, s1.LeaderEpoch)
	}
	t.Logf("epochs: created %d, ISR [A] %d, unclean leader B %d", s0.LeaderEpoch, s1.LeaderEpoch, s2.LeaderEpoch)
	checkEnd(ctx, t, c, topic, n1)
	newer := produce(ctx, t, c, topic, "n3", n3)
	if newer[0].Offset != n1 {
		t.Fatalf("B's first new record is at offset %d, want %d (where A's lost records began)", newer[0].Offset, n1)
	}

	// A restarts on its old log, truncates and follows B back into the ISR.
	c.Restart(ctx, a)
	c.WaitPartition(ctx, topic, 0, "A back in the ISR", func(s kafka.PartitionState) bool { return kafka.SameSet(s.ISR, []int32{a, b}) })
	want := append(append([]*kgo.Record{}, first...), newer...)
	got := consume(ctx, t, c, topic, n1+n3)
	checkSame(t, got, want)
	for _, r := range got {
		wantEpoch := s0.LeaderEpoch
		if r.Offset >= n1 {
			wantEpoch = s2.LeaderEpoch
		}
		if r.LeaderEpoch != wantEpoch {
			t.Fatalf("offset %d carries epoch %d, want %d", r.Offset, r.LeaderEpoch, wantEpoch)
		}
	}

	// A's own epoch history lost every epoch beyond offset n1.
	es := readEpochCheckpoint(t, checkpointPath(c.Node(a), topic))
	last := es[len(es)-1]
	if last.epoch != s2.LeaderEpoch || last.start != n1 {
		t.Fatalf("A's leader-epoch-checkpoint %s: want it to end with (%d,%d)", describe(es), s2.LeaderEpoch, n1)
	}
	for _, e := range es[:len(es)-1] {
		if e.start > n1 || e.epoch >= s2.LeaderEpoch {
			t.Fatalf("A's leader-epoch-checkpoint %s keeps an epoch beyond the divergence at %d", describe(es), n1)
		}
	}

	// And A serves exactly that log once it leads again.
	c.ElectPreferred(ctx, topic, 0)
	c.WaitPartition(ctx, topic, 0, "leader A", func(s kafka.PartitionState) bool { return s.Leader == a })
	checkEnd(ctx, t, c, topic, n1+n3)
	checkSame(t, consume(ctx, t, c, topic, n1+n3), want)
}

// checkEnd asserts the leader's end offset (its high watermark: every
// record here was produced with acks=all).
func checkEnd(ctx context.Context, t *testing.T, c *kafka.Cluster, topic string, want int64) {
	t.Helper()
	hw, err := c.HighWatermark(ctx, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if hw != want {
		t.Fatalf("end offset of %s-0 is %d, want %d", topic, hw, want)
	}
}

// CreateTopic above 5,000 partitions, read back whole by Topic: the
// controller takes at most 10,000 records in one atomic batch, so the
// topic is created with 5,000 and grown by CreatePartitions; and a
// DescribeTopicPartitions answer holds 2,000 partitions, so Topic pages
// three times. Every partition must be there, on the replica assigned.
func TestCreateTopicManyPartitions(t *testing.T) {
	ctx := context.Background()
	c := kafka.Start(t, kafka.Options{})
	const topic, partitions = "many", 5500
	assign := make([][]int32, partitions)
	for p := range assign {
		assign[p] = []int32{1 + int32(p%3)}
	}
	c.CreateTopic(ctx, topic, assign, nil)
	states, err := c.Topic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != partitions {
		t.Fatalf("%s has %d partitions, want %d", topic, len(states), partitions)
	}
	for p, s := range states {
		if want := assign[p]; !slices.Equal(s.Replicas, want) || s.Leader != want[0] {
			t.Fatalf("partition %d: %v, want replicas and leader %v", p, s, want)
		}
	}
	s := c.WaitPartition(ctx, topic, partitions-1, "a leader", func(s kafka.PartitionState) bool { return s.Leader >= 0 })
	if want := assign[partitions-1][0]; s.Leader != want {
		t.Fatalf("partition %d: %v, want leader %d", partitions-1, s, want)
	}
}

// Every leader moves without a broker stopping: the replicas reordered by
// a reassignment of the same set, then one preferred election of every
// partition, each at the next leader epoch.
func TestElectPreferredAll(t *testing.T) {
	ctx := context.Background()
	c := kafka.Start(t, kafka.Options{})
	const topic = "moved"
	assign := [][]int32{{1, 2, 3}, {1, 3, 2}, {2, 3, 1}, {3, 1, 2}}
	c.CreateTopic(ctx, topic, assign, nil)
	before, err := c.Topic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	reordered := map[int32][]int32{}
	var all []int32
	for p, rs := range assign {
		reordered[int32(p)] = []int32{rs[1], rs[0], rs[2]}
		all = append(all, int32(p))
	}
	c.Reassign(ctx, topic, reordered)
	c.WaitReassigned(ctx, topic, 20*time.Millisecond)
	c.WaitTopic(ctx, topic, len(assign), "its replicas reordered, its leader unchanged", func(p int32, s kafka.PartitionState) bool {
		return slices.Equal(s.Replicas, reordered[p]) && s.Leader == assign[p][0]
	})
	c.ElectPreferredAll(ctx, topic, all)
	after := c.WaitTopic(ctx, topic, len(assign), "its new first replica as leader", func(p int32, s kafka.PartitionState) bool {
		return s.Leader == reordered[p][0]
	})
	for p, s := range after {
		if s.LeaderEpoch != before[p].LeaderEpoch+1 {
			t.Fatalf("partition %d: %v after the election, was %v: want the next leader epoch", p, s, before[p])
		}
	}
}
