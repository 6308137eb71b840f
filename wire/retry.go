package wire

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// RetryAfterMetadata reports whether err, the error of one partition in a
// reply (a *kerr.Error, wrapped or not), says that leadership is moving, so
// that the same request may succeed once a fresh Metadata answer names the
// leader and its epoch:
//
//   - NOT_LEADER_OR_FOLLOWER: the broker asked no longer leads the
//     partition;
//   - FENCED_LEADER_EPOCH and UNKNOWN_LEADER_EPOCH: the CurrentLeaderEpoch
//     sent is older or newer than the broker's (KIP-320;
//     Partition.getLocalLog runs this fence before the leader check);
//   - LEADER_NOT_AVAILABLE and REPLICA_NOT_AVAILABLE: an election is under
//     way.
//
// It is the retry rule of the one-shot tools (audit's verify and lineage),
// which retry these few times and report anything else. The daemon's rule
// is follower.Classify, which retries every error, because a daemon must
// outlast a broker restart or an operator fixing ACLs.
func RetryAfterMetadata(err error) bool {
	ke, ok := errors.AsType[*kerr.Error](err)
	if !ok {
		return false
	}
	switch ke.Code {
	case kerr.NotLeaderForPartition.Code, kerr.FencedLeaderEpoch.Code, kerr.UnknownLeaderEpoch.Code,
		kerr.LeaderNotAvailable.Code, kerr.ReplicaNotAvailable.Code:
		return true
	}
	return false
}
