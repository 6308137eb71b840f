package probe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kfollower/kfollower/cluster"
	"github.com/kfollower/kfollower/wire"
)

// Options select the partitions to probe.
type Options struct {
	// Cluster carries every request (KgoCluster for a real cluster).
	Cluster Cluster
	// Topics to probe; required.
	Topics []string
	// Partitions narrows the probe; empty means every partition.
	Partitions []int32
	// HighWatermarkReads is how many extra Fetches read the high watermark
	// for check 5, beyond those the other checks send; default 3.
	HighWatermarkReads int
	// Attempts bounds how often a partition is probed again when its
	// leader or leader epoch changed during a probe (the answers then
	// mix two leaderships); default 3.
	Attempts int
	// Backoff is the wait before probing a partition again; default
	// 500 ms, doubling.
	Backoff time.Duration
}

func (o *Options) defaults() error {
	switch {
	case o.Cluster == nil:
		return errors.New("probe: no cluster to send requests to")
	case len(o.Topics) == 0:
		return errors.New("probe: no topic named")
	}
	if o.HighWatermarkReads <= 0 {
		o.HighWatermarkReads = 3
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.Backoff <= 0 {
		o.Backoff = 500 * time.Millisecond
	}
	return nil
}

// Run probes every selected partition: checks 1–5, read-only (Fetch,
// ListOffsets, OffsetsForLeaderEpoch, Metadata and ApiVersions, nothing
// else), one partition at a time. Partition problems (no leader, a broker
// that cannot be reached) are reported per partition; the error is for
// problems that stop everything (bad options, Metadata unreachable).
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	meta, err := loadMetadata(ctx, opts.Cluster, AnyBroker, opts.Topics)
	if err != nil {
		return nil, err
	}
	vers := map[int32]apiVersions{}
	rep := &Report{}
	for _, tp := range meta.SelectPartitions(opts.Topics, opts.Partitions, true) {
		rep.Partitions = append(rep.Partitions, probePartition(ctx, opts, tp, meta, vers))
	}
	return rep, nil
}

// probePartition probes tp until one probe ran under a single leadership:
// the leader's own Metadata, read last, names the same leader and no later
// epoch than the probe started with. Otherwise, or after an error, it waits, reads
// Metadata again and starts over, up to Attempts times.
func probePartition(ctx context.Context, o Options, tp wire.TopicPartition, meta *cluster.Metadata, vers map[int32]apiVersions) PartitionReport {
	var why []string
	wait := o.Backoff
	for attempt := 1; ; attempt++ {
		pr, err := probeAttempt(ctx, o, tp, meta, vers)
		pr.Attempts = attempt
		if err == nil {
			return pr
		}
		why = append(why, err.Error())
		if attempt == o.Attempts || ctx.Err() != nil {
			pr.Checks = nil
			pr.Error = strings.Join(why, "; then ")
			return pr
		}
		if err := cluster.Backoff(ctx, wait); err != nil {
			pr.Checks, pr.Error = nil, strings.Join(append(why, err.Error()), "; then ")
			return pr
		}
		wait *= 2
		m, err := loadMetadata(ctx, o.Cluster, AnyBroker, []string{tp.Topic})
		if err != nil {
			pr.Checks, pr.Error = nil, strings.Join(append(why, err.Error()), "; then ")
			return pr
		}
		meta = m
	}
}

// errMoved says the leadership changed while a partition was probed.
var errMoved = errors.New("the leadership changed during the probe")

func probeAttempt(ctx context.Context, o Options, tp wire.TopicPartition, meta *cluster.Metadata, vers map[int32]apiVersions) (PartitionReport, error) {
	pr := PartitionReport{Topic: tp.Topic, Partition: tp.Partition, Leader: -1, LeaderEpoch: -1, LogStart: -1, HighWatermark: -1, LogEnd: -1}
	pm, err := meta.Lookup(tp)
	if err != nil {
		return pr, err
	}
	pr.Leader, pr.LeaderEpoch = pm.Leader, pm.LeaderEpoch
	v, ok := vers[pm.Leader]
	if !ok {
		if v, err = loadAPIVersions(ctx, o.Cluster, pm.Leader); err != nil {
			return pr, err
		}
		vers[pm.Leader] = v
	}
	after, err := probeOnce(ctx, o, &pr, pm, v)
	if err != nil {
		return pr, err
	}
	// A lower epoch from the same leader is not a move but an answer
	// check 5 judges: the leader accepted the epoch as current all along.
	if after.Leader != pm.Leader || after.LeaderEpoch > pm.LeaderEpoch {
		return pr, fmt.Errorf("%w: leader %d epoch %d, then leader %d epoch %d", errMoved, pm.Leader, pm.LeaderEpoch, after.Leader, after.LeaderEpoch)
	}
	return pr, nil
}

// answerError is an error code where the probe needed an answer to go on.
type answerError struct {
	request string
	code    int16
}

func (e *answerError) Error() string {
	return fmt.Sprintf("%s answered %s", e.request, wire.ErrorName(e.code))
}

// probeOnce runs the five checks on one partition under the leadership pm
// names, filling pr, and returns what the leader's own Metadata says after
// them.
func probeOnce(ctx context.Context, o Options, pr *PartitionReport, pm cluster.Partition, v apiVersions) (cluster.Partition, error) {
	tp := wire.TopicPartition{Topic: pr.Topic, Partition: pr.Partition}
	l := &leaderConn{c: o.Cluster, tp: tp, id: pm.TopicID, pm: pm, epoch: pm.LeaderEpoch, maxBatchEpoch: -1}
	p := &partitionProbe{l: l, vers: v, cur: pm.LeaderEpoch, hwReads: o.HighWatermarkReads}
	ls, err := l.logStart(ctx, p.cur)
	if err != nil {
		return pm, err
	}
	if ls.ErrorCode != 0 {
		return pm, fmt.Errorf("%s: ListOffsets EARLIEST currentLeaderEpoch=%d to broker %d answered %s", tp, p.cur, pm.Leader, wire.ErrorName(ls.ErrorCode))
	}
	p.logStart, pr.LogStart = ls.Offset, ls.Offset

	lin, walk, violation, err := walkLineage(p.cur, p.logStart, func(e int32) (wire.EpochEndOffset, error) {
		a, err := l.epochs(ctx, p.cur, e)
		if err == nil && a.ErrorCode != 0 {
			err = &answerError{request: fmt.Sprintf("OffsetsForLeaderEpoch leaderEpoch=%d currentLeaderEpoch=%d", e, p.cur), code: a.ErrorCode}
		}
		return a.EpochEndOffset, err
	})
	// An error code in the walk fails it, as an answer the walk cannot use;
	// if the leadership moved meanwhile, the whole probe is discarded.
	if ae := (*answerError)(nil); errors.As(err, &ae) {
		walk = append(walk, Observation{Request: ae.request, Answer: "error " + wire.ErrorName(ae.code), Expected: "error NONE", Status: Fail})
		violation, err = ae.Error(), nil
	}
	if err != nil {
		return pm, err
	}
	p.lin, p.linOK = lin, violation == ""
	if p.linOK {
		pr.Lineage, pr.LogEnd = lin.entries, lin.logEnd
	}

	c1, err := p.checkLineage(ctx, walk, violation)
	if err != nil {
		return pm, err
	}
	c2, err := p.checkEpochGaps(ctx)
	if err != nil {
		return pm, err
	}
	c3, err := p.checkFencing(ctx)
	if err != nil {
		return pm, err
	}
	c4, err := p.checkDiverging(ctx)
	if err != nil {
		return pm, err
	}
	c5, leo, err := p.checkOffsets(ctx)
	if err != nil {
		return pm, err
	}
	after, err := loadMetadata(ctx, o.Cluster, pm.Leader, []string{tp.Topic})
	if err != nil {
		return pm, err
	}
	apm, err := after.Lookup(tp)
	if err != nil {
		return cluster.Partition{Leader: -1, LeaderEpoch: -1}, nil // moved: no leader now
	}
	p.epochObs(&c5, apm.LeaderEpoch)
	pr.Checks = []CheckResult{c1, c2, c3, c4, c5.finish("no Fetch answer to read the offsets from")}
	pr.LogEnd = leo
	if n := len(l.hws); n > 0 {
		pr.HighWatermark = l.hws[n-1].hw
	}
	return apm, nil
}
