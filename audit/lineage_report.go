package audit

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/kfollower/kfollower/storage"
	"github.com/twmb/franz-go/pkg/kgo"
)

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
// prefix of the leader's (docs/design.md promise 1: same offsets, same
// epochs): every local entry is the leader's entry with the same epoch and
// start, consecutive in the leader's sequence, and the last local epoch
// does not run past the leader's end of that epoch. The first local entry
// may start later or earlier than the leader's: either log may have had its
// start moved by retention (truncateFromStart moves the first entry's
// start).
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
	// the high watermark: docs/kafka.md §3.1, row R = L).
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
