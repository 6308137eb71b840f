package storage

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/kfollower/kfollower/wire/batch"
)

// OnSync hears of every fsync: with FlushEveryAppend an append syncs at
// least its segment, and a truncation syncs segments, checkpoint and
// directory.
func TestOnSyncTimesEveryFsync(t *testing.T) {
	var n atomic.Int64
	var total atomic.Int64
	l, err := Open(t.TempDir(), "t", 0, Options{Flush: FlushEveryAppend, OnSync: func(d time.Duration) {
		n.Add(1)
		total.Add(int64(d))
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	afterOpen := n.Load()
	if err := l.Append(batch.BuildRun(0, 1, 2, 5)); err != nil {
		t.Fatal(err)
	}
	afterAppend := n.Load()
	if afterAppend <= afterOpen {
		t.Fatalf("an append with FlushEveryAppend reported no fsync (%d before, %d after)", afterOpen, afterAppend)
	}
	if err := l.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	if n.Load() <= afterAppend {
		t.Fatalf("a truncation reported no fsync")
	}
	if total.Load() <= 0 {
		t.Fatalf("fsyncs took no time at all: %v", time.Duration(total.Load()))
	}
}
