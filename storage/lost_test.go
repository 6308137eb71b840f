package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kfollower/kfollower/wire/batch"
)

// memData is the data dir of the tests on memFS.
const memData = "/data"

// lostEvents lists the entries of a partition's lost+found directory.
func lostEvents(t *testing.T, dataDir string) []string {
	t.Helper()
	ents, err := os.ReadDir(LostFoundDir(dataDir, "t", 0))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// savedBytes is the concatenation of an event's segments.
func savedBytes(t *testing.T, lost Lost) []byte {
	t.Helper()
	var out []byte
	for _, s := range lost.Segments {
		b, err := os.ReadFile(filepath.Join(lost.Dir, s))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// TruncateWithLost on each path the follower takes: the event's From is
// the follower's MoveToLostFound.From (max(target, log start), or the log
// start for a full truncation), lost.json records it beside the first
// saved batch's base offset, the cause and the truncation, and the saved
// segments are the removed batches byte for byte.
func TestTruncateWithLost(t *testing.T) {
	now := time.Unix(1e9, 0)
	cases := []struct {
		name        string
		deleteTo    int64 // DeleteBefore first: the log start moves inside a segment
		t           Truncation
		from, first int64 // want
		leo, start  int64 // the log after
	}{
		{"cut inside a batch", 0, Truncation{Offset: 40, Cause: CauseOffsetsForLeaderEpoch, OldLeaderEpoch: 3, NewLeaderEpoch: 4}, 40, 39, 39, 0},
		{"cut at a batch boundary", 0, Truncation{Offset: 42, Cause: CauseDivergingEpoch}, 42, 42, 42, 0},
		{"below the log start: full", 40, Truncation{Offset: 10, Cause: CauseOutOfRangeHigh}, 40, 39, 10, 10},
		{"full, discarded on a gap", 0, Truncation{Offset: 500, Full: true, Cause: CauseDiscardedOnGap}, 0, 0, 500, 500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := t.TempDir()
			_, batches := populate(t, data)
			opts := corruptOpts(quiet)
			opts.Now = func() time.Time { return now }
			l := openT(t, data, opts)
			if c.deleteTo > 0 {
				if err := l.DeleteBefore(c.deleteTo); err != nil {
					t.Fatal(err)
				}
			}
			want := readAll(t, l)
			if h, _ := batch.ParseHeader(want); c.first > h.BaseOffset {
				want = want[bytes.Index(want, batches[c.first/3]):]
			}
			lost, err := l.TruncateWithLost(c.t)
			if err != nil {
				t.Fatal(err)
			}
			if lost.From != c.from || lost.FirstOffset != c.first || lost.EndOffset != 90 || lost.LastOffset != 89 || lost.Cause != c.t.Cause {
				t.Fatalf("lost %+v, want from %d, first %d", lost, c.from, c.first)
			}
			if l.LogEndOffset() != c.leo || l.LogStartOffset() != c.start {
				t.Fatalf("log now %d..%d, want %d..%d", l.LogStartOffset(), l.LogEndOffset(), c.start, c.leo)
			}
			if got := savedBytes(t, lost); !bytes.Equal(got, want) || lost.Bytes != int64(len(want)) {
				t.Fatalf("saved %d bytes, want the %d removed", len(got), len(want))
			}
			raw, err := os.ReadFile(filepath.Join(lost.Dir, "lost.json"))
			if err != nil {
				t.Fatal(err)
			}
			var js map[string]any
			if err := json.Unmarshal(raw, &js); err != nil {
				t.Fatal(err)
			}
			tr, _ := js["truncation"].(map[string]any)
			if js["cause"] != c.t.Cause || js["from"] != float64(c.from) || js["firstOffset"] != float64(c.first) ||
				tr["offset"] != float64(c.t.Offset) || tr["full"] != (c.t.Full || c.deleteTo > c.t.Offset) ||
				tr["newLeaderEpoch"] != float64(c.t.NewLeaderEpoch) {
				t.Fatalf("lost.json %s", raw)
			}
			back, err := ReadLost(lost.Dir)
			if err != nil || back.ID != lost.ID || back.From != lost.From || !slices.Equal(back.Segments, lost.Segments) {
				t.Fatalf("read back %+v: %v", back, err)
			}
			if got := l.UnreportedLosses(); len(got) != 1 || got[0].ID != lost.ID {
				t.Fatalf("unreported %v, want the loss %s", got, lost.ID)
			}
			if names := lostEvents(t, data); !slices.Equal(names, []string{lost.ID}) {
				t.Fatalf("lost+found holds %v", names)
			}
			if lost.ClusterLoss() != (c.t.Cause != CauseDiscardedOnGap) {
				t.Fatalf("ClusterLoss %v for cause %s", lost.ClusterLoss(), lost.Cause)
			}
		})
	}
}

// A truncation that removes nothing makes no event, and a second loss of
// the same range (new records the cluster wrote at the lost offsets, lost
// again) gets its own event, ".1".
func TestTruncateWithLostNothingAndAgain(t *testing.T) {
	data := t.TempDir()
	l := openT(t, data, testOpts())
	mustAppend(t, l, build(0, 0, 5), build(5, 0, 5))
	none, err := l.TruncateWithLost(Truncation{Offset: 10, Cause: CauseOffsetsForLeaderEpoch})
	if err != nil || none.Batches != 0 || none.ID != "" || lostEvents(t, data) != nil || len(l.UnreportedLosses()) != 0 {
		t.Fatalf("nothing removed: %+v %v, lost+found %v", none, err, lostEvents(t, data))
	}
	first, err := l.TruncateWithLost(Truncation{Offset: 5, Cause: CauseOffsetsForLeaderEpoch})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, build(5, 2, 5))
	second, err := l.TruncateWithLost(Truncation{Offset: 5, Cause: CauseDivergingEpoch})
	if err != nil {
		t.Fatal(err)
	}
	if first.ID != "00000000000000000005-00000000000000000010" || second.ID != first.ID+".1" {
		t.Fatalf("ids %s, %s", first.ID, second.ID)
	}
	if err := l.MarkReported(first.ID); err != nil {
		t.Fatal(err)
	}
	if err := l.MarkReported("00000000000000000000-00000000000000000001"); err != nil {
		t.Fatalf("an unknown id: %v", err)
	}
	l.Close()
	l = openT(t, data, testOpts())
	if got := l.UnreportedLosses(); len(got) != 1 || got[0].ID != second.ID || got[0].Cause != CauseDivergingEpoch {
		t.Fatalf("after reopen, unreported %+v, want only %s", got, second.ID)
	}
	if err := l.MarkReported(second.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(l.Dir(), unreportedName)); !os.IsNotExist(err) {
		t.Fatalf("the empty list is not removed: %v", err)
	}
	if _, err := l.TruncateWithLost(Truncation{Offset: 0, Cause: "Not A Token"}); err == nil {
		t.Fatal("a cause that is not a token was taken")
	}
}

// A crash at chosen points of TruncateWithLost and MarkReported (a strict
// power cut, on memFS): Open completes or drops the save, never copies it
// twice, and reports a loss it completed.
func TestTruncateWithLostRecovery(t *testing.T) {
	cases := []struct {
		name       string
		at         string // the operation before which power is cut
		nth        int    // the nth such operation
		event      bool   // the event exists after Open, and the log is truncated
		unreported bool
	}{
		{"the event's directory made", "mkdir 00000000000000000039-00000000000000000090.tmp", 1, false, false},
		{"its segment written", "write /data/lost+found/t-0/00000000000000000039-00000000000000000090.tmp/00000000000000000039.log", 1, false, false},
		{"lost.json in place, before the intent", "create /data/t-0/kfollower-truncation-intent.tmp", 1, false, false},
		{"the intent durable, the event not renamed", "rename /data/lost+found/t-0/00000000000000000039-00000000000000000090.tmp", 1, true, true},
		{"the event renamed, not synced", "syncdir /data/lost+found/t-0", 2, true, true},
		{"the segment cut, not synced", "sync /data/t-0/00000000000000000033.log", 1, true, true},
		{"the loss listed, the intent not removed", "remove /data/t-0/kfollower-truncation-intent", 1, true, true},
		{"reported, not yet marked", "remove /data/t-0/kfollower-unreported-losses", 1, true, true},
		{"marked", "end", 0, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newMemFS()
			opts := corruptOpts(quiet)
			l, err := openLog(m, memData, "t", 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 30 {
				mustAppend(t, l, build(int64(i*3), int32(i/8), 3))
			}
			var img *memFS
			seen := 0
			m.before = func(_ int, what string) {
				if img == nil && (what == c.at || strings.HasPrefix(what, c.at+" ")) {
					if seen++; seen == c.nth {
						img = m.imageLocked(nil)
					}
				}
			}
			lost, err := l.TruncateWithLost(Truncation{Offset: 40, Cause: CauseOffsetsForLeaderEpoch})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.MarkReported(lost.ID); err != nil {
				t.Fatal(err)
			}
			if c.at == "end" {
				img = m.crashImage(nil)
			}
			l.Close()
			if img == nil {
				t.Fatalf("no operation %q", c.at)
			}
			re, err := openLog(img, memData, "t", 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer re.Close()
			ents, _ := img.ReadDir(LostFoundDir(memData, "t", 0))
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			wantNames := []string(nil)
			wantLEO := int64(90)
			if c.event {
				wantNames, wantLEO = []string{lost.ID}, 39
			}
			if !slices.Equal(names, wantNames) || re.LogEndOffset() != wantLEO {
				t.Fatalf("lost+found %v and log end %d, want %v and %d", names, re.LogEndOffset(), wantNames, wantLEO)
			}
			var ids []string
			for _, x := range re.UnreportedLosses() {
				ids = append(ids, x.ID)
			}
			if c.unreported != slices.Equal(ids, []string{lost.ID}) || (!c.unreported && ids != nil) {
				t.Fatalf("unreported %v", ids)
			}
		})
	}
}

// a *CorruptionError in our own segment while saving
// is returned as such, and leaves no copy behind and the log unchanged,
// so the driver can stop the partition instead of retrying (each retry
// used to leave another partial lost+found directory).
func TestLostCorruption(t *testing.T) {
	for _, api := range []string{"TruncateWithLost", "SaveLost"} {
		t.Run(api, func(t *testing.T) {
			data := t.TempDir()
			dir, batches := populate(t, data)
			seg := segFiles(t, dir, logSuffix)[1] // the sealed segment from offset 33
			at := len(batches[11]) + len(batches[12])
			modify(t, seg, func(b []byte) []byte { b[at+70] ^= 1; return b }) // the batch at 39
			l := openT(t, data, corruptOpts(quiet))
			for range 2 {
				var err error
				if api == "SaveLost" {
					_, err = l.SaveLost(36)
				} else {
					_, err = l.TruncateWithLost(Truncation{Offset: 36, Cause: CauseOffsetsForLeaderEpoch})
				}
				var ce *CorruptionError
				if !errors.As(err, &ce) || ce.Segment != seg || ce.Offset != 39 || ce.Position != int64(at) {
					t.Fatalf("got %v, want the *CorruptionError of the batch at 39 in %s", err, seg)
				}
				if names := lostEvents(t, data); len(names) != 0 {
					t.Fatalf("a failed save left %v in lost+found", names)
				}
				if l.LogEndOffset() != 90 || l.Failed() != nil {
					t.Fatalf("log end %d, failed %v", l.LogEndOffset(), l.Failed())
				}
			}
		})
	}
}

// a Stat error other than not-exist (EIO, EACCES,
// ESTALE) while choosing the event's name is returned, never taken for
// "taken, try the next name": that spun forever, holding the log's lock.
// The fault answers "not found" after many calls, so a loop that spins
// still ends, and the test fails by count.
func TestLostStatError(t *testing.T) {
	for _, e := range []syscall.Errno{syscall.EIO, syscall.EACCES, syscall.ESTALE} {
		for _, api := range []string{"TruncateWithLost", "SaveLost"} {
			t.Run(e.Error()+"/"+api, func(t *testing.T) {
				data := t.TempDir()
				populate(t, data)
				ffs := &faultFS{}
				l, err := openLog(ffs, data, "t", 0, corruptOpts(quiet))
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				ffs.statMatch, ffs.statErr, ffs.statLimit = "0000000039-", e, 1000
				if api == "SaveLost" {
					_, err = l.SaveLost(40)
				} else {
					_, err = l.TruncateWithLost(Truncation{Offset: 40, Cause: CauseOffsetsForLeaderEpoch})
				}
				if !errors.Is(err, e) || ffs.stats != 1 {
					t.Fatalf("got %v after %d Stat calls, want %v after one", err, ffs.stats, e)
				}
				if names := lostEvents(t, data); len(names) != 0 || l.LogEndOffset() != 90 {
					t.Fatalf("lost+found %v, log end %d", names, l.LogEndOffset())
				}
				// The same for the lost+found directory itself.
				ffs.statMatch, ffs.stats = "lost+found", 0
				if api == "SaveLost" {
					_, err = l.SaveLost(40)
				} else {
					_, err = l.TruncateWithLost(Truncation{Offset: 40, Cause: CauseOffsetsForLeaderEpoch})
				}
				if !errors.Is(err, e) || ffs.stats != 1 {
					t.Fatalf("creating lost+found: got %v after %d Stat calls, want %v after one", err, ffs.stats, e)
				}
				ffs.statMatch = ""
				if err := l.Append(build(90, 3, 3)); err != nil {
					t.Fatalf("the log is stuck after the error: %v", err)
				}
			})
		}
	}
}

// a lost range wider than 2^31 offsets (a compaction
// gap) is saved across several segments, as the log itself rolls.
func TestLostWideRange(t *testing.T) {
	for _, api := range []string{"TruncateWithLost", "SaveLost"} {
		t.Run(api, func(t *testing.T) {
			data := t.TempDir()
			l := openT(t, data, testOpts())
			far := int64(1)<<31 + 10
			a, b, c := build(0, 0, 3), build(far, 0, 3), build(far+3, 1, 3)
			mustAppend(t, l, a, b, c)
			var lost Lost
			var err error
			if api == "SaveLost" {
				lost, err = l.SaveLost(1)
			} else {
				lost, err = l.TruncateWithLost(Truncation{Offset: 1, Cause: CauseOffsetsForLeaderEpoch})
			}
			if err != nil {
				t.Fatal(err)
			}
			want := []string{segmentName(0, logSuffix), segmentName(far, logSuffix)}
			if !slices.Equal(lost.Segments, want) || !bytes.Equal(savedBytes(t, lost), slices.Concat(a, b, c)) ||
				lost.FirstOffset != 0 || lost.LastOffset != far+5 || lost.Batches != 3 {
				t.Fatalf("lost %+v, want segments %v", lost, want)
			}
			// Each saved segment is a valid Kafka segment: its indexes load.
			for _, name := range lost.Segments {
				base, _ := parseSegmentName(name)
				s, err := openSegmentFiles(osFS{}, lost.Dir, base, 4096, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				size, _ := s.fileSize()
				ok, err := s.loadIndexes(size)
				s.close()
				if err != nil || !ok {
					t.Fatalf("segment %s: indexes do not load: %v", name, err)
				}
			}
		})
	}
}

// when writing the truncation intent fails (here its
// directory fsync, after the rename), the intent may be on disk; the log
// must not take appends that the next Open's redo would cut.
func TestIntentWriteFailure(t *testing.T) {
	setup := func(t *testing.T, fails int) (string, *faultFS, *Log) {
		data := t.TempDir()
		populate(t, data)
		ffs := &faultFS{}
		l, err := openLog(ffs, data, "t", 0, corruptOpts(quiet))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		ffs.dirSyncs, ffs.dirPath = fails, PartitionDir(data, "t", 0)
		if err := l.TruncateTo(40); !errors.Is(err, errInjected) || ffs.fired != fails {
			t.Fatalf("TruncateTo: %v, %d faults fired", err, ffs.fired)
		}
		return data, ffs, l
	}
	reopen := func(t *testing.T, data string, l *Log) *Log {
		l.Close()
		re, err := Open(data, "t", 0, corruptOpts(quiet))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { re.Close() })
		crashStateLoose(t, re)
		return re
	}
	t.Run("rolled back", func(t *testing.T) {
		data, _, l := setup(t, 1)
		if _, err := os.Stat(filepath.Join(l.Dir(), intentName)); !os.IsNotExist(err) {
			t.Fatalf("the intent is still there: %v", err)
		}
		if err := l.Append(build(90, 3, 3)); err != nil {
			t.Fatal(err)
		}
		if re := reopen(t, data, l); re.LogEndOffset() != 93 {
			t.Fatalf("reopened log ends at %d: the append was cut", re.LogEndOffset())
		}
	})
	t.Run("the roll-back fails too: pending, then the truncation again", func(t *testing.T) {
		data, _, l := setup(t, 2)
		if err := l.Append(build(90, 3, 3)); !errors.Is(err, ErrTruncationPending) || l.Failed() != nil {
			t.Fatalf("Append while the truncation is pending: %v (failed: %v)", err, l.Failed())
		}
		if err := l.DeleteBefore(10); !errors.Is(err, ErrTruncationPending) {
			t.Fatalf("DeleteBefore while the truncation is pending: %v", err)
		}
		if b, err := l.Read(0, 1); err != nil || len(b) == 0 {
			t.Fatalf("Read while pending: %v", err)
		}
		if err := l.TruncateTo(40); err != nil || l.LogEndOffset() != 39 {
			t.Fatalf("the truncation again: %v, end %d", err, l.LogEndOffset())
		}
		mustAppend(t, l, build(39, 3, 3))
		if re := reopen(t, data, l); re.LogEndOffset() != 42 {
			t.Fatalf("reopened log ends at %d", re.LogEndOffset())
		}
	})
	t.Run("the roll-back fails too: pending, then another truncation", func(t *testing.T) {
		data, _, l := setup(t, 2)
		if err := l.TruncateTo(60); err != nil || l.LogEndOffset() != 60 {
			t.Fatalf("another truncation: %v, end %d", err, l.LogEndOffset())
		}
		mustAppend(t, l, build(60, 3, 3))
		if re := reopen(t, data, l); re.LogEndOffset() != 63 {
			t.Fatalf("reopened log ends at %d: the pending truncation to 40 came back", re.LogEndOffset())
		}
	})
	t.Run("the roll-back fails too: pending, then reopened", func(t *testing.T) {
		// The intent was removed, but not durably: a restart may find it
		// (and finish the truncation) or not. Nothing was appended since,
		// so either is whole.
		data, _, l := setup(t, 2)
		if re := reopen(t, data, l); re.LogEndOffset() != 39 && re.LogEndOffset() != 90 {
			t.Fatalf("reopened log ends at %d, want 39 or 90", re.LogEndOffset())
		}
	})
	t.Run("TruncateWithLost, pending, then again", func(t *testing.T) {
		data := t.TempDir()
		populate(t, data)
		ffs := &faultFS{}
		l, err := openLog(ffs, data, "t", 0, corruptOpts(quiet))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ffs.dirSyncs, ffs.dirPath = 2, PartitionDir(data, "t", 0)
		if _, err := l.TruncateWithLost(Truncation{Offset: 40, Cause: CauseOffsetsForLeaderEpoch}); !errors.Is(err, errInjected) {
			t.Fatal(err)
		}
		if len(l.UnreportedLosses()) != 0 {
			t.Fatal("a loss listed before its truncation")
		}
		lost, err := l.TruncateWithLost(Truncation{Offset: 40, Cause: CauseOffsetsForLeaderEpoch})
		if err != nil {
			t.Fatal(err)
		}
		if names := lostEvents(t, data); !slices.Equal(names, []string{lost.ID}) || l.LogEndOffset() != 39 {
			t.Fatalf("lost+found %v, end %d: want one event", names, l.LogEndOffset())
		}
	})
}
