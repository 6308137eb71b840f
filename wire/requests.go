package wire

import (
	"fmt"
	"sort"

	"github.com/kfollower/kfollower/follower"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// TopicID is a topic's UUID, as Metadata reports it and Fetch v13+ uses it.
type TopicID = [16]byte

// byTopic groups partitions by topic, topics and partitions sorted, so
// requests are deterministic (and golden-testable).
func byTopic[T any](m map[TopicPartition]T) ([]string, map[string][]int32) {
	parts := map[string][]int32{}
	for tp := range m {
		parts[tp.Topic] = append(parts[tp.Topic], tp.Partition)
	}
	topics := make([]string, 0, len(parts))
	for t, ps := range parts {
		topics = append(topics, t)
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	}
	sort.Strings(topics)
	return topics, parts
}

// OffsetsForLeaderEpochRequest batches one broker's epoch queries into one
// request (as Kafka's fetcher thread does). ReplicaID is -1, the consumer id:
// the broker ignores it for this API (kafka-internals.md §2.4), and kmsg's
// default of -2 (debug) would misdescribe us.
func OffsetsForLeaderEpochRequest(qs map[TopicPartition]*follower.OffsetsForLeaderEpoch) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	topics, parts := byTopic(qs)
	for _, t := range topics {
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = t
		for _, p := range parts[t] {
			q := qs[TopicPartition{t, p}]
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition = p
			rp.CurrentLeaderEpoch = q.CurrentLeaderEpoch // KIP-320 fence
			rp.LeaderEpoch = q.LeaderEpoch
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// OffsetsForLeaderEpochReplies matches a response to the queries sent. A
// partition the response lacks is reported in missing, to be failed.
func OffsetsForLeaderEpochReplies(resp *kmsg.OffsetForLeaderEpochResponse, sent map[TopicPartition]*follower.OffsetsForLeaderEpoch) (replies map[TopicPartition]follower.EpochReply, missing []TopicPartition) {
	replies = make(map[TopicPartition]follower.EpochReply, len(sent))
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			tp := TopicPartition{t.Topic, p.Partition}
			q, ok := sent[tp]
			if !ok {
				continue // not asked: ignore rather than trust it
			}
			replies[tp] = follower.EpochReply{
				ID:        q.ID,
				ErrorCode: p.ErrorCode,
				Leader:    follower.EpochEndOffset{Epoch: p.LeaderEpoch, EndOffset: p.EndOffset},
			}
		}
	}
	for tp := range sent {
		if _, ok := replies[tp]; !ok {
			missing = append(missing, tp)
		}
	}
	return replies, missing
}

// FetchLimits bound one Fetch request.
type FetchLimits struct {
	MaxWaitMillis     int32
	MinBytes          int32
	MaxBytes          int32
	PartitionMaxBytes int32
}

// DefaultFetchLimits favour catch-up throughput: 8 MiB a partition, 64 MiB a
// request, and a 500 ms long poll once caught up (replica.fetch.wait.max.ms).
var DefaultFetchLimits = FetchLimits{MaxWaitMillis: 500, MinBytes: 1, MaxBytes: 64 << 20, PartitionMaxBytes: 8 << 20}

// FetchRequest batches one broker's fetches into one sessionless request
// (SessionID 0, SessionEpoch -1: a full fetch each time, kafka-internals.md
// §4.5). ReplicaID stays -1 (consumer: only committed data, §4.2) and the
// isolation level read_uncommitted, so control batches and aborted
// transactions are copied as a broker follower copies them. Topics carry both
// name and id; kmsg writes the one the negotiated version uses (ids from v13).
func FetchRequest(fs map[TopicPartition]*follower.Fetch, ids map[string]TopicID, lim FetchLimits) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = lim.MaxWaitMillis
	req.MinBytes = lim.MinBytes
	req.MaxBytes = lim.MaxBytes
	req.IsolationLevel = 0 // read_uncommitted
	req.SessionID, req.SessionEpoch = 0, -1
	topics, parts := byTopic(fs)
	for _, t := range topics {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = t, ids[t]
		for _, p := range parts[t] {
			f := fs[TopicPartition{t, p}]
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = p
			rp.CurrentLeaderEpoch = f.CurrentLeaderEpoch // KIP-320
			rp.FetchOffset = f.Offset
			rp.LastFetchedEpoch = f.LastFetchedEpoch // KIP-595 truncate-on-fetch
			rp.LogStartOffset = f.LogStartOffset
			rp.PartitionMaxBytes = lim.PartitionMaxBytes
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// FetchResult is one partition's part of a Fetch response.
type FetchResult struct {
	Reply follower.FetchReply
	// Leader is the KIP-951 CurrentLeader hint (Fetch v12+, filled by
	// brokers for NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH); nil when
	// absent.
	Leader *follower.LeaderChange
}

// FetchReplies matches a Fetch response to the fetches sent. Topics are
// looked up by name or, for v13+, by id. A response-level error fails every
// partition with that code.
func FetchReplies(resp *kmsg.FetchResponse, sent map[TopicPartition]*follower.Fetch, ids map[string]TopicID) (results map[TopicPartition]FetchResult, missing []TopicPartition) {
	results = make(map[TopicPartition]FetchResult, len(sent))
	names := make(map[TopicID]string, len(ids))
	for n, id := range ids {
		names[id] = n
	}
	if resp.ErrorCode != 0 {
		for tp, f := range sent {
			results[tp] = FetchResult{Reply: follower.FetchReply{ID: f.ID, ErrorCode: resp.ErrorCode,
				HighWatermark: -1, LogStartOffset: -1, Diverging: follower.EpochEndOffset{Epoch: -1, EndOffset: -1}}}
		}
		return results, nil
	}
	for _, t := range resp.Topics {
		name := t.Topic
		if name == "" {
			name = names[t.TopicID]
		}
		for _, p := range t.Partitions {
			tp := TopicPartition{name, p.Partition}
			f, ok := sent[tp]
			if !ok {
				continue
			}
			r := FetchResult{Reply: follower.FetchReply{
				ID:             f.ID,
				ErrorCode:      p.ErrorCode,
				HighWatermark:  p.HighWatermark,
				LogStartOffset: p.LogStartOffset,
				Diverging:      follower.EpochEndOffset{Epoch: p.DivergingEpoch.Epoch, EndOffset: p.DivergingEpoch.EndOffset},
				Records:        p.RecordBatches,
			}}
			if p.CurrentLeader.LeaderID >= 0 && p.CurrentLeader.LeaderEpoch >= 0 {
				r.Leader = &follower.LeaderChange{Leader: p.CurrentLeader.LeaderID, LeaderEpoch: p.CurrentLeader.LeaderEpoch}
			}
			results[tp] = r
		}
	}
	for tp := range sent {
		if _, ok := results[tp]; !ok {
			missing = append(missing, tp)
		}
	}
	return results, missing
}

// Timestamps of ListOffsets.
const (
	latestTimestamp   = -1
	earliestTimestamp = -2
)

// ListOffsetsRequest asks, for each partition, its log start (earliest) or
// its log end (latest). ReplicaID -2 (debug) makes LATEST answer the
// leader's log end offset rather than its high watermark
// (ReplicaManager.fetchOffset, kafka-internals.md §4.6); CurrentLeaderEpoch
// still fences it to the leader we mean.
func ListOffsetsRequest(qs map[TopicPartition]*follower.ListOffsets, latest bool) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -2
	ts := int64(earliestTimestamp)
	if latest {
		ts = latestTimestamp
	}
	topics, parts := byTopic(qs)
	for _, t := range topics {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = t
		for _, p := range parts[t] {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition = p
			rp.CurrentLeaderEpoch = qs[TopicPartition{t, p}].CurrentLeaderEpoch
			rp.Timestamp = ts
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// ListedOffset is one partition's ListOffsets answer.
type ListedOffset struct {
	ErrorCode int16
	Offset    int64
}

// ListOffsetsReplies reads a ListOffsets response.
func ListOffsetsReplies(resp *kmsg.ListOffsetsResponse) map[TopicPartition]ListedOffset {
	out := map[TopicPartition]ListedOffset{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[TopicPartition{t.Topic, p.Partition}] = ListedOffset{ErrorCode: p.ErrorCode, Offset: p.Offset}
		}
	}
	return out
}
