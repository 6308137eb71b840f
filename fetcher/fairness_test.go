package fetcher

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchFairness copies a topic whose partition 0 has a large backlog
// (200 batches) and partitions 1-3 a small one (5 batches each), from one
// broker, with limits that let one batch into each response: the broker
// fills a response in request order (fillBroker, as Kafka), so a fixed
// order would serve partition 0 alone until it is copied. Rotated (a
// partition served moves to the end), the small partitions are copied
// while partition 0 still has most of its backlog to go.
func TestFetchFairness(t *testing.T) {
	want := map[int32]int64{0: 200, 1: 5, 2: 5, 3: 5}
	b := &fillBroker{end: want}
	obs := &fairObserver{want: want, got: map[int32]int64{}, smallDone: make(chan struct{}), allDone: make(chan struct{})}
	cfg := Config{
		DataDir: t.TempDir(), Follow: func(topic string) bool { return topic == "t" },
		MetadataInterval: time.Hour,
		Backoff:          follower.BackoffPolicy{Base: 10 * time.Millisecond, Max: 100 * time.Millisecond},
		// One batch a response: the first batch is always served (KIP-74).
		Limits:    wire.FetchLimits{MaxWaitMillis: 0, MinBytes: 1, MaxBytes: 1, PartitionMaxBytes: 1},
		Logger:    slog.New(slog.DiscardHandler),
		Observers: []Observer{obs},
	}
	m := newManager(cfg, b, func(int32) requester { return b })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for _, ch := range []chan struct{}{obs.smallDone, obs.allDone} {
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("timed out; copied so far %v of %v", obs.copied(), want)
		}
	}
	// Partitions 1-3 take 15 responses; rotated, partition 0 gets about
	// one in four, so it is nowhere near its 200 when they are done (in a
	// fixed order it would have all 200).
	if obs.p0AtSmallDone > 10 {
		t.Fatalf("partition 0 had %d of its 200 records copied when partitions 1-3 were done; want them served in turn with it (at most 10)", obs.p0AtSmallDone)
	}
	// And the order itself: the partition served in one response comes
	// last in the next Fetch that names it (the worker has one Fetch in
	// the air, sent after the answer before it was taken in). Served in
	// a random order the counts above could pass by chance.
	b.mu.Lock()
	defer b.mu.Unlock()
	checked := 0
	for i := 0; i+1 < len(b.orders); i++ {
		served, next := b.served[i], b.orders[i+1]
		if served < 0 || len(next) < 2 || !slices.Contains(next, served) {
			continue
		}
		checked++
		if next[len(next)-1] != served {
			t.Fatalf("Fetch %d served partition %d, and Fetch %d names the partitions in the order %v; want %d last", i, served, i+1, next, served)
		}
	}
	if checked < 10 {
		t.Fatalf("only %d Fetches followed one that served a partition; want the order checked on at least 10", checked)
	}
}

// fillBroker is broker 1, leading topic t's partitions at epoch 0, each
// holding end[p] one-record batches. It fills a Fetch response as Kafka
// does: in request order, every partition answered, the first batch
// always served (KIP-74) and none after MaxBytes is reached. Its data
// appears with the first Fetch that carries every partition (before, it
// answers each empty at high watermark 0), so the count starts with all
// of them in the rotation whatever order the worker adopted them in.
type fillBroker struct {
	end     map[int32]int64
	mu      sync.Mutex
	started bool
	// orders lists the partitions of every Fetch since the data
	// appeared, in request order; served, the partition each answer
	// gave records to (-1: none).
	orders [][]int32
	served []int32
}

func (b *fillBroker) Request(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		return brokerOneLeads(int32(len(b.end))), nil
	case *kmsg.FetchRequest:
		b.mu.Lock()
		defer b.mu.Unlock()
		n := 0
		for _, rt := range r.Topics {
			n += len(rt.Partitions)
		}
		b.started = b.started || n == len(b.end)
		resp := kmsg.NewPtrFetchResponse()
		var used int
		var order []int32
		served := int32(-1)
		for _, rt := range r.Topics {
			t := kmsg.NewFetchResponseTopic()
			t.Topic, t.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				p := kmsg.NewFetchResponseTopicPartition()
				p.Partition, p.LogStartOffset = rp.Partition, 0
				if !b.started {
					t.Partitions = append(t.Partitions, p) // high watermark 0
					continue
				}
				p.HighWatermark = b.end[rp.Partition]
				order = append(order, rp.Partition)
				if rp.FetchOffset < b.end[rp.Partition] && (used == 0 || used < int(r.MaxBytes)) {
					p.RecordBatches = batch.Build(batch.Spec{BaseOffset: rp.FetchOffset, Epoch: 0, Records: 1})
					used += len(p.RecordBatches)
					served = rp.Partition // one batch a response: used passes MaxBytes
				}
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		if b.started {
			b.orders, b.served = append(b.orders, order), append(b.served, served)
		}
		return resp, nil
	}
	return nil, fmt.Errorf("fillBroker: no answer for %T", req)
}

// fairObserver counts the records appended per partition and notes how
// many of partition 0's were in when partitions 1-3 were complete. It is
// told from the worker's goroutine as each append is done, so the figure
// is exact, not a sample.
type fairObserver struct {
	NopObserver
	mu                 sync.Mutex
	want, got          map[int32]int64
	p0AtSmallDone      int64
	smallDone, allDone chan struct{}
	small, all         bool
}

func (o *fairObserver) Appended(_ int32, tp wire.TopicPartition, _, records int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got[tp.Partition] += records
	if !o.small && o.got[1] == o.want[1] && o.got[2] == o.want[2] && o.got[3] == o.want[3] {
		o.small, o.p0AtSmallDone = true, o.got[0]
		close(o.smallDone)
	}
	if !o.all && o.small && o.got[0] == o.want[0] {
		o.all = true
		close(o.allDone)
	}
}

func (o *fairObserver) copied() map[int32]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[int32]int64{}
	for k, v := range o.got {
		out[k] = v
	}
	return out
}
