package storage

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kfollower/kfollower/wire/batch"
)

// A new log's first segment gets its .index and .timeindex when the log
// settles (its first fsync), not at Open: Open of a new log creates the
// .log alone, so thousands of first opens create two files fewer each.
// Once settled, both are there beside the .log, as Kafka's tools expect.
// An empty log closed unsettled leaves neither, and opens again as it
// was; a segment rolled later gets them at once.
func TestNewLogIndexesAtSettle(t *testing.T) {
	data := t.TempDir()
	opts := Options{Logger: quiet, Flush: FlushInterval, TopicID: TopicID{7}, SegmentBytes: 400, IndexIntervalBytes: 50}
	exists := func(l *Log, base int64, suffix string) bool {
		t.Helper()
		_, err := os.Stat(filepath.Join(l.Dir(), segmentName(base, suffix)))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	both := func(l *Log, base int64) (bool, bool) {
		return exists(l, base, indexSuffix), exists(l, base, timeIndexSuffix)
	}

	l, err := Open(data, "t", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !exists(l, 0, logSuffix) {
		t.Fatal("a new log has no .log")
	}
	if i, ti := both(l, 0); i || ti {
		t.Fatalf("a new, unsettled log has its index files already (.index %v, .timeindex %v)", i, ti)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l, err = Open(data, "t", 0, opts); err != nil {
		t.Fatalf("reopening an empty log closed unsettled: %v", err)
	}
	if err := l.Append(batch.BuildRun(0, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if i, ti := both(l, 0); i || ti {
		t.Fatalf("an append made the index files before the settle (.index %v, .timeindex %v)", i, ti)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if i, ti := both(l, 0); !i || !ti {
		t.Fatalf("after the first flush: .index %v, .timeindex %v, want both", i, ti)
	}
	// Batches enough to roll: every segment has both files at once.
	next := int64(1)
	for len(l.Segments()) < 3 {
		if err := l.Append(batch.BuildRun(next, 1, 3, 2)); err != nil {
			t.Fatal(err)
		}
		next += 6
		segs := l.Segments()
		if i, ti := both(l, segs[len(segs)-1]); !i || !ti {
			t.Fatalf("rolled segment %d: .index %v, .timeindex %v, want both", segs[len(segs)-1], i, ti)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(data, "t", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.LogEndOffset(); got != next {
		t.Fatalf("reopened at log end %d, want %d", got, next)
	}
}
