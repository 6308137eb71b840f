package follower

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Reaction is what a partition does about the error in a reply: the one
// mapping from Kafka error codes and transport failures to behaviour.
type Reaction uint8

const (
	// Proceed: no error; act on the reply.
	Proceed Reaction = iota
	// Retry: back off, then send the same kind of request to the same
	// leader again.
	Retry
	// RefreshAndRetry: as Retry, and ask the driver for fresh metadata: the
	// leader we know may no longer be the leader, or may be gone.
	RefreshAndRetry
	// Fence: our leader epoch is older than the broker's (KIP-320). Send
	// nothing until metadata names a newer leader epoch.
	Fence
	// OutOfRange: the fetch offset is outside the leader's log; find out
	// which side with ListOffsets, as
	// AbstractFetcherThread.fetchOffsetAndTruncate does.
	OutOfRange
)

var reactionNames = [...]string{
	Proceed:         "proceed",
	Retry:           "retry",
	RefreshAndRetry: "refresh-and-retry",
	Fence:           "fence",
	OutOfRange:      "out-of-range",
}

func (r Reaction) String() string {
	if int(r) < len(reactionNames) {
		return reactionNames[r]
	}
	return "reaction(?)"
}

// Backoff reports whether the reaction waits before the next request.
func (r Reaction) Backoff() bool { return r == Retry || r == RefreshAndRetry }

// Classify maps the error of one partition's reply to a Reaction. err is nil
// (no error), a *kerr.Error (use ClassifyCode for a raw error code), or any
// other error, which is taken as a lost connection or a request that got no
// answer.
//
// The rows follow what Kafka's own fetcher does (AbstractFetcherThread's
// processFetchRequest and maybeTruncateToEpochEndOffsets) and kgo's
// isRetryableBrokerErr for the transport cases. Like Kafka's fetcher,
// anything not named retries with backoff
// (ReplicaFetcherThreadTest.shouldPollIndefinitelyIfLeaderReturnsAnyException):
// a daemon must outlast an operator fixing ACLs or a broker restarting.
func Classify(err error) Reaction {
	if err == nil {
		return Proceed
	}
	ke, ok := errors.AsType[*kerr.Error](err)
	if !ok {
		// Lost connection, timeout, dial failure: the broker may be down and
		// leadership moving. Kafka maps these to UNKNOWN_SERVER_ERROR with
		// (-1, -1) (RemoteLeaderEndPoint.fetchEpochEndOffsets) and
		// retries; we also refresh metadata.
		return RefreshAndRetry
	}
	switch ke.Code {
	case kerr.FencedLeaderEpoch.Code:
		// KIP-320: the broker has a newer epoch than our metadata. Kafka's
		// onPartitionFenced fails the partition until new leadership
		// arrives; retrying with the same epoch cannot succeed.
		return Fence
	case kerr.UnknownLeaderEpoch.Code:
		// KIP-320: our epoch is newer than the broker's; it is behind on
		// metadata and will catch up. Same request, after a pause
		// (AbstractFetcherThread.processFetchRequest).
		return Retry
	case kerr.OffsetOutOfRange.Code:
		// AbstractFetcherThread.fetchOffsetAndTruncate: high (past the
		// leader's end) or low (below its log start) is decided from
		// ListOffsets.
		return OutOfRange
	case kerr.NotLeaderForPartition.Code, // NOT_LEADER_OR_FOLLOWER
		kerr.LeaderNotAvailable.Code,
		kerr.ReplicaNotAvailable.Code,
		kerr.UnknownTopicOrPartition.Code,
		kerr.UnknownTopicID.Code,
		kerr.InconsistentTopicID.Code,
		// The leader's log directory failed (ReplicaManager's
		// HostedPartition.Offline): the controller will move leadership
		// away from it.
		kerr.KafkaStorageError.Code,
		kerr.NetworkException.Code,
		kerr.RequestTimedOut.Code:
		return RefreshAndRetry
	case kerr.CorruptMessage.Code:
		// A batch failed its CRC, on the broker or in our own validation:
		// Kafka logs, backs off and refetches, as it may be a transient
		// partial read (AbstractFetcherThread.processFetchRequest).
		return Retry
	default:
		// UNKNOWN_LEADER_EPOCH's cousins (OFFSET_NOT_AVAILABLE right after an
		// election), UNKNOWN_SERVER_ERROR, authorization failures, and
		// anything newer than this table.
		return Retry
	}
}

// Together reports whether the partitions that got err in one reply retry
// together: after the same wait, without jitter, so that their retries go
// out in one request to the broker again instead of one per partition.
// These are the answers of a broker in the middle of a leadership change,
// which it gives every partition it has not yet taken over at once: Metadata
// named it leader (its metadata cache is updated before its replica manager
// applies the change, BrokerMetadataPublisher.onMetadataUpdate), and until
// it has made itself leader it answers our newer epoch UNKNOWN_LEADER_EPOCH
// (Partition.checkCurrentLeaderEpoch) or NOT_LEADER_OR_FOLLOWER. Kafka's
// own fetcher delays all the partitions of a failed round by the same
// replica.fetch.backoff.ms (AbstractFetcherThread.delayPartitions), so one
// retry round is one request per broker; spread by jitter, a move of
// thousands of partitions took a request per few partitions and, for each,
// a pass over every partition of the worker.
func Together(err error) bool {
	ke, ok := errors.AsType[*kerr.Error](err)
	return ok && (ke.Code == kerr.UnknownLeaderEpoch.Code || ke.Code == kerr.NotLeaderForPartition.Code)
}

// ClassifyCode is Classify for a raw Kafka error code (0 is no error).
func ClassifyCode(code int16) Reaction {
	return Classify(kerr.ErrorForCode(code))
}
