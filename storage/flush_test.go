package storage

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// gateFS holds one Sync of a matching file on a channel, so a test can
// run writer calls while a Flush is inside its unlocked fsync: before the
// fsync (the writer's changes are then fsynced with it) or after it (they
// are not). The Sync fails with fail when set.
type gateFS struct {
	fileSystem
	mu      sync.Mutex
	match   string // suffix; "" when not armed
	after   bool
	fail    error
	entered chan struct{}
	release chan struct{}
}

// arm holds the next Sync of a file whose name ends with suffix; the
// returned channels say it is held and let it go on.
func (g *gateFS) arm(suffix string, after bool, fail error) (entered chan struct{}, release chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.match, g.after, g.fail = suffix, after, fail
	g.entered, g.release = make(chan struct{}), make(chan struct{})
	return g.entered, g.release
}

func (g *gateFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	f, err := g.fileSystem.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return gateFile{f, g}, nil
}

type gateFile struct {
	file
	g *gateFS
}

func (f gateFile) Sync() error {
	g := f.g
	g.mu.Lock()
	held := g.match != "" && strings.HasSuffix(f.Name(), g.match)
	after, fail, entered, release := g.after, g.fail, g.entered, g.release
	if held {
		g.match = ""
	}
	g.mu.Unlock()
	if !held {
		return f.file.Sync()
	}
	var err error
	if after {
		err = f.file.Sync()
	}
	close(entered)
	<-release
	if !after {
		err = f.file.Sync()
	}
	if fail != nil {
		return fail
	}
	return err
}

// A Flush fsyncs without the log's lock, so appends, rolls and
// truncations run during its fsync; whatever comes between, DurableEnd is
// never above the log end nor above what a power loss leaves (the strict
// crash image, reopened), and the log fails only for an fsync error on a
// segment it still holds.
//
// Checked that it can fail: without the generation check, "truncate, then
// append" after the fsync leaves DurableEnd at 10 over a strict image
// ending at 4, and "truncate below the taken end" leaves it above the log
// end; raising DurableEnd to the log end instead of the taken end fails
// "append"; failing on every fsync error fails "full truncation".
func TestFlushBesideWriter(t *testing.T) {
	cases := []struct {
		name string
		// during runs while the Flush, which took the end 10, is held.
		during  func(l *Log) error
		durable int64 // after the Flush
		end     int64
	}{
		{"append", func(l *Log) error { return l.Append(build(10, 0, 5)) }, 10, 15},
		{"truncate below the taken end", func(l *Log) error { return l.TruncateTo(4) }, 4, 4},
		{"truncate, then append", func(l *Log) error {
			if err := l.TruncateTo(4); err != nil {
				return err
			}
			return l.Append(build(4, 1, 8))
		}, 4, 12},
		{"append, then truncate above the taken end", func(l *Log) error {
			for _, raw := range [][]byte{build(10, 0, 2), build(12, 0, 3)} {
				if err := l.Append(raw); err != nil {
					return err
				}
			}
			return l.TruncateTo(12)
		}, 12, 12},
		{"full truncation", func(l *Log) error { return l.TruncateFullyAndStartAt(50) }, 50, 50},
		{"full truncation, then append", func(l *Log) error {
			if err := l.TruncateFullyAndStartAt(50); err != nil {
				return err
			}
			return l.Append(build(50, 1, 3))
		}, 50, 53},
		{"roll", func(l *Log) error { return l.Append(build(10, 0, 40)) }, 10, 50},
		{"roll, then append", func(l *Log) error {
			if err := l.Append(build(10, 0, 40)); err != nil {
				return err
			}
			return l.Append(build(50, 0, 2)) // rolls again
		}, 50, 52},
	}
	for _, tc := range cases {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fsync done first %v", tc.name, after), func(t *testing.T) {
				m := newMemFS()
				g := &gateFS{fileSystem: m}
				// 10 small batches fill most of a 1200-byte segment: the
				// 40-record batch of "roll" does not fit.
				opts := Options{Logger: quiet, Flush: FlushInterval, SegmentBytes: 1200, Now: func() time.Time { return time.UnixMilli(1_700_000_000_000) }}
				l, err := openLog(g, memData, "t", 0, opts)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				for i := range int64(10) {
					mustAppend(t, l, build(i, 0, 1))
				}
				if l.DurableEnd() != 0 {
					t.Fatalf("Append fsynced under FlushInterval: durable end %d", l.DurableEnd())
				}
				entered, release := g.arm(logSuffix, after, nil)
				done := make(chan error, 1)
				go func() { done <- l.Flush() }()
				<-entered
				if err := tc.during(l); err != nil {
					t.Fatal(err)
				}
				close(release)
				if err := <-done; err != nil {
					t.Fatalf("Flush: %v", err)
				}
				if err := l.Failed(); err != nil {
					t.Fatalf("the log failed: %v", err)
				}
				d, e := l.DurableEnd(), l.LogEndOffset()
				if d != tc.durable || e != tc.end {
					t.Fatalf("durable end %d, log end %d; want %d, %d", d, e, tc.durable, tc.end)
				}
				img, err := openLog(m.crashImage(nil), memData, "t", 0, opts)
				if err != nil {
					t.Fatalf("Open after a power loss: %v", err)
				}
				defer img.Close()
				if got := img.LogEndOffset(); got < d {
					t.Fatalf("a power loss leaves the log ending at %d, below the durable end %d", got, d)
				}
				// And the next Flush makes the rest durable.
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
				if l.DurableEnd() != e {
					t.Fatalf("after a second Flush: durable end %d, want %d", l.DurableEnd(), e)
				}
			})
		}
	}
}

// A Flush whose fsync fails fails the log, so the writer's next call
// returns the error, even when a truncation came between (the page cache
// of the bytes it kept is not to be trusted either); DurableEnd stays
// where the last good fsync put it.
func TestFlushFailure(t *testing.T) {
	for _, truncate := range []bool{false, true} {
		t.Run(fmt.Sprintf("truncation between %v", truncate), func(t *testing.T) {
			g := &gateFS{fileSystem: newMemFS()}
			l, err := openLog(g, memData, "t", 0, Options{Logger: quiet, Flush: FlushInterval})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for i := range int64(5) {
				mustAppend(t, l, build(i, 0, 1))
			}
			entered, release := g.arm(logSuffix, false, errInjected)
			done := make(chan error, 1)
			go func() { done <- l.Flush() }()
			<-entered
			want := int64(0)
			if truncate {
				if err := l.TruncateTo(3); err != nil {
					t.Fatal(err)
				}
				want = 3
			}
			close(release)
			if err := <-done; !errors.Is(err, errInjected) {
				t.Fatalf("Flush with a failing fsync: %v", err)
			}
			if err := l.Append(build(l.LogEndOffset(), 0, 1)); !errors.Is(err, errInjected) {
				t.Fatalf("Append after a failed Flush: %v, want the fsync's error", err)
			}
			if l.DurableEnd() != want {
				t.Fatalf("durable end %d, want %d", l.DurableEnd(), want)
			}
		})
	}
}
