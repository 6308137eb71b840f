package storage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kfollower/kfollower/wire/batch"
)

// segmentFile is the path and on-disk size of the log's only segment.
func segmentFile(t *testing.T, dir string) (string, int64) {
	t.Helper()
	path := filepath.Join(PartitionDir(dir, "t", 0), "00000000000000000000.log")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, fi.Size()
}

// copyPartition copies the partition directory's files as they are now,
// without a Close: what a kill -9 leaves (the page cache keeps every
// write).
func copyPartition(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	src, dst := PartitionDir(from, "t", 0), PartitionDir(to, "t", 0)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// TestStageThenAppend stages a field in three reads and appends it: the
// log holds exactly what a plain Append would have written, and nothing
// staged was visible before the Append.
func TestStageThenAppend(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, testOpts())
	b0 := build(0, 1, 3)
	mustAppend(t, l, b0)
	b1, b2, b3 := build(3, 1, 5), build(8, 2, 2), build(10, 2, 4)
	field := bytes.Join([][]byte{b1, b2, b3}, nil)
	if got := l.Stage(field, true, 4); got != 0 {
		t.Fatalf("staged %d bytes for a Fetch from 4, where the log ends at 3", got)
	}
	for i, n := range []int{len(b1), len(b1) + len(b2) + 10, len(field)} {
		want := len(b1)
		if i == 2 {
			want = len(field)
		} else if i == 1 {
			want = len(b1) + len(b2) // the partial batch read so far waits
		}
		if got := l.Stage(field[:n], i == 0, 3); got != want {
			t.Fatalf("stage %d: %d bytes staged, want %d", i, got, want)
		}
	}
	if _, size := segmentFile(t, dir); size != int64(len(b0)+len(field)) {
		t.Fatalf("segment is %d bytes on disk, want the appended %d and the staged %d", size, len(b0), len(field))
	}
	if got := l.LogEndOffset(); got != 3 {
		t.Fatalf("log end %d after staging, want 3: staged is not appended", got)
	}
	if got := readAll(t, l); !bytes.Equal(got, b0) {
		t.Fatalf("a reader sees %d bytes, want the %d appended", len(got), len(b0))
	}
	mustAppend(t, l, field)
	if got := l.LogEndOffset(); got != 14 {
		t.Fatalf("log end %d, want 14", got)
	}
	want := append(append([]byte(nil), b0...), field...)
	if got := readAll(t, l); !bytes.Equal(got, want) {
		t.Fatal("the log's bytes are not those appended")
	}
	path, _ := segmentFile(t, dir)
	if disk, err := os.ReadFile(path); err != nil || !bytes.Equal(disk, want) {
		t.Fatalf("the segment file is not the appended bytes (%v)", err)
	}
	if e, _ := l.epochs.Latest(); e.Epoch != 2 || e.StartOffset != 8 {
		t.Fatalf("latest epoch %+v, want 2 from 8", e)
	}
	l.Close()
	r := openT(t, dir, testOpts())
	if got := readAll(t, r); !bytes.Equal(got, want) || r.LogEndOffset() != 14 {
		t.Fatalf("reopened: %d bytes to %d, want %d to 14", len(got), r.LogEndOffset(), len(want))
	}
}

// TestStageCrash: a crash after staging and before the Append loses the
// staged batches and nothing else, because the first batch's offset and
// length were held back. Written whole, they would come back as part of
// the log.
func TestStageCrash(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, testOpts())
	b0 := build(0, 1, 3)
	mustAppend(t, l, b0)
	field := append(build(3, 1, 5), build(8, 1, 2)...)
	if got := l.Stage(field, true, l.LogEndOffset()); got != len(field) {
		t.Fatalf("%d bytes staged, want %d", got, len(field))
	}
	r := openT(t, copyPartition(t, dir), testOpts())
	if got := r.LogEndOffset(); got != 3 {
		t.Fatalf("after a crash the log ends at %d, want 3: staged batches came back", got)
	}
	if got := readAll(t, r); !bytes.Equal(got, b0) {
		t.Fatalf("after a crash the log holds %d bytes, want %d", len(got), len(b0))
	}
	// And a Close drops them: the reopen finds no torn tail to cut.
	l.Close()
	if _, size := segmentFile(t, dir); size != int64(len(b0)) {
		t.Fatalf("closed: segment is %d bytes on disk, want %d", size, len(b0))
	}
}

// TestStagePrefix: the state machine may take fewer batches than were
// staged; the rest is cut.
func TestStagePrefix(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, testOpts())
	b1, b2 := build(0, 1, 3), build(3, 1, 4)
	field := append(append([]byte(nil), b1...), b2...)
	l.Stage(field, true, l.LogEndOffset())
	mustAppend(t, l, field[:len(b1)])
	if _, size := segmentFile(t, dir); size != int64(len(b1)) {
		t.Fatalf("segment is %d bytes on disk, want %d", size, len(b1))
	}
	r := openT(t, copyPartition(t, dir), testOpts())
	if r.LogEndOffset() != 3 {
		t.Fatalf("log end %d, want 3", r.LogEndOffset())
	}
}

// TestStageDropped: whatever else happens to the log drops what is
// staged, and an Append of other bytes is written as any other.
func TestStageDropped(t *testing.T) {
	b0, b1 := build(0, 1, 3), build(3, 1, 4)
	for name, act := range map[string]func(*testing.T, *Log, []byte){
		"append of a copy": func(t *testing.T, l *Log, f []byte) {
			mustAppend(t, l, append([]byte(nil), f...))
		},
		// At the log end: it removes nothing, and still cuts what is
		// staged.
		"truncate": func(t *testing.T, l *Log, _ []byte) {
			if err := l.TruncateTo(3); err != nil {
				t.Fatal(err)
			}
		},
		"retention": func(t *testing.T, l *Log, _ []byte) {
			if _, err := l.EnforceRetention(); err != nil {
				t.Fatal(err)
			}
		},
		// The same buffer, read into again with another batch of the
		// same size: its headers (the CRC) tell it apart.
		"append of other bytes at the same place": func(t *testing.T, l *Log, f []byte) {
			copy(f, build(3, 2, 4))
			mustAppend(t, l, f)
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			l := openT(t, dir, testOpts())
			mustAppend(t, l, b0)
			field := append([]byte(nil), b1...)
			l.Stage(field, true, l.LogEndOffset())
			act(t, l, field)
			want := readAll(t, l)
			if n := l.StagedAppended(); n != 0 {
				t.Fatalf("%d bytes appended where they were staged", n)
			}
			path, size := segmentFile(t, dir)
			if size != l.Size() {
				t.Fatalf("segment is %d bytes on disk, the log %d", size, l.Size())
			}
			if disk, err := os.ReadFile(path); err != nil || !bytes.Equal(disk, want) {
				t.Fatalf("the segment file is not the log's bytes (%v)", err)
			}
		})
	}
}

// TestStageRefuses: Stage writes nothing that Append would not take
// where it lies.
func TestStageRefuses(t *testing.T) {
	bad := build(3, 1, 4)
	bad[len(bad)-1] ^= 1 // its CRC fails
	for name, c := range map[string]struct {
		opts  Options
		field []byte
		want  int
	}{
		"below the log end":  {testOpts(), build(2, 1, 2), 0},
		"an older epoch":     {testOpts(), build(3, 0, 2), 0},
		"a bad CRC":          {testOpts(), bad, 0},
		"after a good batch": {testOpts(), append(build(3, 1, 2), build(5, 1, 2)[:40]...), len(build(3, 1, 2))},
		"a roll due":         {Options{Logger: quiet, SegmentBytes: 150}, build(3, 1, 4), 0},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			l := openT(t, dir, c.opts)
			b0 := build(0, 1, 3)
			mustAppend(t, l, b0)
			if got := l.Stage(c.field, true, 3); got != c.want {
				t.Fatalf("%d bytes staged, want %d", got, c.want)
			}
			if c.want == 0 {
				if _, size := segmentFile(t, dir); size != int64(len(b0)) {
					t.Fatalf("segment is %d bytes on disk, want %d: something was staged", size, len(b0))
				}
			}
		})
	}
}

// TestStageWriteFails: a staging write that fails half-way is cut back
// and fails nothing: the log takes the same batches by a plain Append, and
// the file is the log's bytes.
func TestStageWriteFails(t *testing.T) {
	dir := t.TempDir()
	ffs := &faultFS{}
	l, err := openLog(ffs, dir, "t", 0, testOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b0, b1 := build(0, 1, 3), build(3, 1, 40)
	mustAppend(t, l, b0)
	ffs.mu.Lock()
	ffs.writeMatch = ".log"
	ffs.mu.Unlock()
	field := append([]byte(nil), b1...)
	if got := l.Stage(field, true, 3); got != 0 {
		t.Fatalf("a failed staging write staged %d bytes", got)
	}
	if ffs.fired != 1 {
		t.Fatalf("the fault fired %d times, want once", ffs.fired)
	}
	if _, size := segmentFile(t, dir); size != int64(len(b0)) {
		t.Fatalf("segment is %d bytes on disk after a failed staging, want %d", size, len(b0))
	}
	if err := l.Failed(); err != nil {
		t.Fatalf("a failed staging failed the log: %v", err)
	}
	mustAppend(t, l, field)
	want := append(append([]byte(nil), b0...), b1...)
	path, _ := segmentFile(t, dir)
	if disk, err := os.ReadFile(path); err != nil || !bytes.Equal(disk, want) || !bytes.Equal(readAll(t, l), want) {
		t.Fatalf("the log is not the appended bytes (%v)", err)
	}
}

// TestStagedAppendWrites: an Append of the staged bytes writes the 12
// held back and nothing else of the .log; of anything else it writes the
// bytes.
func TestStagedAppendWrites(t *testing.T) {
	m := newMemFS()
	var writes []string
	m.before = func(_ int, what string) {
		if strings.HasPrefix(what, "write ") && strings.Contains(what, ".log ") {
			writes = append(writes, what[strings.LastIndex(what, " ")+1:])
		}
	}
	l, err := openLog(m, "/data", "t", 0, testOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b0, b1, b2 := build(0, 1, 3), build(3, 1, 40), build(43, 1, 5)
	mustAppend(t, l, b0)
	field := append(append([]byte(nil), b1...), b2...)
	l.Stage(field, true, 3)
	writes = nil
	mustAppend(t, l, field)
	if want := fmt.Sprintf("%d+%d", len(b0), batch.LogOverhead); len(writes) != 1 || writes[0] != want {
		t.Fatalf("the staged Append wrote %v to the .log, want only %s", writes, want)
	}
	if n := l.StagedAppended(); n != int64(len(field)) {
		t.Fatalf("%d bytes appended where staged, want %d", n, len(field))
	}
	// A prefix is not taken where it lies: the batches after it would
	// be whole on disk.
	f2 := append(build(48, 1, 4), build(52, 1, 4)...)
	l.Stage(f2, true, 48)
	writes = nil
	mustAppend(t, l, f2[:len(build(48, 1, 4))])
	if len(writes) != 1 || writes[0] != fmt.Sprintf("%d+%d", len(b0)+len(field), len(build(48, 1, 4))) {
		t.Fatalf("a prefix of the staged bytes wrote %v, want the whole prefix written", writes)
	}
}

// TestStageRollByClock: the segment's age, when its batches carry no
// timestamps, is the clock's, and the clock may pass the roll time
// between Append's decision to take the staged bytes and anything after
// it. Append decides once: the batches stay where they were staged, in
// the segment that holds them. Deciding again rolled into a new segment
// that got only the 12 held-back bytes.
func TestStageRollByClock(t *testing.T) {
	start := time.Unix(1e9, 0)
	calls, flipAt := 0, -1
	opts := Options{Logger: quiet, SegmentAge: time.Hour, Now: func() time.Time {
		calls++
		if flipAt >= 0 && calls > flipAt {
			return start.Add(2 * time.Hour)
		}
		return start
	}}
	dir := t.TempDir()
	l := openT(t, dir, opts)
	untimed := func(base int64) []byte { // MaxTimestamp -1: aged by the clock
		return batch.Build(batch.Spec{BaseOffset: base, Epoch: 1, Records: 1, Timestamp: batch.NoTimestamp})
	}
	b0, field := untimed(0), untimed(1)
	mustAppend(t, l, b0)
	if l.Stage(field, true, 1) == 0 {
		t.Fatal("nothing staged")
	}
	flipAt = calls + 1 // the first reading of the clock in Append is before the roll time, every later one past it
	mustAppend(t, l, field)
	if n := len(l.Segments()); n != 1 {
		t.Fatalf("%d segments after the Append of staged bytes: it rolled after taking them", n)
	}
	if _, size := segmentFile(t, dir); size != l.Size() {
		t.Fatalf("segment is %d bytes on disk, the log says %d", size, l.Size())
	}
	l.Close()
	r := openT(t, dir, opts)
	if r.LogEndOffset() != 2 {
		t.Fatalf("reopened at %d, want 2", r.LogEndOffset())
	}
}

// TestStageAhead: a Fetch sent ahead of the Append of the one before it
// stages nothing while that Append is to come, and leaves its staged
// bytes alone.
func TestStageAhead(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, testOpts())
	f1, f2 := build(0, 1, 3), build(3, 1, 3)
	l.Stage(f1, true, 0)
	if got := l.Stage(f2, true, 3); got != 0 {
		t.Fatalf("the Fetch ahead staged %d bytes before the Append of the one before", got)
	}
	mustAppend(t, l, f1)
	if n := l.StagedAppended(); n != int64(len(f1)) {
		t.Fatalf("%d bytes appended where staged, want %d: the Fetch ahead dropped them", n, len(f1))
	}
}
