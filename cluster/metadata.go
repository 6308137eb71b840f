package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Partition is what Metadata says of one partition.
type Partition struct {
	TopicID     wire.TopicID
	Leader      int32 // -1: none
	LeaderEpoch int32
	// Replicas and ISR as the answer lists them.
	Replicas, ISR []int32
	Err           error // the partition's error, or its topic's
}

// Metadata is one Metadata answer for a set of topics.
type Metadata struct {
	// parts holds a topic's error under partition -1.
	parts   map[wire.TopicPartition]Partition
	counts  map[string]int32 // partition count per topic
	brokers []int32          // sorted
}

// LoadMetadata asks for topics (all topics when nil). A topic the cluster
// does not know gets its error in every partition asked about later (see
// Lookup).
func LoadMetadata(ctx context.Context, cl *kgo.Client, topics []string) (*Metadata, error) {
	resp, err := MetadataRequest(topics).RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata for %v: %w", topics, err)
	}
	return MetadataOf(resp), nil
}

// MetadataRequest asks for topics (all topics when nil), for a caller that
// sends it its own way (LoadMetadata sends it through kgo; probe through
// its Cluster, to a broker it picks).
func MetadataRequest(topics []string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	}
	return req
}

// MetadataOf reads a Metadata answer.
func MetadataOf(resp *kmsg.MetadataResponse) *Metadata {
	m := &Metadata{parts: map[wire.TopicPartition]Partition{}, counts: map[string]int32{}}
	for _, b := range resp.Brokers {
		m.brokers = append(m.brokers, b.NodeID)
	}
	slices.Sort(m.brokers)
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		name := *t.Topic
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			m.parts[wire.TopicPartition{Topic: name, Partition: -1}] = Partition{Leader: -1, Err: err}
			continue
		}
		m.counts[name] = int32(len(t.Partitions))
		for _, p := range t.Partitions {
			m.parts[wire.TopicPartition{Topic: name, Partition: p.Partition}] = Partition{
				TopicID: t.TopicID, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR,
				Err: kerr.ErrorForCode(p.ErrorCode),
			}
		}
	}
	return m
}

// Brokers are the ids of the brokers the answer lists, sorted.
func (m *Metadata) Brokers() []int32 { return m.brokers }

// Lookup returns the metadata of tp, or an error saying why there is none:
// its topic's error, not in the answer, its partition's error (but
// LEADER_NOT_AVAILABLE, which a partition with a leader may still carry),
// or no leader.
func (m *Metadata) Lookup(tp wire.TopicPartition) (Partition, error) {
	if p, ok := m.parts[wire.TopicPartition{Topic: tp.Topic, Partition: -1}]; ok {
		return p, fmt.Errorf("topic %s: %w", tp.Topic, p.Err)
	}
	p, ok := m.parts[tp]
	switch {
	case !ok:
		return p, fmt.Errorf("%s: not in the cluster's metadata", tp)
	case p.Err != nil && !errors.Is(p.Err, kerr.LeaderNotAvailable):
		return p, fmt.Errorf("%s: %w", tp, p.Err)
	case p.Leader < 0:
		return p, fmt.Errorf("%s: no leader", tp)
	}
	return p, nil
}

// Partitions returns the partition count of topic; ok is false when the
// answer does not list it, or lists it with an error (see TopicError).
func (m *Metadata) Partitions(topic string) (n int32, ok bool) {
	n, ok = m.counts[topic]
	return n, ok
}

// TopicError is the error the answer gave for topic as a whole
// (UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED, ...); nil when
// none, or when topic was not in the answer.
func (m *Metadata) TopicError(topic string) error {
	if p, ok := m.parts[wire.TopicPartition{Topic: topic, Partition: -1}]; ok {
		return p.Err
	}
	return nil
}

// SelectPartitions lists the partitions of topics, narrowed to parts when
// given, sorted. A topic the answer does not list still gets an entry per
// asked partition (partition 0 when none was asked), so that its error is
// reported; so does an asked partition the topic lacks when keepAbsent
// (Lookup then says it is not in the metadata).
func (m *Metadata) SelectPartitions(topics []string, parts []int32, keepAbsent bool) []wire.TopicPartition {
	var tps []wire.TopicPartition
	for _, t := range topics {
		n, ok := m.Partitions(t)
		if !ok {
			ps := parts
			if len(ps) == 0 {
				ps = []int32{0}
			}
			for _, p := range ps {
				tps = append(tps, wire.TopicPartition{Topic: t, Partition: p})
			}
			continue
		}
		for p := range n {
			if len(parts) == 0 || slices.Contains(parts, p) {
				tps = append(tps, wire.TopicPartition{Topic: t, Partition: p})
			}
		}
		for _, p := range parts {
			if keepAbsent && p >= n {
				tps = append(tps, wire.TopicPartition{Topic: t, Partition: p})
			}
		}
	}
	slices.SortFunc(tps, func(a, b wire.TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return slices.Compact(tps)
}
