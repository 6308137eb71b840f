package storage

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kfollower/kfollower/wire/batch"
)

// countFS counts the fsyncs that reach the file system, files and
// directories alike.
type countFS struct {
	osFS
	n atomic.Int64
}

func (c *countFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	f, err := c.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return countFile{f, c}, nil
}

func (c *countFS) SyncDir(dir string) error {
	c.n.Add(1)
	return c.osFS.SyncDir(dir)
}

type countFile struct {
	file
	c *countFS
}

func (f countFile) Sync() error {
	f.c.n.Add(1)
	return f.file.Sync()
}

// OnSync hears of every fsync, and each operation makes exactly the
// fsyncs doc.go's order of durable steps lists: the count at the file
// system and the count OnSync hears must both be the step's.
func TestOnSyncTimesEveryFsync(t *testing.T) {
	var heard, total atomic.Int64
	onSync := func(d time.Duration) {
		heard.Add(1)
		total.Add(int64(d))
	}
	fsys := &countFS{}
	// A clock that stands still: the recovery point is rewritten at most
	// once a second, so only the steps that always write it do.
	now := time.UnixMilli(1_700_000_000_000)
	opts := Options{Logger: quiet, Flush: FlushEveryAppend, Now: func() time.Time { return now }}
	l, err := openLog(timedFS{fileSystem: fsys, onSync: onSync, now: time.Now}, t.TempDir(), "t", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	steps := []struct {
		name string
		do   func() error
		want int64
	}{
		// The new log's first fsync settles it (the segment's snapshot
		// under a tmp name; leader-epoch-checkpoint, written unsynced by
		// the append; the partition directory; the data directory), then
		// the active segment: its .log (the batches are smaller than
		// index.interval.bytes, so the index files get no entry and are
		// neither written nor fsynced).
		{"append in a new epoch", func() error { return l.Append(batch.BuildRun(0, 1, 2, 5)) }, 4 + 1},
		// The active segment only.
		{"append in the same epoch", func() error { return l.Append(batch.BuildRun(10, 1, 1, 5)) }, 1},
		// Nothing new to sync.
		{"flush", func() error { return l.Flush() }, 0},
		// The recovery point is due again: the segment, then the point
		// (tmp file, directory).
		{"append a second later", func() error { now = now.Add(time.Second); return l.Append(batch.BuildRun(15, 1, 1, 5)) }, 1 + 2},
		// The intent (tmp, directory); the cut segment (.log and its
		// rewritten .index and .timeindex); the
		// directory; the recovery point (tmp, directory); the intent's
		// removal (directory). Epoch 1 still starts at 0: no checkpoint.
		{"truncate inside the epoch", func() error { return l.TruncateTo(5) }, 2 + 3 + 1 + 2 + 1},
		// As above, plus the checkpoint cut back (tmp, directory).
		{"append in epoch 2, then truncate it away", func() error {
			if err := l.Append(batch.BuildRun(5, 2, 1, 5)); err != nil {
				return err
			}
			fsys.n.Store(0)
			heard.Store(0)
			return l.TruncateTo(5)
		}, 2 + 3 + 1 + 2 + 2 + 1},
	}
	for _, s := range steps {
		fsys.n.Store(0)
		heard.Store(0)
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := fsys.n.Load(); got != s.want {
			t.Errorf("%s: %d fsyncs, want %d", s.name, got, s.want)
		}
		if got := heard.Load(); got != fsys.n.Load() {
			t.Errorf("%s: OnSync heard %d of %d fsyncs", s.name, got, fsys.n.Load())
		}
	}
	if total.Load() <= 0 {
		t.Fatalf("fsyncs took no time at all: %v", time.Duration(total.Load()))
	}
}

// Open wires Options.OnSync in: an append that fsyncs its segment is heard.
func TestOpenWiresOnSync(t *testing.T) {
	var heard atomic.Int64
	now := time.UnixMilli(1_700_000_000_000)
	l, err := Open(t.TempDir(), "t", 0, Options{Logger: quiet, Flush: FlushEveryAppend, Now: func() time.Time { return now },
		OnSync: func(time.Duration) { heard.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	heard.Store(0)
	if err := l.Append(batch.BuildRun(0, 1, 1, 5)); err != nil {
		t.Fatal(err)
	}
	if heard.Load() != 4+1 {
		t.Fatalf("OnSync heard %d fsyncs of a new log's first append, in a new epoch, want 5", heard.Load())
	}
}

// A new log costs no fsync to open, where it cost 11 and then 2 (issue 14:
// 4,000 partitions took 22 s to start, 10,000 still 14 s):
// partition.metadata is written without one and no recovery point, the
// directories are left unsynced (an empty log a crash takes is just
// created again, and one with torn batches is re-read as torn from its
// start: TestNewLogTornFirstBatches). Appends make none; the first fsync
// settles the log (partition.metadata, the segment's snapshot, the
// checkpoint, the partition directory, the data directory) before it
// declares anything durable. Reopening and closing an empty log cost none.
// The power-loss model (TestPowerLoss, from a new log) shows that no
// durable end is ever reported before these are durable; its variant
// TestPowerLossStillClock covers the unsynced first recovery point (a
// clock that stands still keeps it all run: with the clock moving, the
// next Flush replaces it before an image tears it, and TestPowerLoss
// passes with unsyncedPoint always false) and partition.metadata of a
// settled log reopened empty.
func TestNewLogFsyncs(t *testing.T) {
	fsys := &countFS{}
	data := filepath.Join(t.TempDir(), "data")
	id := TopicID{1, 2, 3}
	opts := Options{Logger: quiet, Flush: FlushOS, TopicID: id}
	step := func(what string, want int64, do func() error) {
		t.Helper()
		fsys.n.Store(0)
		if err := do(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := fsys.n.Load(); got != want {
			t.Errorf("%s: %d fsyncs, want %d", what, got, want)
		}
	}
	var l *Log
	open := func() error {
		var err error
		l, err = openLog(fsys, data, "t", 0, opts)
		return err
	}
	step("opening a new log", 0, open)
	if got, ok := l.TopicID(); !ok || got != id {
		t.Fatalf("topic id %v %v", got, ok)
	}
	if b, err := os.ReadFile(filepath.Join(l.Dir(), PartitionMetadataFile)); err != nil || len(b) == 0 {
		t.Fatalf("partition.metadata is not there for readers: %q %v", b, err)
	}
	step("closing it empty", 0, func() error { return l.Close() })
	step("reopening it empty", 0, open)
	step("its first append", 0, func() error { return l.Append(batch.BuildRun(0, 1, 1, 5)) })
	step("a second append", 0, func() error { return l.Append(batch.BuildRun(5, 1, 1, 5)) })
	if l.DurableEnd() != 0 {
		t.Fatalf("durable end %d before any fsync", l.DurableEnd())
	}
	// Settling (partition.metadata, the snapshot, the checkpoint the
	// first append wrote, the partition directory, the data directory),
	// then the .log; settling writes the first recovery point unsynced,
	// and counts as writing it (the flushes rewrite it at most once a
	// second).
	step("the first flush", 5+1, func() error { return l.Flush() })
	if l.DurableEnd() != 10 {
		t.Fatalf("durable end %d after the flush, want 10", l.DurableEnd())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// A new log's first batches, never fsynced (FlushOS), torn by a power
// loss in every way memFS can tear them (each unsynced write kept or not
// sector by sector, each directory keeping a prefix of its changes): every
// image opens, holding a prefix of the batches, with its topic id. Open
// writes partition.metadata without an fsync and no recovery point, so an
// image may hold it torn or not at all, and no point; the log was never
// settled, so Open re-reads it as torn from its start (a bad batch with a
// valid one after it is cut, not refused as corruption) and writes
// partition.metadata again. Checked that it can fail: with a missing
// point judged as for a settled log, 15 of the seeds are refused
// ("corrupt record batch ... at byte 0"; the first: 3288, 4231, 4578);
// with a torn partition.metadata refused, as a settled log's is, seed 10
// is.
func TestNewLogTornFirstBatches(t *testing.T) {
	m := newMemFS()
	id := TopicID{9, 8, 7}
	opts := Options{Logger: quiet, Flush: FlushOS, TopicID: id}
	l, err := openLog(m, memData, "t", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var raw []byte
	for i := range 6 {
		b := crashRun(int64(i*4), 1, 4, 1)
		raw = append(raw, b...)
		if err := l.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	kept := 0
	for seed := range uint64(tornSeeds) {
		img := m.crashImage(rand.New(rand.NewPCG(seed, 3)))
		r, err := openLog(img, memData, "t", 0, opts)
		if err != nil {
			t.Fatalf("seed %d: Open after a power loss: %v", seed, err)
		}
		got, err := r.Read(0, 1<<20)
		if err != nil && r.LogEndOffset() > 0 {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !bytes.HasPrefix(raw, got) {
			t.Fatalf("seed %d: the log holds bytes that are not a prefix of the appended ones", seed)
		}
		if got, ok := r.TopicID(); !ok || got != id {
			t.Fatalf("seed %d: topic id %v %v, want %v", seed, got, ok, id)
		}
		if r.LogEndOffset() > 0 {
			kept++
		}
		r.Close()
	}
	if kept == 0 {
		t.Fatal("no image kept a batch: the test tears nothing")
	}
	t.Logf("%d of %d torn images kept some batches", kept, tornSeeds)
}

// The first recovery point of a new log, which its first fsync writes at
// the segment's start when it settles the log, is never fsynced (the next
// one replaces it whole: tmp fsynced, renamed, at most once a second, and
// settling counts as writing it), so a power loss can leave it torn in a
// log that is settled and has a durable end, with a torn tail past that
// end. Torn, the point is that first one: the tail is cut (down to the
// durable end), not refused as corruption. A point that is whole but garbled is
// not a torn write: the log is judged without one, and a bad batch with a
// valid one after it stays corruption. Checked that it can fail: without
// unsyncedPoint, the empty and the zeroed points are refused as
// corruption (a point cut just before its newline parses as the first
// one). A View needs no such rule: it walks headers without their CRCs,
// and reads no further than the last batch whose header parses.
func TestTornRecoveryPointOfSettledLog(t *testing.T) {
	for _, tc := range []struct {
		name       string
		point      []byte
		corruption bool
	}{
		{"empty", nil, false},
		{"cut before its newline", []byte("0\n0 0 0 0 0 -1 -1 -1 -1"), false},
		{"a zeroed sector", []byte("\x00\x00\x00\x000 0 0 0 -1 -1 -1 -1\n"), false},
		{"garbled but whole", []byte("0\nnot a point\n"), true},
		// No torn write of the start point: other bytes than its own or
		// zeros, or longer. Damage, judged as a garbled point.
		{"no final newline, other bytes", []byte("0\n0 29"), true},
		{"zeroed bytes, other bytes", []byte("0\n0 290 8\x00\x00"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMemFS()
			now := time.UnixMilli(1_700_000_000_000) // stands still
			opts := Options{Logger: quiet, Flush: FlushOS, TopicID: TopicID{3}, Now: func() time.Time { return now }}
			l, err := openLog(m, memData, "t", 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			durable := crashRun(0, 1, 4, 2)
			if err := l.Append(durable); err != nil {
				t.Fatal(err)
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if l.DurableEnd() != 8 {
				t.Fatalf("durable end %d after the flush, want 8", l.DurableEnd())
			}
			// The power cut: the strict image, then what a torn one may
			// keep of the unsynced rest: two more batches, the first with
			// a sector lost, and the point as tc has it.
			img := m.crashImage(nil)
			dir := PartitionDir(memData, "t", 0)
			if b, err := img.ReadFile(filepath.Join(dir, recoveryPointName)); err != nil || len(b) != 0 {
				t.Fatalf("the image's recovery point is %q (%v), want the unsynced first one, empty", b, err)
			}
			tail := crashRun(8, 1, 4, 2)
			clear(tail[40:72])
			f, err := img.OpenFile(filepath.Join(dir, segmentName(0, logSuffix)), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(tail, int64(len(durable))); err != nil {
				t.Fatal(err)
			}
			f.Close()
			f, err = img.OpenFile(filepath.Join(dir, recoveryPointName), os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(tc.point); err != nil {
				t.Fatal(err)
			}
			f.Close()
			r, err := openLog(img, memData, "t", 0, opts)
			var ce *CorruptionError
			if tc.corruption {
				if !errors.As(err, &ce) {
					t.Fatalf("Open: %v, want a *CorruptionError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer r.Close()
			if r.LogEndOffset() != 8 {
				t.Fatalf("log end %d, want the durable end 8 (the torn tail cut)", r.LogEndOffset())
			}
			got, err := r.Read(0, 1<<20)
			if err != nil || !bytes.Equal(got, durable) {
				t.Fatalf("read %d bytes (%v), want the %d durable ones", len(got), err, len(durable))
			}
		})
	}
}

// tornSeeds is how many torn images TestNewLogTornFirstBatches opens.
const tornSeeds = 30000

// A new log appended to by a process that died before its first fsync
// (so before settle synced the data directory's entry for it, and
// partition.metadata): the next process's Open makes it durable and
// reports it so, so the data directory's entry must be durable too, and
// partition.metadata, or a power loss after that Open takes every byte it
// reported durable, or leaves them without their topic id (and a settled
// log refuses a torn partition.metadata). Checked that it can fail:
// without the data directory's fsync in Open's non-empty branch the
// strict crash image holds no log end 5 but 0; without loadTopicID's
// fsync of a fresh log's file, Open of the image fails ("partition.metadata:
// fewer than two lines").
func TestReopenedUnsettledLogIsDurable(t *testing.T) {
	fsys := newMemFS()
	if err := mkdirAllSynced(fsys, "/data"); err != nil { // as kfollower run does
		t.Fatal(err)
	}
	opts := Options{Logger: quiet, Flush: FlushOS, TopicID: TopicID{1}}
	first, err := openLog(fsys, "/data", "t", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Append(batch.BuildRun(0, 2, 1, 5)); err != nil {
		t.Fatal(err)
	}
	// first's process dies here: no Flush, no Close; the page cache
	// (fsys) keeps everything.
	second, err := openLog(fsys, "/data", "t", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	if d := second.DurableEnd(); d != 5 {
		t.Fatalf("reopened: durable end %d, want 5", d)
	}
	opts.TopicID = TopicID{} // to see the image's own
	after, err := openLog(fsys.crashImage(nil), "/data", "t", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	if e := after.LogEndOffset(); e != 5 {
		t.Errorf("after a power loss: log end %d, want the durable end 5 the reopened log reported", e)
	}
	if id, ok := after.TopicID(); !ok || id != (TopicID{1}) {
		t.Errorf("after a power loss: topic id %v %v, want %v", id, ok, TopicID{1})
	}
}
