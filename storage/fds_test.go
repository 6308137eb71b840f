package storage

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// openFilesIn counts this process's descriptors open on a file under dir,
// from /proc/self/fd: those of other tests running beside this one are
// elsewhere.
func openFilesIn(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("listing open descriptors: %v", err)
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			n++
		}
	}
	return n
}

// A log holds exactly one descriptor per segment, its .log, whatever it
// does (appends across rolls, aborted transactions, flushes, truncations,
// retention, a reopen); none after Close. The index files are written
// through descriptors opened for the write and closed again, so 10,000
// partitions fit a 20,000-descriptor limit (issue 14). A View holds the
// same: one per segment.
func TestOpenFilesPerLog(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts descriptors in /proc/self/fd")
	}
	data := t.TempDir()
	now := time.UnixMilli(1_700_000_000_000)
	opts := Options{Logger: quiet, Flush: FlushInterval, SegmentBytes: 300, IndexIntervalBytes: 50, Now: func() time.Time { return now }}
	l := openTxnLog(t, data, opts)
	defer l.Close()
	check := func(what string, want int) {
		t.Helper()
		if got := openFilesIn(t, l.Dir()); got != want {
			t.Fatalf("%s: %d descriptors open under %s, want %d (segments %v)", what, got, l.Dir(), want, l.Segments())
		}
	}
	check("a new log", 1)
	// The story's batches roll segments and put ABORT markers in them
	// (a .txnindex written as the marker comes), with index entries.
	for _, b := range txnStory() {
		if err := l.Append(b); err != nil {
			t.Fatal(err)
		}
		check("after an append", len(l.Segments()))
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("the story made %d segments, want several", len(l.Segments()))
	}
	now = now.Add(time.Second)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	check("after a flush", len(l.Segments()))
	if err := l.TruncateTo(8); err != nil {
		t.Fatal(err)
	}
	check("after a truncation", len(l.Segments()))
	if err := l.DeleteBefore(5); err != nil {
		t.Fatal(err)
	}
	check("after DeleteBefore", len(l.Segments()))
	v, err := OpenReadOnly(data, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	check("with a view beside the log", 2*len(l.Segments()))
	v.Close()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	check("after Close", 0)
	l = openTxnLog(t, data, opts)
	check("reopened", len(l.Segments()))
	if err := l.TruncateFullyAndStartAt(40); err != nil {
		t.Fatal(err)
	}
	check("after a full truncation", 1)
}
