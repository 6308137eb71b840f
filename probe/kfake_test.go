package probe

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The probe against franz-go's kfake, a Kafka-compatible broker no one here
// wrote, at the version go.mod pins (v0.0.0-20260918054303-01f206a7e32c),
// through a real kgo client. Three partitions, leaders moved with
// MoveTopicPartition (which bumps the epoch, as an election does):
//
//	t-0  epoch 0 writes 0–9, epoch 1 writes 10–14, epochs 2 and 3 elected
//	     back to back, epoch 3 writes 15–19
//	t-1  epoch 0 writes 0–9, epoch 1 elected and writes nothing
//	t-2  nothing written, epoch 1 elected
//
// kfake answers the first partition's lineage, gaps, fences and offsets
// as Kafka does, and fails three checks, each for a reason its source
// states (module cache, the files named):
//
//   - diverging_epoch on t-0: 01_fetch.go, "v12: LastFetchedEpoch for
//     divergence detection - not implemented": a Fetch with a
//     LastFetchedEpoch the leader lacks gets records, never DivergingEpoch.
//   - lineage_matches_data on t-1: 23_offset_for_leader_epoch.go computes
//     answers from batch epochs and keeps no cache seeded at election
//     (Kafka's Partition.makeLeader assigns the new epoch at the log end),
//     so below an empty current epoch its binary search finds no batch of
//     a higher epoch and answers (-1, -1); Kafka answers (0, 10).
//   - lineage_matches_data on t-2: for a partition with no batches it
//     answers every epoch below the current one with (current epoch, 0),
//     an epoch above the one asked; Kafka answers (asked, 0), the "below
//     the first entry" row of endOffsetFor.
func TestKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(p int32, n int) {
		t.Helper()
		for range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	move := func(p int32) {
		t.Helper()
		next := (c.LeaderFor("t", p) + 1) % 3
		if err := c.MoveTopicPartition("t", p, next); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 10)
	move(0)
	produce(0, 5)
	move(0)
	move(0)
	produce(0, 5)
	produce(1, 10)
	move(1)
	move(2)

	rep, err := Run(ctx, Options{Cluster: KgoCluster(cl), Topics: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table(t, rep))
	want := []struct {
		lineage  string
		statuses map[string]Status
		// failed is a part of the first failed observation's answer.
		failed string
	}{
		{"0@0 1@10 3@15", map[string]Status{CheckLineage: Pass, CheckEpochGaps: Pass, CheckFencing: Pass, CheckDiverging: Fail, CheckOffsets: Pass},
			"first batch [16, 16] epoch 3, high watermark 20"},
		{"", map[string]Status{CheckLineage: Fail, CheckEpochGaps: Pass, CheckFencing: Pass, CheckDiverging: NotApplicable, CheckOffsets: Pass},
			"(-1, -1)"},
		{"", map[string]Status{CheckLineage: Fail, CheckEpochGaps: Pass, CheckFencing: Pass, CheckDiverging: NotApplicable, CheckOffsets: Pass},
			"(1, 0)"},
	}
	if len(rep.Partitions) != len(want) {
		t.Fatalf("%d partitions, want %d", len(rep.Partitions), len(want))
	}
	for i, w := range want {
		p := rep.Partitions[i]
		if p.Error != "" {
			t.Fatalf("t-%d: %s", i, p.Error)
		}
		if got := (lineage{entries: p.Lineage}).String(); got != w.lineage {
			t.Errorf("t-%d: lineage %q, want %q", i, got, w.lineage)
		}
		if got := statuses(p); !equalStatuses(got, w.statuses) {
			t.Errorf("t-%d: %v, want %v", i, got, w.statuses)
		}
		var first *Observation
		for _, c := range p.Checks {
			for j := range c.Evidence {
				if o := &c.Evidence[j]; o.Status == Fail && first == nil {
					first = o
				}
			}
		}
		if first == nil || !strings.Contains(first.Answer, w.failed) {
			t.Errorf("t-%d: first failed observation %+v, want an answer with %q", i, first, w.failed)
		}
	}
	if rep.ExitCode() != ExitFail {
		t.Errorf("exit code %d, want %d", rep.ExitCode(), ExitFail)
	}
}

// The failover scenario refuses a topic that exists and a one-broker
// cluster, and deletes the topic it created even when a step fails: kfake
// accepts AlterPartitionAssignments but never applies it
// (45_alter_partition_assignments.go), so the first move times out.
func TestFailoverKfake(t *testing.T) {
	ctx := context.Background()
	one, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(one.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := Failover(ctx, FailoverOptions{Client: cl, Topic: "t"}); err == nil || !strings.Contains(err.Error(), "topic t exists") {
		t.Errorf("existing topic: %v", err)
	}
	if _, err := Failover(ctx, FailoverOptions{Client: cl, Topic: "new"}); err == nil || !strings.Contains(err.Error(), "needs 2 or more") {
		t.Errorf("one broker: %v", err)
	}
	if one.TopicInfo("new") != nil {
		t.Error("a refused scenario created its topic")
	}

	three, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer three.Close()
	cl3, err := kgo.NewClient(kgo.SeedBrokers(three.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl3.Close()
	var log strings.Builder
	rep, err := Failover(ctx, FailoverOptions{Client: cl3, Topic: "scratch", Moves: 2, Records: 5, Timeout: 500 * time.Millisecond, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("log:\n%s\n%s", log.String(), table(t, rep))
	last := rep.Partitions[len(rep.Partitions)-1]
	if rep.ExitCode() == ExitOK || last.Error == "" {
		t.Errorf("exit %d, last step %+v: want the timed-out step reported", rep.ExitCode(), last)
	}
	if three.TopicInfo("scratch") != nil {
		t.Errorf("the scenario left its topic behind")
	}
	if !strings.Contains(log.String(), "this scenario WRITES") || !strings.Contains(log.String(), "deleting topic scratch") {
		t.Errorf("log:\n%s", log.String())
	}
}
