package fetcher

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The catalog against kfake: it lists the followed topic under its
// upstream id and partition count, serves each partition's log while it is
// copied and while it is handed between workers (a reader goroutine reads
// throughout, under the race detector), tells Changed of the partition,
// serves a leader epoch that never goes down, and serves nothing once Run
// has closed the logs.
func TestCatalogKfake(t *testing.T) {
	c := newKfake(t, kfake.NumBrokers(2), kfake.SeedTopics(2, "t", "other"))
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(n int) {
		var rs []*kgo.Record
		for i := range n {
			rs = append(rs, &kgo.Record{Partition: int32(i % 2), Value: []byte{byte(i)}})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(200)
	md, err := kadm.NewClient(cl).Metadata(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	wantID := md.Topics["t"].ID

	var changedT0 atomic.Int64
	m, err := New(Config{
		Client: cl, DataDir: t.TempDir(), Follow: func(topic string) bool { return topic == "t" },
		MetadataInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		Changed: func(tp wire.TopicPartition) {
			if tp == (wire.TopicPartition{Topic: "t", Partition: 0}) {
				changedT0.Add(1)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(rctx) }()
	defer func() { cancel(); <-done }()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s; statuses %+v", what, m.Statuses())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	ends := func(want int64) func() bool {
		return func() bool {
			for p := range int32(2) {
				l, _, ok := m.CatalogPartition("t", p)
				if !ok || l.LogEndOffset() != want {
					return false
				}
			}
			return true
		}
	}
	waitFor("100 records per partition served", ends(100))
	ts := m.CatalogTopics()
	if len(ts) != 1 || ts[0].Name != "t" || ts[0].ID != wantID || ts[0].Partitions != 2 {
		t.Fatalf("CatalogTopics = %+v, want only t (id %x) with 2 partitions", ts, wantID)
	}
	if _, _, ok := m.CatalogPartition("other", 0); ok {
		t.Fatal("an unfollowed topic's partition is served")
	}
	if changedT0.Load() == 0 {
		t.Fatal("Changed was never called for t-0")
	}

	// A reader reads t-0 from its start throughout the hand-off.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readErr atomic.Value
	var lastEpoch atomic.Int32
	lastEpoch.Store(-1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			l, epoch, ok := m.CatalogPartition("t", 0)
			if !ok {
				readErr.CompareAndSwap(nil, "t-0 stopped being served during the hand-off")
				return
			}
			if prev := lastEpoch.Swap(epoch); epoch < prev {
				readErr.CompareAndSwap(nil, "the served epoch went down")
			}
			if _, err := l.Read(l.LogStartOffset(), 1<<20); err != nil {
				readErr.CompareAndSwap(nil, err.Error())
			}
		}
	}()
	before := status(m, "t", 0)
	to := (before.Leader + 1) % 2
	if err := c.MoveTopicPartition("t", 0, to); err != nil {
		t.Fatal(err)
	}
	produce(200)
	waitFor("200 records per partition after the hand-off", func() bool {
		_, epoch, _ := m.CatalogPartition("t", 0)
		return ends(200)() && status(m, "t", 0).Leader == to && epoch > before.LeaderEpoch
	})
	close(stop)
	wg.Wait()
	if msg := readErr.Load(); msg != nil {
		t.Fatal(msg)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil // for the deferred receive
	if _, _, ok := m.CatalogPartition("t", 0); ok {
		t.Fatal("t-0 is still served after Run closed its log")
	}
}
