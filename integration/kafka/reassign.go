package kafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Reassign moves each partition p of topic onto the brokers replicas[p],
// the first the preferred leader, with AlterPartitionAssignments (KIP-455),
// and returns once the controller has accepted every move. The new
// replicas then copy at the brokers' own replica fetcher settings: no
// throttle is set (kafka-reassign-partitions.sh sets one only with
// --throttle). WaitReassigned waits for the copy.
func (c *Cluster) Reassign(ctx context.Context, topic string, replicas map[int32][]int32) {
	c.t.Helper()
	// The controller writes a reassignment request as one atomic batch of
	// at most 10,000 records (QuorumController.MAX_RECORDS_PER_USER_OP),
	// one per partition: more go in several requests, in partition order.
	parts := slices.Sorted(maps.Keys(replicas))
	for len(parts) > 0 {
		chunk := parts[:min(len(parts), maxPartitionsPerRequest)]
		parts = parts[len(chunk):]
		var req kadm.AlterPartitionAssignmentsReq
		for _, p := range chunk {
			req.Assign(topic, p, replicas[p])
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
			if len(replicas) > 10 {
				c.t.Fatalf("reassigning %d partitions of %s: %v %v", len(replicas), topic, err, msgs)
			}
			c.t.Fatalf("reassigning %s onto %v: %v %v", topic, replicas, err, msgs)
		}
	}
}

// ElectPreferredAll moves the leadership of each of partitions of topic to
// its first replica with ElectLeaders(PREFERRED) (KIP-460), asking again
// for those whose preferred replica is not yet eligible, and returns once
// the controller has elected every one (or found it led by its preferred
// replica already: ELECTION_NOT_NEEDED). The controller answers once the
// elections are committed to the metadata log
// (ReplicationControlManager.electLeaders); the brokers take over later,
// as each applies the change. After a reorder of the replicas by Reassign
// (the same set in another order is no data movement: the controller only
// rewrites the order, KRaft's changePartitionReassignment), this moves
// every leader without stopping a broker.
//
// The partitions go in requests of at most 5,000, sent together: the
// controller splits a non-atomic result into batches of 10,000 records
// and, when it holds an exact multiple of that, appends an empty last
// batch, which Raft refuses; the controller then renounces its leadership
// and answers UNKNOWN_SERVER_ERROR (QuorumController.appendRecords,
// KAFKA-21129): 10,000 elections in one request fail so in Kafka 4.4.
func (c *Cluster) ElectPreferredAll(ctx context.Context, topic string, partitions []int32) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 0, len(partitions)/maxPartitionsPerRequest+1)
	var mu sync.Mutex
	for chunk := range slices.Chunk(partitions, maxPartitionsPerRequest) {
		wg.Go(func() {
			if err := c.electPreferred(ctx, topic, chunk); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.t.Fatal(err)
	}
}

func (c *Cluster) electPreferred(ctx context.Context, topic string, left []int32) error {
	var last error
	for len(left) > 0 {
		set := kadm.TopicsSet{}
		set.Add(topic, left...)
		res, err := c.Admin().ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		if err != nil {
			last = err
			if !isRetriableNet(err) && !errors.Is(err, kerr.RequestTimedOut) {
				return fmt.Errorf("electing the preferred leaders of %d partitions of %s: %w", len(left), topic, err)
			}
		} else {
			var again []int32
			for _, p := range left {
				r, ok := res[topic][p]
				switch {
				case !ok:
					again, last = append(again, p), fmt.Errorf("no answer for %s-%d", topic, p)
				case r.Err == nil || errors.Is(r.Err, kerr.ElectionNotNeeded):
				case errors.Is(r.Err, kerr.PreferredLeaderNotAvailable) || errors.Is(r.Err, kerr.RequestTimedOut):
					again, last = append(again, p), r.Err
				default:
					return fmt.Errorf("electing the preferred leader of %s-%d: %w", topic, p, r.Err)
				}
			}
			left = again
			if len(left) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("electing the preferred leaders of %s: %w with %d partitions left (last: %v)", topic, ctx.Err(), len(left), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// WaitReassigned polls ListPartitionReassignments every poll until no
// partition of topic is being reassigned, and fails the test at ctx's
// deadline (or after 5 minutes). The controller ends a reassignment when
// every target replica is in the ISR and drops the replicas it removes at
// that moment (KIP-455; ReplicationControlManager and
// PartitionReassignmentReplicas in KRaft), so this returns once an added
// broker has caught up. The controller answers from its own state, ahead
// of the brokers' Metadata by a propagation delay.
func (c *Cluster) WaitReassigned(ctx context.Context, topic string, poll time.Duration) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var last string
	for {
		n, err := c.reassigning(ctx, topic)
		if err == nil && n == 0 {
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%d partitions being reassigned", n)
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("waiting for the reassignment of %s to end: %v; last seen: %s", topic, ctx.Err(), last)
		case <-time.After(poll):
		}
	}
}

// reassigning is how many partitions of topic the controller is
// reassigning. It asks for every reassignment (topics null): a topic named
// with no partitions matches none (ReplicationControlManager.listPartitionReassignments).
func (c *Cluster) reassigning(ctx context.Context, topic string) (int, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = 10_000
	resp, err := req.RequestWith(ctx, c.adminClient())
	if err != nil {
		return 0, fmt.Errorf("listing reassignments: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, fmt.Errorf("listing reassignments: %w", err)
	}
	n := 0
	for _, t := range resp.Topics {
		if t.Topic == topic {
			n += len(t.Partitions)
		}
	}
	return n, nil
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

// LogBytes is the size of the node's segments (*.log) of topic-partition,
// 0 if it holds none. A replica that has caught up with its leader holds
// the leader's batches byte for byte, so the same size.
func (n *Node) LogBytes(topic string, partition int32) (int64, error) {
	logs, err := filepath.Glob(filepath.Join(n.DataDir(), fmt.Sprintf("%s-%d", topic, partition), "*.log"))
	if err != nil {
		return 0, err
	}
	var size int64
	for _, l := range logs {
		fi, err := os.Stat(l)
		if err != nil {
			return 0, fmt.Errorf("node %d: %w", n.ID, err)
		}
		size += fi.Size()
	}
	return size, nil
}
