package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kfollower/kfollower/wire/batch"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild()
		return
	}
	goleak.VerifyTestMain(m)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func testOpts() Options { return Options{Logger: quiet, Flush: FlushOS} }

func openT(t *testing.T, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, "t", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func build(base int64, epoch int32, n int) []byte {
	return batch.Build(batch.Spec{BaseOffset: base, Epoch: epoch, Records: n, Timestamp: 1_700_000_000_000 + base})
}

func mustAppend(t *testing.T, l *Log, raw ...[]byte) {
	t.Helper()
	for _, r := range raw {
		if err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
}

// readAll reads every batch from the log start to the LEO.
func readAll(t *testing.T, l *Log) []byte {
	t.Helper()
	var out []byte
	off := l.LogStartOffset()
	for off < l.LogEndOffset() {
		b, err := l.Read(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			break
		}
		out = append(out, b...)
		s := batch.NewScanner(b)
		for s.Next() {
			off = s.Header().NextOffset()
		}
	}
	return out
}

func TestAppendReadReopen(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, testOpts())
	var all []byte
	for i := range 50 {
		b := build(int64(i*3), int32(i/10), 3)
		all = append(all, b...)
		mustAppend(t, l, b)
	}
	if l.LogEndOffset() != 150 || l.LogStartOffset() != 0 {
		t.Fatalf("leo %d start %d", l.LogEndOffset(), l.LogStartOffset())
	}
	if got := readAll(t, l); !bytes.Equal(got, all) {
		t.Fatal("read back differs")
	}
	// Read from the middle of a batch returns that batch.
	b, err := l.Read(31, 1)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := batch.ParseHeader(b)
	if h.BaseOffset != 30 || len(b) != h.Size() {
		t.Fatalf("read 31 gave base %d len %d", h.BaseOffset, len(b))
	}
	if b, err := l.Read(150, 100); err != nil || b != nil {
		t.Fatalf("read at LEO: %v %v", b, err)
	}
	if _, err := l.Read(151, 100); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read past LEO: %v", err)
	}
	wantEpochs := fmt.Sprint([]EpochEntry{{0, 0}, {1, 30}, {2, 60}, {3, 90}, {4, 120}})
	if got := fmt.Sprint(l.Epochs().Entries()); got != wantEpochs {
		t.Fatalf("epochs %s", got)
	}
	if e, end := l.EndOffsetForEpoch(2); e != 2 || end != 90 {
		t.Fatalf("end of 2: %d %d", e, end)
	}
	if e, ok := l.LatestEpoch(); !ok || e != 4 {
		t.Fatal("latest epoch")
	}
	l.Close()
	l2 := openT(t, dir, testOpts())
	if l2.LogEndOffset() != 150 || !bytes.Equal(readAll(t, l2), all) || fmt.Sprint(l2.Epochs().Entries()) != wantEpochs {
		t.Fatal("reopen differs")
	}
	cp, _ := os.ReadFile(filepath.Join(l2.Dir(), EpochCheckpointFile))
	if string(cp) != "0\n5\n0 0\n1 30\n2 60\n3 90\n4 120\n" {
		t.Fatalf("checkpoint %q", cp)
	}
}

func TestAppendValidation(t *testing.T) {
	l := openT(t, t.TempDir(), testOpts())
	mustAppend(t, l, build(0, 2, 5))
	bad := build(5, 2, 1)
	bad[len(bad)-1] ^= 1
	cases := map[string][]byte{
		"below LEO":         build(4, 2, 1),
		"epoch decreases":   build(5, 1, 1),
		"no epoch":          build(5, -1, 1),
		"crc":               bad,
		"partial tail":      append(build(5, 2, 1), build(6, 2, 1)[:30]...),
		"overlap in run":    append(build(5, 2, 2), build(6, 2, 1)...),
		"epoch down in run": append(build(5, 3, 1), build(6, 2, 1)...),
		"magic 1": func() []byte {
			b := build(5, 2, 1)
			b[16] = 1
			return b
		}(),
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			err := l.Append(raw)
			var ae *AppendError
			if !errors.As(err, &ae) || ae.Topic != "t" || ae.Partition != 0 || ae.Offset < 4 {
				t.Fatalf("got %v", err)
			}
			if l.LogEndOffset() != 5 || l.Size() != int64(len(build(0, 2, 5))) {
				t.Fatal("something was written")
			}
		})
	}
	// Gaps are legal (compaction).
	mustAppend(t, l, build(100, 3, 1))
	if l.LogEndOffset() != 101 {
		t.Fatal(l.LogEndOffset())
	}
}

func TestTruncateTo(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{Logger: quiet, SegmentBytes: 300})
	var kept []byte
	for i := range 20 {
		b := build(int64(i*2), int32(i/5), 2)
		if i < 7 {
			kept = append(kept, b...)
		}
		mustAppend(t, l, b)
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("segments %v", l.Segments())
	}
	// Offset 15 is inside batch 14..15: the whole batch goes, LEO 14.
	if err := l.TruncateTo(15); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 14 || !bytes.Equal(readAll(t, l), kept) {
		t.Fatalf("leo %d", l.LogEndOffset())
	}
	if got := fmt.Sprint(l.Epochs().Entries()); got != "[{0 0} {1 10}]" {
		t.Fatal(got)
	}
	mustAppend(t, l, build(14, 5, 1))
	l.Close()
	l = openT(t, dir, testOpts())
	if l.LogEndOffset() != 15 || fmt.Sprint(l.Epochs().Entries()) != "[{0 0} {1 10} {5 14}]" {
		t.Fatalf("after reopen leo %d epochs %v", l.LogEndOffset(), l.Epochs())
	}
	if _, err := os.Stat(filepath.Join(l.Dir(), intentName)); !os.IsNotExist(err) {
		t.Fatal("intent left behind")
	}
	// KAFKA-10706: truncating at/after the LEO still cuts the cache there.
	if err := l.TruncateTo(100); err != nil || l.LogEndOffset() != 15 {
		t.Fatal(err)
	}
	// Below the log start: full truncation.
	if err := l.DeleteBefore(4); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 2 || l.LogEndOffset() != 2 || l.Epochs().Len() != 0 {
		t.Fatalf("start %d end %d epochs %v", l.LogStartOffset(), l.LogEndOffset(), l.Epochs())
	}
}

func TestTruncateFullyAndDeleteBefore(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{Logger: quiet, SegmentBytes: 200})
	for i := range 10 {
		mustAppend(t, l, build(int64(i*2), int32(i/3), 2))
	}
	if err := l.DeleteBefore(7); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 7 || l.Segments()[0] > 7 {
		t.Fatalf("start %d segs %v", l.LogStartOffset(), l.Segments())
	}
	if got := fmt.Sprint(l.Epochs().Entries()); got != "[{1 7} {2 12} {3 18}]" {
		t.Fatal(got)
	}
	if _, err := l.Read(5, 10); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatal(err)
	}
	l.Close()
	l = openT(t, dir, testOpts())
	if l.LogStartOffset() != 7 || fmt.Sprint(l.Epochs().Entries()) != "[{1 7} {2 12} {3 18}]" {
		t.Fatalf("reopen start %d epochs %v", l.LogStartOffset(), l.Epochs())
	}
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1000 || l.Epochs().Len() != 0 || len(l.Segments()) != 1 {
		t.Fatal("not fully truncated")
	}
	// Empty log: a batch starting below the LEO but covering it restarts the log.
	mustAppend(t, l, build(998, 9, 5))
	if l.LogStartOffset() != 998 || l.LogEndOffset() != 1003 {
		t.Fatalf("restart: start %d end %d", l.LogStartOffset(), l.LogEndOffset())
	}
	l.Close()
	l = openT(t, dir, testOpts())
	if l.LogStartOffset() != 998 || l.LogEndOffset() != 1003 || fmt.Sprint(l.Epochs().Entries()) != "[{9 998}]" {
		t.Fatalf("reopen: start %d end %d %v", l.LogStartOffset(), l.LogEndOffset(), l.Epochs())
	}
}

func TestSaveLost(t *testing.T) {
	data := t.TempDir()
	l := openT(t, data, Options{Logger: quiet, SegmentBytes: 250, Now: func() time.Time { return time.Unix(1e9, 0) }})
	var all []byte
	for i := range 10 {
		b := build(int64(i*2), int32(i/4), 2)
		all = append(all, b...)
		mustAppend(t, l, b)
	}
	lost, err := l.SaveLost(9)
	if err != nil {
		t.Fatal(err)
	}
	if lost.FirstOffset != 8 || lost.LastOffset != 19 || lost.EndOffset != 20 || lost.Batches != 6 || lost.Records != 12 {
		t.Fatalf("%+v", lost)
	}
	if fmt.Sprint(lost.Epochs) != "[{1 8 15 4 8} {2 16 19 2 4}]" {
		t.Fatalf("epochs %v", lost.Epochs)
	}
	// The copy rolls where the log would (SegmentBytes 250): several
	// segments, together the batches.
	var seg []byte
	for _, name := range lost.Segments {
		b, err := os.ReadFile(filepath.Join(lost.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 250 {
			t.Fatalf("segment %s has %d bytes, more than SegmentBytes", name, len(b))
		}
		seg = append(seg, b...)
	}
	off8 := len(build(0, 0, 2)) * 4
	if !bytes.Equal(seg, all[off8:]) || len(lost.Segments) < 2 || lost.Segment != lost.Segments[0] || lost.Segment != segmentName(8, logSuffix) {
		t.Fatalf("saved segments %v are not the batches", lost.Segments)
	}
	back, err := ReadLost(lost.Dir)
	if err != nil || back.Batches != 6 || back.Bytes != int64(len(seg)) {
		t.Fatalf("%+v %v", back, err)
	}
	if filepath.Dir(lost.Dir) != LostFoundDir(data, "t", 0) {
		t.Fatal(lost.Dir)
	}
	again, err := l.SaveLost(9)
	if err != nil || again.Dir == lost.Dir {
		t.Fatalf("second save: %v %s", err, again.Dir)
	}
	if none, err := l.SaveLost(20); err != nil || none.Batches != 0 {
		t.Fatal(none, err)
	}
}
