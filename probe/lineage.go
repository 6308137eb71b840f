package probe

import (
	"fmt"
	"strings"

	"github.com/kfollower/kfollower/wire"
)

// Epoch is one entry of a leader's epoch sequence: the first offset written
// in a leader epoch (KIP-101; LeaderEpochFileCache, docs/kafka.md §2.1).
type Epoch struct {
	Epoch       int32 `json:"epoch"`
	StartOffset int64 `json:"startOffset"`
	// Inferred marks the start of epoch 0, which no question reveals
	// (asking epoch -1 always answers (-1, -1)): it is taken to be the log
	// start, where the cache's first entry sits (truncateFromStart,
	// docs/kafka.md §2.4).
	Inferred bool `json:"inferred,omitempty"`
}

func (e Epoch) String() string { return fmt.Sprintf("%d@%d", e.Epoch, e.StartOffset) }

// lineage is a leader's epoch sequence as the walk rebuilt it, oldest
// first, with the log end the leader gave for its current epoch.
type lineage struct {
	entries []Epoch
	logEnd  int64
}

func (l lineage) String() string {
	var b strings.Builder
	for i, e := range l.entries {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(e.String())
	}
	return b.String()
}

// endOffsetFor is what a leader holding this sequence must answer to
// OffsetsForLeaderEpoch(r): LeaderEpochFileCache.endOffsetFor, row by row
// (docs/kafka.md §3.1). The probe's expectations come from it.
func (l lineage) endOffsetFor(r int32) wire.EpochEndOffset {
	undefined := wire.EpochEndOffset{Epoch: -1, EndOffset: -1}
	n := len(l.entries)
	switch {
	case r < 0 || n == 0:
		return undefined
	case l.entries[n-1].Epoch == r:
		return wire.EpochEndOffset{Epoch: r, EndOffset: l.logEnd}
	}
	// higher: the first entry above r; floor: the last at or below it.
	hi := 0
	for hi < n && l.entries[hi].Epoch <= r {
		hi++
	}
	switch {
	case hi == n:
		return undefined
	case hi == 0: // below the first entry (KAFKA-7415)
		return wire.EpochEndOffset{Epoch: r, EndOffset: l.entries[0].StartOffset}
	}
	return wire.EpochEndOffset{Epoch: l.entries[hi-1].Epoch, EndOffset: l.entries[hi].StartOffset}
}

// epochAt is the epoch whose range holds offset (epochForOffset,
// docs/kafka.md §2.5), false below the first entry.
func (l lineage) epochAt(offset int64) (int32, bool) {
	for i := len(l.entries) - 1; i >= 0; i-- {
		if l.entries[i].StartOffset <= offset {
			return l.entries[i].Epoch, true
		}
	}
	return -1, false
}

// latest is the newest entry's epoch, -1 when there is none.
func (l lineage) latest() int32 {
	if len(l.entries) == 0 {
		return -1
	}
	return l.entries[len(l.entries)-1].Epoch
}

// endOf is where entry i ends: the next entry's start, or the log end.
func (l lineage) endOf(i int) int64 {
	if i+1 < len(l.entries) {
		return l.entries[i+1].StartOffset
	}
	return l.logEnd
}

// walkLineage rebuilds a leader's epoch sequence from the outside, asking
// OffsetsForLeaderEpoch one epoch at a time from the current one down, as
// `kfollower lineage` does (the inversion of endOffsetFor, docs/kafka.md
// §3.1):
//
//   - the current epoch is in the leader's cache, assigned at its log end
//     when it was elected (Partition.makeLeader, docs/kafka.md §2.6), so
//     the first answer is (current, log end);
//   - for an epoch C known to be in the cache, the answer to C-1 is
//     (floor(C-1), start of C): it gives C's start, and the floor X is the
//     next entry down, certainly so when X < C-1;
//   - when X == C-1 it may instead be the "below the first entry" row
//     (C-1, start of the first entry), so the walk asks X-1 too: an answer
//     repeating the same end means X was that echo and the walk is done;
//   - epoch 0's start is the log start (see Epoch.Inferred).
//
// ask sends one question and returns the answer, or an error for an answer
// that carries an error code or never came (the caller decides what those
// mean). A walk the answers make impossible returns the violation, with
// the evidence of every question asked so far.
func walkLineage(current int32, logStart int64, ask func(epoch int32) (wire.EpochEndOffset, error)) (lin lineage, evidence []Observation, violation string, err error) {
	record := func(epoch int32, a wire.EpochEndOffset, expected string, ok bool) {
		evidence = append(evidence, Observation{
			Request:  fmt.Sprintf("OffsetsForLeaderEpoch leaderEpoch=%d currentLeaderEpoch=%d", epoch, current),
			Answer:   fmt.Sprintf("(%d, %d)", a.Epoch, a.EndOffset),
			Expected: expected,
			Status:   passIf(ok),
		})
	}
	first, err := ask(current)
	if err != nil {
		return lin, evidence, "", err
	}
	ok := first.Epoch == current && first.EndOffset >= 0
	record(current, first, fmt.Sprintf("(%d, the log end): the current epoch is the newest entry (Partition.makeLeader)", current), ok)
	if !ok {
		return lin, evidence, fmt.Sprintf("the leader answered (%d, %d) for its current epoch %d", first.Epoch, first.EndOffset, current), nil
	}
	lin.logEnd = first.EndOffset
	var found []Epoch // newest first
	cand, sure, bound := current, true, first.EndOffset
	for cand > 0 {
		asked := cand - 1
		a, err := ask(asked)
		if err != nil {
			return lin, evidence, "", err
		}
		var bad string
		switch {
		case a.Epoch < 0 || a.EndOffset < 0:
			bad = fmt.Sprintf("the leader answered (%d, %d) for epoch %d, below its current epoch %d: a leader has an answer for every epoch up to its current one", a.Epoch, a.EndOffset, asked, current)
		case a.Epoch > asked:
			bad = fmt.Sprintf("the leader answered epoch %d for epoch %d: endOffsetFor answers an epoch at or below the one asked", a.Epoch, asked)
		case a.EndOffset > bound:
			bad = fmt.Sprintf("the leader answered end offset %d for epoch %d, above %d, where a later epoch starts", a.EndOffset, asked, bound)
		case a.EndOffset < logStart:
			bad = fmt.Sprintf("the leader answered end offset %d for epoch %d, below its log start %d", a.EndOffset, asked, logStart)
		}
		record(asked, a, fmt.Sprintf("an epoch ≤ %d and an end offset in [%d, %d]", asked, logStart, bound), bad == "")
		if bad != "" {
			return lin, evidence, bad, nil
		}
		if !sure && a.EndOffset == bound {
			// cand was the echo of the first entry: the one above it is
			// the first.
			break
		}
		found = append(found, Epoch{Epoch: cand, StartOffset: a.EndOffset})
		cand, sure, bound = a.Epoch, a.Epoch < asked, a.EndOffset
	}
	// Epoch 0, whose start no question reveals: it is in the cache when
	// certain, or when the log start lies below the next entry's start
	// (an empty epoch 0 at the log start would have been replaced).
	if cand == 0 && (sure || logStart < bound) && logStart <= bound {
		found = append(found, Epoch{Epoch: 0, StartOffset: logStart, Inferred: true})
	}
	for i := len(found) - 1; i >= 0; i-- {
		lin.entries = append(lin.entries, found[i])
	}
	return lin, evidence, "", nil
}
