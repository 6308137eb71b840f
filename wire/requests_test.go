package wire

import (
	"slices"
	"testing"

	"github.com/kfollower/kfollower/follower"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	tpA0 = TopicPartition{"a", 0}
	tpA1 = TopicPartition{"a", 1}
	tpB0 = TopicPartition{"b", 0}
	idA  = TopicID{1, 2, 3}
	idB  = TopicID{9}
)

// roundTrip encodes req at version v and decodes it again, as a broker
// reads it: what we mean to send is what goes on the wire.
func roundTrip[T kmsg.Request](t *testing.T, req T, v int16, into T) T {
	t.Helper()
	req.SetVersion(v)
	into.SetVersion(v)
	if err := into.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatalf("decoding %T v%d: %v", req, v, err)
	}
	return into
}

// OffsetsForLeaderEpoch goes out as a consumer's (replica id -1, not
// kmsg's default -2), fenced with CurrentLeaderEpoch, one entry per
// partition, topics and partitions sorted.
func TestOffsetsForLeaderEpochRequest(t *testing.T) {
	qs := map[TopicPartition]*follower.OffsetsForLeaderEpoch{
		tpB0: {ID: 3, CurrentLeaderEpoch: 7, LeaderEpoch: 5},
		tpA1: {ID: 2, CurrentLeaderEpoch: 4, LeaderEpoch: 2},
		tpA0: {ID: 1, CurrentLeaderEpoch: 4, LeaderEpoch: 3},
	}
	req := roundTrip(t, OffsetsForLeaderEpochRequest(qs), 4, kmsg.NewPtrOffsetForLeaderEpochRequest())
	if req.ReplicaID != -1 {
		t.Fatalf("replica id %d, want -1", req.ReplicaID)
	}
	var got []string
	for _, rt := range req.Topics {
		for _, p := range rt.Partitions {
			got = append(got, rt.Topic+string(rune('0'+p.Partition)))
			q := qs[TopicPartition{rt.Topic, p.Partition}]
			if p.CurrentLeaderEpoch != q.CurrentLeaderEpoch || p.LeaderEpoch != q.LeaderEpoch {
				t.Fatalf("%s-%d: sent %d/%d, want %d/%d", rt.Topic, p.Partition, p.CurrentLeaderEpoch, p.LeaderEpoch, q.CurrentLeaderEpoch, q.LeaderEpoch)
			}
		}
	}
	if !slices.Equal(got, []string{"a0", "a1", "b0"}) {
		t.Fatalf("order %v", got)
	}

	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
	rt.Topic = "a"
	p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
	p.Partition, p.LeaderEpoch, p.EndOffset = 0, 3, 120
	q := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
	q.Partition, q.ErrorCode = 9, kerr.NotLeaderForPartition.Code // not asked: ignored
	rt.Partitions = append(rt.Partitions, p, q)
	resp.Topics = append(resp.Topics, rt)
	replies, missing := OffsetsForLeaderEpochReplies(resp, qs)
	if r := replies[tpA0]; r.ID != 1 || r.Leader != (follower.EpochEndOffset{Epoch: 3, EndOffset: 120}) || len(replies) != 1 {
		t.Fatalf("replies %+v", replies)
	}
	slices.SortFunc(missing, func(x, y TopicPartition) int { return compareTP(x, y) })
	if !slices.Equal(missing, []TopicPartition{tpA1, tpB0}) {
		t.Fatalf("missing %v, want a-1 and b-0", missing)
	}
}

func compareTP(x, y TopicPartition) int {
	if x.Topic != y.Topic {
		if x.Topic < y.Topic {
			return -1
		}
		return 1
	}
	return int(x.Partition - y.Partition)
}

// Fetch goes out sessionless, read_uncommitted, as a consumer, with the
// KIP-320 fence and KIP-595's LastFetchedEpoch; from v13 topics travel by
// id, before by name.
func TestFetchRequest(t *testing.T) {
	fs := map[TopicPartition]*follower.Fetch{
		tpA0: {ID: 1, Offset: 100, CurrentLeaderEpoch: 4, LastFetchedEpoch: 3, LogStartOffset: 0},
		tpB0: {ID: 2, Offset: 7, CurrentLeaderEpoch: 2, LastFetchedEpoch: -1, LogStartOffset: 5},
	}
	ids := map[string]TopicID{"a": idA, "b": idB}
	for _, v := range []int16{12, 13, 17} {
		req := roundTrip(t, FetchRequest(fs, ids, DefaultFetchLimits), v, kmsg.NewPtrFetchRequest())
		if v >= 15 {
			if req.ReplicaState.ID != -1 {
				t.Fatalf("v%d: replica state id %d, want -1", v, req.ReplicaState.ID)
			}
		} else if req.ReplicaID != -1 {
			t.Fatalf("v%d: replica id %d, want -1", v, req.ReplicaID)
		}
		if req.IsolationLevel != 0 || req.SessionID != 0 || req.SessionEpoch != -1 {
			t.Fatalf("v%d: isolation %d session %d/%d, want read_uncommitted and sessionless", v, req.IsolationLevel, req.SessionID, req.SessionEpoch)
		}
		for _, rt := range req.Topics {
			name := rt.Topic
			if v >= 13 {
				for n, id := range ids {
					if id == rt.TopicID {
						name = n
					}
				}
				if rt.Topic != "" {
					t.Fatalf("v%d carries the topic name %q; from v13 only the id", v, rt.Topic)
				}
			}
			for _, p := range rt.Partitions {
				f := fs[TopicPartition{name, p.Partition}]
				if f == nil || p.FetchOffset != f.Offset || p.CurrentLeaderEpoch != f.CurrentLeaderEpoch ||
					p.LastFetchedEpoch != f.LastFetchedEpoch || p.LogStartOffset != f.LogStartOffset {
					t.Fatalf("v%d: %s-%d sent %+v, want %+v", v, name, p.Partition, p, f)
				}
			}
		}
	}
}

// A v13+ response names topics by id; a response-level error fails every
// partition; the KIP-951 leader hint is passed on only when present.
func TestFetchReplies(t *testing.T) {
	fs := map[TopicPartition]*follower.Fetch{tpA0: {ID: 1}, tpA1: {ID: 2}, tpB0: {ID: 3}}
	ids := map[string]TopicID{"a": idA, "b": idB}

	resp := kmsg.NewPtrFetchResponse()
	rt := kmsg.NewFetchResponseTopic()
	rt.TopicID = idA
	p0 := kmsg.NewFetchResponseTopicPartition()
	p0.Partition, p0.HighWatermark, p0.LogStartOffset, p0.RecordBatches = 0, 50, 0, []byte{1, 2, 3}
	p1 := kmsg.NewFetchResponseTopicPartition()
	p1.Partition, p1.ErrorCode = 1, kerr.NotLeaderForPartition.Code
	p1.CurrentLeader.LeaderID, p1.CurrentLeader.LeaderEpoch = 3, 9
	p1.DivergingEpoch.Epoch, p1.DivergingEpoch.EndOffset = 2, 40
	rt.Partitions = append(rt.Partitions, p0, p1)
	resp.Topics = append(resp.Topics, rt)

	results, missing := FetchReplies(resp, fs, ids)
	r0, r1 := results[tpA0], results[tpA1]
	if r0.Reply.ID != 1 || r0.Reply.HighWatermark != 50 || len(r0.Reply.Records) != 3 || r0.Leader != nil ||
		r0.Reply.Diverging != (follower.EpochEndOffset{Epoch: -1, EndOffset: -1}) {
		t.Fatalf("a-0: %+v", r0)
	}
	if r1.Reply.ErrorCode != kerr.NotLeaderForPartition.Code || r1.Leader == nil || *r1.Leader != (follower.LeaderChange{Leader: 3, LeaderEpoch: 9}) ||
		r1.Reply.Diverging != (follower.EpochEndOffset{Epoch: 2, EndOffset: 40}) {
		t.Fatalf("a-1: %+v", r1)
	}
	if !slices.Equal(missing, []TopicPartition{tpB0}) {
		t.Fatalf("missing %v, want b-0", missing)
	}

	top := kmsg.NewPtrFetchResponse()
	top.ErrorCode = kerr.UnknownServerError.Code
	results, missing = FetchReplies(top, fs, ids)
	if len(results) != 3 || len(missing) != 0 {
		t.Fatalf("a response-level error: %d results, missing %v", len(results), missing)
	}
	for tp, r := range results {
		if r.Reply.ErrorCode != kerr.UnknownServerError.Code || r.Reply.ID != fs[tp].ID || r.Reply.HighWatermark != -1 {
			t.Fatalf("%s: %+v", tp, r.Reply)
		}
	}
}

// ListOffsets uses replica id -2 so LATEST is the leader's log end, not its
// high watermark (kafka-internals.md §4.6), with the fence.
func TestListOffsetsRequest(t *testing.T) {
	qs := map[TopicPartition]*follower.ListOffsets{tpA0: {ID: 1, CurrentLeaderEpoch: 6}}
	for _, latest := range []bool{false, true} {
		req := roundTrip(t, ListOffsetsRequest(qs, latest), 7, kmsg.NewPtrListOffsetsRequest())
		want := int64(-2)
		if latest {
			want = -1
		}
		p := req.Topics[0].Partitions[0]
		if req.ReplicaID != -2 || p.Timestamp != want || p.CurrentLeaderEpoch != 6 {
			t.Fatalf("latest=%v: replica %d timestamp %d fence %d", latest, req.ReplicaID, p.Timestamp, p.CurrentLeaderEpoch)
		}
	}
}
