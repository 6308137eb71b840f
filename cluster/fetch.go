package cluster

import (
	"context"
	"fmt"

	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch sends one Fetch for one partition to its leader p.Leader, built as
// the fetcher builds its own (wire.FetchRequest: sessionless, as a
// consumer, so only data up to the high watermark, read_uncommitted so
// aborted data and control batches come back as the broker stores them),
// fenced by p.LeaderEpoch (KIP-320). MaxWait 0: the broker answers at once,
// so an empty answer means the offset is at the high watermark.
//
// A transport failure, a response-level error or a partition missing from
// the answer is the error; the partition's own ErrorCode is left to the
// caller.
func Fetch(ctx context.Context, cl *kgo.Client, tp wire.TopicPartition, p Partition, offset int64, maxBytes int32) (*kmsg.FetchResponseTopicPartition, error) {
	req := wire.FetchRequest(
		map[wire.TopicPartition]wire.FetchPartition{tp: {Offset: offset, CurrentLeaderEpoch: p.LeaderEpoch, LastFetchedEpoch: -1, LogStartOffset: -1}},
		map[string]wire.TopicID{tp.Topic: p.TopicID},
		wire.FetchLimits{MaxWaitMillis: 0, MinBytes: 1, MaxBytes: maxBytes, PartitionMaxBytes: maxBytes})
	kr, err := cl.Broker(int(p.Leader)).Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("fetching %s at %d from broker %d: %w", tp, offset, p.Leader, err)
	}
	resp := kr.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("fetching %s at %d from broker %d: %w", tp, offset, p.Leader, err)
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != tp.Topic && t.TopicID != p.TopicID {
			continue
		}
		for j := range t.Partitions {
			if rp := &t.Partitions[j]; rp.Partition == tp.Partition {
				return rp, nil
			}
		}
	}
	return nil, fmt.Errorf("fetching %s at %d from broker %d: partition missing from the answer", tp, offset, p.Leader)
}

// Chunk is one Fetch answer for one partition, reduced to the headers of
// its whole batches from the offset asked for.
type Chunk struct {
	Headers       []batch.Header
	Next          int64 // the offset to fetch next
	HighWatermark int64
}

// ChunkOf splits a partition's answer to a Fetch at offset into whole
// batches (a partial last batch is normal: the broker cuts at the byte
// limit), checking each CRC. A batch that ends before offset is left out:
// the broker sends the whole batch holding offset, so the first may start
// below it.
func ChunkOf(tp wire.TopicPartition, p *kmsg.FetchResponseTopicPartition, offset int64) (Chunk, error) {
	c := Chunk{Next: offset, HighWatermark: p.HighWatermark}
	sc := batch.NewScanner(p.RecordBatches)
	for sc.Next() {
		h := sc.Header()
		if h.NextOffset() <= offset {
			continue
		}
		c.Headers = append(c.Headers, h)
		c.Next = h.NextOffset()
	}
	if err := sc.Err(); err != nil {
		return c, fmt.Errorf("fetching %s at %d: leader sent an invalid batch: %w", tp, offset, err)
	}
	return c, nil
}
