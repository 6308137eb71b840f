package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/kfollower/kfollower/cluster"
	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The failover scenario's own checks, added to each step's report.
const (
	// CheckFailoverEpoch: every move of the leadership gave a higher
	// leader epoch than any before it.
	CheckFailoverEpoch = "failover_epoch_increases"
	// CheckFailoverStart: the epoch of each leadership starts in the
	// lineage exactly at the first offset written in it.
	CheckFailoverStart = "failover_epoch_starts_at_first_write"
)

// FailoverOptions set up the failover scenario.
type FailoverOptions struct {
	// Client needs the rights to create, produce to, reassign, elect and
	// delete Topic.
	Client *kgo.Client
	// Topic is the scratch topic: created by the scenario, which refuses
	// to start if it exists, and deleted at the end.
	Topic string
	// Moves is how many times the leadership is moved, alternating a
	// preferred election (the replicas reordered) and a reassignment that
	// takes the leader out of the replicas; default 4.
	Moves int
	// Records written in each leadership; default 50.
	Records int
	// Log, if set, is told what the scenario is about to do, before it
	// does it.
	Log io.Writer
	// Timeout bounds each wait for the cluster (a leader, a full ISR, a
	// reassignment to finish); default 60 s.
	Timeout time.Duration
}

// Failover runs the failover scenario on a scratch topic of one partition
// with two replicas: write, probe (checks 1–5), then for each move: move
// the leadership, wait until it settled, check the epoch grew, write,
// probe again and check the new epoch starts in the lineage exactly at the
// first offset it wrote. The report has one entry per step. The error is
// for a scenario that could not start (the topic exists, too few brokers,
// no right to create it); a step that fails later ends the scenario with
// that step's Error (exit 2), and the topic is deleted either way.
func Failover(ctx context.Context, opts FailoverOptions) (*Report, error) {
	if opts.Client == nil || opts.Topic == "" {
		return nil, errors.New("failover: a client and a scratch topic are needed")
	}
	if opts.Moves <= 0 {
		opts.Moves = 4
	}
	if opts.Records <= 0 {
		opts.Records = 50
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	logf := func(format string, args ...any) {
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, "probe failover: "+format+"\n", args...)
		}
	}
	s := &scenario{opts: opts, c: KgoCluster(opts.Client), adm: kadm.NewClient(opts.Client), logf: logf,
		tp: wire.TopicPartition{Topic: opts.Topic, Partition: 0}, vers: map[int32]apiVersions{}}
	meta, err := loadMetadata(ctx, s.c, AnyBroker, []string{opts.Topic})
	if err != nil {
		return nil, err
	}
	switch _, err := meta.Lookup(s.tp); {
	case err == nil:
		return nil, fmt.Errorf("failover: topic %s exists; the scenario writes only to a topic it creates", opts.Topic)
	case !errors.Is(err, kerr.UnknownTopicOrPartition):
		return nil, fmt.Errorf("failover: cannot tell whether topic %s exists: %w", opts.Topic, err)
	}
	if len(meta.Brokers()) < 2 {
		return nil, fmt.Errorf("failover: the cluster has %d broker(s); moving a leadership needs 2 or more", len(meta.Brokers()))
	}
	s.brokers = meta.Brokers()
	moves := "preferred elections"
	if len(s.brokers) >= 3 {
		moves += " and reassignments"
	}
	logf("this scenario WRITES: it creates topic %s (1 partition, 2 replicas), writes %d records in each of %d leaderships, moves the leadership %d times (%s), and deletes the topic at the end",
		opts.Topic, opts.Records, opts.Moves+1, opts.Moves, moves)
	resp, err := s.adm.CreateTopic(ctx, 1, 2, nil, opts.Topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return nil, fmt.Errorf("failover: creating topic %s: %w", opts.Topic, err)
	}
	defer s.deleteTopic(ctx)
	return s.run(ctx), nil
}

type scenario struct {
	opts    FailoverOptions
	c       Cluster
	adm     *kadm.Client
	logf    func(string, ...any)
	tp      wire.TopicPartition
	brokers []int32
	vers    map[int32]apiVersions
	epochs  []int32 // the epoch of each leadership so far
}

func (s *scenario) deleteTopic(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	s.logf("deleting topic %s", s.opts.Topic)
	resp, err := s.adm.DeleteTopic(ctx, s.opts.Topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		s.logf("deleting topic %s failed: %v; delete it by hand", s.opts.Topic, err)
	}
}

func (s *scenario) run(ctx context.Context) *Report {
	rep := &Report{Scenario: "failover"}
	fail := func(step string, err error) *Report {
		rep.Partitions = append(rep.Partitions, PartitionReport{Topic: s.tp.Topic, Partition: s.tp.Partition, Step: step,
			Leader: -1, LeaderEpoch: -1, LogStart: -1, HighWatermark: -1, LogEnd: -1, Error: err.Error()})
		return rep
	}
	pm, err := s.waitFor(ctx, "a leader and both replicas in the ISR", func(pm cluster.Partition) bool {
		return pm.Leader >= 0 && len(pm.Replicas) == 2 && sameSet(pm.ISR, pm.Replicas)
	})
	if err != nil {
		return fail("created", err)
	}
	step := fmt.Sprintf("created: leader %d, epoch %d", pm.Leader, pm.LeaderEpoch)
	for move := 0; ; move++ {
		var grew *CheckResult
		if len(s.epochs) > 0 {
			prev := slices.Max(s.epochs)
			c := newCheck(CheckFailoverEpoch)
			c.add(Observation{
				Request:  "Metadata once the move settled",
				Answer:   fmt.Sprintf("leader %d, epoch %d", pm.Leader, pm.LeaderEpoch),
				Expected: fmt.Sprintf("an epoch above %d, the highest of the leaderships before (%v)", prev, s.epochs),
				Status:   passIf(pm.LeaderEpoch > prev),
			})
			c = c.finish("")
			grew = &c
		}
		s.epochs = append(s.epochs, pm.LeaderEpoch)
		s.logf("%s; writing %d records", step, s.opts.Records)
		first, err := s.produce(ctx)
		if err != nil {
			return fail(step, err)
		}
		pr := s.probe(ctx, step, pm, first)
		if grew != nil {
			pr.Checks = append(pr.Checks, *grew)
		}
		rep.Partitions = append(rep.Partitions, pr)
		if pr.Error != "" || move == s.opts.Moves {
			return rep
		}
		if pm, step, err = s.move(ctx, move, pm); err != nil {
			return fail(fmt.Sprintf("move %d", move+1), err)
		}
	}
}

// probe runs checks 1–5 on the scratch partition, then checks that the
// epoch of this leadership starts in the lineage at first, the first
// offset written in it.
func (s *scenario) probe(ctx context.Context, step string, pm cluster.Partition, first int64) PartitionReport {
	meta, err := loadMetadata(ctx, s.c, AnyBroker, []string{s.tp.Topic})
	if err != nil {
		return PartitionReport{Topic: s.tp.Topic, Partition: s.tp.Partition, Step: step, Error: err.Error()}
	}
	o := Options{Cluster: s.c, Topics: []string{s.tp.Topic}}
	_ = o.defaults()
	pr := probePartition(ctx, o, s.tp, meta, s.vers)
	pr.Step = step
	if pr.Error != "" {
		return pr
	}
	c := newCheck(CheckFailoverStart)
	var got string
	for _, e := range pr.Lineage {
		if e.Epoch == pm.LeaderEpoch {
			got = e.String()
		}
	}
	c.add(Observation{
		Request:  fmt.Sprintf("the lineage walked after writing from offset %d in epoch %d", first, pm.LeaderEpoch),
		Answer:   fmt.Sprintf("%s (entry for epoch %d: %s)", orDash(lineage{entries: pr.Lineage}.String()), pm.LeaderEpoch, orDash(got)),
		Expected: fmt.Sprintf("an entry %d@%d", pm.LeaderEpoch, first),
		Status:   passIf(got == Epoch{Epoch: pm.LeaderEpoch, StartOffset: first}.String()),
	})
	pr.Checks = append(pr.Checks, c.finish(""))
	return pr
}

// produce writes Records records (acks=all) and returns the offset of the
// first.
func (s *scenario) produce(ctx context.Context) (int64, error) {
	var rs []*kgo.Record
	for i := range s.opts.Records {
		rs = append(rs, &kgo.Record{Topic: s.tp.Topic, Partition: s.tp.Partition, Value: fmt.Appendf(nil, "probe-%d-%d", len(s.epochs), i)})
	}
	pctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	res := s.opts.Client.ProduceSync(pctx, rs...)
	if err := res.FirstErr(); err != nil {
		return -1, fmt.Errorf("writing to %s: %w", s.tp, err)
	}
	first := res[0].Record.Offset
	for _, r := range res {
		first = min(first, r.Record.Offset)
	}
	return first, nil
}

// move moves the leadership away from pm.Leader: an even move reorders
// the replicas and runs a preferred election; an odd one, given a third
// broker, reassigns the partition to the follower and that broker, taking
// the leader out. It returns once the reassignment is done, the ISR is
// full and the new leader leads.
func (s *scenario) move(ctx context.Context, n int, pm cluster.Partition) (cluster.Partition, string, error) {
	follower := pm.Replicas[0]
	if follower == pm.Leader {
		follower = pm.Replicas[1]
	}
	var target []int32
	var how string
	if n%2 == 1 && len(s.brokers) >= 3 {
		outsider := s.brokers[slices.IndexFunc(s.brokers, func(b int32) bool { return !slices.Contains(pm.Replicas, b) })]
		target = []int32{follower, outsider}
		how = fmt.Sprintf("reassignment %v → %v", pm.Replicas, target)
	} else {
		target = []int32{follower, pm.Leader}
		how = fmt.Sprintf("preferred election after reordering %v → %v", pm.Replicas, target)
	}
	s.logf("moving the leadership of %s away from broker %d (epoch %d): %s", s.tp, pm.Leader, pm.LeaderEpoch, how)
	req := kadm.AlterPartitionAssignmentsReq{}
	req.Assign(s.tp.Topic, s.tp.Partition, target)
	res, err := s.adm.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		return pm, how, fmt.Errorf("%s: %w", how, err)
	}
	settled := func(p cluster.Partition) bool { return slices.Equal(p.Replicas, target) && sameSet(p.ISR, target) }
	if _, err := s.waitFor(ctx, fmt.Sprintf("replicas and ISR %v", target), settled); err != nil {
		return pm, how, fmt.Errorf("%s: %w", how, err)
	}
	if err := s.waitReassigned(ctx); err != nil {
		return pm, how, fmt.Errorf("%s: %w", how, err)
	}
	// After a reorder the preferred replica still has to be elected;
	// after a reassignment the controller has already moved the
	// leadership off the removed leader, and the election is not needed.
	if err := s.electPreferred(ctx); err != nil {
		return pm, how, fmt.Errorf("%s: %w", how, err)
	}
	after, err := s.waitFor(ctx, fmt.Sprintf("leader %d", target[0]), func(p cluster.Partition) bool {
		return p.Leader == target[0] && settled(p)
	})
	if err != nil {
		return pm, how, fmt.Errorf("%s: %w", how, err)
	}
	return after, fmt.Sprintf("after %s: leader %d, epoch %d", how, after.Leader, after.LeaderEpoch), nil
}

// electPreferred runs a preferred election, retrying while the preferred
// replica is not yet eligible; ELECTION_NOT_NEEDED means it already leads.
func (s *scenario) electPreferred(ctx context.Context) error {
	return s.poll(ctx, fmt.Sprintf("electing the preferred leader of %s", s.tp), func(ctx context.Context, set kadm.TopicsSet) (bool, error) {
		res, err := s.adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		if err == nil {
			err = res[s.tp.Topic][s.tp.Partition].Err
		}
		if err == nil || errors.Is(err, kerr.ElectionNotNeeded) {
			return true, nil
		}
		if !errors.Is(err, kerr.PreferredLeaderNotAvailable) && !errors.Is(err, kerr.EligibleLeadersNotAvailable) {
			return false, err
		}
		return false, nil
	})
}

// waitReassigned waits until no reassignment of the partition is under
// way.
func (s *scenario) waitReassigned(ctx context.Context) error {
	return s.poll(ctx, fmt.Sprintf("waiting for the reassignment of %s to finish", s.tp), func(ctx context.Context, set kadm.TopicsSet) (bool, error) {
		res, err := s.adm.ListPartitionReassignments(ctx, set)
		if err == nil {
			r, ok := res[s.tp.Topic][s.tp.Partition]
			return !ok || len(r.AddingReplicas)+len(r.RemovingReplicas) == 0, nil
		}
		return false, nil
	})
}

// poll calls try with the scratch partition every 200 ms until it is done
// or fails, for at most Timeout; the error says what it was doing.
func (s *scenario) poll(ctx context.Context, what string, try func(context.Context, kadm.TopicsSet) (done bool, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	set := kadm.TopicsSet{}
	set.Add(s.tp.Topic, s.tp.Partition)
	for {
		done, err := try(ctx, set)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if done {
			return nil
		}
		if err := cluster.Backoff(ctx, 200*time.Millisecond); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
}

// waitFor polls Metadata until the partition meets cond, for at most
// Timeout.
func (s *scenario) waitFor(ctx context.Context, what string, cond func(cluster.Partition) bool) (cluster.Partition, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	last := "nothing"
	for {
		meta, err := loadMetadata(ctx, s.c, AnyBroker, []string{s.tp.Topic})
		if err == nil {
			pm, err := meta.Lookup(s.tp)
			if err == nil && cond(pm) {
				return pm, nil
			}
			last = fmt.Sprintf("leader %d, epoch %d, replicas %v, ISR %v", pm.Leader, pm.LeaderEpoch, pm.Replicas, pm.ISR)
			if err != nil {
				last = err.Error()
			}
		} else {
			last = err.Error()
		}
		if err := cluster.Backoff(ctx, 200*time.Millisecond); err != nil {
			return cluster.Partition{}, fmt.Errorf("waiting for %s to have %s: %w; last seen: %s", s.tp, what, err, last)
		}
	}
}

func sameSet(a, b []int32) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
