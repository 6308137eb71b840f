package fetcher

import (
	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kerr"
)

// epochResult classifies one partition of an OffsetsForLeaderEpoch reply.
func epochResult(r follower.EpochReply) string {
	if r.ErrorCode != 0 {
		return errorName(r.ErrorCode)
	}
	if r.Leader.EndOffset < 0 {
		return "undefined"
	}
	return "ok"
}

// errorName is a Kafka error code's name, e.g. FENCED_LEADER_EPOCH.
func errorName(code int16) string {
	if ke, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return ke.Message
	}
	return "UNKNOWN_ERROR_CODE"
}

// countRecords counts the records of the whole batches in raw from their
// headers alone (no CRC: that is storage's to check).
func countRecords(raw []byte) int64 {
	var n int64
	s := batch.NewFrameScanner(raw)
	for s.Next() {
		n += int64(s.Header().RecordCount)
	}
	return n
}
