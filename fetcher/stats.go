package fetcher

import (
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RequestStats describes one batched request to a leader broker and its
// response, for Observer.RequestDone.
type RequestStats struct {
	Broker int32
	// Key is the request's API: kmsg.Fetch, kmsg.OffsetForLeaderEpoch, or
	// kmsg.ListOffsets for the pair of requests (EARLIEST, then LATEST)
	// one ListOffsets round trip takes.
	Key        kmsg.Key
	Partitions int
	// Asked names the partitions of an OffsetForLeaderEpoch request (nil
	// for the other APIs), so that an observer can tell how many rounds
	// each partition took against how many requests its broker got: one
	// request per broker per round is the goal (follower.EpochRound).
	Asked   []wire.TopicPartition
	Latency time.Duration
	Err     error // transport error, nil on a response
	// FetchedBytes and FetchedRecords count the record batches a Fetch
	// response carried (records from the batch headers, nothing
	// decompressed; bytes of a partial last batch included).
	FetchedBytes, FetchedRecords int64
	// Results counts an OffsetForLeaderEpoch response's partitions by
	// result: "ok", "undefined" (the leader has no end offset for the
	// epoch) or a Kafka error name such as FENCED_LEADER_EPOCH; for a
	// Fetch, the partitions that answered with an error, by error name.
	Results map[string]int
	// Stale counts the partitions whose answer was dropped: handed off
	// while the request was in the air, or no longer the request in flight
	// for the state machine (follower.ErrStale).
	Stale int
	// Named is the number of partitions the request named: Partitions,
	// but for an Incremental Fetch (KIP-227), which names only those
	// added or changed since the session's last Fetch; the others are
	// fetched from what the broker's session holds for them.
	Named       int
	Incremental bool
	// Direct: the Fetch went on the worker's own connection
	// (Config.DirectFetch), which franz-go's broker metrics (kprom) do
	// not see; ResponseBytes is then the size of the response read from
	// it (zero through franz-go, whose hooks count it).
	Direct        bool
	ResponseBytes int64
	// StagedBytes counts the record bytes written into the logs as the
	// response was read on the direct connection (worker.stageSink),
	// for their Appends to take where they lie.
	StagedBytes int64
}

// epochResult classifies one partition of an OffsetsForLeaderEpoch reply.
func epochResult(r follower.EpochReply) string {
	if r.ErrorCode != 0 {
		return wire.ErrorName(r.ErrorCode)
	}
	if r.Leader.EndOffset < 0 {
		return "undefined"
	}
	return "ok"
}
