package fetcher

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkFetchAppend copies 4 partitions from one fake broker that
// answers every Fetch after a fixed delay (the network and the leader's
// read) with 1 MiB of 16 KiB batches a partition, into real logs under
// --flush os: the worker's loop as it runs, without Kafka. With the Fetch
// in the air while the last response is appended, a round costs the
// larger of the delay and the appends rather than their sum.
func BenchmarkFetchAppend(b *testing.B) {
	for _, delay := range []time.Duration{2 * time.Millisecond, 5 * time.Millisecond} {
		b.Run(fmt.Sprintf("delay=%v", delay), func(b *testing.B) { benchFetchAppend(b, delay) })
	}
}

func benchFetchAppend(b *testing.B, delay time.Duration) {
	const partitions, batches, value = 4, 64, 16 << 10
	var run []byte
	for i := range batches {
		run = append(run, batch.Build(batch.Spec{BaseOffset: int64(i), Records: 1, Value: make([]byte, value)})...)
	}
	end := int64(b.N) * batches // each partition's log end: b.N responses
	br := &delayBroker{delay: delay, run: run, end: end, partitions: partitions}
	var appended atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	obs := &countObserver{f: func(records int64) {
		if appended.Add(records) == end*partitions {
			once.Do(func() { close(done) })
		}
	}}
	cfg := Config{
		DataDir: b.TempDir(), Follow: func(topic string) bool { return topic == "t" },
		MetadataInterval: time.Hour,
		Backoff:          follower.BackoffPolicy{Base: 10 * time.Millisecond, Max: 100 * time.Millisecond},
		Limits:           wire.FetchLimits{MaxWaitMillis: 0, MinBytes: 1, MaxBytes: 64 << 20, PartitionMaxBytes: 8 << 20},
		Logger:           slog.New(slog.DiscardHandler),
		Observers:        []Observer{obs},
		Storage:          storage.Options{Flush: storage.FlushOS},
	}
	m := newManager(cfg, br, func(int32) requester { return br })
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	b.SetBytes(int64(len(run)) * partitions)
	b.ResetTimer()
	go func() { runDone <- m.Run(ctx) }()
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		b.Error("timed out")
	}
	b.StopTimer()
	cancel()
	<-runDone
}

type countObserver struct {
	NopObserver
	f func(records int64)
}

func (o *countObserver) Appended(_ int32, _ wire.TopicPartition, _, records int64) { o.f(records) }

// delayBroker is broker 1, leading partitions of topic t that each hold
// end one-record batches; a Fetch is answered after delay with run (its
// base offsets moved to the fetch offset) for every partition not yet
// copied.
type delayBroker struct {
	delay      time.Duration
	run        []byte
	end        int64
	partitions int32
}

func (b *delayBroker) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		return brokerOneLeads(b.partitions), nil
	case *kmsg.FetchRequest:
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(b.delay):
		}
		resp := kmsg.NewPtrFetchResponse()
		for _, rt := range r.Topics {
			t := kmsg.NewFetchResponseTopic()
			t.Topic, t.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				p := kmsg.NewFetchResponseTopicPartition()
				p.Partition, p.LogStartOffset, p.HighWatermark = rp.Partition, 0, b.end
				if rp.FetchOffset < b.end {
					// A fresh copy, as a client reads each response into
					// a buffer of its own; the base offset is outside the
					// CRC.
					p.RecordBatches = append([]byte(nil), b.run...)
					for pos := 0; pos < len(p.RecordBatches); {
						base := binary.BigEndian.Uint64(p.RecordBatches[pos:])
						binary.BigEndian.PutUint64(p.RecordBatches[pos:], base+uint64(rp.FetchOffset))
						pos += 12 + int(binary.BigEndian.Uint32(p.RecordBatches[pos+8:]))
					}
				}
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil
	}
	return nil, fmt.Errorf("delayBroker: no answer for %T", req)
}
