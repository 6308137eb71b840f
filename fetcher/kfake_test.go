package fetcher

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The driver's error paths against kfake (which cannot diverge, so no
// truncation may ever be reported): fetches answered NOT_LEADER_OR_FOLLOWER
// and FENCED_LEADER_EPOCH, epoch queries answered UNKNOWN_LEADER_EPOCH,
// and a partition moved to another broker mid-stream (a hand-off between
// worker goroutines). Every record still arrives exactly once.
func TestDriverErrorPathsKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(4, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Err: kerr.NotLeaderForPartition, Count: 5},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Err: kerr.FencedLeaderEpoch, Count: 2},
		kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetForLeaderEpoch}, Err: kerr.UnknownLeaderEpoch, Count: 3},
	)
	ctx := context.Background()
	produce := func(n int) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var rs []*kgo.Record
		for i := range n {
			rs = append(rs, &kgo.Record{Partition: int32(i % 4), Value: []byte{byte(i)}})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(2000)

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	dir := t.TempDir()
	var mu sync.Mutex
	var events []follower.Event
	m, err := New(Config{
		Client: cl, DataDir: dir, Follow: func(topic string) bool { return topic == "t" },
		MetadataInterval: 200 * time.Millisecond,
		Backoff:          follower.BackoffPolicy{Base: 10 * time.Millisecond, Max: 100 * time.Millisecond},
		Logger:           slog.New(slog.DiscardHandler),
		OnEvent: func(e follower.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(rctx) }()
	defer func() { cancel(); <-done }()

	waitEnds := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var sum int64
			ss := m.Statuses()
			for _, s := range ss {
				sum += s.LogEndOffset
			}
			if len(ss) == 4 && sum == want && m.Ready() {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("want %d records copied, statuses %+v", want, ss)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitEnds(2000)
	if err := c.MoveTopicPartition("t", 0, nextNode(m, "t", 0)); err != nil {
		t.Fatal(err)
	}
	produce(400)
	waitEnds(2400)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil // for the deferred receive

	for _, e := range events {
		if _, ok := e.(*follower.ConformanceEvent); !ok {
			t.Fatalf("kfake cannot diverge or delete, yet: %v", e)
		}
	}
	for p := range int32(4) {
		l, err := storage.Open(dir, "t", p, storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var records int64
		for off := l.LogStartOffset(); off < l.LogEndOffset(); {
			b, err := l.Read(off, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			s := batch.NewScanner(b)
			for s.Next() {
				records += int64(s.Header().RecordCount)
				off = s.Header().NextOffset()
			}
		}
		l.Close()
		if records != 600 {
			t.Fatalf("partition %d holds %d records, want 600", p, records)
		}
	}
}

// nextNode names a broker other than the current leader of topic-p.
func nextNode(m *Manager, topic string, p int32) int32 {
	for _, s := range m.Statuses() {
		if s.Topic == topic && s.Partition == p {
			return (s.Leader + 1) % 3
		}
	}
	return 0
}
