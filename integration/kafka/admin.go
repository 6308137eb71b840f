package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxPartitionsPerRequest is the most partitions CreateTopic creates with
// one request. The controller writes a topic's creation (a TopicRecord, a
// record per config and a PartitionRecord per partition) as one atomic
// batch and refuses one of more than 10,000 records with POLICY_VIOLATION
// "Unable to perform excessively large batch operation"
// (QuorumController.MAX_RECORDS_PER_USER_OP), so 10,000 partitions do not
// fit in one CreateTopics; it also refuses more than 10,000 partitions in
// one request (ReplicationControlManager.validateTotalNumberOfPartitions).
const maxPartitionsPerRequest = 5_000

// CreateTopic creates topic with an explicit replica assignment (partition i
// on assignment[i], the first replica preferred leader) and configs, and
// waits until every partition has a leader with its full ISR. Past 5,000
// partitions it creates the topic with the first 5,000 and adds the rest
// with CreatePartitions (KIP-195), 5,000 at a time. A topic of more than 1,000
// partitions logs how long each step took. The wait reads the brokers'
// metadata (DescribeTopicPartitions), which a broker updates before its
// replica manager creates the logs (BrokerMetadataPublisher.onMetadataUpdate):
// at thousands of partitions a first produce with acks=all waits many
// seconds more, until every replica's log exists and fetches.
func (c *Cluster) CreateTopic(ctx context.Context, topic string, assignment [][]int32, configs map[string]string) {
	c.t.Helper()
	began := time.Now()
	first := assignment[:min(len(assignment), maxPartitionsPerRequest)]
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions, rt.ReplicationFactor = -1, -1 // given by the assignment
	for p, replicas := range first {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 60_000
	resp, err := req.RequestWith(ctx, c.adminClient())
	if err != nil {
		c.t.Fatalf("creating topic %s: %v", topic, err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			msg := ""
			if t.ErrorMessage != nil {
				msg = *t.ErrorMessage
			}
			c.t.Fatalf("creating topic %s: %v %s", topic, err, msg)
		}
	}
	for done := len(first); done < len(assignment); {
		more := assignment[done:min(len(assignment), done+maxPartitionsPerRequest)]
		c.addPartitions(ctx, topic, done+len(more), more)
		done += len(more)
	}
	created := time.Since(began)
	c.WaitTopic(ctx, topic, len(assignment), "a leader and its full ISR", func(p int32, s PartitionState) bool {
		return s.Leader >= 0 && sameSet(s.ISR, assignment[p])
	})
	if len(assignment) > 1000 {
		c.t.Logf("kafka harness: created %s with %d partitions in %v (the controller accepted it after %v; every leader and full ISR, seen by every live broker, %v later)",
			topic, len(assignment), time.Since(began).Round(time.Millisecond), created.Round(time.Millisecond), (time.Since(began) - created).Round(time.Millisecond))
	}
}

// addPartitions grows topic to total partitions, the new ones on replicas
// (CreatePartitions, KIP-195).
func (c *Cluster) addPartitions(ctx context.Context, topic string, total int, replicas [][]int32) {
	c.t.Helper()
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, int32(total)
	for _, rs := range replicas {
		a := kmsg.NewCreatePartitionsRequestTopicAssignment()
		a.Replicas = rs
		rt.Assignment = append(rt.Assignment, a)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 60_000
	resp, err := req.RequestWith(ctx, c.adminClient())
	if err != nil {
		c.t.Fatalf("adding partitions to %s (to %d): %v", topic, total, err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			msg := ""
			if t.ErrorMessage != nil {
				msg = *t.ErrorMessage
			}
			c.t.Fatalf("adding partitions to %s (to %d): %v %s", topic, total, err, msg)
		}
	}
}

// Topic asks the cluster for the state of every partition of topic, in
// partition order. An answer holds at most ResponsePartitionLimit
// partitions (2,000 by default) and a cursor for the rest, so it pages
// until the cursor is null (KIP-966, DescribeTopicPartitionsRequestHandler).
// On a cluster the harness started it asks every live broker and fails
// unless they agree, as Partition does.
func (c *Cluster) Topic(ctx context.Context, topic string) ([]PartitionState, error) {
	views, err := c.topicViews(ctx, topic)
	if err != nil {
		return nil, err
	}
	first := views[0]
	for _, v := range views[1:] {
		if len(v.states) != len(first.states) {
			return nil, fmt.Errorf("brokers disagree on %s: %d sees %d partitions, %d sees %d", topic, first.id, len(first.states), v.id, len(v.states))
		}
		for p, s := range v.states {
			if s.String() != first.states[p].String() {
				return nil, fmt.Errorf("brokers disagree on %s-%d: %d says %v, %d says %v", topic, p, first.id, first.states[p], v.id, s)
			}
		}
	}
	return first.states, nil
}

// topicView is one broker's answer for every partition of a topic (id -1:
// the external cluster's, from any broker).
type topicView struct {
	id     int32
	states []PartitionState
}

// topicViews asks each live, unpaused broker (any broker of an external
// cluster) for every partition of topic.
func (c *Cluster) topicViews(ctx context.Context, topic string) ([]topicView, error) {
	if c.external != nil {
		s, err := c.topicFrom(ctx, -1, topic)
		return []topicView{{-1, s}}, err
	}
	var views []topicView
	for _, n := range c.Brokers() {
		if !n.wantUp() || n.isPaused() {
			continue
		}
		s, err := c.topicFrom(ctx, n.ID, topic)
		if err != nil {
			return nil, err
		}
		views = append(views, topicView{n.ID, s})
	}
	if len(views) == 0 {
		return nil, fmt.Errorf("describing %s: no live broker", topic)
	}
	return views, nil
}

// topicFrom pages DescribeTopicPartitions for topic from broker id (any
// broker if -1), and returns the states indexed by partition.
func (c *Cluster) topicFrom(ctx context.Context, id int32, topic string) ([]PartitionState, error) {
	var states []PartitionState
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	for {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = topic
		req.Topics = append(req.Topics, rt)
		req.ResponsePartitionLimit = 2000
		req.Cursor = cursor
		resp, err := c.describe(ctx, id, req)
		if err != nil {
			return nil, fmt.Errorf("describing %s from partition %d: %w", topic, len(states), err)
		}
		for _, t := range resp.Topics {
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
				return nil, fmt.Errorf("describing %s: %w", topic, err)
			}
			for _, p := range t.Partitions {
				if int(p.Partition) != len(states) {
					return nil, fmt.Errorf("describing %s: partition %d where %d was due", topic, p.Partition, len(states))
				}
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil && !errors.Is(err, kerr.LeaderNotAvailable) {
					return nil, fmt.Errorf("describing %s-%d: %w", topic, p.Partition, err)
				}
				states = append(states, stateOf(p))
			}
		}
		// The next page starts at the cursor's partition; null when the
		// answer held the topic's last one.
		if resp.NextCursor == nil || resp.NextCursor.Topic != topic {
			return states, nil
		}
		next := kmsg.NewDescribeTopicPartitionsRequestCursor()
		next.Topic, next.Partition = topic, resp.NextCursor.Partition
		cursor = &next
	}
}

// describe sends req to broker id (any broker if -1).
func (c *Cluster) describe(ctx context.Context, id int32, req *kmsg.DescribeTopicPartitionsRequest) (*kmsg.DescribeTopicPartitionsResponse, error) {
	if id < 0 {
		return req.RequestWith(ctx, c.adminClient())
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := c.adminClient().Broker(int(id)).Request(rctx, req)
	if err != nil {
		return nil, fmt.Errorf("on broker %d: %w", id, err)
	}
	return r.(*kmsg.DescribeTopicPartitionsResponse), nil
}

func stateOf(p kmsg.DescribeTopicPartitionsResponseTopicPartition) PartitionState {
	return PartitionState{
		Leader: p.LeaderID, LeaderEpoch: p.LeaderEpoch,
		Replicas: p.Replicas, ISR: p.ISR, ELR: p.EligibleLeaderReplicas,
		LastKnownELR: p.LastKnownELR, Offline: p.OfflineReplicas,
	}
}

// WaitTopic polls until every one of the n partitions of topic meets cond
// in the view of every live broker (each pages through the whole topic),
// and returns the states that met it. It fails the test at ctx's deadline,
// or after a minute plus 30 ms per partition (a broker creating 10,000
// logs on a loaded 2-core machine takes minutes), naming what it waited
// for and how many partitions met it.
func (c *Cluster) WaitTopic(ctx context.Context, topic string, n int, what string, cond func(partition int32, s PartitionState) bool) []PartitionState {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute+time.Duration(n)*30*time.Millisecond)
	defer cancel()
	var last string
	for {
		views, err := c.topicViews(ctx, topic)
		if err == nil {
			last = ""
			for _, v := range views {
				ok := 0
				for p, s := range v.states {
					if cond(int32(p), s) {
						ok++
					}
				}
				if ok != n || len(v.states) != n {
					last += fmt.Sprintf("broker %d: %d of %d partitions (of %d) have it; ", v.id, ok, n, len(v.states))
				}
			}
			if last == "" {
				return views[0].states
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("waiting for every partition of %s to have %s: %v; last seen: %s", topic, what, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// PartitionState is what the cluster says of one partition, from
// DescribeTopicPartitions (the only API that shows the ELR, KIP-966).
type PartitionState struct {
	Leader       int32
	LeaderEpoch  int32
	Replicas     []int32
	ISR          []int32
	ELR          []int32
	LastKnownELR []int32
	Offline      []int32
}

func (s PartitionState) String() string {
	return fmt.Sprintf("leader %d epoch %d replicas %v isr %v elr %v last-known-elr %v offline %v",
		s.Leader, s.LeaderEpoch, s.Replicas, s.ISR, s.ELR, s.LastKnownELR, s.Offline)
}

// Partition asks the cluster for the state of topic-partition. On a cluster
// the harness started it asks every live broker and fails unless they all
// agree: a broker just resumed from SIGSTOP answers from stale metadata
// until it catches up, and a wait must not be satisfied by that.
func (c *Cluster) Partition(ctx context.Context, topic string, partition int32) (PartitionState, error) {
	if c.external != nil {
		return c.partitionFrom(ctx, -1, topic, partition)
	}
	var first PartitionState
	var from int32 = -1
	for _, n := range c.Brokers() {
		if !n.wantUp() || n.isPaused() {
			continue
		}
		s, err := c.partitionFrom(ctx, n.ID, topic, partition)
		if err != nil {
			return PartitionState{}, err
		}
		if from < 0 {
			first, from = s, n.ID
		} else if s.String() != first.String() {
			return PartitionState{}, fmt.Errorf("brokers disagree on %s-%d: %d says %v, %d says %v", topic, partition, from, first, n.ID, s)
		}
	}
	if from < 0 {
		return PartitionState{}, fmt.Errorf("describing %s-%d: no live broker", topic, partition)
	}
	return first, nil
}

// partitionFrom asks broker id (any broker if -1).
func (c *Cluster) partitionFrom(ctx context.Context, id int32, topic string, partition int32) (PartitionState, error) {
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	rt.Topic = topic
	req.Topics = append(req.Topics, rt)
	// An answer holds at most ResponsePartitionLimit partitions (2,000 by
	// default) and names a cursor for the rest, so a partition past the
	// first page would never be found: the cursor starts the answer at the
	// partition asked about, and one is all it needs to hold (KIP-966,
	// DescribeTopicPartitionsRequestHandler).
	cursor := kmsg.NewDescribeTopicPartitionsRequestCursor()
	cursor.Topic, cursor.Partition = topic, partition
	req.Cursor, req.ResponsePartitionLimit = &cursor, 1
	resp, err := c.describe(ctx, id, req)
	if err != nil {
		return PartitionState{}, fmt.Errorf("describing %s-%d: %w", topic, partition, err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return PartitionState{}, fmt.Errorf("describing %s-%d: %w", topic, partition, err)
		}
		for _, p := range t.Partitions {
			if p.Partition != partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil && !errors.Is(err, kerr.LeaderNotAvailable) {
				return PartitionState{}, fmt.Errorf("describing %s-%d: %w", topic, partition, err)
			}
			return stateOf(p), nil
		}
	}
	return PartitionState{}, fmt.Errorf("describing %s-%d: partition not in the answer", topic, partition)
}

// WaitPartition polls until cond holds for topic-partition and returns the
// state that met it; it fails the test at ctx's deadline (or after 60 s),
// naming what it waited for and what it last saw.
func (c *Cluster) WaitPartition(ctx context.Context, topic string, partition int32, what string, cond func(PartitionState) bool) PartitionState {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var last string
	for {
		s, err := c.Partition(ctx, topic, partition)
		if err == nil && cond(s) {
			return s
		}
		if err != nil {
			last = err.Error()
		} else {
			last = s.String()
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("waiting for %s-%d to have %s: %v; last seen: %s", topic, partition, what, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ElectUnclean runs ElectLeaders(UNCLEAN) for topic-partition, retrying while
// no live replica is eligible yet (a resumed broker not yet unfenced), and
// returns the new state. It works whatever the topic's
// unclean.leader.election.enable says (docs/testing.md §6.8).
func (c *Cluster) ElectUnclean(ctx context.Context, topic string, partition int32) PartitionState {
	c.t.Helper()
	return c.elect(ctx, kadm.ElectLiveReplica, topic, partition)
}

// ElectPreferred moves leadership to the first replica of topic-partition.
func (c *Cluster) ElectPreferred(ctx context.Context, topic string, partition int32) PartitionState {
	c.t.Helper()
	return c.elect(ctx, kadm.ElectPreferredReplica, topic, partition)
}

func (c *Cluster) elect(ctx context.Context, how kadm.ElectLeadersHow, topic string, partition int32) PartitionState {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	set := kadm.TopicsSet{}
	set.Add(topic, partition)
	var last error
	for {
		res, err := c.Admin().ElectLeaders(ctx, how, set)
		if err == nil {
			r := res[topic][partition]
			err = r.Err
			if err == nil {
				break
			}
		}
		last = err
		retry := errors.Is(err, kerr.EligibleLeadersNotAvailable) || errors.Is(err, kerr.PreferredLeaderNotAvailable) ||
			errors.Is(err, kerr.RequestTimedOut)
		if !retry && ctx.Err() == nil && !isRetriableNet(err) {
			c.t.Fatalf("electing a leader for %s-%d: %v", topic, partition, err)
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("electing a leader for %s-%d: %v (last: %v)", topic, partition, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
	return c.WaitPartition(ctx, topic, partition, "a leader after the election", func(s PartitionState) bool { return s.Leader >= 0 })
}

func isRetriableNet(err error) bool {
	var ke *kerr.Error
	return !errors.As(err, &ke) // transport errors: the admin client reconnects
}

func sameSet(a, b []int32) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// SameSet reports whether a and b hold the same broker ids in any order.
func SameSet(a, b []int32) bool { return sameSet(a, b) }

// HighWatermark asks the partition's leader, and only it, for its high
// watermark (ListOffsets latest as a consumer), retrying until ctx's
// deadline or 30 s. A kadm call may route its metadata request to a
// SIGSTOPped broker and time out; this never does.
func (c *Cluster) HighWatermark(ctx context.Context, topic string, partition int32) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last error
	for {
		s, err := c.Partition(ctx, topic, partition)
		if err == nil && s.Leader < 0 {
			err = fmt.Errorf("%s-%d has no leader", topic, partition)
		}
		if err == nil {
			req := kmsg.NewPtrListOffsetsRequest()
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition = partition
			rp.CurrentLeaderEpoch = s.LeaderEpoch
			rp.Timestamp = -1 // latest; replica id -1 makes it the high watermark
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			var resp kmsg.Response
			resp, err = c.adminClient().Broker(int(s.Leader)).Request(rctx, req)
			rcancel()
			if err == nil {
				r := resp.(*kmsg.ListOffsetsResponse)
				if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
					p := r.Topics[0].Partitions[0]
					if err = kerr.ErrorForCode(p.ErrorCode); err == nil {
						return p.Offset, nil
					}
				} else {
					err = fmt.Errorf("ListOffsets answer for %s-%d has no partition", topic, partition)
				}
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("high watermark of %s-%d: %w (last: %v)", topic, partition, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
