package storage

import (
	"errors"
	"testing"
	"time"
)

// DurableEnd follows the fsyncs of each FlushPolicy exactly as Reader's
// doc says: every step names the end it must have.
func TestDurableEnd(t *testing.T) {
	type step struct {
		name        string
		do          func(l *Log) error
		durable     int64
		logEnd      int64
		advanceTime time.Duration // before do
	}
	appendAt := func(base int64, n int) func(l *Log) error {
		return func(l *Log) error { return l.Append(build(base, 0, n)) }
	}
	cases := []struct {
		name  string
		opts  Options
		steps []step
	}{
		{"FlushEveryAppend", Options{Flush: FlushEveryAppend}, []step{
			{name: "open", durable: 0, logEnd: 0},
			{name: "append", do: appendAt(0, 3), durable: 3, logEnd: 3},
			{name: "append after a gap", do: appendAt(10, 2), durable: 12, logEnd: 12},
			{name: "truncate", do: func(l *Log) error { return l.TruncateTo(3) }, durable: 3, logEnd: 3},
		}},
		{"FlushInterval", Options{Flush: FlushInterval, FlushInterval: time.Minute}, []step{
			{name: "open", durable: 0, logEnd: 0},
			// Append never fsyncs: the owner's Flush does (fetcher's
			// flusher, off the fetch path).
			{name: "append", do: appendAt(0, 3), durable: 0, logEnd: 3},
			{name: "append past the interval", do: appendAt(3, 3), advanceTime: time.Minute, durable: 0, logEnd: 6},
			{name: "flush", do: func(l *Log) error { return l.Flush() }, durable: 6, logEnd: 6},
			{name: "append after the flush", do: appendAt(6, 3), durable: 6, logEnd: 9},
			{name: "flush again", do: func(l *Log) error { return l.Flush() }, durable: 9, logEnd: 9},
			{name: "flush with nothing new", do: func(l *Log) error { return l.Flush() }, durable: 9, logEnd: 9},
		}},
		{"FlushOS", Options{Flush: FlushOS, SegmentBytes: 200}, []step{
			{name: "open", durable: 0, logEnd: 0},
			{name: "append", do: appendAt(0, 1), durable: 0, logEnd: 1},
			{name: "append, still unsynced", do: appendAt(1, 1), durable: 0, logEnd: 2},
			// Two 70-byte batches leave no room for a third in 200 bytes:
			// this one rolls, which seals (fsyncs) the old segment.
			{name: "roll", do: appendAt(2, 1), durable: 2, logEnd: 3},
			{name: "truncate below the durable end", do: func(l *Log) error { return l.TruncateTo(1) }, durable: 1, logEnd: 1},
			{name: "append", do: appendAt(1, 1), durable: 1, logEnd: 2},
			{name: "truncate at the log end changes nothing", do: func(l *Log) error { return l.TruncateTo(2) }, durable: 1, logEnd: 2},
			{name: "full truncation", do: func(l *Log) error { return l.TruncateFullyAndStartAt(50) }, durable: 50, logEnd: 50},
			{name: "append", do: appendAt(50, 4), durable: 50, logEnd: 54},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := time.UnixMilli(1_700_000_000_000)
			opts := tc.opts
			opts.Logger = quiet
			opts.Now = func() time.Time { return now }
			dir := t.TempDir()
			l := openT(t, dir, opts)
			for _, s := range tc.steps {
				now = now.Add(s.advanceTime)
				if s.do != nil {
					if err := s.do(l); err != nil {
						t.Fatalf("%s: %v", s.name, err)
					}
				}
				if d, e := l.DurableEnd(), l.LogEndOffset(); d != s.durable || e != s.logEnd {
					t.Fatalf("%s: durable end %d, log end %d; want %d, %d", s.name, d, e, s.durable, s.logEnd)
				}
			}
			// Close fsyncs, and Open starts with the whole log durable.
			end := l.LogEndOffset()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if l.DurableEnd() != end {
				t.Fatalf("after Close: durable end %d, want %d", l.DurableEnd(), end)
			}
			re := openT(t, dir, opts)
			if re.DurableEnd() != end {
				t.Fatalf("after Open: durable end %d, want %d", re.DurableEnd(), end)
			}
		})
	}
}

// A failed fsync leaves DurableEnd where the last good one put it.
func TestDurableEndAfterFailedFsync(t *testing.T) {
	fsys := &faultFS{}
	l, err := openLog(fsys, t.TempDir(), "t", 0, Options{Logger: quiet, Flush: FlushEveryAppend})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustAppend(t, l, build(0, 0, 3))
	fsys.syncMatch = logSuffix
	if err := l.Append(build(3, 0, 3)); !errors.Is(err, errInjected) {
		t.Fatalf("append with a failing fsync: %v", err)
	}
	if fsys.fired != 1 || l.DurableEnd() != 3 || l.LogEndOffset() != 6 {
		t.Fatalf("fired %d; durable end %d, log end %d; want 1, 3, 6", fsys.fired, l.DurableEnd(), l.LogEndOffset())
	}
}
