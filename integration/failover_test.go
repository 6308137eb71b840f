package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/storage"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SIGKILL the leader while producers write and we follow: a clean leader
// change. No truncation, no loss event, no gap, and our log end never moves
// backwards (docs/design.md: no false alarms). The last is counted, not
// sampled: the bytes and records the fetcher reports appending add up to
// exactly what our logs hold at the end, so not one byte was ever cut and
// fetched again.
func TestLeaderKillMidStream(t *testing.T) {
	ctx := context.Background()
	c := kafka.Start(t, kafka.Options{NeedsFaults: true})
	const topic = "midstream"
	c.CreateTopic(ctx, topic, [][]int32{{1, 2, 3}, {2, 3, 1}}, nil)
	s := follow(t, c, "", topic)

	before := c.WaitPartition(ctx, topic, 0, "a leader", func(s kafka.PartitionState) bool { return s.Leader >= 0 })
	var wg sync.WaitGroup
	stopProducing := make(chan struct{})
	for p := int32(0); p < 2; p++ {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stopProducing:
					return
				default:
				}
				produceTo(ctx, t, c, topic, p, "mid", 200, kgo.ProducerLinger(2*time.Millisecond))
			}
		})
	}
	s.waitLogEnd(t, topic, 0, 2000)
	c.Kill(before.Leader)
	after := c.WaitPartition(ctx, topic, 0, "a new leader", func(st kafka.PartitionState) bool {
		return st.Leader >= 0 && st.Leader != before.Leader
	})
	s.waitStatus(t, topic, 0, "fetching from the new leader", func(st fetcherStatus) bool {
		return st.LeaderEpoch == after.LeaderEpoch && st.State == "fetching" && st.LogEndOffset > 2000
	})
	close(stopProducing)
	wg.Wait()
	for p := int32(0); p < 2; p++ {
		s.waitCaughtUp(ctx, c, topic, 2)
		s.compareWithLeader(ctx, c, topic, p)
	}
	var size, end int64
	for _, st := range s.m.Statuses() {
		size += st.SizeBytes
		end += st.LogEndOffset
	}
	// Records: the idempotent producer writes no control batches, so a
	// partition's records are its offsets.
	if b, r := s.appendedBytes.Load(), s.appendedRecords.Load(); b != size || r != end {
		t.Fatalf("the fetcher appended %d bytes and %d records, our logs hold %d bytes and end at %d offsets in all: something was cut and fetched again", b, r, size, end)
	}
	if evs := s.Events(); len(evs) != 0 {
		t.Fatalf("a clean leader change reported events: %v", evs)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "lost+found")); !os.IsNotExist(err) {
		t.Fatalf("lost+found exists after a clean leader change (%v)", err)
	}
}

// The unclean election of docs/testing.md §6.8 with kfollower attached: it
// holds committed records of A that B never had; B is elected uncleanly.
// kfollower needs one OffsetsForLeaderEpoch round trip, truncates to exactly
// B's end of the shared epoch, keeps exactly the lost records in lost+found,
// reports them, then copies B's new records.
func TestUncleanElectionLoss(t *testing.T) {
	ctx := context.Background()
	c := kafka.Start(t, kafka.Options{Layout: kafka.Isolated, NeedsFaults: true})
	const topic = "unclean"
	const a, b = int32(1), int32(2)
	const n1, n2, n3 = 300, 120, 200
	c.CreateTopic(ctx, topic, [][]int32{{a, b}}, map[string]string{
		"min.insync.replicas": "1", "unclean.leader.election.enable": "false",
	})
	s := follow(t, c, "", topic)
	produceTo(ctx, t, c, topic, 0, "n1", n1)
	s.waitLogEnd(t, topic, 0, n1)

	c.Pause(b)
	c.WaitPartition(ctx, topic, 0, "ISR [A]", func(st kafka.PartitionState) bool { return kafka.SameSet(st.ISR, []int32{a}) })
	lost := produceTo(ctx, t, c, topic, 0, "n2", n2)
	s.waitLogEnd(t, topic, 0, n1+n2) // committed (ISR [A], min ISR 1): we copy it

	c.Kill(a)
	c.WaitPartition(ctx, topic, 0, "no leader", func(st kafka.PartitionState) bool { return st.Leader == -1 })
	c.Resume(b)
	elected := c.ElectUnclean(ctx, topic, 0)
	if elected.Leader != b {
		t.Fatalf("unclean election chose %v, want leader %d", elected, b)
	}
	s.waitStatus(t, topic, 0, "reconciled with B", func(st fetcherStatus) bool {
		return st.LeaderEpoch == elected.LeaderEpoch && st.State == "fetching"
	})
	newer := produceTo(ctx, t, c, topic, 0, "n3", n3)
	if newer[0].Offset != n1 {
		t.Fatalf("B wrote its first new record at %d, want %d", newer[0].Offset, n1)
	}
	s.waitCaughtUp(ctx, c, topic, 1)
	s.compareWithLeader(ctx, c, topic, 0)

	evs := s.Events()
	if len(evs) != 1 {
		t.Fatalf("want exactly one event, got %v", evs)
	}
	ev, ok := evs[0].(*follower.TruncationEvent)
	if !ok {
		t.Fatalf("want a truncation event, got %v", evs[0])
	}
	if ev.From != n1 || ev.To != n1+n2 || ev.Records != n2 || ev.Roundtrips != 1 ||
		ev.NewLeaderEpoch != elected.LeaderEpoch || ev.Cause != follower.CauseEpochReply || ev.HighestHighWatermark != n1+n2 {
		t.Fatalf("truncation event %+v; want offsets [%d,%d), %d records, 1 roundtrip, new epoch %d, highest HW %d",
			ev, n1, n1+n2, n2, elected.LeaderEpoch, n1+n2)
	}
	checkLostFound(t, s.dir, topic, lost)
}

// checkLostFound asserts lost+found holds exactly the acknowledged records
// want, in one saved range, at their offsets.
func checkLostFound(t *testing.T, dataDir, topic string, want []*kgo.Record) {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(storage.LostFoundDir(dataDir, topic, 0), "*"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("want one saved range in lost+found, got %v (%v)", dirs, err)
	}
	var meta storage.Lost
	b, err := os.ReadFile(filepath.Join(dirs[0], "lost.json"))
	if err == nil {
		err = json.Unmarshal(b, &meta)
	}
	if err != nil {
		t.Fatalf("reading lost.json: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(dirs[0], meta.Segment))
	if err != nil {
		t.Fatalf("reading the saved segment: %v", err)
	}
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.RecordBatches = raw
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: topic}, &rp, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		t.Fatalf("decoding the saved segment: %v", fp.Err)
	}
	if int64(len(want)) != meta.Records {
		t.Fatalf("lost.json counts %d records, want %d", meta.Records, len(want))
	}
	checkRecords(t, fp.Records, want)
}

func checkRecords(t *testing.T, got, want []*kgo.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Offset != want[i].Offset || string(got[i].Value) != string(want[i].Value) || string(got[i].Key) != string(want[i].Key) {
			t.Fatalf("record %d: got offset %d %q=%q, want offset %d %q=%q", i,
				got[i].Offset, got[i].Key, got[i].Value, want[i].Offset, want[i].Key, want[i].Value)
		}
	}
}
