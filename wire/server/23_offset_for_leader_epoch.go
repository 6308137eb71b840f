package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetForLeaderEpoch (key 23): v2-4. Broker side:
// KafkaApis.handleOffsetForLeaderEpochRequest,
// ReplicaManager.lastOffsetForLeaderEpoch and
// Partition.lastOffsetForLeaderEpoch (docs/kafka.md §3.2, §3.3).
//
//   - The replica id (v3+) is ignored, as Kafka ignores it.
//   - An unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION; one not
//     served: NOT_LEADER_OR_FOLLOWER; then the CurrentLeaderEpoch fence
//     (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH against the served
//     epoch, KIP-320). Each with epoch and end offset -1.
//   - Otherwise endOffsetFor over the log's cache plus the served epoch at
//     the log end (partition.endOffsetFor): the served epoch answers the
//     log end, an epoch above it (-1, -1), no error.

func init() { register(23, 2, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(_ context.Context, cc *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	counts := partitionCounts(cc.s.cfg.Catalog)
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetForLeaderEpochResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			p.Partition = rp.Partition
			p.LeaderEpoch, p.EndOffset = -1, -1
			part, err := cc.s.find(counts, rt.Topic, rp.Partition)
			if err == nil {
				err = part.fence(rp.CurrentLeaderEpoch, rp.CurrentLeaderEpoch != -1)
			}
			if err != nil {
				p.ErrorCode = err.Code
			} else {
				p.LeaderEpoch, p.EndOffset = part.endOffsetFor(rp.LeaderEpoch)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	cc.authorizeOffsetForLeaderEpoch(resp)
	return resp, nil
}

// partitionCounts is each served topic's partition count, to tell an
// unknown partition from one not served.
func partitionCounts(c Catalog) map[string]int32 {
	ts := c.Topics()
	m := make(map[string]int32, len(ts))
	for _, t := range ts {
		m[t.Name] = t.Partitions
	}
	return m
}

// find is the partition a request names, or the error Kafka gives for it:
// UNKNOWN_TOPIC_OR_PARTITION when the metadata does not know it,
// NOT_LEADER_OR_FOLLOWER when it is known but not hosted here
// (ReplicaManager.getPartitionOrException).
func (s *Server) find(counts map[string]int32, topic string, p int32) (partition, *kerr.Error) {
	if n, ok := counts[topic]; !ok || p < 0 || p >= n {
		return partition{}, kerr.UnknownTopicOrPartition
	}
	part, ok := s.lookup(topic, p)
	if !ok {
		return partition{}, kerr.NotLeaderForPartition
	}
	return part, nil
}
