package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kfollower/kfollower/cluster"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
)

// Verify compares the local copy of each selected partition with its
// current leader.
//
// For every local batch it fetches the same range from the leader (as a
// consumer, so up to the high watermark) and compares base offset, last
// offset, partition leader epoch and CRC; the leader's batches are
// fetched in large chunks by a goroutine that keeps one request ahead of
// the comparison, and the local segments are read in large sequential
// chunks, so a partition verifies at about the speed a consumer reads it.
// Local batches above the leader's high watermark are checked against the
// leader's epoch sequence instead. The leader's sequence comes from the
// OffsetsForLeaderEpoch walk of Lineage, and the local
// leader-epoch-checkpoint must be a prefix of it.
//
// Partition problems are reported per partition (Status, Error); the
// error is for problems that stop everything.
func Verify(ctx context.Context, opts VerifyOptions) (*VerifyReport, error) {
	start := time.Now()
	if opts.Client == nil {
		return nil, &UsageError{"verify: no Kafka client"}
	}
	if opts.DataDir == "" {
		return nil, &UsageError{"verify: no data dir"}
	}
	if opts.FetchMaxBytes <= 0 {
		opts.FetchMaxBytes = 32 << 20
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	local, err := storage.ListPartitions(opts.DataDir)
	if err != nil {
		return nil, err
	}
	var tps []wire.TopicPartition
	for _, pn := range local {
		tp := wire.TopicPartition(pn)
		if (len(opts.Topics) == 0 || slices.Contains(opts.Topics, tp.Topic)) &&
			(len(opts.Partitions) == 0 || slices.Contains(opts.Partitions, tp.Partition)) {
			tps = append(tps, tp)
		}
	}
	rep := &VerifyReport{Partitions: make([]PartitionVerify, len(tps))}
	if len(tps) == 0 {
		if len(opts.Topics) > 0 || len(opts.Partitions) > 0 {
			return nil, &UsageError{fmt.Sprintf("verify: no local partition of %v %v in %s", opts.Topics, opts.Partitions, opts.DataDir)}
		}
		return rep, nil
	}
	var topics []string
	for _, tp := range tps {
		if !slices.Contains(topics, tp.Topic) {
			topics = append(topics, tp.Topic)
		}
	}
	meta, err := cluster.LoadMetadata(ctx, opts.Client, topics)
	if err != nil {
		return nil, err
	}
	// The local log ends are taken before the leaders are asked, so that
	// with a daemon appending beside us every batch we compare was at or
	// below a high watermark the walk already saw (docs/design.md: we only
	// copy committed data); batches appended later are left for the next
	// run.
	snapshot := map[wire.TopicPartition]int64{}
	for _, tp := range tps {
		if lv, err := storage.OpenReadOnly(opts.DataDir, tp.Topic, tp.Partition); err == nil {
			snapshot[tp] = lv.LogEndOffset()
			lv.Close()
		}
	}
	lineages := walkLineages(ctx, opts.Client, tps, meta)

	sem := make(chan struct{}, opts.Parallel)
	var wg sync.WaitGroup
	for i, tp := range tps {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t0 := time.Now()
			end, ok := snapshot[tp]
			if !ok {
				end = -1
			}
			v := &verifier{opts: &opts, tp: tp, meta: meta, lineage: lineages[tp], snapshotEnd: end}
			pv := v.run(ctx)
			pv.Seconds = time.Since(t0).Seconds()
			rep.Partitions[i] = pv
		})
	}
	wg.Wait()
	rep.Seconds = time.Since(start).Seconds()
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	return rep, nil
}

type verifier struct {
	opts    *VerifyOptions
	tp      wire.TopicPartition
	meta    *cluster.Metadata
	lineage *leaderLineage
	// snapshotEnd is the local log end before the walk (-1: unknown);
	// the comparison stops there.
	snapshotEnd int64
}

func (v *verifier) run(ctx context.Context) PartitionVerify {
	tp := v.tp
	pv := PartitionVerify{Topic: tp.Topic, Partition: tp.Partition, Status: StatusError, Leader: -1,
		LeaderLogStart: -1, LeaderHighWatermark: -1, LeaderLogEnd: -1, UnverifiedFrom: -1}
	fail := func(err error) PartitionVerify {
		pv.Status, pv.Error = StatusError, err.Error()
		return pv
	}
	lv, err := storage.OpenReadOnly(v.opts.DataDir, tp.Topic, tp.Partition)
	if err != nil {
		return fail(err)
	}
	defer lv.Close()
	pv.LocalLogStart = lv.LogStartOffset()
	localEnd := lv.LogEndOffset()
	if v.snapshotEnd >= 0 {
		localEnd = min(localEnd, v.snapshotEnd)
	}
	pv.LocalLogEnd = localEnd
	// The cache is cut to that end as Kafka cuts a cache to a log end
	// (truncateFromEnd): an epoch started by a later append is not ours yet.
	epochs := lv.Epochs().TruncateFromEnd(localEnd).Entries()
	for _, e := range epochs {
		pv.LocalEpochs = append(pv.LocalEpochs, Epoch{Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	pm, err := v.meta.Lookup(tp)
	if err != nil {
		return fail(err)
	}
	pv.Leader, pv.LeaderEpoch = pm.Leader, pm.LeaderEpoch
	if id, ok := lv.TopicID(); ok && pm.TopicID != id {
		pv.Status = StatusDiverged
		pv.Divergence = &Divergence{Offset: lv.LogStartOffset(), Kind: DivergedTopicID,
			Detail: fmt.Sprintf("partition.metadata names topic id %s, the cluster %s: the topic was created again", id, storage.TopicID(pm.TopicID))}
		return pv
	}
	l := v.lineage
	if l == nil || l.err != nil {
		if l == nil {
			return fail(fmt.Errorf("%s: no leader epoch walk", tp))
		}
		return fail(l.err)
	}
	pv.Leader, pv.LeaderEpoch = l.leader, l.leaderEpoch
	pv.LeaderLogStart, pv.LeaderLogEnd, pv.LeaderEpochs = l.logStart, l.logEnd, l.epochs
	pv.EpochsParted = compareEpochs(epochs, localEnd, l.epochs, l.logEnd)
	pv.EpochsPrefix = pv.EpochsParted == nil

	if err := v.compare(ctx, lv, pm, &pv); err != nil {
		return fail(err)
	}
	pv.Status = StatusMatch
	if pv.Divergence != nil || pv.EpochsParted != nil {
		pv.Status = StatusDiverged
	}
	return pv
}

// compare walks the local batches beside the leader's.
func (v *verifier) compare(ctx context.Context, lv *storage.View, pm cluster.Partition, pv *PartitionVerify) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the fetch goroutine
	rd := lv.Batches(lv.LogStartOffset(), pv.LocalLogEnd)
	pv.VerifiedFrom, pv.VerifiedTo = -1, -1
	// Local batches below the leader's log start cannot be fetched
	// (OFFSET_OUT_OF_RANGE): skip them.
	var cur *batch.Header
	for rd.Next() {
		h := rd.Header()
		if h.BaseOffset >= pv.LeaderLogStart {
			cur = &h
			break
		}
		pv.SkippedTo = h.NextOffset()
	}
	if cur == nil {
		return v.localDone(rd, pv, pv.LocalLogEnd)
	}
	pv.VerifiedFrom, pv.VerifiedTo = cur.BaseOffset, cur.BaseOffset
	ld := &leaderStream{v: v, pm: pm, ch: make(chan leaderChunk, 2)}
	go ld.run(ctx, cur.BaseOffset, pv.LocalLogEnd)
	var sinceProgress int64
	for {
		lh, ok, err := ld.next(ctx)
		if err != nil {
			return err
		}
		if ld.hw >= 0 {
			pv.LeaderHighWatermark = ld.hw
		}
		if !ok {
			// The leader has nothing more for a consumer: the rest of our
			// log is above its high watermark.
			return v.tail(rd, cur, pv)
		}
		h := *cur
		if lh.BaseOffset != h.BaseOffset || lh.LastOffset() != h.LastOffset() ||
			lh.PartitionLeaderEpoch != h.PartitionLeaderEpoch || lh.CRC != h.CRC {
			pv.Divergence = &Divergence{Offset: min(lh.BaseOffset, h.BaseOffset), Kind: DivergedBatch,
				Local: batchInfo(h), Leader: batchInfo(lh), Detail: describeBatchDiff(h, lh)}
			return nil
		}
		pv.VerifiedTo = h.NextOffset()
		pv.Batches++
		pv.Bytes += int64(h.Size())
		sinceProgress += int64(h.Size())
		if v.opts.Progress != nil && sinceProgress >= 16<<20 {
			sinceProgress = 0
			v.opts.Progress(VerifyProgress{Topic: pv.Topic, Partition: pv.Partition, Offset: pv.VerifiedTo, End: pv.LocalLogEnd, Bytes: pv.Bytes})
		}
		if !rd.Next() {
			return v.localDone(rd, pv, pv.VerifiedTo)
		}
		next := rd.Header()
		cur = &next
	}
}

// localDone ends a comparison at the end of the local batches: a corrupt
// batch there is a divergence.
func (v *verifier) localDone(rd *storage.Batches, pv *PartitionVerify, at int64) error {
	if v.opts.Progress != nil {
		v.opts.Progress(VerifyProgress{Topic: pv.Topic, Partition: pv.Partition, Offset: max(at, 0), End: pv.LocalLogEnd, Bytes: pv.Bytes})
	}
	var ce *storage.CorruptionError
	if err := rd.Err(); errors.As(err, &ce) {
		pv.Divergence = &Divergence{Offset: at, Kind: DivergedCorrupt, Detail: ce.Error()}
		return nil
	} else if err != nil {
		return err
	}
	return nil
}

// tail checks the local batches from cur on, which lie above the leader's
// high watermark, against the leader's epoch sequence: each must lie
// below the leader's log end, in the epoch the leader names for its
// offsets.
func (v *verifier) tail(rd *storage.Batches, cur *batch.Header, pv *PartitionVerify) error {
	first := cur.BaseOffset
	pv.UnverifiedFrom = first
	for {
		h := *cur
		if d := checkTail(h, pv.LeaderEpochs, pv.LeaderLogEnd); d != nil {
			pv.Divergence = d
			if h.BaseOffset == first {
				pv.UnverifiedFrom = -1
			}
			return nil
		}
		if !rd.Next() {
			return v.localDone(rd, pv, h.NextOffset())
		}
		next := rd.Header()
		cur = &next
	}
}

// checkTail is the epoch test for one batch above the high watermark.
func checkTail(h batch.Header, leader []Epoch, leaderEnd int64) *Divergence {
	if h.LastOffset() >= leaderEnd {
		return &Divergence{Offset: max(h.BaseOffset, leaderEnd), Kind: DivergedMissing, Local: batchInfo(h),
			Detail: fmt.Sprintf("the leader's log ends at %d", leaderEnd)}
	}
	e, ok := epochAt(leader, h.BaseOffset)
	e2, ok2 := epochAt(leader, h.LastOffset())
	if !ok || !ok2 || e != h.PartitionLeaderEpoch || e2 != h.PartitionLeaderEpoch {
		return &Divergence{Offset: h.BaseOffset, Kind: DivergedEpoch, Local: batchInfo(h),
			Detail: fmt.Sprintf("above the leader's high watermark; the leader's epoch sequence names epoch %d for offset %d and %d for %d, the batch has %d",
				e, h.BaseOffset, e2, h.LastOffset(), h.PartitionLeaderEpoch)}
	}
	return nil
}

// epochAt is LeaderEpochFileCache.epochForOffset over a walked sequence.
func epochAt(seq []Epoch, offset int64) (int32, bool) {
	for i := len(seq) - 1; i >= 0; i-- {
		if seq[i].StartOffset <= offset {
			return seq[i].Epoch, true
		}
	}
	return -1, false
}

func describeBatchDiff(local, leader batch.Header) string {
	var d []string
	if local.BaseOffset != leader.BaseOffset || local.LastOffset() != leader.LastOffset() {
		d = append(d, fmt.Sprintf("offsets [%d..%d] vs the leader's [%d..%d]", local.BaseOffset, local.LastOffset(), leader.BaseOffset, leader.LastOffset()))
	}
	if local.PartitionLeaderEpoch != leader.PartitionLeaderEpoch {
		d = append(d, fmt.Sprintf("epoch %d vs the leader's %d", local.PartitionLeaderEpoch, leader.PartitionLeaderEpoch))
	}
	if local.CRC != leader.CRC {
		d = append(d, fmt.Sprintf("crc %#08x vs the leader's %#08x", local.CRC, leader.CRC))
	}
	return strings.Join(d, ", ")
}
