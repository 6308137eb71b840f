package audit

import (
	"fmt"
	"slices"
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
// R), LeaderEpochFileCache.endOffsetFor (docs/kafka.md §3.1, §2.1):
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
// docs/kafka.md §2.6), so the first question, epoch = current, answers the
// log end.
//
// testdata/*.txt tell the walk's cases as stories (TestEpochWalkStories).
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
