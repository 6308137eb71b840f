package fetcher

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchOverlapsAppend runs a worker's real loop (Manager.Run) against
// a broker that serves one batch a Fetch, over a log whose every append
// waits until the broker has been asked for the offset after it: the next
// Fetch must be in the air while the response before it is appended. A
// serial worker (send only after the appends) never gets there, and every
// append would wait out its deadline. The broker also checks that the
// worker never has two requests in the air.
func TestFetchOverlapsAppend(t *testing.T) {
	const end = 30
	b := &overlapBroker{end: end, asked: map[int64]chan struct{}{}}
	var mu sync.Mutex
	var waited, overlapped int
	var missed bool // one wait ran out: the others do not wait
	done := make(chan struct{})
	cfg := Config{
		DataDir: t.TempDir(), Follow: func(topic string) bool { return topic == "t" },
		MetadataInterval: time.Hour,
		Backoff:          follower.BackoffPolicy{Base: 10 * time.Millisecond, Max: 100 * time.Millisecond},
		Limits:           wire.FetchLimits{MaxWaitMillis: 0, MinBytes: 1, MaxBytes: 1, PartitionMaxBytes: 1},
		Logger:           slog.New(slog.DiscardHandler),
	}
	m := newManager(cfg, b, func(int32) requester { return b })
	m.openLog = func(dataDir, topic string, partition int32, opts storage.Options) (partLog, error) {
		l, err := storage.Open(dataDir, topic, partition, opts)
		if err != nil {
			return nil, err
		}
		return &overlapLog{partLog: l, before: func(raw []byte) {
			h, err := batch.ParseHeader(raw)
			if err != nil {
				t.Errorf("appending a batch wire framed: %v", err)
				return
			}
			// Waiting for the Fetch ahead; bounded, so that a serial
			// worker fails the test rather than hang it.
			mu.Lock()
			wait := 10 * time.Second
			if missed {
				wait = 0
			}
			mu.Unlock()
			ok := true
			select {
			case <-b.askedFor(h.NextOffset()):
			case <-time.After(wait):
				ok = false
			}
			mu.Lock()
			defer mu.Unlock()
			if ok {
				overlapped++
			} else {
				missed = true
			}
			if waited++; waited == end {
				close(done)
			}
		}}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- m.Run(ctx) }()
	defer func() { cancel(); <-runDone }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("timed out before every batch was appended")
	}
	mu.Lock()
	defer mu.Unlock()
	if overlapped != end {
		t.Errorf("%d of %d appends had the next Fetch in the air while they ran; want all", overlapped, end)
	}
	if n := b.maxInAir(); n != 1 {
		t.Errorf("the worker had up to %d requests in the air at once; want 1", n)
	}
}

// overlapLog calls before ahead of every append.
type overlapLog struct {
	partLog
	before func(raw []byte)
}

func (l *overlapLog) Append(raw []byte) error {
	l.before(raw)
	return l.partLog.Append(raw)
}

// overlapBroker is broker 1, leading t-0 at epoch 0 with end one-record
// batches, one served a Fetch. It notes every offset it is asked for, and
// how many requests it had at once.
type overlapBroker struct {
	end         int64
	mu          sync.Mutex
	asked       map[int64]chan struct{} // closed once a Fetch asked from the offset
	inAir, most int
}

func (b *overlapBroker) askedFor(off int64) chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch, ok := b.asked[off]
	if !ok {
		ch = make(chan struct{})
		b.asked[off] = ch
	}
	return ch
}

func (b *overlapBroker) maxInAir() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.most
}

func (b *overlapBroker) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		return brokerOneLeads(1), nil
	case *kmsg.FetchRequest:
		b.mu.Lock()
		b.inAir++
		b.most = max(b.most, b.inAir)
		b.mu.Unlock()
		defer func() {
			b.mu.Lock()
			b.inAir--
			b.mu.Unlock()
		}()
		resp := kmsg.NewPtrFetchResponse()
		for _, rt := range r.Topics {
			t := kmsg.NewFetchResponseTopic()
			t.Topic, t.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				ch := b.askedFor(rp.FetchOffset)
				b.mu.Lock()
				select {
				case <-ch:
				default:
					close(ch)
				}
				b.mu.Unlock()
				p := kmsg.NewFetchResponseTopicPartition()
				p.Partition, p.LogStartOffset, p.HighWatermark = rp.Partition, 0, b.end
				if rp.FetchOffset < b.end {
					p.RecordBatches = batch.Build(batch.Spec{BaseOffset: rp.FetchOffset, Epoch: 0, Records: 1})
				} else {
					// Caught up: a long poll, cut short when the test ends.
					select {
					case <-ctx.Done():
						return nil, ctx.Err()
					case <-time.After(10 * time.Millisecond):
					}
				}
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil
	}
	return nil, fmt.Errorf("overlapBroker: no answer for %T", req)
}

// brokerOneLeads is a Metadata answer of one broker, 1, leading every
// partition of topic t (id "t") at epoch 0.
func brokerOneLeads(partitions int32) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	br := kmsg.NewMetadataResponseBroker()
	br.NodeID = 1
	resp.Brokers = append(resp.Brokers, br)
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr("t")
	copy(mt.TopicID[:], "t")
	for p := range partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p, 1, 0
		mt.Partitions = append(mt.Partitions, mp)
	}
	resp.Topics = append(resp.Topics, mt)
	return resp
}
