package probe

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kfollower/kfollower/wire"
)

// walkCache walks a leader whose cache is entries (log end leo, log start
// logStart), answering with the fake's endOffsetFor, Kafka's rules written
// separately from the probe's model.
func walkCache(entries []Epoch, leo, logStart int64) (lineage, []Observation, string, int) {
	f := &fakeLeader{cache: entries, logStart: logStart}
	if leo > logStart {
		f.batches = []fakeBatch{{base: logStart, records: int(leo - logStart)}}
	}
	current := entries[len(entries)-1].Epoch
	asked := 0
	lin, obs, violation, _ := walkLineage(current, logStart, func(e int32) (wire.EpochEndOffset, error) {
		asked++
		ep, end := f.endOffsetFor(e)
		return wire.EpochEndOffset{Epoch: ep, EndOffset: end}, nil
	})
	return lin, obs, violation, asked
}

// The walk gives back the leader's cache exactly, with epoch 0's start
// inferred at the log start, for the caches of LeaderEpochFileCacheTest
// and the shapes retention and empty epochs leave (docs/kafka.md §2, §3.1).
func TestWalkLineage(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cache         []Epoch
		leo, logStart int64
		want          string
		questions     int
	}{
		{"epoch 0 only, empty", []Epoch{{0, 0, false}}, 0, 0, "0@0", 1},
		{"epoch 0 only", []Epoch{{0, 0, false}}, 10, 0, "0@0", 1},
		{"epochForOffset's cache", []Epoch{{0, 10, false}, {1, 20, false}, {5, 30, false}}, 40, 10, "0@10 1@20 5@30", 3},
		{"gaps", []Epoch{{0, 10, false}, {2, 13, false}, {4, 17, false}}, 20, 10, "0@10 2@13 4@17", 3},
		// (5,11)(6,12)(7,13): epochs 0–4 are below the first entry
		// (KAFKA-7415), found when an answer repeats the same end.
		{"below the first epoch", []Epoch{{5, 11, false}, {6, 12, false}, {7, 13, false}}, 20, 11, "5@11 6@12 7@13", 5},
		{"empty current epoch", []Epoch{{0, 0, false}, {3, 50, false}}, 50, 0, "0@0 3@50", 2},
		{"first entry at the log start after retention", []Epoch{{3, 120, false}, {5, 150, false}, {7, 200, false}}, 250, 120, "3@120 5@150 7@200", 5},
		{"epoch 1 first, epoch 0 never written", []Epoch{{1, 0, false}, {2, 5, false}}, 9, 0, "1@0 2@5", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lin, obs, violation, asked := walkCache(tc.cache, tc.leo, tc.logStart)
			if violation != "" {
				t.Fatalf("violation %s", violation)
			}
			if lin.String() != tc.want || lin.logEnd != tc.leo || asked != tc.questions || len(obs) != asked {
				t.Fatalf("walked %s to %d in %d questions (%d observations), want %s to %d in %d", lin, lin.logEnd, asked, len(obs), tc.want, tc.leo, tc.questions)
			}
			if first := lin.entries[0]; first.Inferred != (first.Epoch == 0) {
				t.Errorf("first entry %+v: only epoch 0 is inferred", first)
			}
		})
	}
}

// Answers no leader can give stop the walk with the violation, the answer
// that showed it as the last, failed, observation.
func TestWalkViolations(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers map[int32]wire.EpochEndOffset
		want    string
	}{
		{"current epoch answered with another", map[int32]wire.EpochEndOffset{3: {Epoch: 2, EndOffset: 50}}, "for its current epoch 3"},
		{"current epoch without an end", map[int32]wire.EpochEndOffset{3: {Epoch: 3, EndOffset: -1}}, "for its current epoch 3"},
		{"(-1, -1) below the current epoch", map[int32]wire.EpochEndOffset{3: {Epoch: 3, EndOffset: 50}, 2: {Epoch: -1, EndOffset: -1}}, "a leader has an answer for every epoch"},
		{"an epoch above the one asked", map[int32]wire.EpochEndOffset{3: {Epoch: 3, EndOffset: 50}, 2: {Epoch: 3, EndOffset: 40}}, "answers an epoch at or below the one asked"},
		{"an end past a later epoch's start", map[int32]wire.EpochEndOffset{3: {Epoch: 3, EndOffset: 50}, 2: {Epoch: 1, EndOffset: 60}}, "above 50, where a later epoch starts"},
		{"an end below the log start", map[int32]wire.EpochEndOffset{3: {Epoch: 3, EndOffset: 50}, 2: {Epoch: 1, EndOffset: 5}}, "below its log start 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, obs, violation, err := walkLineage(3, 10, func(e int32) (wire.EpochEndOffset, error) { return tc.answers[e], nil })
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(violation, tc.want) || len(obs) == 0 || obs[len(obs)-1].Status != Fail {
				t.Fatalf("violation %q, observations %+v; want %q with the last failed", violation, obs, tc.want)
			}
		})
	}
}

// The model's endOffsetFor, from which the checks take their
// expectations, agrees with the fake leader's, written separately from
// LeaderEpochFileCache.endOffsetFor, on random caches; and a walk over
// each gives the cache back.
func TestEndOffsetForModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var cache []Epoch
		epoch, start := int32(r.IntN(3)), int64(r.IntN(5))
		logStart := start
		for range 1 + r.IntN(6) {
			cache = append(cache, Epoch{Epoch: epoch, StartOffset: start})
			epoch += 1 + int32(r.IntN(3))
			start += 1 + int64(r.IntN(20))
		}
		leo := cache[len(cache)-1].StartOffset + int64(r.IntN(10))
		f := &fakeLeader{cache: cache, logStart: logStart, batches: []fakeBatch{{base: logStart, records: int(leo - logStart)}}}
		lin := lineage{entries: cache, logEnd: leo}
		for e := int32(-1); e <= epoch+1; e++ {
			we, wend := f.endOffsetFor(e)
			if got := lin.endOffsetFor(e); got != (wire.EpochEndOffset{Epoch: we, EndOffset: wend}) {
				t.Fatalf("cache %v log end %d: endOffsetFor(%d) = %v, want (%d, %d)", cache, leo, e, got, we, wend)
			}
		}
		walked, _, violation, _ := walkCache(cache, leo, logStart)
		if violation != "" || walked.String() != lin.String() {
			t.Fatalf("cache %v (log start %d): walked %s, violation %q", cache, logStart, walked, violation)
		}
	}
}
