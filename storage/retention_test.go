package storage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/wire/batch"
)

func TestRollBySize(t *testing.T) {
	l := openT(t, t.TempDir(), Options{Logger: quiet, SegmentBytes: 500})
	size := len(build(0, 0, 2))
	for i := range 20 {
		mustAppend(t, l, build(int64(i*2), 0, 2))
	}
	segs := l.Segments()
	perSeg := 500 / size
	if len(segs) != (20+perSeg-1)/perSeg {
		t.Fatalf("segments %v with %d-byte batches", segs, size)
	}
	for i, b := range segs {
		if b != int64(i*perSeg*2) {
			t.Fatalf("segment %d base %d", i, b)
		}
	}
}

func TestRollByAge(t *testing.T) {
	l := openT(t, t.TempDir(), Options{Logger: quiet, SegmentAge: time.Hour})
	ts := int64(1_700_000_000_000)
	app := func(base int64, at int64) {
		mustAppend(t, l, batch.Build(batch.Spec{BaseOffset: base, Epoch: 0, Records: 1, Timestamp: at}))
	}
	app(0, ts)
	app(1, ts+time.Hour.Milliseconds())   // exactly one hour: not past it
	app(2, ts+time.Hour.Milliseconds()+1) // past: roll
	if got := fmt.Sprint(l.Segments()); got != "[0 2]" {
		t.Fatal(got)
	}
}

func TestRetention(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000 + 1000)
	opts := Options{Logger: quiet, SegmentBytes: 300, Now: func() time.Time { return now }}
	l := openT(t, t.TempDir(), opts)
	for i := range 12 {
		mustAppend(t, l, batch.Build(batch.Spec{BaseOffset: int64(i * 2), Epoch: int32(i / 4), Records: 2, Timestamp: 1_700_000_000_000 + int64(i*100)}))
	}
	segs := l.Segments()
	if len(segs) < 4 {
		t.Fatal(segs)
	}
	// By size: keep at least RetentionBytes.
	l.opts.RetentionBytes = l.Size() - 1
	n, err := l.EnforceRetention()
	if err != nil || n != 0 {
		t.Fatalf("deleted %d: %v (removing a segment would go below the limit)", n, err)
	}
	l.opts.RetentionBytes = l.Size() - l.segs[0].size()
	if n, err := l.EnforceRetention(); err != nil || n != 1 || l.LogStartOffset() != segs[1] {
		t.Fatalf("deleted %d: %v, start %d", n, err, l.LogStartOffset())
	}
	// By age: segments whose largest timestamp is older than the limit,
	// never the active one.
	l.opts.RetentionBytes = 0
	l.opts.RetentionAge = time.Millisecond
	now = time.UnixMilli(1_700_000_000_000 + 1_000_000)
	n, err = l.EnforceRetention()
	if err != nil || len(l.Segments()) != 1 || l.LogStartOffset() != l.Segments()[0] {
		t.Fatalf("deleted %d: %v, segments %v start %d", n, err, l.Segments(), l.LogStartOffset())
	}
	first, _ := l.Epochs().Earliest()
	if first.StartOffset != l.LogStartOffset() {
		t.Fatalf("epochs not cut from the start: %v", l.Epochs())
	}
}

// Readers run while the single writer appends and truncates (run with
// -race). Every read sees whole, valid batches.
func TestConcurrentReaders(t *testing.T) {
	l := openT(t, t.TempDir(), Options{Logger: quiet, SegmentBytes: 2000, Flush: FlushOS})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				leo := l.LogEndOffset()
				if leo == 0 {
					continue
				}
				b, err := l.Read(leo/2, 500)
				if err != nil {
					continue // truncated under us: out of range is fine
				}
				if _, err := batch.Whole(b); err != nil {
					t.Error(err)
					return
				}
				l.EndOffsetForEpoch(1)
			}
		}()
	}
	for i := range 400 {
		leo := l.LogEndOffset()
		if i%50 == 49 {
			if err := l.TruncateTo(leo - 7); err != nil {
				t.Fatal(err)
			}
			continue
		}
		ep, _ := l.LatestEpoch()
		if err := l.Append(build(leo, ep+int32(i%100/99), 2)); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}

// Reopening from a recovery point and appending on must leave the same
// index bytes as reading the whole segment again.
func TestResumeIndexesMatchRebuild(t *testing.T) {
	data := t.TempDir()
	opts := Options{Logger: quiet, IndexIntervalBytes: 200, Flush: FlushOS}
	off := int64(0)
	appendSome := func(l *Log, n int) {
		for i := range n {
			mustAppend(t, l, batch.Build(batch.Spec{BaseOffset: off, Epoch: 1, Records: 2, Timestamp: 1_700_000_000_000 + int64(i%5)*10 + off}))
			off += 2
		}
	}
	for range 4 {
		l := openT(t, data, opts)
		appendSome(l, 7)
		l.Close()
	}
	l := openT(t, data, opts)
	dir := l.Dir()
	l.Close()
	read := func() (a, b []byte) {
		a, _ = os.ReadFile(filepath.Join(dir, segmentName(0, indexSuffix)))
		b, _ = os.ReadFile(filepath.Join(dir, segmentName(0, timeIndexSuffix)))
		return a, b
	}
	idx1, tidx1 := read()
	if len(idx1) < 16 {
		t.Fatalf("too few index entries: %d bytes", len(idx1))
	}
	os.Remove(filepath.Join(dir, recoveryPointName))
	l = openT(t, data, opts)
	l.Close()
	idx2, tidx2 := read()
	if !bytes.Equal(idx1, idx2) || !bytes.Equal(tidx1, tidx2) {
		t.Fatalf("resumed indexes differ from rebuilt ones:\n%x\n%x\n%x\n%x", idx1, idx2, tidx1, tidx2)
	}
}
