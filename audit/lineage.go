package audit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/kfollower/kfollower/cluster"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kgo"
)

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
// leader moved (wire.RetryAfterMetadata) is walked again from the start
// with fresh Metadata, a few times (see retry.go).
func walkLineages(ctx context.Context, cl *kgo.Client, tps []wire.TopicPartition, meta *cluster.Metadata) map[wire.TopicPartition]*leaderLineage {
	out := map[wire.TopicPartition]*leaderLineage{}
	todo := tps
	for attempt := 0; len(todo) > 0; attempt++ {
		if attempt > 0 {
			if err := cluster.Backoff(ctx, 200*time.Millisecond*time.Duration(attempt)); err != nil {
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
	tps := meta.SelectPartitions(opts.Topics, opts.Partitions, false)
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

func joinErr(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
