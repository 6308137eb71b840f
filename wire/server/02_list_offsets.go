package server

import (
	"context"
	"errors"

	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets (key 2): v1-11. Broker side:
// KafkaApis.handleListOffsetRequest, ReplicaManager.fetchOffset,
// Partition.fetchOffsetForTimestamp and UnifiedLog.fetchOffsetByTimestamp
// (docs/kafka.md §7.2).
//
//   - A partition named twice: INVALID_REQUEST for each; a special
//     timestamp the version does not know (-3 before v7, -4 before v8, -5
//     before v9, -6 before v11): UNSUPPORTED_VERSION; unknown or not
//     served, and the CurrentLeaderEpoch fence (v4+), as in
//     OffsetForLeaderEpoch. Errors carry timestamp, offset and epoch -1.
//   - -1 latest: the last fetchable offset, with the served epoch. For the
//     consumer replica id (-1) that is the high watermark, or under
//     read_committed (v2+) the last stable offset; for any other id (a
//     follower's -2) the log end, as Kafka reads without isolation then
//     (UnifiedLog.fetchOffsetByTimestamp's lastFetchableOffset).
//   - -2 earliest, and -4 earliest local (no tiered storage here): the log
//     start, with the epoch of the batch there (the cache's earliest entry,
//     which starts at or before the log start).
//   - -5 latest tiered and -6 earliest pending upload: no remote storage,
//     so offset and epoch -1.
//   - -3 max timestamp: the first batch with the largest max timestamp, and
//     in it the first record with that timestamp (offsetOfMaxTimestamp).
//   - A timestamp: the first batch whose max timestamp is at or above it,
//     and in it the first record at or above it, at or after the log start
//     (LogSegment.findOffsetByTimestamp).
//   - A -3 or timestamp answer at or past the last fetchable offset is
//     offset -1, no error.
//
// Not as Kafka: -3 and timestamps scan the batches from the log start (a
// Log has no time index yet), decompressing the one batch answered; a
// codec without a decompressor answers that batch's base offset. No
// OFFSET_NOT_AVAILABLE while the high watermark is below the start of the
// served epoch: this copy's high watermark never goes back.

func init() { register(2, 1, handleListOffsets) }

// Special timestamps (ListOffsetsRequest.java) and the version each needs.
const (
	latestTimestamp          = -1
	earliestTimestamp        = -2
	maxTimestamp             = -3
	earliestLocalTimestamp   = -4
	latestTieredTimestamp    = -5
	earliestPendingTimestamp = -6
)

var timestampSince = map[int64]int16{
	maxTimestamp:             7,
	earliestLocalTimestamp:   8,
	latestTieredTimestamp:    9,
	earliestPendingTimestamp: 11,
}

func handleListOffsets(_ context.Context, cc *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	counts := partitionCounts(cc.s.cfg.Catalog)
	seen := map[topicPartition]int{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			seen[topicPartition{rt.Topic, rp.Partition}]++
		}
	}
	for _, rt := range req.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition = rp.Partition
			p.Timestamp, p.Offset, p.LeaderEpoch = -1, -1, -1
			if err := cc.s.listOffset(req, counts, seen, rt.Topic, rp, &p); err != nil {
				p.ErrorCode = err.Code
				p.Timestamp, p.Offset, p.LeaderEpoch = -1, -1, -1
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	cc.authorizeListOffsets(resp)
	return resp, nil
}

func (s *Server) listOffset(req *kmsg.ListOffsetsRequest, counts map[string]int32, seen map[topicPartition]int,
	topic string, rp kmsg.ListOffsetsRequestTopicPartition, out *kmsg.ListOffsetsResponseTopicPartition) *kerr.Error {
	if seen[topicPartition{topic, rp.Partition}] > 1 {
		return kerr.InvalidRequest
	}
	if v, ok := timestampSince[rp.Timestamp]; ok && req.Version < v {
		return kerr.UnsupportedVersion
	}
	part, err := s.find(counts, topic, rp.Partition)
	if err != nil {
		return err
	}
	if err := part.fence(rp.CurrentLeaderEpoch, req.Version >= 4 && rp.CurrentLeaderEpoch != -1); err != nil {
		return err
	}
	l := part.log
	start, hw, leo := l.LogStartOffset(), l.DurableEnd(), l.LogEndOffset()
	// The consumer id reads with isolation; every other id reads to the
	// log end (ReplicaManager.fetchOffset).
	fetchable := leo
	if req.ReplicaID == -1 {
		fetchable = hw
		if req.IsolationLevel == 1 {
			fetchable = min(l.LastStableOffset(), hw)
		}
	}
	switch rp.Timestamp {
	case latestTimestamp:
		out.Offset, out.LeaderEpoch = fetchable, part.epoch
		return nil
	case earliestTimestamp, earliestLocalTimestamp:
		out.Offset, out.LeaderEpoch = start, s.epochAt(part, start)
		return nil
	case latestTieredTimestamp, earliestPendingTimestamp:
		return nil
	}
	var (
		found      bool
		ts, offset int64
		epoch      int32
	)
	var scanErr error
	if rp.Timestamp == maxTimestamp {
		found, ts, offset, epoch, scanErr = s.maxTimestamp(l, start, leo)
	} else {
		found, ts, offset, epoch, scanErr = s.offsetForTimestamp(l, start, leo, rp.Timestamp)
	}
	if scanErr != nil {
		s.log.Warn("ListOffsets: reading the log", "topic", topic, "partition", rp.Partition, "err", scanErr)
		return kerr.KafkaStorageError
	}
	if found && offset < fetchable {
		out.Timestamp, out.Offset, out.LeaderEpoch = ts, offset, epoch
	}
	return nil
}

// epochAt is the epoch of the batch at (or first after) offset, or, in an
// empty log, the cache's latest: after retention the cache's earliest entry
// is the epoch of the log start (LeaderEpochFileCache.truncateFromStart).
func (s *Server) epochAt(part partition, offset int64) int32 {
	epoch := int32(-1)
	if e, ok := part.log.LatestEpoch(); ok && offset >= part.log.LogEndOffset() {
		return e
	}
	scan(part.log, offset, part.log.LogEndOffset(), func(h batch.Header, _ []byte) bool {
		epoch = h.PartitionLeaderEpoch
		return false
	})
	return epoch
}

// maxTimestamp finds the first batch with the largest max timestamp in
// [start, end), then its first record with that timestamp.
func (s *Server) maxTimestamp(l Log, start, end int64) (found bool, ts, offset int64, epoch int32, err error) {
	var best []byte
	var bh batch.Header
	err = scan(l, start, end, func(h batch.Header, b []byte) bool {
		if best == nil || h.MaxTimestamp > bh.MaxTimestamp {
			best, bh = append(best[:0], b...), h
		}
		return true
	})
	if err != nil || best == nil {
		return false, 0, 0, 0, err
	}
	offset = bh.BaseOffset
	err = s.records(bh, best, func(o, t int64) bool {
		if t == bh.MaxTimestamp {
			offset = o
			return false
		}
		return true
	})
	if errors.Is(err, errUndecodable) {
		err = nil
	}
	return err == nil, bh.MaxTimestamp, offset, bh.PartitionLeaderEpoch, err
}

// offsetForTimestamp finds the first record at or after start with a
// timestamp at or above target, in the first batch whose max timestamp
// reaches target.
func (s *Server) offsetForTimestamp(l Log, start, end, target int64) (found bool, ts, offset int64, epoch int32, err error) {
	var (
		rerr error
		done bool
	)
	err = scan(l, start, end, func(h batch.Header, b []byte) bool {
		if h.MaxTimestamp < target || h.LastOffset() < start {
			return true
		}
		rerr = s.records(h, b, func(o, t int64) bool {
			if o >= start && t >= target {
				found, ts, offset, epoch = true, t, o, h.PartitionLeaderEpoch
				return false
			}
			return true
		})
		if errors.Is(rerr, errUndecodable) {
			// The batch's first record, which is never later than the
			// one asked for.
			rerr = nil
			found, ts, offset, epoch = true, h.BaseTimestamp, max(h.BaseOffset, start), h.PartitionLeaderEpoch
			if h.Attributes.LogAppendTime() {
				ts = h.MaxTimestamp
			}
		}
		done = found || rerr != nil
		return !done
	})
	if err == nil {
		err = rerr
	}
	return found, ts, offset, epoch, err
}
