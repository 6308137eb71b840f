package storage

import (
	"os"
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
		// leader-epoch-checkpoint (tmp file, directory) for the new epoch,
		// then the active segment: its .log (the batches are smaller than
		// index.interval.bytes, so the index files get no entry and are
		// neither written nor fsynced).
		{"append in a new epoch", func() error { return l.Append(batch.BuildRun(0, 1, 2, 5)) }, 2 + 1},
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
	if heard.Load() != 2+1 {
		t.Fatalf("OnSync heard %d fsyncs of an append in a new epoch, want 3", heard.Load())
	}
}
