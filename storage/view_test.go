package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kfollower/kfollower/wire/batch"
)

func openView(t *testing.T, data string) *View {
	t.Helper()
	v, err := OpenReadOnly(data, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// viewBases reads every batch of it and returns their base offsets.
func viewBases(t *testing.T, it *Batches) []int64 {
	t.Helper()
	var got []int64
	for it.Next() {
		got = append(got, it.Header().BaseOffset)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// readerState is everything a Reader says about a log: the same for a Log
// and for a View of it.
func readerState(t *testing.T, r Reader) string {
	t.Helper()
	var b strings.Builder
	latest, ok := r.LatestEpoch()
	fmt.Fprintf(&b, "start %d end %d durable %d epochs %v latest %d %v\n", r.LogStartOffset(), r.LogEndOffset(), r.DurableEnd(), r.Epochs(), latest, ok)
	for e := int32(-1); e <= latest+1; e++ {
		f, end := r.EndOffsetForEpoch(e)
		fmt.Fprintf(&b, "endOffsetFor(%d) = %d %d\n", e, f, end)
	}
	for off := r.LogStartOffset(); off <= r.LogEndOffset(); off++ {
		for _, max := range []int{1, 300} {
			got, err := r.Read(off, max)
			fmt.Fprintf(&b, "read(%d, %d) = %x %v\n", off, max, got, err)
		}
	}
	_, err := r.Read(r.LogEndOffset()+1, 1)
	fmt.Fprintf(&b, "read past the end: %v\n", errors.Is(err, ErrOffsetOutOfRange))
	return b.String()
}

// A View of a closed log answers every Reader question as the Log does.
func TestViewMatchesLog(t *testing.T) {
	data := t.TempDir()
	l := openT(t, data, Options{Logger: quiet, SegmentBytes: 400, IndexIntervalBytes: 100, Flush: FlushOS})
	for i := range 30 {
		mustAppend(t, l, build(int64(i*3)+int64(i/10), int32(i/7)*2, 3)) // gaps and skipped epochs
	}
	if err := l.DeleteBefore(10); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openT(t, data, Options{Logger: quiet, SegmentBytes: 400, IndexIntervalBytes: 100, Flush: FlushOS})
	if len(l.Segments()) < 3 {
		t.Fatalf("want several segments, have %v", l.Segments())
	}
	v := openView(t, data)
	want, got := readerState(t, l), readerState(t, v)
	if got != want {
		t.Fatalf("view:\n%s\nlog:\n%s", got, want)
	}
	if id, ok := v.TopicID(); ok {
		t.Fatalf("topic id %s without partition.metadata", id)
	}
	if v.Dir() != l.Dir() {
		t.Fatalf("dir %s, want %s", v.Dir(), l.Dir())
	}
	if got := viewBases(t, v.Batches(0, v.LogEndOffset())); len(got) == 0 || got[0] > 10 {
		t.Fatalf("batches from the log start: %v", got)
	}
	// Read looked positions up in the same index entries the Log has.
	for i, s := range v.segs {
		if !slices.Equal(s.ix.offsets, l.segs[i].ix.offsets) || (i == 0 && len(s.ix.offsets) == 0) {
			t.Fatalf("segment %d: index entries %v, the log's %v", s.base, s.ix.offsets, l.segs[i].ix.offsets)
		}
	}
}

// The view's iterator over two segments and a write in progress: every
// chunk size and starting point gives the same batches, each checked, and
// the half-written batch is not part of the log.
func TestViewBatches(t *testing.T) {
	data := t.TempDir()
	l := openT(t, data, Options{Logger: quiet, SegmentBytes: 25 * 600, Flush: FlushOS})
	var all []batch.Header
	off := int64(0)
	for i := range 40 {
		b := batch.Build(batch.Spec{BaseOffset: off, Records: 1 + i%5, Epoch: int32(i / 20), Value: bytes.Repeat([]byte{'x'}, 10*i)})
		mustAppend(t, l, b)
		h, _ := batch.ParseHeader(b)
		all = append(all, h)
		off = h.NextOffset()
	}
	if len(l.Segments()) < 2 {
		t.Fatalf("want two segments, have %v", l.Segments())
	}
	// A write in progress: half a batch at the end of the last segment.
	partial := batch.Build(batch.Spec{BaseOffset: off, Records: 2, Epoch: 1})
	last := filepath.Join(l.Dir(), segmentName(l.Segments()[len(l.Segments())-1], logSuffix))
	appendFile(t, last, partial[:len(partial)/2])

	v := openView(t, data)
	if v.LogEndOffset() != off {
		t.Fatalf("end %d, want %d", v.LogEndOffset(), off)
	}
	for _, chunk := range []int{64, 1000, 1 << 20} {
		for _, from := range []int64{0, 7, off - 1, off} {
			it := v.Batches(from, off+100)
			it.chunk = chunk
			var want []int64
			for _, h := range all {
				if h.NextOffset() > from {
					want = append(want, h.BaseOffset)
				}
			}
			if got := viewBases(t, it); !slices.Equal(got, want) {
				t.Fatalf("chunk %d from %d: bases %v, want %v", chunk, from, got, want)
			}
		}
	}
	// An upper bound: batches that start at or after it are not read.
	to := all[30].BaseOffset
	if got := viewBases(t, v.Batches(0, to+1)); got[len(got)-1] != to {
		t.Fatalf("to %d: last batch read at %d", to+1, got[len(got)-1])
	}
	if got := viewBases(t, v.Batches(0, to)); got[len(got)-1] != all[29].BaseOffset {
		t.Fatalf("to %d: last batch read at %d", to, got[len(got)-1])
	}
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// A bad batch is a *CorruptionError naming its segment and byte, from the
// iterator and from Read alike.
func TestViewCorruption(t *testing.T) {
	data := t.TempDir()
	dir, batches := populate(t, data)
	seg := segFiles(t, dir, logSuffix)[0]
	at := len(batches[0]) + len(batches[1])
	modify(t, seg, func(b []byte) []byte { b[at+70] ^= 1; return b }) // in the third batch's records
	v := openView(t, data)
	it := v.Batches(0, v.LogEndOffset())
	n := 0
	for it.Next() {
		n++
	}
	var ce *CorruptionError
	if n != 2 || !errors.As(it.Err(), &ce) || ce.Position != int64(at) || ce.Segment != seg || ce.Offset != 6 {
		t.Fatalf("after %d batches: %v, want corruption of the third batch at byte %d of %s", n, it.Err(), at, seg)
	}
	if _, err := v.Read(6, 1); !errors.As(err, &ce) || ce.Position != int64(at) {
		t.Fatalf("read of the bad batch: %v", err)
	}
	if b, err := v.Read(3, 1); err != nil || !bytes.Equal(b, batches[1]) {
		t.Fatalf("read before the bad batch: %v", err)
	}
}

// The tail of the last segment is read as Open would recover it: a torn or
// zero-filled tail is left out; bad bytes with a valid batch after them are
// corruption where the bytes were durable, and a torn tail past the
// recovery point (a power loss may reorder unsynced writes).
func TestViewTail(t *testing.T) {
	badThenValid := func(bs [][]byte) []byte {
		bad := build(90, 3, 3)
		bad[16] = 7 // magic
		return append(bad, build(93, 3, 3)...)
	}
	cases := []struct {
		name    string
		tail    func(batches [][]byte) []byte
		noPoint bool // remove kfollower-recovery-point: nothing says which bytes were durable
		corrupt bool // Open refuses the log, reading the view finds a *CorruptionError
	}{
		{"half a batch", func(bs [][]byte) []byte { return build(90, 3, 3)[:40] }, false, false},
		{"zeros", func(bs [][]byte) []byte { return make([]byte, 100) }, false, false},
		{"a bad header before a valid batch, past the recovery point", badThenValid, false, false},
		{"a bad header before a valid batch, no recovery point", badThenValid, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			dir, batches := populate(t, data)
			segs := segFiles(t, dir, logSuffix)
			appendFile(t, segs[len(segs)-1], tc.tail(batches))
			if tc.noPoint {
				if err := os.Remove(filepath.Join(dir, recoveryPointName)); err != nil {
					t.Fatal(err)
				}
			}
			before := dirState(t, data)
			v := openView(t, data)
			if v.LogEndOffset() != 90 {
				t.Fatalf("end %d, want 90", v.LogEndOffset())
			}
			it := v.Batches(0, v.LogEndOffset())
			n := 0
			for it.Next() {
				n++
			}
			var ce *CorruptionError
			if n != len(batches) || tc.corrupt != errors.As(it.Err(), &ce) || (!tc.corrupt && it.Err() != nil) {
				t.Fatalf("%d batches, then %v; want %d", n, it.Err(), len(batches))
			}
			if b, err := v.Read(90, 1); tc.corrupt != errors.As(err, &ce) || (!tc.corrupt && (err != nil || b != nil)) {
				t.Fatalf("read at the end: %x %v", b, err)
			}
			if after := dirState(t, data); after != before {
				t.Fatalf("the view changed the directory:\n%s\nwas\n%s", after, before)
			}
			v.Close()
			l, err := Open(data, "t", 0, corruptOpts(quiet))
			if tc.corrupt {
				if !errors.As(err, &ce) {
					t.Fatalf("Open: %v, want a *CorruptionError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if l.LogEndOffset() != 90 {
				t.Fatalf("Open's end %d, the view's 90", l.LogEndOffset())
			}
		})
	}
}

// dirState is every file under dir with its size, mode, modification time
// and content.
func dirState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v %d %s", path, fi.Mode(), fi.Size(), fi.ModTime().Format(time.RFC3339Nano))
		if !d.IsDir() {
			c, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", c)
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Nothing Open would repair is repaired by a view: not an interrupted
// truncation, a damaged checkpoint, a leftover temp file or a torn tail.
// The view reads around them and writes nothing.
func TestViewNeverWrites(t *testing.T) {
	data := t.TempDir()
	dir, batches := populate(t, data)
	segs := segFiles(t, dir, logSuffix)
	appendFile(t, segs[len(segs)-1], build(90, 3, 3)[:30])
	for name, content := range map[string]string{
		intentName:                   EpochCheckpointFile + " is damaged; this intent is not finished",
		EpochCheckpointFile:          "nonsense",
		EpochCheckpointFile + ".tmp": "left over",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := dirState(t, data)
	v := openView(t, data)
	if got := viewBases(t, v.Batches(0, v.LogEndOffset())); len(got) != len(batches) {
		t.Fatalf("%d batches, want %d", len(got), len(batches))
	}
	// The damaged checkpoint is read as Open would rebuild it.
	if v.Epochs().String() != "[{0 0} {1 24} {2 48} {3 72}]" {
		t.Fatalf("epochs %v", v.Epochs())
	}
	v.Close()
	if after := dirState(t, data); after != before {
		t.Fatalf("the view changed the directory:\n%s\nwas\n%s", after, before)
	}
}

// Beside a running writer the view is the log as it was at open: appends,
// deletions and rewrites of the checkpoint afterwards do not reach it.
func TestViewBesideWriter(t *testing.T) {
	data := t.TempDir()
	now := time.UnixMilli(1_700_000_000_000)
	l := openT(t, data, Options{Logger: quiet, SegmentBytes: 300, Flush: FlushEveryAppend, Now: func() time.Time { return now }})
	for i := range 12 {
		now = now.Add(time.Second) // each flush rewrites the recovery point
		mustAppend(t, l, build(int64(i*3), int32(i/4), 3))
	}
	want := readerState(t, l)
	v := openView(t, data)
	if got := readerState(t, v); got != want {
		t.Fatalf("view:\n%s\nlog:\n%s", got, want)
	}
	// An append whose checkpoint write has not happened yet is read as
	// Open would read it: its epoch comes from the batch.
	mustAppend(t, l, build(36, 7, 3))
	if err := os.WriteFile(filepath.Join(l.Dir(), EpochCheckpointFile), formatEpochCheckpoint(v.Epochs().Entries()), 0o644); err != nil {
		t.Fatal(err)
	}
	v2 := openView(t, data)
	if e, _ := v2.LatestEpoch(); e != 7 || v2.LogEndOffset() != 39 {
		t.Fatalf("latest epoch %d, end %d; want 7, 39", e, v2.LogEndOffset())
	}
	if err := l.DeleteBefore(30); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, build(39, 7, 3))
	if got := readerState(t, v); got != want {
		t.Fatalf("after the writer moved on, view:\n%s\nwant\n%s", got, want)
	}
	if got := viewBases(t, v.Batches(0, 100)); len(got) != 12 || got[11] != 33 {
		t.Fatalf("batches %v", got)
	}
}

// Under FlushOS the view's durable end is what the writer last recorded:
// sealed segments, and the active one up to the recovery point.
func TestViewDurableEnd(t *testing.T) {
	data := t.TempDir()
	l := openT(t, data, Options{Logger: quiet, SegmentBytes: 200, Flush: FlushOS})
	mustAppend(t, l, build(0, 0, 1), build(1, 0, 1), build(2, 0, 1), build(3, 0, 1))
	if l.Segments()[1] != 2 || l.DurableEnd() != 2 {
		t.Fatalf("segments %v, durable end %d", l.Segments(), l.DurableEnd())
	}
	v := openView(t, data)
	if v.DurableEnd() != 2 || v.LogEndOffset() != 4 {
		t.Fatalf("view: durable end %d, end %d; want 2, 4", v.DurableEnd(), v.LogEndOffset())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if v := openView(t, data); v.DurableEnd() != 4 {
		t.Fatalf("after Close: durable end %d, want 4", v.DurableEnd())
	}
}

// A recovery point that does not sit on a batch is not trusted: the last
// segment is walked from its start instead.
func TestViewBadRecoveryPoint(t *testing.T) {
	data := t.TempDir()
	dir, batches := populate(t, data)
	segs := segFiles(t, dir, logSuffix)
	base, _ := parseSegmentName(filepath.Base(segs[len(segs)-1]))
	rp := recoveryPoint{base: base, pos: 5, next: base + 1, firstTs: -1, maxTs: -1, maxTsOffset: -1, lastEpoch: -1}
	if err := os.WriteFile(filepath.Join(dir, recoveryPointName), formatRecoveryPoint(rp), 0o644); err != nil {
		t.Fatal(err)
	}
	v := openView(t, data)
	if v.LogEndOffset() != 90 || v.DurableEnd() != base {
		t.Fatalf("end %d, durable end %d; want 90, %d", v.LogEndOffset(), v.DurableEnd(), base)
	}
	if got := viewBases(t, v.Batches(0, 90)); len(got) != len(batches) {
		t.Fatalf("%d batches, want %d", len(got), len(batches))
	}
}

func TestViewMissing(t *testing.T) {
	if _, err := OpenReadOnly(t.TempDir(), "t", 0); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing partition: %v", err)
	}
	if _, err := OpenReadOnly(t.TempDir(), "..", 0); err == nil {
		t.Fatal("topic .. accepted")
	}
}

func TestPartitionDirs(t *testing.T) {
	for name, want := range map[string]PartitionName{
		"a-0": {Topic: "a", Partition: 0}, "my-topic-12": {Topic: "my-topic", Partition: 12},
	} {
		if got, ok := ParsePartitionDir(name); !ok || got != want {
			t.Errorf("%s: %v %v", name, got, ok)
		}
		if PartitionDir("d", want.Topic, want.Partition) != filepath.Join("d", name) {
			t.Errorf("%s: PartitionDir is not the inverse", name)
		}
	}
	for _, name := range []string{"lost+found", "a-", "-1", "a-01", "a-x", "a-0.abc-delete", "a-0.abc-future", "a b-0"} {
		if _, ok := ParsePartitionDir(name); ok {
			t.Errorf("%s parsed", name)
		}
	}
	data := t.TempDir()
	for _, name := range []string{"b-1", "a-10", "a-2", "empty-0", ".hidden-0", "a-0.abc-delete", "lost+found"} {
		if err := os.MkdirAll(filepath.Join(data, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if name != "empty-0" {
			if err := os.WriteFile(filepath.Join(data, name, segmentName(0, logSuffix)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := ListPartitions(data)
	if err != nil || fmt.Sprint(got) != "[{a 2} {a 10} {b 1}]" {
		t.Fatalf("ListPartitions: %v %v", got, err)
	}
}
