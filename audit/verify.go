package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/kfollower/kfollower/cluster"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// VerifyOptions select what Verify compares.
type VerifyOptions struct {
	// Client sends Metadata, ListOffsets, OffsetForLeaderEpoch and Fetch
	// requests; any kgo client of the cluster will do (Verify only sends
	// raw requests through it; no consumer options needed).
	Client *kgo.Client
	// DataDir is the kfollower data dir; it is only read.
	DataDir string
	// Topics narrows the check; empty means every partition directory
	// found in DataDir.
	Topics []string
	// Partitions narrows it further; empty means every partition.
	Partitions []int32
	// FetchMaxBytes bounds each Fetch (default 32 MiB; brokers cap it at
	// fetch.max.bytes, 55 MiB by default).
	FetchMaxBytes int32
	// Parallel is how many partitions are verified at once (default 4).
	Parallel int
	// Progress, if set, is called after each compared chunk, from the
	// goroutine verifying that partition (so from several at once).
	Progress func(VerifyProgress)
}

// VerifyProgress reports how far one partition's comparison got.
type VerifyProgress struct {
	Topic     string
	Partition int32
	// Offset is the end of the range verified so far; End the local log
	// end (the comparison stops there).
	Offset, End int64
	// Bytes is how many local batch bytes were compared so far.
	Bytes int64
}

// BatchInfo is what Verify compares of a batch.
type BatchInfo struct {
	BaseOffset int64  `json:"baseOffset"`
	LastOffset int64  `json:"lastOffset"`
	Epoch      int32  `json:"epoch"`
	CRC        uint32 `json:"crc"`
}

func batchInfo(h batch.Header) *BatchInfo {
	return &BatchInfo{BaseOffset: h.BaseOffset, LastOffset: h.LastOffset(), Epoch: h.PartitionLeaderEpoch, CRC: h.CRC}
}

func (b *BatchInfo) String() string {
	if b == nil {
		return "none"
	}
	return fmt.Sprintf("[%d..%d] epoch %d crc %#08x", b.BaseOffset, b.LastOffset, b.Epoch, b.CRC)
}

// Kinds of divergence.
const (
	// DivergedBatch: the leader's batch at this offset differs in its
	// offsets, leader epoch or CRC. Same offsets and epoch with another
	// CRC can also be the leader's log cleaner rewriting a compacted
	// topic's batch after we copied it.
	DivergedBatch = "batch"
	// DivergedEpoch: above the leader's high watermark (so not fetchable
	// yet), the leader's epoch sequence names another epoch for these
	// offsets, or ends before them (KIP-101: the same epoch at the same
	// offset means the same batch).
	DivergedEpoch = "epoch"
	// DivergedMissing: the leader's log ends before this offset.
	DivergedMissing = "missing"
	// DivergedCorrupt: the local batch fails its own checks (CRC, length).
	DivergedCorrupt = "corrupt"
	// DivergedTopicID: partition.metadata names another topic id than the
	// cluster's: the topic was deleted and created again.
	DivergedTopicID = "topic-id"
)

// Divergence is the first place the local copy and the leader disagree.
type Divergence struct {
	Offset int64      `json:"offset"`
	Kind   string     `json:"kind"`
	Local  *BatchInfo `json:"local,omitempty"`
	Leader *BatchInfo `json:"leader,omitempty"`
	Detail string     `json:"detail"`
}

// Partition statuses.
const (
	StatusMatch    = "match"
	StatusDiverged = "diverged"
	StatusError    = "error"
)

// PartitionVerify is one partition's result. Offset ranges are half-open,
// [from, to).
type PartitionVerify struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Status is StatusMatch, StatusDiverged (Divergence or EpochsParted
	// set) or StatusError.
	Status      string `json:"status"`
	Leader      int32  `json:"leader"`
	LeaderEpoch int32  `json:"leaderEpoch"`

	LocalLogStart       int64 `json:"localLogStart"`
	LocalLogEnd         int64 `json:"localLogEnd"`
	LeaderLogStart      int64 `json:"leaderLogStart"`
	LeaderHighWatermark int64 `json:"leaderHighWatermark"`
	LeaderLogEnd        int64 `json:"leaderLogEnd"`

	// VerifiedFrom..VerifiedTo were compared batch by batch and match:
	// Batches batches, Bytes bytes.
	VerifiedFrom int64 `json:"verifiedFrom"`
	VerifiedTo   int64 `json:"verifiedTo"`
	Batches      int64 `json:"batches"`
	Bytes        int64 `json:"bytes"`
	// SkippedTo: local batches in LocalLogStart..SkippedTo lie below the
	// leader's log start (retention) and cannot be compared.
	SkippedTo int64 `json:"skippedTo,omitempty"`
	// UnverifiedFrom: local batches from here to LocalLogEnd lie above the
	// leader's high watermark (a consumer cannot fetch them yet, e.g. just
	// after a clean leader change); the leader's epoch sequence names the
	// same epochs for them, which KIP-101 makes enough for the same data,
	// but their bytes were not compared. -1 when there are none.
	UnverifiedFrom int64 `json:"unverifiedFrom"`

	Divergence *Divergence `json:"divergence,omitempty"`
	// EpochsPrefix says whether the local leader-epoch-checkpoint is a
	// prefix of the leader's sequence (see Lineage); EpochsParted says
	// where it is not.
	EpochsPrefix bool     `json:"epochsPrefix"`
	EpochsParted *Parting `json:"epochsParted,omitempty"`
	LocalEpochs  []Epoch  `json:"localEpochs"`
	LeaderEpochs []Epoch  `json:"leaderEpochs"`

	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
}

// VerifyReport is the result of Verify. Its exported fields are its JSON
// form.
type VerifyReport struct {
	Partitions []PartitionVerify `json:"partitions"`
	Seconds    float64           `json:"seconds"`
}

// ExitCode is ExitMismatch if any partition diverged, else ExitError if
// any could not be checked, else ExitOK. A divergence wins over an error:
// it is a proven finding, the error only a missing one.
func (r *VerifyReport) ExitCode() int {
	code := ExitOK
	for _, p := range r.Partitions {
		switch p.Status {
		case StatusDiverged:
			return ExitMismatch
		case StatusError:
			code = ExitError
		}
	}
	return code
}

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

// leaderStream fetches a partition's batches from its leader, one request
// ahead of the comparison. It ends at stopAt, at the high watermark (an
// empty answer), on an error, or with its context.
type leaderStream struct {
	v  *verifier
	pm cluster.Partition
	ch chan leaderChunk

	// Owned by the reading goroutine.
	buf []batch.Header
	hw  int64
	eof bool
}

type leaderChunk struct {
	c   cluster.Chunk
	err error
}

func (s *leaderStream) run(ctx context.Context, offset, stopAt int64) {
	defer close(s.ch)
	send := func(c leaderChunk) bool {
		select {
		case s.ch <- c:
			return true
		case <-ctx.Done():
			return false
		}
	}
	tp, pm := s.v.tp, s.pm
	retries := 0
	for offset < stopAt {
		p, err := cluster.Fetch(ctx, s.v.opts.Client, tp, pm, offset, s.v.opts.FetchMaxBytes)
		if err == nil {
			err = kerr.ErrorForCode(p.ErrorCode)
			if err != nil {
				err = fmt.Errorf("fetching %s at %d from broker %d: %w", tp, offset, pm.Leader, err)
			}
		}
		if err != nil && wire.RetryAfterMetadata(err) && retries < 5 && ctx.Err() == nil {
			// The leader moved (KIP-320 fence): compare with the new one.
			retries++
			if backoff(ctx, time.Duration(retries)*200*time.Millisecond) != nil {
				return
			}
			m, merr := cluster.LoadMetadata(ctx, s.v.opts.Client, []string{tp.Topic})
			if merr == nil {
				if npm, lerr := m.Lookup(tp); lerr == nil {
					pm = npm
				}
			}
			continue
		}
		if err != nil {
			send(leaderChunk{err: err})
			return
		}
		c, err := cluster.ChunkOf(tp, p, offset)
		if err != nil {
			send(leaderChunk{err: err})
			return
		}
		if !send(leaderChunk{c: c}) || len(c.Headers) == 0 {
			return
		}
		offset = c.Next
	}
}

// next returns the leader's next batch header; ok is false once the
// leader has no more (high watermark reached).
func (s *leaderStream) next(ctx context.Context) (h batch.Header, ok bool, err error) {
	for len(s.buf) == 0 {
		if s.eof {
			return h, false, nil
		}
		var c leaderChunk
		select {
		case c, ok = <-s.ch:
		case <-ctx.Done():
			return h, false, ctx.Err()
		}
		if !ok {
			s.eof = true
			continue
		}
		if c.err != nil {
			return h, false, c.err
		}
		s.hw = c.c.HighWatermark
		if len(c.c.Headers) == 0 {
			s.eof = true
		}
		s.buf = c.c.Headers
	}
	h, s.buf = s.buf[0], s.buf[1:]
	return h, true, nil
}

// WriteTable renders one line per partition and, below it, the first
// divergence, the epoch parting, or the error.
func (r *VerifyReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tSTATUS\tLOCAL\tVERIFIED\tBATCHES\tBYTES\tLEADER\tHW\tEPOCHS\t")
	for _, p := range r.Partitions {
		epochs := "prefix"
		if p.EpochsParted != nil {
			epochs = fmt.Sprintf("part at %d", p.EpochsParted.Offset)
		} else if p.Status == StatusError {
			epochs = "-"
		}
		verified := "-"
		if p.VerifiedTo > p.VerifiedFrom && p.VerifiedFrom >= 0 {
			verified = fmt.Sprintf("[%d, %d)", p.VerifiedFrom, p.VerifiedTo)
		}
		fmt.Fprintf(tw, "%s-%d\t%s\t[%d, %d)\t%s\t%d\t%d\t%d (epoch %d)\t%d\t%s\t\n", p.Topic, p.Partition, p.Status,
			p.LocalLogStart, p.LocalLogEnd, verified, p.Batches, p.Bytes, p.Leader, p.LeaderEpoch, p.LeaderHighWatermark, epochs)
		if p.SkippedTo > 0 {
			fmt.Fprintf(tw, "  [%d, %d) below the leader's log start %d: not compared\n", p.LocalLogStart, p.SkippedTo, p.LeaderLogStart)
		}
		if p.UnverifiedFrom >= 0 {
			to := p.LocalLogEnd
			if p.Divergence != nil {
				to = p.Divergence.Offset
			}
			fmt.Fprintf(tw, "  [%d, %d) above the leader's high watermark: epochs agree, bytes not compared\n", p.UnverifiedFrom, to)
		}
		if d := p.Divergence; d != nil {
			fmt.Fprintf(tw, "  first divergence at offset %d (%s): local %s, leader %s; %s\n", d.Offset, d.Kind, d.Local, d.Leader, d.Detail)
		}
		if pt := p.EpochsParted; pt != nil {
			fmt.Fprintf(tw, "  epochs part at offset %d: %s (local %v, leader %v)\n", pt.Offset, pt.Reason, fmtEpochs(p.LocalEpochs), fmtEpochs(p.LeaderEpochs))
		}
		if p.Error != "" {
			fmt.Fprintf(tw, "  error: %s\n", p.Error)
		}
	}
	return tw.Flush()
}

func fmtEpochs(es []Epoch) string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "(%d,%d)", e.Epoch, e.StartOffset)
	}
	return b.String()
}
