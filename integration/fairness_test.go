package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFetchFairnessKafka copies a topic whose partition 0 has a large
// backlog (300 batches) and partitions 1-3 a small one (10 batches each),
// all led by one broker, with limits that let one batch into each Fetch
// response. Kafka fills a response in the order of its partitions and
// stops once the response's limit is reached, serving the first batch of
// the first partition with data whatever its size (KIP-74,
// ReplicaManager.readFromLog's minOneMessage), so a fixed order that puts
// partition 0 ahead of another would serve that one nothing until
// partition 0 is copied. The order rotates on one side or the other:
// in a KIP-227 session the broker moves each partition it returned
// records for to the end of the session
// (FetchSession.IncrementalFetchContext's PartitionIterator); in full,
// sessionless fetches the worker does it (fetchOrder, as Kafka's replica
// fetcher with partitionStates.updateAndMoveToEnd). Either way the small
// partitions must be copied while partition 0 still has most of its
// backlog ahead of it. The fetcher's kfake test (TestFetchFairness)
// checks the worker's own order; this one checks what a user sees from a
// real broker, both ways.
func TestFetchFairnessKafka(t *testing.T) {
	ctx := context.Background()
	c := kafka.Start(t, kafka.Options{})
	const topic = "fairness"
	c.CreateTopic(ctx, topic, [][]int32{{1}, {1}, {1}, {1}}, nil)
	want := map[int32]int64{0: 300, 1: 10, 2: 10, 3: 10}
	// One record per produce request: one batch each, so that every
	// response carries one record.
	cl := c.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	defer cl.Close()
	for p, n := range want {
		for i := range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "p%d-%04d", p, i)}).FirstErr(); err != nil {
				t.Fatalf("producing to %s-%d: %v", topic, p, err)
			}
		}
	}
	for _, sessions := range []bool{true, false} {
		name := "sessions"
		if !sessions {
			name = "full-fetches"
		}
		t.Run(name, func(t *testing.T) {
			obs := &fairCount{want: want, got: map[int32]int64{}, smallDone: make(chan struct{}), allDone: make(chan struct{})}
			// Closed after the fetcher stops (cleanups run last first).
			fcl := c.Client(kgo.MetadataMinAge(100 * time.Millisecond))
			t.Cleanup(fcl.Close)
			followWith(t, fetcher.Config{
				Client:           fcl,
				DirectFetch:      testDirectFetch(),
				NoFetchSessions:  !sessions,
				Follow:           func(name string) bool { return name == topic },
				MetadataInterval: time.Second,
				Backoff:          follower.BackoffPolicy{Base: 50 * time.Millisecond, Max: time.Second},
				// One batch a response: Kafka serves the first batch of
				// the first partition with data whatever the limits.
				Limits:    wire.FetchLimits{MaxWaitMillis: 100, MinBytes: 1, MaxBytes: 1, PartitionMaxBytes: 1},
				Observers: []fetcher.Observer{obs},
			})
			for _, w := range []struct {
				what string
				done chan struct{}
			}{{"partitions 1-3", obs.smallDone}, {"every partition", obs.allDone}} {
				select {
				case <-w.done:
				case <-time.After(2 * time.Minute):
					t.Fatalf("%s not copied in 2 minutes; copied so far %v of %v", w.what, obs.copied(), want)
				}
			}
			// Partitions 1-3 take 30 responses. Served in turn with them,
			// partition 0 gets about one in four; in a fixed order behind
			// it they would get none until it had all 300.
			t.Logf("partition 0 had %d of its %d records copied when partitions 1-3 had theirs", obs.p0AtSmallDone, want[0])
			if obs.p0AtSmallDone > want[0]/2 {
				t.Fatalf("partition 0 had %d of its %d records copied when partitions 1-3 were done; want them served in turn with it (at most %d)",
					obs.p0AtSmallDone, want[0], want[0]/2)
			}
		})
	}
}

// fairCount counts the records appended per partition and notes how many
// of partition 0's were in when partitions 1-3 were complete. It is told
// from the worker's goroutine as each append is done, so the figure is
// exact, not a sample.
type fairCount struct {
	fetcher.NopObserver
	mu                 sync.Mutex
	want, got          map[int32]int64
	p0AtSmallDone      int64
	smallDone, allDone chan struct{}
	small, all         bool
}

func (o *fairCount) Appended(_ int32, tp wire.TopicPartition, _, records int64) {
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

func (o *fairCount) copied() map[int32]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[int32]int64, len(o.got))
	for k, v := range o.got {
		out[k] = v
	}
	return out
}
