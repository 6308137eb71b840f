package storage

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// stallFS holds the first fsync of the recovery point's temporary file
// (telling reached) until, once cut is closed, the log's .log is cut and
// its directory then fsynced: a disk whose queue is full of other files' writeback, and a
// truncation that comes meanwhile. It counts point writes under way at
// once (opened, not yet renamed into place): more than one means two
// writers raced for the one temporary file and the rename order.
type stallFS struct {
	osFS
	reached, cut, release chan struct{}
	mu                    sync.Mutex
	stalled, released     bool
	truncated             bool
	// failWrite fails writes to the .log; closeReleases makes the .log's
	// Close end the stall.
	failWrite, closeReleases bool
	inFlight                 int
	overlap                  bool
}

func newStallFS() *stallFS {
	return &stallFS{reached: make(chan struct{}), cut: make(chan struct{}), release: make(chan struct{})}
}

func (s *stallFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	f, err := s.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return f, err
	}
	switch {
	case strings.HasSuffix(name, recoveryPointName+tmpSuffix):
		s.mu.Lock()
		s.inFlight++
		s.overlap = s.overlap || s.inFlight > 1
		s.mu.Unlock()
		return stallFile{file: f, fs: s, point: true}, nil
	case strings.HasSuffix(name, logSuffix):
		return stallFile{file: f, fs: s}, nil
	}
	return f, nil
}

func (s *stallFS) Rename(from, to string) error {
	if strings.HasSuffix(from, recoveryPointName+tmpSuffix) {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}
	return s.osFS.Rename(from, to)
}

type stallFile struct {
	file
	fs    *stallFS
	point bool
}

func (f stallFile) Sync() error {
	if f.point {
		f.fs.mu.Lock()
		first := !f.fs.stalled
		f.fs.stalled = true
		f.fs.mu.Unlock()
		if first {
			close(f.fs.reached)
			<-f.fs.release
		}
	}
	return f.file.Sync()
}

func (f stallFile) Write(b []byte) (int, error) {
	f.fs.mu.Lock()
	fail := !f.point && f.fs.failWrite
	f.fs.mu.Unlock()
	if fail {
		return 0, errInjected
	}
	return f.file.Write(b)
}

func (f stallFile) WriteAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	fail := !f.point && f.fs.failWrite
	f.fs.mu.Unlock()
	if fail {
		return 0, errInjected
	}
	return f.file.WriteAt(b, off)
}

func (f stallFile) Close() error {
	if !f.point {
		f.fs.releaseIf(func() bool { return f.fs.closeReleases })
	}
	return f.file.Close()
}

// releaseIf ends the stall, once, if cond holds (under mu).
func (s *stallFS) releaseIf(cond func() bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cond() && !s.released {
		s.released = true
		close(s.release)
	}
}

// pointWrites is how many point writes are under way.
func (s *stallFS) pointWrites() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

func (f stallFile) Truncate(size int64) error {
	select {
	case <-f.fs.cut:
		f.fs.mu.Lock()
		f.fs.truncated = true
		f.fs.mu.Unlock()
	default:
	}
	return f.file.Truncate(size)
}

// SyncDir after the cut is the truncation's last step before its point.
func (s *stallFS) SyncDir(dir string) error {
	s.releaseIf(func() bool { return s.truncated })
	return s.osFS.SyncDir(dir)
}

// stalledFlush opens a log on a stallFS (a test clock), appends offsets
// 0-3 and flushes them (settling it), then 4-7 a second later, and starts
// a Flush, which rewrites the point at 8: it returns once that Flush is
// stalled in the point's fsync. Its cleanups end the stall, then close the
// log (a failing test leaves neither Flush nor Close waiting).
func stalledFlush(t *testing.T) (l *Log, fsys *stallFS, dir string, flushed chan error, deadline <-chan time.Time) {
	t.Helper()
	now := time.UnixMilli(1_700_000_000_000)
	fsys = newStallFS()
	opts := Options{Logger: quiet, Flush: FlushInterval, FlushInterval: time.Second, Now: func() time.Time { return now }}
	dir = t.TempDir()
	l, err := openLog(fsys, dir, "t", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	t.Cleanup(func() { fsys.releaseIf(func() bool { return true }) }) // runs first
	if err := l.Append(build(0, 0, 4)); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil { // settles: the start point, unsynced, no stall
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	if err := l.Append(build(4, 0, 4)); err != nil {
		t.Fatal(err)
	}
	flushed = make(chan error, 1)
	go func() { flushed <- l.Flush() }()
	deadline = time.After(time.Minute) // a failure's bound, not a speed
	select {
	case <-fsys.reached:
	case err := <-flushed:
		t.Fatalf("Flush returned (%v) without rewriting the recovery point", err)
	case <-deadline:
		t.Fatal("Flush never reached the recovery point's fsync")
	}
	return l, fsys, dir, flushed, deadline
}

// Flush's rewrite of the recovery point (an fsync and a directory fsync,
// slow behind other logs' writeback) holds no lock the writer needs: an
// Append and a read go through while it is stalled. A truncation that
// comes meanwhile waits for it and writes its own point after, so the
// point on disk is the truncation's, not the older one Flush decided.
func TestFlushPointOutsideLock(t *testing.T) {
	l, fsys, dir, flushed, deadline := stalledFlush(t)

	appended := make(chan error, 1)
	go func() { appended <- l.Append(build(8, 0, 2)) }()
	select {
	case err := <-appended:
		if err != nil {
			t.Fatal(err)
		}
	case <-deadline:
		t.Fatal("Append waited for Flush's recovery point write")
	}
	if e, d := l.LogEndOffset(), l.DurableEnd(); e != 10 || d != 8 {
		t.Fatalf("during the stalled point write: log end %d, durable end %d; want 10 and 8", e, d)
	}

	// The truncation cuts the .log (which ends the stall), then writes
	// its point: only once Flush's is in place.
	close(fsys.cut)
	truncated := make(chan error, 1)
	go func() { truncated <- l.TruncateTo(4) }()
	for _, c := range []struct {
		what string
		done chan error
	}{{"Flush", flushed}, {"the truncation", truncated}} {
		select {
		case err := <-c.done:
			if err != nil {
				t.Fatalf("%s: %v", c.what, err)
			}
		case <-deadline:
			t.Fatalf("%s never returned", c.what)
		}
	}
	if fsys.overlap {
		t.Fatal("the truncation wrote its recovery point while Flush's write was under way")
	}
	b, err := os.ReadFile(filepath.Join(PartitionDir(dir, "t", 0), recoveryPointName))
	if err != nil {
		t.Fatal(err)
	}
	rp, err := parseRecoveryPoint(b)
	if err != nil {
		t.Fatal(err)
	}
	if rp.next != 4 {
		t.Fatalf("recovery point on disk covers up to %d after the truncation to 4: the older point of Flush landed last", rp.next)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	re, err := Open(dir, "t", 0, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	if e := re.LogEndOffset(); e != 4 {
		t.Fatalf("reopened: log end %d, want 4", e)
	}
}

// PrepareFlush does a new log's settling (its small files' fsyncs), so
// the Flush after it fsyncs the data alone; with nothing appended it
// does nothing.
func TestPrepareFlushSettles(t *testing.T) {
	var syncs int
	now := time.UnixMilli(1_700_000_000_000) // still: no point falls due
	opts := Options{Logger: quiet, Flush: FlushInterval, FlushInterval: time.Second, TopicID: TopicID{9},
		OnSync: func(time.Duration) { syncs++ }, Now: func() time.Time { return now }}
	l := openT(t, t.TempDir(), opts)
	defer l.Close()
	if err := l.PrepareFlush(); err != nil || syncs != 0 {
		t.Fatalf("PrepareFlush of an empty new log: %v, %d fsyncs; want none", err, syncs)
	}
	if err := l.Append(build(0, 3, 4)); err != nil {
		t.Fatal(err)
	}
	if err := l.PrepareFlush(); err != nil {
		t.Fatal(err)
	}
	prepared := syncs
	if prepared == 0 || l.DurableEnd() != 0 {
		t.Fatalf("PrepareFlush after an append: %d fsyncs, durable end %d; want the settling's fsyncs and no durable end yet", prepared, l.DurableEnd())
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := syncs - prepared; n != 1 || l.DurableEnd() != 4 {
		t.Fatalf("Flush after PrepareFlush: %d fsyncs, durable end %d; want the .log's alone, and 4", n, l.DurableEnd())
	}
}

// Close returns only once a Flush's recovery point write (made without
// the log's lock) is over, on a failed log's path too, which writes no
// point of its own: the fetcher reopens a failed log on the same
// directory right after, and the old write would race the new Log's for
// the one temporary file, or land after the reopen finished a
// truncation. The stall ends when Close closes the .log, just before it
// returns; a Close that did not wait returns with the write under way.
func TestCloseWaitsForPointWrite(t *testing.T) {
	l, fsys, _, flushed, deadline := stalledFlush(t)
	fsys.mu.Lock()
	fsys.failWrite, fsys.closeReleases = true, true
	fsys.mu.Unlock()
	if err := l.Append(build(8, 0, 2)); err == nil {
		t.Fatal("Append with the .log failing succeeded")
	}
	if l.Failed() == nil {
		t.Fatal("a failed Append left the log usable")
	}
	closed := make(chan int, 1)
	go func() {
		_ = l.Close() // the failed log's error
		closed <- fsys.pointWrites()
	}()
	select {
	case n := <-closed:
		if n != 0 {
			t.Fatalf("Close returned with %d recovery point writes under way", n)
		}
	case <-deadline:
		t.Fatal("Close never returned")
	}
	select {
	case <-flushed:
	case <-deadline:
		t.Fatal("Flush never returned")
	}
}
