package kafka

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Reassign moves each partition p of topic onto the brokers replicas[p],
// the first the preferred leader, with AlterPartitionAssignments (KIP-455),
// and returns once the controller has accepted every move. The new
// replicas then copy at the brokers' own replica fetcher settings: no
// throttle is set (kafka-reassign-partitions.sh sets one only with
// --throttle). WaitReassigned waits for the copy.
func (c *Cluster) Reassign(ctx context.Context, topic string, replicas map[int32][]int32) {
	c.t.Helper()
	var req kadm.AlterPartitionAssignmentsReq
	for p, rs := range replicas {
		req.Assign(topic, p, rs)
	}
	resp, err := c.Admin().AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		var msgs []string
		resp.Each(func(r kadm.AlterPartitionAssignmentsResponse) {
			if r.ErrMessage != "" {
				msgs = append(msgs, fmt.Sprintf("%d: %s", r.Partition, r.ErrMessage))
			}
		})
		c.t.Fatalf("reassigning %s onto %v: %v %v", topic, replicas, err, msgs)
	}
}

// WaitReassigned polls ListPartitionReassignments every poll until no
// partition of topic is being reassigned, and fails the test at ctx's
// deadline (or after 5 minutes). The controller ends a reassignment when
// every target replica is in the ISR and drops the replicas it removes at
// that moment (KIP-455; ReplicationControlManager, PartitionReassignmentReplicas
// in KRaft), so this returns when an added broker has caught up. The
// controller answers ListPartitionReassignments from its own state, ahead
// of what the brokers' Metadata shows by a propagation delay.
func (c *Cluster) WaitReassigned(ctx context.Context, topic string, poll time.Duration) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	set := kadm.TopicsSet{}
	set.Add(topic) // no partitions: every partition of topic
	var last string
	for {
		rs, err := c.Admin().ListPartitionReassignments(ctx, set)
		if err == nil && len(rs[topic]) == 0 {
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprint(rs.Sorted())
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("waiting for the reassignment of %s to end: %v; last seen: %s", topic, ctx.Err(), last)
		case <-time.After(poll):
		}
	}
}

// WaitPartitionGone waits until node id holds no directory of
// topic-partition, neither the log nor the copy Kafka renames it to for a
// deferred delete (topic-partition.<id>-delete, removed
// log.segment.delete.delay.ms later: LogManager.asyncDelete), and fails
// the test at ctx's deadline (or after 2 minutes).
func (c *Cluster) WaitPartitionGone(ctx context.Context, id int32, topic string, partition int32) {
	c.t.Helper()
	n := c.Node(id)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	dir := filepath.Join(n.DataDir(), fmt.Sprintf("%s-%d", topic, partition))
	for {
		left, err := filepath.Glob(dir + ".*-delete")
		if err == nil {
			if _, serr := os.Stat(dir); serr == nil {
				left = append(left, dir)
			} else if !errors.Is(serr, os.ErrNotExist) {
				err = serr
			}
		}
		if err == nil && len(left) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("waiting for node %d to delete %s-%d: %v; still there: %v (%v)", n.ID, topic, partition, ctx.Err(), left, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
