package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// FuzzCheckpoint checks the leader-epoch-checkpoint parser: it never
// panics; whatever it accepts formats back to text it parses to the same
// entries; and a cache built from accepted entries keeps its invariant
// (epochs and offsets strictly increasing).
func FuzzCheckpoint(f *testing.F) {
	addSeeds(f, "FuzzCheckpoint")
	f.Fuzz(func(t *testing.T, in []byte) {
		entries, err := ParseEpochCheckpoint(in)
		if err != nil {
			return
		}
		out := formatEpochCheckpoint(entries)
		back, err := ParseEpochCheckpoint(out)
		if err != nil || fmt.Sprint(back) != fmt.Sprint(entries) {
			t.Fatalf("reparse of %q: %v %v", out, back, err)
		}
		if !bytes.Equal(formatEpochCheckpoint(back), out) {
			t.Fatal("format not stable")
		}
		c, err := NewEpochs(entries...)
		if err != nil {
			return
		}
		es := c.Entries()
		for i := 1; i < len(es); i++ {
			if es[i].Epoch <= es[i-1].Epoch || es[i].StartOffset <= es[i-1].StartOffset {
				t.Fatalf("cache from %v not monotonic: %v", entries, es)
			}
		}
	})
}

// FuzzRecoverTail appends arbitrary bytes to the active segment of a
// cleanly closed log and opens it: Open must not panic, and must either
// report a *CorruptionError or keep every original batch (they lie before
// the recovery point) plus only whole, valid, contiguous batches after.
func FuzzRecoverTail(f *testing.F) {
	addSeeds(f, "FuzzRecoverTail")
	f.Fuzz(func(t *testing.T, tail []byte) {
		data := t.TempDir()
		opts := Options{Logger: quiet, Flush: FlushOS, IndexIntervalBytes: 100}
		fsys := noSyncFS{}
		l, err := openLog(fsys, data, "t", 0, opts)
		if err != nil {
			t.Fatal(err)
		}
		orig := append(build(0, 0, 3), build(3, 1, 3)...)
		mustAppend(t, l, orig)
		dir := l.Dir()
		l.Close()
		path := filepath.Join(dir, segmentName(0, logSuffix))
		fl, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		fl.Write(tail)
		fl.Close()
		l, err = openLog(fsys, data, "t", 0, opts)
		var ce *CorruptionError
		if errors.As(err, &ce) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		all := readAll(t, l)
		if !bytes.HasPrefix(all, orig) {
			t.Fatal("lost an original batch")
		}
		checkBatches(t, l, true)
		// A second Open finds nothing to repair.
		l.Close()
		l2, err := openLog(fsys, data, "t", 0, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer l2.Close()
		if !bytes.Equal(readAll(t, l2), all) {
			t.Fatal("second open differs")
		}
	})
}
