package storage

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kfollower/kfollower/wire/batch"
)

// populate writes 30 batches of 3 records (epochs 0..3, eight batches
// each) over several segments, closes the log and returns its batches.
func populate(t *testing.T, data string) (dir string, batches [][]byte) {
	t.Helper()
	l, err := Open(data, "t", 0, corruptOpts(quiet))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		b := build(int64(i*3), int32(i/8), 3)
		batches = append(batches, b)
		mustAppend(t, l, b)
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("want several segments, have %v", l.Segments())
	}
	dir = l.Dir()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, batches
}

func corruptOpts(lg *slog.Logger) Options {
	return Options{Logger: lg, SegmentBytes: 1000, IndexIntervalBytes: 150, Flush: FlushEveryAppend}
}

// syncBuffer collects log output for the warning checks.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func segFiles(t *testing.T, dir, suffix string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil || len(m) == 0 {
		t.Fatalf("no %s files: %v", suffix, err)
	}
	return m
}

func modify(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func joined(bs [][]byte) []byte { return bytes.Join(bs, nil) }

type result struct {
	l    *Log
	err  error
	logs string
}

// TestCorruption is the table of on-disk damage and its documented
// outcome (storage/doc.go, "Recovery").
func TestCorruption(t *testing.T) {
	cases := []struct {
		name    string
		damage  func(t *testing.T, dir string)
		outcome string
		check   func(t *testing.T, r result, batches [][]byte)
	}{
		{
			name: "torn last batch",
			damage: func(t *testing.T, dir string) {
				logs := segFiles(t, dir, logSuffix)
				modify(t, logs[len(logs)-1], func(b []byte) []byte { return b[:len(b)-10] })
			},
			outcome: "tail cut at the last whole batch; epoch cache cut to the new end; warning",
			check: func(t *testing.T, r result, batches [][]byte) {
				if r.err != nil {
					t.Fatal(r.err)
				}
				if r.l.LogEndOffset() != 87 || !bytes.Equal(readAll(t, r.l), joined(batches[:29])) {
					t.Fatalf("leo %d", r.l.LogEndOffset())
				}
				if !strings.Contains(r.logs, "cutting a torn tail") {
					t.Fatalf("no warning: %s", r.logs)
				}
			},
		},
		{
			name: "torn batch that began an epoch",
			damage: func(t *testing.T, dir string) {
				// Leave only 10 bytes of the last batch, whose epoch 3 starts at 87... not
				// the case here (epoch 3 starts at 72); instead cut back to offset 72.
				l, err := Open(filepath.Dir(dir), "t", 0, corruptOpts(quiet))
				if err != nil {
					t.Fatal(err)
				}
				if err := l.TruncateTo(72); err != nil {
					t.Fatal(err)
				}
				mustAppend(t, l, build(72, 5, 3))
				l.Close()
				logs := segFiles(t, dir, logSuffix)
				modify(t, logs[len(logs)-1], func(b []byte) []byte { return b[:len(b)-1] })
			},
			outcome: "the epoch that only the torn batch had is removed from the cache",
			check: func(t *testing.T, r result, batches [][]byte) {
				if r.err != nil {
					t.Fatal(r.err)
				}
				if e, _ := r.l.LatestEpoch(); e != 2 || r.l.LogEndOffset() != 72 {
					t.Fatalf("latest epoch %d leo %d", e, r.l.LogEndOffset())
				}
			},
		},
		{
			name: "zero-filled tail",
			damage: func(t *testing.T, dir string) {
				logs := segFiles(t, dir, logSuffix)
				modify(t, logs[len(logs)-1], func(b []byte) []byte { return append(b, make([]byte, 4096)...) })
			},
			outcome: "zeros cut; nothing lost",
			check: func(t *testing.T, r result, batches [][]byte) {
				if r.err != nil || r.l.LogEndOffset() != 90 || !bytes.Equal(readAll(t, r.l), joined(batches)) {
					t.Fatalf("err %v leo %d", r.err, r.l.LogEndOffset())
				}
			},
		},
		{
			name: "torn and reordered tail past the recovery point",
			damage: func(t *testing.T, dir string) {
				// A power loss kept the second of two unsynced batches
				// whole and zeroed a sector of the first.
				first := build(90, 3, 3)
				copy(first[64:96], make([]byte, 32))
				logs := segFiles(t, dir, logSuffix)
				appendFile(t, logs[len(logs)-1], append(first, build(93, 3, 3)...))
			},
			outcome: "past the recovery point nothing was known durable: cut as a torn tail (as Kafka's LogSegment.recover), not refused as corruption",
			check: func(t *testing.T, r result, batches [][]byte) {
				if r.err != nil {
					t.Fatal(r.err)
				}
				if r.l.LogEndOffset() != 90 || !bytes.Equal(readAll(t, r.l), joined(batches)) {
					t.Fatalf("leo %d", r.l.LogEndOffset())
				}
				if !strings.Contains(r.logs, "pastRecoveryPoint=true") {
					t.Fatalf("no warning: %s", r.logs)
				}
			},
		},
		{
			name: "flipped byte in a sealed segment",
			damage: func(t *testing.T, dir string) {
				modify(t, segFiles(t, dir, logSuffix)[0], func(b []byte) []byte { b[len(batches0)+70] ^= 0x40; return b })
			},
			outcome: "Open succeeds (recovery reads only the tail); Read of the bad batch is a *CorruptionError",
			check: func(t *testing.T, r result, batches [][]byte) {
				if r.err != nil {
					t.Fatal(r.err)
				}
				if _, err := r.l.Read(0, 1); err != nil {
					t.Fatalf("good batch: %v", err)
				}
				_, err := r.l.Read(3, 1)
				var ce *CorruptionError
				if !errors.As(err, &ce) || ce.Offset != 3 || !strings.HasSuffix(ce.Segment, segmentName(0, logSuffix)) {
					t.Fatalf("got %v", err)
				}
			},
		},
		{
			name: "flipped byte in a sealed segment whose index is gone",
			damage: func(t *testing.T, dir string) {
				modify(t, segFiles(t, dir, logSuffix)[0], func(b []byte) []byte { b[len(batches0)+70] ^= 0x40; return b })
				os.Remove(segFiles(t, dir, indexSuffix)[0])
			},
			outcome: "Open rebuilds the index, meets the bad batch: *CorruptionError, nothing cut",
			check: func(t *testing.T, r result, batches [][]byte) {
				var ce *CorruptionError
				if !errors.As(r.err, &ce) || ce.Position != int64(len(batches0)) || ce.Offset != 3 {
					t.Fatalf("got %v", r.err)
				}
			},
		},
		{
			name: "flipped byte in the flushed part of the active segment",
			damage: func(t *testing.T, dir string) {
				logs := segFiles(t, dir, logSuffix)
				modify(t, logs[len(logs)-1], func(b []byte) []byte { b[70] ^= 1; return b })
			},
			outcome: "before the recovery point Open does not read: Open succeeds, Read of the batch is a *CorruptionError",
			check: func(t *testing.T, r result, batches [][]byte) {
				if r.err != nil {
					t.Fatal(r.err)
				}
				_, err := r.l.Read(r.l.Segments()[len(r.l.Segments())-1], 1)
				var ce *CorruptionError
				if !errors.As(err, &ce) || ce.Position != 0 {
					t.Fatalf("got %v", err)
				}
			},
		},
		{
			name: "flipped byte in the middle of the unflushed part of the active segment",
			damage: func(t *testing.T, dir string) {
				logs := segFiles(t, dir, logSuffix)
				modify(t, logs[len(logs)-1], func(b []byte) []byte { b[70] ^= 1; return b })
				os.Remove(filepath.Join(dir, recoveryPointName))
			},
			outcome: "a valid batch follows the bad one, so it is not a torn write: *CorruptionError, nothing cut",
			check: func(t *testing.T, r result, batches [][]byte) {
				var ce *CorruptionError
				if !errors.As(r.err, &ce) || ce.Position != 0 {
					t.Fatalf("got %v", r.err)
				}
			},
		},
		{
			name: "truncated index (partial entry)",
			damage: func(t *testing.T, dir string) {
				modify(t, segFiles(t, dir, indexSuffix)[0], func(b []byte) []byte { return b[:len(b)-3] })
			},
			outcome: "index fails the sanity check and is rebuilt byte-identical; warning",
			check:   checkIndexRebuilt,
		},
		{
			name: "truncated index (whole entry)",
			damage: func(t *testing.T, dir string) {
				modify(t, segFiles(t, dir, indexSuffix)[0], func(b []byte) []byte { return b[:len(b)-8] })
			},
			outcome: "a batch past the last entry should have been indexed: rebuilt byte-identical",
			check:   checkIndexRebuilt,
		},
		{
			name: "garbage checkpoint",
			damage: func(t *testing.T, dir string) {
				os.WriteFile(filepath.Join(dir, EpochCheckpointFile), []byte("0\n3\nnonsense\n"), 0o644)
			},
			outcome: "cache rebuilt from the batches' epochs and rewritten; warning",
			check:   checkEpochsRebuilt,
		},
		{
			name: "missing checkpoint",
			damage: func(t *testing.T, dir string) {
				os.Remove(filepath.Join(dir, EpochCheckpointFile))
			},
			outcome: "cache rebuilt from the batches' epochs; warning",
			check:   checkEpochsRebuilt,
		},
		{
			name: "non-monotonic checkpoint",
			damage: func(t *testing.T, dir string) {
				os.WriteFile(filepath.Join(dir, EpochCheckpointFile), []byte("0\n3\n0 0\n2 48\n1 24\n"), 0o644)
			},
			outcome: "treated as unreadable (we never write one): rebuilt from the batches; warning. Kafka would replay it through assign and get (2,63)",
			check:   checkEpochsRebuilt,
		},
		{
			name: "checkpoint ahead of the log",
			damage: func(t *testing.T, dir string) {
				os.WriteFile(filepath.Join(dir, EpochCheckpointFile), []byte("0\n5\n0 0\n1 24\n2 48\n3 72\n7 95\n"), 0o644)
			},
			outcome: "entries at or past the LEO cut (LogLoader truncateFromEnd)",
			check: func(t *testing.T, r result, batches [][]byte) {
				if r.err != nil {
					t.Fatal(r.err)
				}
				if got := fmt.Sprint(r.l.Epochs().Entries()); got != "[{0 0} {1 24} {2 48} {3 72}]" {
					t.Fatal(got)
				}
				cp, _ := os.ReadFile(filepath.Join(r.l.Dir(), EpochCheckpointFile))
				if string(cp) != "0\n4\n0 0\n1 24\n2 48\n3 72\n" {
					t.Fatalf("checkpoint not rewritten: %q", cp)
				}
			},
		},
		{
			name: "interrupted truncation",
			damage: func(t *testing.T, dir string) {
				os.WriteFile(filepath.Join(dir, intentName), formatIntent(intent{offset: 40}), 0o644)
			},
			outcome: "Open finishes it: LEO 39 (offset 40 is inside batch 39..41), cache cut, intent removed",
			check: func(t *testing.T, r result, batches [][]byte) {
				if r.err != nil {
					t.Fatal(r.err)
				}
				if r.l.LogEndOffset() != 39 || !bytes.Equal(readAll(t, r.l), joined(batches[:13])) {
					t.Fatalf("leo %d", r.l.LogEndOffset())
				}
				if got := fmt.Sprint(r.l.Epochs().Entries()); got != "[{0 0} {1 24}]" {
					t.Fatal(got)
				}
				if _, err := os.Stat(filepath.Join(r.l.Dir(), intentName)); !os.IsNotExist(err) {
					t.Fatal("intent still there")
				}
			},
		},
		{
			name: "garbage recovery point",
			damage: func(t *testing.T, dir string) {
				os.WriteFile(filepath.Join(dir, recoveryPointName), []byte("0\n1 2\n"), 0o644)
			},
			outcome: "ignored with a warning: the whole active segment is read",
			check: func(t *testing.T, r result, batches [][]byte) {
				if r.err != nil || r.l.LogEndOffset() != 90 || !strings.Contains(r.logs, "recovery point") {
					t.Fatalf("err %v leo %d logs %s", r.err, r.l.LogEndOffset(), r.logs)
				}
			},
		},
		{
			name: "recovery point past the end of the segment",
			damage: func(t *testing.T, dir string) {
				logs := segFiles(t, dir, logSuffix)
				modify(t, logs[len(logs)-1], func(b []byte) []byte { return b[:len(b)-5] })
			},
			outcome: "ignored (the file is shorter than what was fsynced): the whole active segment is read and the torn batch cut",
			check: func(t *testing.T, r result, batches [][]byte) {
				if r.err != nil || r.l.LogEndOffset() != 87 {
					t.Fatalf("err %v leo %d", r.err, r.l.LogEndOffset())
				}
			},
		},
		{
			name: "interrupted truncation that had begun deleting segments",
			damage: func(t *testing.T, dir string) {
				os.WriteFile(filepath.Join(dir, intentName), formatIntent(intent{offset: 20}), 0o644)
				logs, idxs := segFiles(t, dir, logSuffix), segFiles(t, dir, indexSuffix)
				if len(logs) != 3 || !strings.HasSuffix(logs[1], segmentName(33, logSuffix)) {
					t.Fatalf("segments %v", logs)
				}
				os.Remove(idxs[len(idxs)-2])
				modify(t, logs[len(logs)-2], func(b []byte) []byte { b[80] ^= 1; return b })
			},
			outcome: "segments the truncation deletes are not read (no CorruptionError from them); LEO 18",
			check: func(t *testing.T, r result, batches [][]byte) {
				if r.err != nil || r.l.LogEndOffset() != 18 || fmt.Sprint(r.l.Epochs().Entries()) != "[{0 0}]" {
					t.Fatalf("err %v leo %d", r.err, r.l.LogEndOffset())
				}
			},
		},
		{
			name: "garbage intent",
			damage: func(t *testing.T, dir string) {
				os.WriteFile(filepath.Join(dir, intentName), []byte("what"), 0o644)
			},
			outcome: "Open refuses: it cannot know what was to be removed",
			check: func(t *testing.T, r result, batches [][]byte) {
				if r.err == nil || !strings.Contains(r.err.Error(), intentName) {
					t.Fatalf("got %v", r.err)
				}
			},
		},
		{
			name: "leftover tmp files and orphan index",
			damage: func(t *testing.T, dir string) {
				os.WriteFile(filepath.Join(dir, EpochCheckpointFile+tmpSuffix), []byte("junk"), 0o644)
				os.WriteFile(filepath.Join(dir, segmentName(5000, indexSuffix)), []byte("junk"), 0o644)
			},
			outcome: "removed; nothing else changes",
			check: func(t *testing.T, r result, batches [][]byte) {
				if r.err != nil || r.l.LogEndOffset() != 90 {
					t.Fatal(r.err)
				}
				for _, n := range []string{EpochCheckpointFile + tmpSuffix, segmentName(5000, indexSuffix)} {
					if _, err := os.Stat(filepath.Join(r.l.Dir(), n)); !os.IsNotExist(err) {
						t.Fatalf("%s still there", n)
					}
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Logf("documented outcome: %s", c.outcome)
			data := t.TempDir()
			dir, batches := populate(t, data)
			c.damage(t, dir)
			var logs syncBuffer
			l, err := Open(data, "t", 0, corruptOpts(slog.New(slog.NewTextHandler(&logs, nil))))
			if l != nil {
				defer l.Close()
			}
			c.check(t, result{l, err, logs.String()}, batches)
		})
	}
}

// batches0 is the size of one populate batch, to aim at the second one.
var batches0 = build(0, 0, 3)

func checkIndexRebuilt(t *testing.T, r result, batches [][]byte) {
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !strings.Contains(r.logs, "rebuilding indexes") {
		t.Fatalf("no warning: %s", r.logs)
	}
	other, _ := populate(t, t.TempDir())
	want, _ := os.ReadFile(segFiles(t, other, indexSuffix)[0])
	got, _ := os.ReadFile(segFiles(t, r.l.Dir(), indexSuffix)[0])
	if !bytes.Equal(got, want) || len(want) == 0 {
		t.Fatalf("rebuilt index %x, want %x", got, want)
	}
	if !bytes.Equal(readAll(t, r.l), joined(batches)) {
		t.Fatal("data differs")
	}
}

func checkEpochsRebuilt(t *testing.T, r result, batches [][]byte) {
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := fmt.Sprint(r.l.Epochs().Entries()); got != "[{0 0} {1 24} {2 48} {3 72}]" {
		t.Fatal(got)
	}
	if !strings.Contains(r.logs, "rebuilding leader-epoch-checkpoint") {
		t.Fatalf("no warning: %s", r.logs)
	}
	cp, _ := os.ReadFile(filepath.Join(r.l.Dir(), EpochCheckpointFile))
	if string(cp) != "0\n4\n0 0\n1 24\n2 48\n3 72\n" {
		t.Fatalf("checkpoint %q", cp)
	}
}

// TestFaults injects failed fsyncs and writes through the fs seam.
func TestFaults(t *testing.T) {
	cases := []struct {
		name    string
		arm     func(f *faultFS)
		op      func(l *Log) error
		outcome string
		after   func(t *testing.T, l *Log, reopened *Log, batches [][]byte)
		usable  bool // the log still takes writes after the failure
	}{
		{
			name:    "failed fsync of the segment on append",
			arm:     func(f *faultFS) { f.syncMatch = logSuffix },
			op:      func(l *Log) error { return l.Append(build(90, 3, 3)) },
			outcome: "Append fails; the log refuses writes until reopened; reopen keeps a valid prefix (here the write had reached the page cache)",
			after: func(t *testing.T, l, re *Log, batches [][]byte) {
				if re.LogEndOffset() != 93 && re.LogEndOffset() != 90 {
					t.Fatal(re.LogEndOffset())
				}
			},
		},
		{
			name:    "failed write of the segment on append",
			arm:     func(f *faultFS) { f.writeMatch = logSuffix },
			op:      func(l *Log) error { return l.Append(build(90, 3, 3)) },
			outcome: "Append fails with half the batch written; reopen cuts the torn half",
			after: func(t *testing.T, l, re *Log, batches [][]byte) {
				if re.LogEndOffset() != 90 || !bytes.Equal(readAll(t, re), joined(batches)) {
					t.Fatal(re.LogEndOffset())
				}
			},
		},
		{
			name:    "failed write of the checkpoint on a new epoch",
			arm:     func(f *faultFS) { f.writeMatch = EpochCheckpointFile },
			op:      func(l *Log) error { return l.Append(build(90, 4, 3)) },
			outcome: "Append fails after the batch is written; reopen finds the batch and adds its epoch from the active segment",
			after: func(t *testing.T, l, re *Log, batches [][]byte) {
				if e, _ := re.LatestEpoch(); re.LogEndOffset() != 93 || e != 4 {
					t.Fatalf("leo %d epoch %d", re.LogEndOffset(), e)
				}
			},
		},
		{
			name:    "failed fsync of the truncation intent",
			arm:     func(f *faultFS) { f.syncMatch = intentName },
			op:      func(l *Log) error { return l.TruncateTo(40) },
			outcome: "TruncateTo fails before touching anything; the log is unchanged and still usable",
			usable:  true,
			after: func(t *testing.T, l, re *Log, batches [][]byte) {
				if l.LogEndOffset() != 90 || re.LogEndOffset() != 90 {
					t.Fatal(l.LogEndOffset(), re.LogEndOffset())
				}
			},
		},
		{
			name:    "failed fsync of the segment during truncation",
			arm:     func(f *faultFS) { f.syncMatch = logSuffix },
			op:      func(l *Log) error { return l.TruncateTo(40) },
			outcome: "TruncateTo fails after the intent; reopen finishes the truncation",
			after: func(t *testing.T, l, re *Log, batches [][]byte) {
				if re.LogEndOffset() != 39 || fmt.Sprint(re.Epochs().Entries()) != "[{0 0} {1 24}]" {
					t.Fatal(re.LogEndOffset(), re.Epochs())
				}
			},
		},
		{
			name: "failed directory fsync on roll",
			arm:  func(f *faultFS) { f.dirSyncs = 1 },
			op: func(l *Log) error {
				return l.Append(batch.Build(batch.Spec{BaseOffset: 90, Epoch: 3, Records: 3, Value: make([]byte, 300)}))
			},
			outcome: "Append fails if it rolled (new segment's directory entry not durable); reopen is consistent",
			after: func(t *testing.T, l, re *Log, batches [][]byte) {
				if re.LogEndOffset() != 90 && re.LogEndOffset() != 93 {
					t.Fatal(re.LogEndOffset())
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Logf("documented outcome: %s", c.outcome)
			data := t.TempDir()
			_, batches := populate(t, data)
			ffs := &faultFS{}
			l, err := openLog(ffs, data, "t", 0, corruptOpts(quiet))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			c.arm(ffs)
			err = c.op(l)
			if ffs.fired == 0 {
				t.Fatal("fault never fired")
			}
			if !errors.Is(err, errInjected) {
				t.Fatalf("op returned %v, want the injected error", err)
			}
			if uerr := l.usable(); c.usable != (uerr == nil) || (uerr != nil && !errors.Is(uerr, errInjected)) || (l.Failed() == nil) != c.usable {
				t.Fatalf("usable after the failure: %v (Failed %v), want %v", uerr, l.Failed(), c.usable)
			}
			l.Close()
			re, err := Open(data, "t", 0, corruptOpts(quiet))
			if err != nil {
				t.Fatal(err)
			}
			defer re.Close()
			c.after(t, l, re, batches)
			// Whatever happened, the reopened log is self-consistent.
			_ = crashStateLoose(t, re)
		})
	}
}

// crashStateLoose checks contiguity and epochs against the batches.
func crashStateLoose(t *testing.T, l *Log) Epochs { return checkBatches(t, l, false) }

// checkBatches checks that the batches follow each other (with
// compaction gaps when allowed) and that the epoch cache is the one they
// give.
func checkBatches(t *testing.T, l *Log, gaps bool) Epochs {
	t.Helper()
	s := batch.NewScanner(readAll(t, l))
	var cache Epochs
	next := l.LogStartOffset()
	for s.Next() {
		h := s.Header()
		if h.BaseOffset < next || (!gaps && h.BaseOffset != next) {
			t.Fatalf("batch at %d, expected %d", h.BaseOffset, next)
		}
		cache, _, _ = cache.Assign(h.PartitionLeaderEpoch, h.BaseOffset)
		next = h.NextOffset()
	}
	if next != l.LogEndOffset() || !cache.Equal(l.Epochs()) {
		t.Fatalf("end %d/%d epochs %v/%v", next, l.LogEndOffset(), cache, l.Epochs())
	}
	return cache
}
