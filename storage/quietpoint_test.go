package storage

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A log settled before (TruncateFullyAndStartAt) and reopened empty with a
// topic id it did not have: partition.metadata must be written fsynced,
// since Open tolerates a torn one only of a log never settled. Every
// crash image of it must open.
func TestTornMetadataOfSettledEmptyLog(t *testing.T) {
	m := newMemFS()
	opts := Options{Logger: quiet, Flush: FlushOS} // no topic id yet
	l, err := openLog(m, memData, "t", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateFullyAndStartAt(5); err != nil { // settles
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	opts.TopicID = TopicID{7}
	l, err = openLog(m, memData, "t", 0, opts) // empty, settled before
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	pm := filepath.Join(PartitionDir(memData, "t", 0), PartitionMetadataFile)
	want := string(formatPartitionMetadata(TopicID{7}))
	missing := 0
	for seed := range uint64(500) {
		img := m.crashImage(rand.New(rand.NewPCG(seed, 1)))
		b, err := img.ReadFile(pm)
		if isNotExist(err) {
			missing++
		} else if err != nil || string(b) != want {
			t.Fatalf("seed %d: partition.metadata %q (%v): torn, though the log was settled", seed, b, err)
		}
		r, err := openLog(img, memData, "t", 0, opts)
		if err != nil {
			t.Fatalf("seed %d: Open refused: %v", seed, err)
		}
		if id, ok := r.TopicID(); !ok || id != (TopicID{7}) {
			t.Fatalf("seed %d: topic id %v %v", seed, id, ok)
		}
		r.Close()
	}
	if missing != 0 {
		t.Fatalf("partition.metadata missing in %d images: not written durably", missing)
	}
}

// quietLog is a new log under FlushInterval that gets 8 records (offsets
// 0-7, two batches of 4), is flushed once (settling it) and then flushed
// every second with nothing new: the fetcher's flusher on a partition
// whose backlog came at start-up.
func quietLog(t *testing.T, m *memFS, now *time.Time) (*Log, Options) {
	t.Helper()
	opts := Options{Logger: quiet, Flush: FlushInterval, TopicID: TopicID{3}, Now: func() time.Time { return *now }}
	l, err := openLog(m, memData, "t", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	*now = now.Add(5 * time.Second)
	if err := l.Append(crashRun(0, 1, 4, 2)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		*now = now.Add(time.Second)
	}
	if d := l.DurableEnd(); d != 8 {
		t.Fatalf("durable end %d, want 8", d)
	}
	return l, opts
}

// The recovery point of a quiet log catches up with its durable end on a
// Flush with nothing new, a second after settle wrote the start point;
// and only once (a quiet log costs no fsync per Flush).
func TestQuietLogPointCatchesUp(t *testing.T) {
	m := newMemFS()
	now := time.UnixMilli(1_700_000_000_000)
	l, _ := quietLog(t, m, &now)
	defer l.Close()
	path := filepath.Join(PartitionDir(memData, "t", 0), recoveryPointName)
	b, err := m.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := parseRecoveryPoint(b)
	if err != nil {
		t.Fatal(err)
	}
	if rp.next != 8 || rp.pos == 0 {
		t.Fatalf("point on disk %q after quiet flushes: want it at the durable end 8", b)
	}
	if l.FlushDue() {
		t.Fatal("FlushDue with nothing unsynced and the point caught up")
	}
	// Nothing more to catch up: further flushes leave the file alone.
	ops := m.opCount()
	for range 3 {
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Second)
	}
	if n := m.opCount() - ops; n != 0 {
		t.Fatalf("%d file system changes by Flushes with nothing new after the point caught up", n)
	}
}

// The consequence: bit rot inside a quiet log's durable batches, then an
// unclean stop. Open must keep the durable batches (resuming from the
// point: Read's CRC check reports the damage later) or report it
// (CorruptionError), never cut them as a torn tail.
func TestQuietLogCorruptionReported(t *testing.T) {
	m := newMemFS()
	now := time.UnixMilli(1_700_000_000_000)
	l, opts := quietLog(t, m, &now)
	defer l.Close()
	img := m.crashImage(nil)
	f, err := img.OpenFile(filepath.Join(PartitionDir(memData, "t", 0), segmentName(0, logSuffix)), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff, 0xee}, 100); err != nil { // inside the first batch, the second after it
		t.Fatal(err)
	}
	f.Close()
	r, err := openLog(img, memData, "t", 0, opts)
	var ce *CorruptionError
	if errors.As(err, &ce) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.LogEndOffset() == 8 {
		return
	}
	t.Fatalf("Open cut durable batches silently: log end %d, durable end was 8", r.LogEndOffset())
}

func (m *memFS) opCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ops
}

// FlushDue names a quiet log whose point is behind, a second after settle,
// and no longer once a Flush caught it up: the flusher's test.
func TestFlushDueOfQuietLog(t *testing.T) {
	m := newMemFS()
	now := time.UnixMilli(1_700_000_000_000)
	l, err := openLog(m, memData, "t", 0, Options{Logger: quiet, Flush: FlushInterval, TopicID: TopicID{3}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.FlushDue() {
		t.Fatal("FlushDue of a new empty log")
	}
	if err := l.Append(crashRun(0, 1, 4, 2)); err != nil {
		t.Fatal(err)
	}
	if !l.FlushDue() {
		t.Fatal("no FlushDue with unsynced appends")
	}
	if err := l.Flush(); err != nil { // settles: the start point, counted as just written
		t.Fatal(err)
	}
	if l.FlushDue() {
		t.Fatal("FlushDue right after the settling Flush")
	}
	now = now.Add(time.Second)
	if !l.FlushDue() {
		t.Fatal("no FlushDue a second later, the point still at the segment's start")
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if l.FlushDue() {
		t.Fatal("FlushDue after the point caught up")
	}
}

// startPoint is what a log opened empty writes unsynced (settle's first
// point), for a new log and for one truncated fully to 5: unsyncedPoint's
// torn-write test depends on it.
func TestStartPointIsWhatSettleWrites(t *testing.T) {
	m := newMemFS()
	now := time.UnixMilli(1_700_000_000_000) // stands still: the point stays settle's
	opts := Options{Logger: quiet, Flush: FlushInterval, TopicID: TopicID{3}, Now: func() time.Time { return now }}
	l, err := openLog(m, memData, "t", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(crashRun(0, 1, 4, 2)); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(PartitionDir(memData, "t", 0), recoveryPointName)
	if b, _ := m.ReadFile(path); string(b) != string(formatRecoveryPoint(startPoint(0, -1))) {
		t.Fatalf("settle wrote %q, startPoint(0) is %q", b, formatRecoveryPoint(startPoint(0, -1)))
	}
	if !unsyncedPoint(nil, []segStart{{0, -1}}) || !unsyncedPoint([]byte("0\n\x00\x00"), []segStart{{0, -1}}) {
		t.Fatal("torn images of the start point not taken as torn")
	}
	if unsyncedPoint([]byte("0\n5 0"), []segStart{{0, -1}}) || unsyncedPoint(formatRecoveryPoint(startPoint(0, -1)), []segStart{{0, -1}}) {
		t.Fatal("another segment's start point, or a whole one, taken as torn")
	}
	if err := l.TruncateFullyAndStartAt(5); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := openLog(m, memData, "t", 0, opts) // empty: keeps or rewrites, unsynced, the start point
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if b, _ := m.ReadFile(path); string(b) != string(formatRecoveryPoint(startPoint(5, -1))) {
		t.Fatalf("the log opened empty at 5 has the point %q, startPoint(5) is %q", b, formatRecoveryPoint(startPoint(5, -1)))
	}
}
