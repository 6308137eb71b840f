package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type topicPartition = wire.TopicPartition

func sortTPs(tps []topicPartition) {
	slices.SortFunc(tps, func(a, b topicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
}

// partitionMeta is what Metadata says of one partition.
type partitionMeta struct {
	topicID     wire.TopicID
	leader      int32 // -1: none
	leaderEpoch int32
	err         error // partition or topic error
}

// clusterMeta is one Metadata answer for a set of topics.
type clusterMeta struct {
	parts      map[topicPartition]partitionMeta
	partitions map[string]int32 // partition count per topic
	ids        map[string]wire.TopicID
}

// loadMetadata asks for topics (all topics when nil). A topic the cluster
// does not know gets its error in every partition asked about later (see
// lookup).
func loadMetadata(ctx context.Context, cl *kgo.Client, topics []string) (*clusterMeta, error) {
	req := kmsg.NewPtrMetadataRequest()
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata for %v: %w", topics, err)
	}
	m := &clusterMeta{parts: map[topicPartition]partitionMeta{}, partitions: map[string]int32{}, ids: map[string]wire.TopicID{}}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		name := *t.Topic
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			m.parts[topicPartition{Topic: name, Partition: -1}] = partitionMeta{leader: -1, err: err}
			continue
		}
		m.ids[name] = t.TopicID
		m.partitions[name] = int32(len(t.Partitions))
		for _, p := range t.Partitions {
			m.parts[topicPartition{Topic: name, Partition: p.Partition}] = partitionMeta{
				topicID: t.TopicID, leader: p.Leader, leaderEpoch: p.LeaderEpoch, err: kerr.ErrorForCode(p.ErrorCode),
			}
		}
	}
	return m, nil
}

// lookup returns the metadata of tp, or an error saying why there is none.
func (m *clusterMeta) lookup(tp topicPartition) (partitionMeta, error) {
	if pm, ok := m.parts[topicPartition{Topic: tp.Topic, Partition: -1}]; ok {
		return pm, fmt.Errorf("topic %s: %w", tp.Topic, pm.err)
	}
	pm, ok := m.parts[tp]
	switch {
	case !ok:
		return pm, fmt.Errorf("%s: not in the cluster's metadata", tp)
	case pm.err != nil && !errors.Is(pm.err, kerr.LeaderNotAvailable):
		return pm, fmt.Errorf("%s: %w", tp, pm.err)
	case pm.leader < 0:
		return pm, fmt.Errorf("%s: no leader", tp)
	}
	return pm, nil
}

// backoff waits d or until ctx ends.
func backoff(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// fetchChunk is one Fetch answer for one partition, reduced to whole
// batches.
type fetchChunk struct {
	headers       []batch.Header
	bytes         int64
	next          int64 // offset to fetch next
	highWatermark int64
	logStart      int64
}

// fetchOnce sends one Fetch for one partition to its leader, built as the
// fetcher builds its own (wire.FetchRequest: sessionless, as a consumer, so
// only data up to the high watermark, read_uncommitted so aborted data and
// control batches come back as the broker stores them), fenced by the
// leader epoch (KIP-320). MaxWait 0: the broker answers at once, so an empty
// answer means the offset is at the high watermark.
func fetchOnce(ctx context.Context, cl *kgo.Client, tp topicPartition, pm partitionMeta, offset int64, maxBytes int32) (*kmsg.FetchResponseTopicPartition, error) {
	req := wire.FetchRequest(
		map[topicPartition]wire.FetchPartition{tp: {Offset: offset, CurrentLeaderEpoch: pm.leaderEpoch, LastFetchedEpoch: -1, LogStartOffset: -1}},
		map[string]wire.TopicID{tp.Topic: pm.topicID},
		wire.FetchLimits{MaxWaitMillis: 0, MinBytes: 1, MaxBytes: maxBytes, PartitionMaxBytes: maxBytes})
	kr, err := cl.Broker(int(pm.leader)).Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("fetching %s at %d from broker %d: %w", tp, offset, pm.leader, err)
	}
	resp := kr.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("fetching %s at %d from broker %d: %w", tp, offset, pm.leader, err)
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != tp.Topic && t.TopicID != pm.topicID {
			continue
		}
		for j := range t.Partitions {
			if p := &t.Partitions[j]; p.Partition == tp.Partition {
				return p, nil
			}
		}
	}
	return nil, fmt.Errorf("fetching %s at %d from broker %d: partition missing from the answer", tp, offset, pm.leader)
}

// chunkOf splits a partition's answer into whole batches (a partial last
// batch is normal: the broker cuts at the byte limit), checking each CRC.
func chunkOf(tp topicPartition, p *kmsg.FetchResponseTopicPartition, offset int64) (fetchChunk, error) {
	c := fetchChunk{next: offset, highWatermark: p.HighWatermark, logStart: p.LogStartOffset}
	sc := batch.NewScanner(p.RecordBatches)
	for sc.Next() {
		h := sc.Header()
		if h.NextOffset() <= offset {
			continue // a batch before the one asked for (the broker sends whole batches)
		}
		c.headers = append(c.headers, h)
		c.bytes += int64(h.Size())
		c.next = h.NextOffset()
	}
	if err := sc.Err(); err != nil {
		return c, fmt.Errorf("fetching %s at %d: leader sent an invalid batch: %w", tp, offset, err)
	}
	return c, nil
}

// epochQuery is one OffsetsForLeaderEpoch question.
type epochQuery struct {
	tp           topicPartition
	currentEpoch int32
	epoch        int32
}

// epochAnswer is its answer.
type epochAnswer struct {
	err       error
	epoch     int32
	endOffset int64
}

// offsetsForLeaderEpoch sends one OffsetForLeaderEpoch request per broker
// for the queries given (grouped by leader), concurrently, as Kafka's
// fetcher threads batch theirs, built as the fetcher builds its own
// (wire.OffsetsForLeaderEpochRequest). A transport failure fails that
// broker's queries.
func offsetsForLeaderEpoch(ctx context.Context, cl *kgo.Client, byBroker map[int32][]epochQuery) map[topicPartition]epochAnswer {
	asked := func(qs []epochQuery) map[topicPartition]wire.EpochQuery {
		return wireQueries(qs, func(q epochQuery) wire.EpochQuery {
			return wire.EpochQuery{CurrentLeaderEpoch: q.currentEpoch, LeaderEpoch: q.epoch}
		})
	}
	return perBroker(ctx, cl, byBroker, "OffsetsForLeaderEpoch", func(qs []epochQuery) kmsg.Request {
		return wire.OffsetsForLeaderEpochRequest(asked(qs))
	}, func(kr kmsg.Response, qs []epochQuery, answer func(topicPartition, epochAnswer, int16)) {
		as, _ := wire.OffsetsForLeaderEpochReplies(kr.(*kmsg.OffsetForLeaderEpochResponse), asked(qs))
		for tp, a := range as {
			answer(tp, epochAnswer{epoch: a.Epoch, endOffset: a.EndOffset}, a.ErrorCode)
		}
	})
}

// listStartOffsets asks each leader for the log start offset of its
// partitions (wire.LogStartRequest: ListOffsets EARLIEST as a consumer, so
// only the leader answers), one request per broker, fenced by
// CurrentLeaderEpoch. The answer's endOffset is the log start.
func listStartOffsets(ctx context.Context, cl *kgo.Client, byBroker map[int32][]epochQuery) map[topicPartition]epochAnswer {
	asked := func(qs []epochQuery) map[topicPartition]wire.ListOffsetsQuery {
		return wireQueries(qs, func(q epochQuery) wire.ListOffsetsQuery {
			return wire.ListOffsetsQuery{CurrentLeaderEpoch: q.currentEpoch}
		})
	}
	return perBroker(ctx, cl, byBroker, "ListOffsets", func(qs []epochQuery) kmsg.Request {
		return wire.LogStartRequest(asked(qs))
	}, func(kr kmsg.Response, qs []epochQuery, answer func(topicPartition, epochAnswer, int16)) {
		as, _ := wire.ListedOffsets(kr.(*kmsg.ListOffsetsResponse), asked(qs))
		for tp, a := range as {
			answer(tp, epochAnswer{endOffset: a.Offset}, a.ErrorCode)
		}
	})
}

// wireQueries keys queries by partition in wire's form.
func wireQueries[Q any](qs []epochQuery, to func(epochQuery) Q) map[topicPartition]Q {
	m := make(map[topicPartition]Q, len(qs))
	for _, q := range qs {
		m[q.tp] = to(q)
	}
	return m
}

// perBroker sends each broker its request (built by build from that
// broker's queries) concurrently, and reads every partition's answer (read
// calls answer for each). A transport failure, an error code, or a
// partition missing from the answer fails that query, with what and where.
func perBroker(ctx context.Context, cl *kgo.Client, byBroker map[int32][]epochQuery, what string,
	build func([]epochQuery) kmsg.Request, read func(kmsg.Response, []epochQuery, func(topicPartition, epochAnswer, int16)),
) map[topicPartition]epochAnswer {
	type result struct {
		broker int32
		resp   kmsg.Response
		err    error
	}
	results := make(chan result, len(byBroker))
	for broker, qs := range byBroker {
		req := build(qs)
		go func() {
			resp, err := cl.Broker(int(broker)).Request(ctx, req)
			results <- result{broker: broker, resp: resp, err: err}
		}()
	}
	out := map[topicPartition]epochAnswer{}
	for range byBroker {
		r := <-results
		if r.err != nil {
			for _, q := range byBroker[r.broker] {
				out[q.tp] = epochAnswer{err: fmt.Errorf("%s to broker %d: %w", what, r.broker, r.err)}
			}
			continue
		}
		read(r.resp, byBroker[r.broker], func(tp topicPartition, a epochAnswer, code int16) {
			if err := kerr.ErrorForCode(code); err != nil {
				a.err = fmt.Errorf("%s for %s on broker %d: %w", what, tp, r.broker, err)
			}
			out[tp] = a
		})
		for _, q := range byBroker[r.broker] {
			if _, ok := out[q.tp]; !ok {
				out[q.tp] = epochAnswer{err: fmt.Errorf("%s to broker %d: %s missing from the answer", what, r.broker, q.tp)}
			}
		}
	}
	return out
}
