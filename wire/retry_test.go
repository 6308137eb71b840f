package wire

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Only the errors of a moving leadership are retried after Metadata; errors
// a new leader cannot cure, and transport failures, are not.
func TestRetryAfterMetadata(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{kerr.NotLeaderForPartition, true}, // NOT_LEADER_OR_FOLLOWER
		{kerr.FencedLeaderEpoch, true},
		{kerr.UnknownLeaderEpoch, true},
		{kerr.LeaderNotAvailable, true},
		{kerr.ReplicaNotAvailable, true},
		{fmt.Errorf("fetching t-0 at 5 from broker 1: %w", kerr.FencedLeaderEpoch), true},
		{fmt.Errorf("walking: %w", fmt.Errorf("OffsetsForLeaderEpoch for t-0 on broker 2: %w", kerr.NotLeaderForPartition)), true},
		{kerr.OffsetOutOfRange, false},
		{kerr.UnknownTopicOrPartition, false},
		{kerr.UnknownTopicID, false},
		{kerr.KafkaStorageError, false},
		{kerr.TopicAuthorizationFailed, false},
		{kerr.CorruptMessage, false},
		{kerr.UnknownServerError, false},
		{kerr.ErrorForCode(32767), false}, // a code newer than kerr
		{io.EOF, false},
		{errors.New("dial tcp 10.0.0.1:9092: connect: connection refused"), false},
	} {
		if got := RetryAfterMetadata(tc.err); got != tc.want {
			t.Errorf("RetryAfterMetadata(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
