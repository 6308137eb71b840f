package fetcher

import (
	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/wire"
)

// The mapping between the state machine's requests and replies and wire's:
// follower speaks in request ids and partitions one at a time, wire in
// batches of partitions, and neither imports the other.

// mapValues maps m's values, into a map sized for at least size entries
// (more are added to it after).
func mapValues[K comparable, V, W any](m map[K]V, size int, f func(V) W) map[K]W {
	out := make(map[K]W, max(len(m), size))
	for k, v := range m {
		out[k] = f(v)
	}
	return out
}

// requestIDs keeps the id of each partition's request, for its reply.
func requestIDs[R follower.Request](rs map[wire.TopicPartition]R, size int) map[wire.TopicPartition]uint64 {
	return mapValues(rs, size, func(r R) uint64 { return r.RequestID() })
}

func epochQueries(rs map[wire.TopicPartition]*follower.OffsetsForLeaderEpoch) map[wire.TopicPartition]wire.EpochQuery {
	return mapValues(rs, 0, func(r *follower.OffsetsForLeaderEpoch) wire.EpochQuery {
		return wire.EpochQuery{CurrentLeaderEpoch: r.CurrentLeaderEpoch, LeaderEpoch: r.LeaderEpoch}
	})
}

func listQueries(rs map[wire.TopicPartition]*follower.ListOffsets) map[wire.TopicPartition]wire.ListOffsetsQuery {
	return mapValues(rs, 0, func(r *follower.ListOffsets) wire.ListOffsetsQuery {
		return wire.ListOffsetsQuery{CurrentLeaderEpoch: r.CurrentLeaderEpoch}
	})
}

func fetchPartitions(rs map[wire.TopicPartition]*follower.Fetch, size int) map[wire.TopicPartition]wire.FetchPartition {
	return mapValues(rs, size, func(r *follower.Fetch) wire.FetchPartition {
		return wire.FetchPartition{Offset: r.Offset, CurrentLeaderEpoch: r.CurrentLeaderEpoch,
			LastFetchedEpoch: r.LastFetchedEpoch, LogStartOffset: r.LogStartOffset}
	})
}

func epochEndOffset(e wire.EpochEndOffset) follower.EpochEndOffset {
	return follower.EpochEndOffset{Epoch: e.Epoch, EndOffset: e.EndOffset}
}

func epochReply(id uint64, a wire.EpochAnswer) follower.EpochReply {
	return follower.EpochReply{ID: id, ErrorCode: a.ErrorCode, Leader: epochEndOffset(a.EpochEndOffset)}
}

func offsetsReply(id uint64, a wire.ListOffsetsAnswer) follower.OffsetsReply {
	return follower.OffsetsReply{ID: id, ErrorCode: a.ErrorCode, LogStartOffset: a.LogStartOffset, LogEndOffset: a.LogEndOffset}
}

func fetchReply(id uint64, a wire.FetchAnswer) follower.FetchReply {
	return follower.FetchReply{ID: id, ErrorCode: a.ErrorCode, HighWatermark: a.HighWatermark,
		LogStartOffset: a.LogStartOffset, Diverging: epochEndOffset(a.Diverging), Records: a.Records}
}

func leaderHint(h wire.LeaderHint) follower.LeaderChange {
	return follower.LeaderChange{Leader: h.Leader, LeaderEpoch: h.LeaderEpoch}
}
