package storage

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kfollower/kfollower/wire/batch"
)

// txnData is one transactional data batch of producer pid.
func txnData(base int64, pid int64, n int) []byte {
	return batch.Build(batch.Spec{BaseOffset: base, Records: n, Transactional: true, ProducerID: pid})
}

// txnMarker is the COMMIT (commit) or ABORT marker of producer pid, as a
// leader writes it: one control record, key version 0 and the type, value
// version 0 and a coordinator epoch (EndTransactionMarker).
func txnMarker(base int64, pid int64, commit bool) []byte {
	ctrl := byte(controlAbort)
	if commit {
		ctrl = controlCommit
	}
	return batch.Build(batch.Spec{BaseOffset: base, Records: 1, Control: true, Transactional: true, ProducerID: pid,
		Key: []byte{0, 0, 0, ctrl}, Value: []byte{0, 0, 0, 0, 0, 5}})
}

func plain(base int64, n int) []byte { return batch.Build(batch.Spec{BaseOffset: base, Records: n}) }

// txnStory interleaves plain records with committed, aborted and empty
// transactions of three producers:
//
//	0-1 plain; 2-3 p7; 4 p8; 5 plain; 6 ABORT p7 (p8 open at 4: LSO 4)
//	7-8 p7; 9 COMMIT p8; 10 ABORT p9 (nothing open: no entry)
//	11 ABORT p7 (nothing else open: LSO 12); 12 p9, still open
func txnStory() [][]byte {
	return [][]byte{
		plain(0, 2), txnData(2, 7, 2), txnData(4, 8, 1), plain(5, 1), txnMarker(6, 7, false),
		txnData(7, 7, 2), txnMarker(9, 8, true), txnMarker(10, 9, false), txnMarker(11, 7, false), txnData(12, 9, 1),
	}
}

var txnStoryIndex = []abortedTxn{{7, 2, 6, 4}, {7, 7, 11, 12}}

// The .txnindex entry format, byte for byte (AbortedTxn.java: int16
// version 0, then producerId, firstOffset, lastOffset, lastStableOffset as
// int64, big-endian), and TransactionIndex's checks on reading it.
func TestTxnIndexFormat(t *testing.T) {
	es := []abortedTxn{{pid: 0x0102030405060708, first: 5, last: 9, lso: 10}, {pid: 1000, first: 11, last: 300, lso: 12}}
	want, _ := hex.DecodeString("0000" + "0102030405060708" + "0000000000000005" + "0000000000000009" + "000000000000000a" +
		"0000" + "00000000000003e8" + "000000000000000b" + "000000000000012c" + "000000000000000c")
	got := encodeTxnIndex(es)
	if !bytes.Equal(got, want) || len(got) != 2*abortedTxnSize {
		t.Fatalf("encoded\n%x, want\n%x", got, want)
	}
	back, err := decodeTxnIndex(got, 0, 301)
	if err != nil || !slices.Equal(back, es) {
		t.Fatalf("decoded %v, %v", back, err)
	}
	// A last stable offset below the first offset: another producer's
	// transaction, open since before this one began (the crash model
	// found a check that refused it).
	below := []abortedTxn{{pid: 2, first: 383, last: 524, lso: 332}}
	if back, err := decodeTxnIndex(encodeTxnIndex(below), 522, 600); err != nil || !slices.Equal(back, below) {
		t.Errorf("LSO below the first offset: %v, %v", back, err)
	}
	bad := func(name string, b []byte, base, next int64) {
		if _, err := decodeTxnIndex(b, base, next); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	bad("partial entry", got[:50], 0, 301)
	v1 := bytes.Clone(got)
	v1[1] = 1
	bad("version 1", v1, 0, 301)
	bad("marker past the segment", got, 0, 300)
	bad("marker before the segment", got, 10, 301)
	bad("not increasing", encodeTxnIndex([]abortedTxn{es[1], es[0]}), 0, 301)
}

func TestMarkerType(t *testing.T) {
	for _, commit := range []bool{false, true} {
		b := txnMarker(3, 1, commit)
		h, _ := batch.Check(b)
		want := int16(controlAbort)
		if commit {
			want = controlCommit
		}
		if got := markerType(h, b); got != want {
			t.Errorf("commit %v: type %d", commit, got)
		}
	}
	b := txnData(3, 1, 2)
	h, _ := batch.Check(b)
	if got := markerType(h, b); got != -1 {
		t.Errorf("data batch: type %d", got)
	}
}

func openTxnLog(t *testing.T, dir string, opts Options) *Log {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	l, err := Open(dir, "t", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func appendAll(t *testing.T, l *Log, runs ...[]byte) {
	t.Helper()
	for _, r := range runs {
		if err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
}

// txnIndexFiles is the entries of every segment's .txnindex, in order;
// the active segment's may be missing (it is created on demand), every
// sealed one's must be there.
func txnIndexFiles(t *testing.T, dir string, bases []int64) []byte {
	t.Helper()
	var all []byte
	for i, b := range bases {
		data, err := os.ReadFile(filepath.Join(dir, segmentName(b, txnIndexSuffix)))
		if i == len(bases)-1 && isNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, data...)
	}
	return all
}

// The story's .txnindex, LSO and aborted lists, whether the batches come
// in one run or one by one, in one segment or one segment per batch: the
// entries are the leader's, which appends each marker on its own.
func TestTxnAppend(t *testing.T) {
	for _, tc := range []struct {
		name    string
		oneRun  bool
		segment int64
	}{{"one run", true, 1 << 20}, {"one by one", false, 1 << 20}, {"a segment per batch", false, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openTxnLog(t, dir, Options{Flush: FlushEveryAppend, SegmentBytes: tc.segment})
			defer l.Close()
			story := txnStory()
			if tc.oneRun {
				appendAll(t, l, bytes.Join(story, nil))
			} else {
				appendAll(t, l, story...)
			}
			if got := txnIndexFiles(t, l.Dir(), l.Segments()); !bytes.Equal(got, encodeTxnIndex(txnStoryIndex)) {
				t.Fatalf(".txnindex files hold %x, want %x", got, encodeTxnIndex(txnStoryIndex))
			}
			checkStory(t, l)
			l.Close()
			// Reopened: the sealed segments' files are trusted, the
			// active one's rebuilt; a view reads the same.
			re := openTxnLog(t, dir, Options{Flush: FlushEveryAppend, SegmentBytes: tc.segment})
			defer re.Close()
			checkStory(t, re)
			v, err := OpenReadOnly(dir, "t", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			checkStory(t, v)
		})
	}
}

func checkStory(t *testing.T, r Reader) {
	t.Helper()
	if got := r.LastStableOffset(); got != 12 {
		t.Errorf("LSO %d, want 12 (p9's transaction open at 12)", got)
	}
	for _, c := range []struct {
		from, to int64
		want     []AbortedTxn
	}{
		{0, 13, []AbortedTxn{{ProducerID: 7, FirstOffset: 2}, {ProducerID: 7, FirstOffset: 7}}},
		{0, 3, []AbortedTxn{{ProducerID: 7, FirstOffset: 2}}}, // the first entry's LSO 4 >= 3: complete
		{0, 2, []AbortedTxn{}},
		{6, 7, []AbortedTxn{{ProducerID: 7, FirstOffset: 2}}},
		{7, 8, []AbortedTxn{{ProducerID: 7, FirstOffset: 7}}},
		{12, 13, []AbortedTxn{}},
	} {
		if got := r.AbortedTransactions(c.from, c.to); !slices.Equal(got, c.want) || got == nil {
			t.Errorf("AbortedTransactions(%d, %d) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}

// A truncation cuts the .txnindex with the log (TransactionIndex
// .truncateTo) and reopens the transactions its markers had ended.
func TestTxnTruncate(t *testing.T) {
	for _, segment := range []int64{1 << 20, 1} {
		dir := t.TempDir()
		l := openTxnLog(t, dir, Options{Flush: FlushEveryAppend, SegmentBytes: segment})
		appendAll(t, l, txnStory()...)
		if err := l.TruncateTo(11); err != nil {
			t.Fatal(err)
		}
		// p7's second transaction is open again at 7.
		if got := l.LastStableOffset(); got != 7 {
			t.Errorf("segment bytes %d: after TruncateTo(11): LSO %d, want 7", segment, got)
		}
		if got := txnIndexFiles(t, l.Dir(), l.Segments()); !bytes.Equal(got, encodeTxnIndex(txnStoryIndex[:1])) {
			t.Errorf("segment bytes %d: after TruncateTo(11): .txnindex %x", segment, got)
		}
		if err := l.TruncateTo(6); err != nil {
			t.Fatal(err)
		}
		if got := l.LastStableOffset(); got != 2 {
			t.Errorf("segment bytes %d: after TruncateTo(6): LSO %d, want 2", segment, got)
		}
		if got := txnIndexFiles(t, l.Dir(), l.Segments()); len(got) != 0 {
			t.Errorf("segment bytes %d: after TruncateTo(6): .txnindex %x", segment, got)
		}
		// The same markers again give the same entries.
		appendAll(t, l, txnStory()[4:]...)
		if got := txnIndexFiles(t, l.Dir(), l.Segments()); !bytes.Equal(got, encodeTxnIndex(txnStoryIndex)) {
			t.Errorf("segment bytes %d: appended again: .txnindex %x", segment, got)
		}
		checkStory(t, l)
		if err := l.TruncateFullyAndStartAt(20); err != nil {
			t.Fatal(err)
		}
		if got := l.LastStableOffset(); got != 20 {
			t.Errorf("segment bytes %d: after a full truncation: LSO %d, want 20", segment, got)
		}
		l.Close()
	}
}

// Open rebuilds a missing or damaged .txnindex or snapshot from the
// batches: the active segment's always, a sealed one's when it fails its
// checks or the segment has no snapshot (written before transactions were
// kept).
func TestTxnRecover(t *testing.T) {
	damage := map[string]func(t *testing.T, dir string, bases []int64){
		"every .txnindex removed": func(t *testing.T, dir string, bases []int64) {
			for _, b := range bases {
				rm(t, filepath.Join(dir, segmentName(b, txnIndexSuffix)))
			}
		},
		"every snapshot and .txnindex removed": func(t *testing.T, dir string, bases []int64) {
			for _, b := range bases {
				rm(t, filepath.Join(dir, segmentName(b, txnIndexSuffix)))
				rm(t, filepath.Join(dir, segmentName(b, txnStateSuffix)))
			}
		},
		"garbage in every .txnindex": func(t *testing.T, dir string, bases []int64) {
			for _, b := range bases {
				if err := os.WriteFile(filepath.Join(dir, segmentName(b, txnIndexSuffix)), []byte("garbage"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		},
		"an entry ahead of the log in the active .txnindex": func(t *testing.T, dir string, bases []int64) {
			p := filepath.Join(dir, segmentName(bases[len(bases)-1], txnIndexSuffix))
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(encodeTxnIndex([]abortedTxn{{9, 12, 13, 14}}))
			f.Close()
		},
	}
	for name, do := range damage {
		for _, segment := range []int64{1 << 20, 200} {
			dir := t.TempDir()
			l := openTxnLog(t, dir, Options{Flush: FlushEveryAppend, SegmentBytes: segment})
			appendAll(t, l, txnStory()...)
			bases := l.Segments()
			l.Close()
			do(t, PartitionDir(dir, "t", 0), bases)
			v, err := OpenReadOnly(dir, "t", 0)
			if err != nil {
				t.Fatalf("%s, segment bytes %d: %v", name, segment, err)
			}
			checkStory(t, v) // a view rebuilds in memory, writes nothing
			v.Close()
			re := openTxnLog(t, dir, Options{Flush: FlushEveryAppend, SegmentBytes: segment})
			if got := txnIndexFiles(t, re.Dir(), re.Segments()); !bytes.Equal(got, encodeTxnIndex(txnStoryIndex)) {
				t.Errorf("%s, segment bytes %d (%d segments): .txnindex after Open %x", name, segment, len(bases), got)
			}
			checkStory(t, re)
			re.Close()
		}
	}
}

func rm(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

// The LSO stops at a transaction whose marker is written but not durable:
// DurableEnd is the high watermark, and a reader must not be told the
// transaction is decided before the marker would survive a crash
// (ProducerStateManager's unreplicated transactions).
func TestTxnLastStableOffsetWaitsForTheMarker(t *testing.T) {
	l := openTxnLog(t, t.TempDir(), Options{Flush: FlushOS})
	defer l.Close()
	appendAll(t, l, plain(0, 2), txnData(2, 7, 2))
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := l.LastStableOffset(); got != 2 {
		t.Fatalf("open transaction at 2: LSO %d", got)
	}
	appendAll(t, l, txnMarker(4, 7, true), plain(5, 1))
	if got, end := l.LastStableOffset(), l.DurableEnd(); got != 2 || end != 4 {
		t.Fatalf("marker at 4 not durable (durable end %d): LSO %d, want 2", end, got)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := l.LastStableOffset(); got != 6 {
		t.Fatalf("marker durable: LSO %d, want 6", got)
	}
}

// Retention deletes a segment's .txnindex and snapshot with it, and the
// log start bounds the LSO from below.
func TestTxnRetention(t *testing.T) {
	dir := t.TempDir()
	l := openTxnLog(t, dir, Options{Flush: FlushEveryAppend, SegmentBytes: 1})
	defer l.Close()
	appendAll(t, l, txnStory()...)
	if err := l.DeleteBefore(7); err != nil {
		t.Fatal(err)
	}
	for _, suf := range []string{txnIndexSuffix, txnStateSuffix} {
		if _, err := os.Stat(filepath.Join(l.Dir(), segmentName(6, suf))); !os.IsNotExist(err) {
			t.Errorf("segment 6's %s is still there (%v)", suf, err)
		}
	}
	if got := l.AbortedTransactions(7, 13); !slices.Equal(got, []AbortedTxn{{ProducerID: 7, FirstOffset: 7}}) {
		t.Errorf("aborted after retention: %v", got)
	}
	if err := l.TruncateTo(10); err != nil {
		t.Fatal(err)
	}
	// p7 open at 7 again, the log start.
	if got := l.LastStableOffset(); got != 7 {
		t.Errorf("LSO %d, want 7", got)
	}
}
