package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kfollower/kfollower/cluster"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Epoch is one entry of a leader-epoch sequence: the first offset written
// in a leader epoch (KIP-101).
type Epoch struct {
	Epoch       int32 `json:"epoch"`
	StartOffset int64 `json:"startOffset"`
	// Inferred marks a start that OffsetsForLeaderEpoch cannot reveal: the
	// start of epoch 0 (asking for epoch -1 always answers (-1, -1)), taken
	// to be the leader's log start offset, where Kafka's cache puts its
	// first entry (LeaderEpochFileCache.truncateFromStart).
	Inferred bool `json:"inferred,omitempty"`
}

// epochWalk reconstructs one leader's epoch sequence from the answers to
// OffsetsForLeaderEpoch, asking one epoch at a time from the current one
// downwards. It is pure: ask says what to send, answer takes the reply.
//
// The leader answers epoch R with (floor(R), start of the first entry above
// R), LeaderEpochFileCache.endOffsetFor (kafka-internals.md §1.5, §2.1):
// the answer to R = C-1, for an epoch C known to be in the cache, is the
// start of C, plus the largest epoch below C. That epoch X is certainly in
// the cache when X < R. When X == R it may instead be the KAFKA-7415 row
// "R below the first epoch: (R, start of the first entry)", so the walk
// asks R-1 too: if R is in the cache that answer's end is the start of R,
// below the start of C; if R is below the first entry, the answer repeats
// the start of C and the walk is done.
//
// The current epoch (from Metadata) is always in the leader's cache: a new
// leader assigns it at its log end before writing (Partition.makeLeader,
// §2.5), so the first question, epoch = current, answers the log end.
type epochWalk struct {
	current  int32
	logStart int64 // the leader's, for the start of epoch 0
	leo      int64

	started bool
	done    bool
	cand    int32 // the epoch whose start the next answer gives
	sure    bool  // cand is known to be in the cache
	bound   int64 // start of the entry above cand (the log end at first)
	found   []Epoch
	queries int
}

func newEpochWalk(current int32, logStart int64) *epochWalk {
	return &epochWalk{current: current, logStart: logStart}
}

// ask returns the epoch to ask about next, or false when the walk is done.
func (w *epochWalk) ask() (int32, bool) {
	switch {
	case w.done:
		return 0, false
	case !w.started:
		return w.current, true
	}
	return w.cand - 1, true
}

// answer takes the leader's (LeaderEpoch, EndOffset) for the epoch ask
// returned.
func (w *epochWalk) answer(epoch int32, end int64) error {
	w.queries++
	if !w.started {
		if epoch != w.current || end < 0 {
			return fmt.Errorf("the leader answered (%d, %d) for its current epoch %d", epoch, end, w.current)
		}
		w.started, w.leo = true, end
		w.cand, w.sure, w.bound = w.current, true, end
		w.finishAtZero()
		return nil
	}
	asked := w.cand - 1
	switch {
	case epoch < 0 || end < 0:
		return fmt.Errorf("the leader answered (%d, %d) for epoch %d, below its epoch %d", epoch, end, asked, w.cand)
	case epoch > asked:
		return fmt.Errorf("the leader answered epoch %d for epoch %d", epoch, asked)
	case end > w.bound:
		return fmt.Errorf("the leader answered end offset %d for epoch %d, above the start %d of a later epoch", end, asked, w.bound)
	case !w.sure && end == w.bound:
		// cand was the "below the first epoch" echo: the entry above it
		// is the first.
		w.done = true
		return nil
	}
	w.found = append(w.found, Epoch{Epoch: w.cand, StartOffset: end})
	w.cand, w.sure, w.bound = epoch, epoch < asked, end
	w.finishAtZero()
	return nil
}

// finishAtZero ends the walk at epoch 0, whose start no question reveals
// (asking -1 answers (-1, -1)): it is the log start when epoch 0 is in the
// cache, which it is when certain, or when the log start lies below the
// next entry (epoch 0's batches, or an empty epoch 0 at the log start
// that a later epoch would have replaced, so not that).
func (w *epochWalk) finishAtZero() {
	if w.cand != 0 {
		return
	}
	if (w.sure || w.logStart < w.bound) && w.logStart >= 0 && w.logStart <= w.bound {
		w.found = append(w.found, Epoch{Epoch: 0, StartOffset: w.logStart, Inferred: true})
	}
	w.done = true
}

// entries is the sequence found, oldest first.
func (w *epochWalk) entries() []Epoch {
	out := slices.Clone(w.found)
	slices.Reverse(out)
	return out
}

// leaderLineage is the outcome of one partition's walk.
type leaderLineage struct {
	leader      int32
	leaderEpoch int32
	logStart    int64
	logEnd      int64
	epochs      []Epoch
	queries     int
	err         error
}

// walkLineages walks the leaders' epoch sequences of tps in rounds: each
// round sends one OffsetForLeaderEpoch request per leader broker carrying
// the next question of every partition it leads. A partition whose
// leader moved (FENCED/UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER) is
// walked again from the start with fresh Metadata, a few times.
func walkLineages(ctx context.Context, cl *kgo.Client, tps []wire.TopicPartition, meta *cluster.Metadata) map[wire.TopicPartition]*leaderLineage {
	out := map[wire.TopicPartition]*leaderLineage{}
	todo := tps
	for attempt := 0; len(todo) > 0; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, 200*time.Millisecond*time.Duration(attempt)); err != nil {
				break
			}
			topics := map[string]bool{}
			var names []string
			for _, tp := range todo {
				if !topics[tp.Topic] {
					topics[tp.Topic] = true
					names = append(names, tp.Topic)
				}
			}
			m, err := cluster.LoadMetadata(ctx, cl, names)
			if err != nil {
				for _, tp := range todo {
					out[tp].err = err
				}
				break
			}
			meta = m
		}
		walkOnce(ctx, cl, todo, meta, out)
		var again []wire.TopicPartition
		for _, tp := range todo {
			if l := out[tp]; l.err != nil && wire.RetryAfterMetadata(l.err) && attempt < 4 {
				again = append(again, tp)
			}
		}
		todo = again
	}
	return out
}

func walkOnce(ctx context.Context, cl *kgo.Client, tps []wire.TopicPartition, meta *cluster.Metadata, out map[wire.TopicPartition]*leaderLineage) {
	walks := map[wire.TopicPartition]*epochWalk{}
	queries := map[int32][]cluster.Query{}
	for _, tp := range tps {
		l := &leaderLineage{leader: -1, logStart: -1, logEnd: -1}
		out[tp] = l
		pm, err := meta.Lookup(tp)
		if err != nil {
			l.err = err
			continue
		}
		l.leader, l.leaderEpoch = pm.Leader, pm.LeaderEpoch
		queries[pm.Leader] = append(queries[pm.Leader], cluster.Query{TP: tp, CurrentEpoch: pm.LeaderEpoch})
	}
	// The log start, for the start of epoch 0 (see finishAtZero).
	for tp, a := range cluster.LogStartOffsets(ctx, cl, queries) {
		l := out[tp]
		if l == nil || l.err != nil {
			continue
		}
		if a.Err != nil {
			l.err = a.Err
			continue
		}
		l.logStart = a.Offset
		walks[tp] = newEpochWalk(l.leaderEpoch, a.Offset)
	}
	for {
		byBroker := map[int32][]cluster.Query{}
		for tp, w := range walks {
			if e, ok := w.ask(); ok {
				l := out[tp]
				byBroker[l.leader] = append(byBroker[l.leader], cluster.Query{TP: tp, CurrentEpoch: l.leaderEpoch, Epoch: e})
			}
		}
		if len(byBroker) == 0 {
			break
		}
		for tp, a := range cluster.OffsetsForLeaderEpoch(ctx, cl, byBroker) {
			w, l := walks[tp], out[tp]
			if w == nil {
				continue
			}
			err := a.Err
			if err == nil {
				err = w.answer(a.Epoch, a.Offset)
			}
			if err != nil {
				l.err = fmt.Errorf("walking the leader epochs of %s: %w", tp, err)
				delete(walks, tp)
			}
		}
	}
	for tp, l := range out {
		if w := walks[tp]; w != nil && l.err == nil {
			l.epochs, l.logEnd, l.queries = w.entries(), w.leo, w.queries
		}
	}
}

// Parting says where a local epoch sequence stops being the leader's.
type Parting struct {
	// Index is the local entry where they part; equal to the number of
	// local entries when only the end of the last local epoch differs.
	Index int `json:"index"`
	// Offset is the first offset the two name different epochs for (or
	// the leader has none for).
	Offset int64  `json:"offset"`
	Reason string `json:"reason"`
}

// compareEpochs checks that the local sequence (with its log end) is a
// prefix of the leader's (DESIGN.md promise 1: same offsets, same epochs):
// every local entry is the leader's entry with the same epoch and start,
// consecutive in the leader's sequence, and the last local epoch does not
// run past the leader's end of that epoch. The first local entry may start
// later or earlier than the leader's: either log may have had its start
// moved by retention (truncateFromStart moves the first entry's start).
// Local entries that end at or below the leader's first start are older
// than anything the leader still holds and are not compared.
//
// Caveat: on a compacted topic an epoch whose batches were all removed
// before we copied them is missing locally though the leader's cache
// still names it; that shows as a parting.
func compareEpochs(local []storage.EpochEntry, localEnd int64, leader []Epoch, leaderEnd int64) *Parting {
	if len(local) == 0 {
		return nil
	}
	endOf := func(i int) int64 {
		if i+1 < len(local) {
			return local[i+1].StartOffset
		}
		return localEnd
	}
	if len(leader) == 0 {
		return &Parting{Index: 0, Offset: local[0].StartOffset, Reason: "the leader has no leader epochs"}
	}
	i0 := 0
	for i0 < len(local) && endOf(i0) <= leader[0].StartOffset && local[i0].Epoch < leader[0].Epoch {
		i0++
	}
	if i0 == len(local) {
		return nil
	}
	j0 := slices.IndexFunc(leader, func(e Epoch) bool { return e.Epoch == local[i0].Epoch })
	if j0 < 0 {
		return &Parting{Index: i0, Offset: max(local[i0].StartOffset, leader[0].StartOffset),
			Reason: fmt.Sprintf("the leader has no epoch %d", local[i0].Epoch)}
	}
	for i := i0; i < len(local); i++ {
		l, j := local[i], j0+i-i0
		if j >= len(leader) {
			return &Parting{Index: i, Offset: l.StartOffset,
				Reason: fmt.Sprintf("local epoch %d starts at %d; the leader has no epoch after %d", l.Epoch, l.StartOffset, leader[len(leader)-1].Epoch)}
		}
		le := leader[j]
		if le.Epoch != l.Epoch || (i > i0 && le.StartOffset != l.StartOffset) {
			return &Parting{Index: i, Offset: min(l.StartOffset, le.StartOffset),
				Reason: fmt.Sprintf("local epoch %d starts at %d; the leader's epoch %d starts at %d", l.Epoch, l.StartOffset, le.Epoch, le.StartOffset)}
		}
	}
	last, j := len(local)-1, j0+len(local)-1-i0
	leaderEndOf := leaderEnd
	if j+1 < len(leader) {
		leaderEndOf = leader[j+1].StartOffset
	}
	if localEnd > leaderEndOf {
		return &Parting{Index: len(local), Offset: leaderEndOf,
			Reason: fmt.Sprintf("local epoch %d runs to %d; the leader's ends at %d", local[last].Epoch, localEnd, leaderEndOf)}
	}
	return nil
}

// LineageOptions select the partitions whose leader epochs Lineage
// reconstructs.
type LineageOptions struct {
	// Client sends Metadata, ListOffsets and OffsetForLeaderEpoch; any
	// kgo client of the cluster will do (no consumer options needed).
	Client *kgo.Client
	// Topics to walk; required.
	Topics []string
	// Partitions narrows the walk; empty means every partition.
	Partitions []int32
	// DataDir, if set, is a kfollower data dir whose local sequences are
	// shown beside the leader's.
	DataDir string
}

// LineageReport is the result of Lineage. Its exported fields are its
// JSON form.
type LineageReport struct {
	Partitions []PartitionLineage `json:"partitions"`
}

// PartitionLineage is one partition's leader sequence beside the local one.
type PartitionLineage struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Leader      int32  `json:"leader"`
	LeaderEpoch int32  `json:"leaderEpoch"`
	// LeaderLogStart and LeaderLogEnd are the leader's log start offset
	// and log end offset (the end of its current epoch, which may be past
	// the high watermark, kafka-internals.md §1.5).
	LeaderLogStart int64   `json:"leaderLogStart"`
	LeaderLogEnd   int64   `json:"leaderLogEnd"`
	LeaderEpochs   []Epoch `json:"leaderEpochs"`
	// Queries is how many OffsetsForLeaderEpoch questions the walk took.
	Queries int `json:"queries"`
	// HasLocal says whether a local copy was found; LocalEpochs and
	// LocalLogEnd describe it.
	HasLocal    bool    `json:"hasLocal"`
	LocalEpochs []Epoch `json:"localEpochs,omitempty"`
	LocalLogEnd int64   `json:"localLogEnd,omitempty"`
	// Parted is where the local sequence stops being a prefix of the
	// leader's; nil when it is one (or there is no local copy).
	Parted *Parting `json:"parted,omitempty"`
	Error  string   `json:"error,omitempty"`
}

// Lineage reconstructs the leader epoch sequence of every selected
// partition from the outside (see epochWalk) and, given a data dir, sets
// the local sequence beside it. Partition problems (no leader, fenced
// repeatedly) are reported per partition; the error is for problems that
// stop everything (no Client, Metadata unreachable).
func Lineage(ctx context.Context, opts LineageOptions) (*LineageReport, error) {
	if opts.Client == nil {
		return nil, &UsageError{"lineage: no Kafka client"}
	}
	if len(opts.Topics) == 0 {
		return nil, &UsageError{"lineage: no topic named"}
	}
	meta, err := cluster.LoadMetadata(ctx, opts.Client, opts.Topics)
	if err != nil {
		return nil, err
	}
	tps := selectPartitions(meta, opts.Topics, opts.Partitions)
	walked := walkLineages(ctx, opts.Client, tps, meta)
	rep := &LineageReport{}
	for _, tp := range tps {
		l := walked[tp]
		pl := PartitionLineage{Topic: tp.Topic, Partition: tp.Partition, Leader: l.leader, LeaderEpoch: l.leaderEpoch,
			LeaderLogStart: l.logStart, LeaderLogEnd: l.logEnd, LeaderEpochs: l.epochs, Queries: l.queries}
		if l.err != nil {
			pl.Error = l.err.Error()
		}
		if opts.DataDir != "" {
			if err := pl.addLocal(opts.DataDir); err != nil {
				pl.Error = joinErr(pl.Error, err.Error())
			}
		}
		rep.Partitions = append(rep.Partitions, pl)
	}
	return rep, nil
}

// selectPartitions lists the partitions of topics, narrowed to parts when
// given. A topic Metadata does not list still gets an entry per asked
// partition (partition 0 when none was asked), so its error is reported.
func selectPartitions(meta *cluster.Metadata, topics []string, parts []int32) []wire.TopicPartition {
	var tps []wire.TopicPartition
	for _, t := range topics {
		n, ok := meta.Partitions(t)
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
	}
	slices.SortFunc(tps, func(a, b wire.TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return slices.Compact(tps)
}

func (pl *PartitionLineage) addLocal(dataDir string) error {
	lv, err := storage.OpenReadOnly(dataDir, pl.Topic, pl.Partition)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer lv.Close()
	end, epochs := lv.LogEndOffset(), lv.Epochs().Entries()
	pl.HasLocal, pl.LocalLogEnd = true, end
	for _, e := range epochs {
		pl.LocalEpochs = append(pl.LocalEpochs, Epoch{Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	if pl.Error == "" {
		pl.Parted = compareEpochs(epochs, end, pl.LeaderEpochs, pl.LeaderLogEnd)
	}
	return nil
}

// ExitCode is ExitMismatch when a local sequence parts from its leader's,
// else ExitError when a partition could not be walked, else ExitOK.
func (r *LineageReport) ExitCode() int {
	code := ExitOK
	for _, p := range r.Partitions {
		if p.Parted != nil {
			return ExitMismatch
		}
		if p.Error != "" {
			code = ExitError
		}
	}
	return code
}

// WriteTable renders each partition's leader sequence beside the local one,
// marking the row where they part.
func (r *LineageReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, p := range r.Partitions {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "%s-%d  leader %d, epoch %d, log %d..%d", p.Topic, p.Partition, p.Leader, p.LeaderEpoch, p.LeaderLogStart, p.LeaderLogEnd)
		if p.HasLocal {
			fmt.Fprintf(tw, "; local log end %d", p.LocalLogEnd)
		}
		fmt.Fprintf(tw, "; %d queries\n", p.Queries)
		if p.Error != "" {
			fmt.Fprintf(tw, "  error: %s\n", p.Error)
		}
		fmt.Fprintln(tw, "  EPOCH\tLEADER START\tLOCAL START\t")
		for _, row := range lineageRows(p) {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", row.epoch, row.leader, row.local, row.mark)
		}
		if p.Parted != nil {
			fmt.Fprintf(tw, "  parts at offset %d: %s\n", p.Parted.Offset, p.Parted.Reason)
		} else if p.HasLocal && p.Error == "" {
			fmt.Fprintln(tw, "  local sequence is a prefix of the leader's")
		}
	}
	return tw.Flush()
}

type lineageRow struct {
	epoch         int32
	leader, local string
	mark          string
}

func lineageRows(p PartitionLineage) []lineageRow {
	byEpoch := map[int32]*lineageRow{}
	var epochs []int32
	row := func(e int32) *lineageRow {
		if r, ok := byEpoch[e]; ok {
			return r
		}
		r := &lineageRow{epoch: e, leader: "-", local: "-"}
		byEpoch[e] = r
		epochs = append(epochs, e)
		return r
	}
	for _, e := range p.LeaderEpochs {
		s := fmt.Sprint(e.StartOffset)
		if e.Inferred {
			s += " (log start)"
		}
		row(e.Epoch).leader = s
	}
	for _, e := range p.LocalEpochs {
		row(e.Epoch).local = fmt.Sprint(e.StartOffset)
	}
	if p.Parted != nil {
		idx := min(p.Parted.Index, len(p.LocalEpochs)-1)
		if idx >= 0 {
			row(p.LocalEpochs[idx].Epoch).mark = "<- parts here"
		}
	}
	slices.Sort(epochs)
	out := make([]lineageRow, 0, len(epochs))
	for _, e := range epochs {
		out = append(out, *byEpoch[e])
	}
	return out
}

func joinErr(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
