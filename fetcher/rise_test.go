package fetcher

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
)

// TestRiseAllAtOnce: when several partitions of one worker reconcile with
// a new leader in one answer, their served epochs rise in one pass
// (riseAll, side by side) before they are published: each is served at
// the new upstream epoch and has it durable in its directory.
func TestRiseAllAtOnce(t *testing.T) {
	dir := t.TempDir()
	e := newDriverEnvAt(t, dir, slog.New(slog.DiscardHandler))
	defer e.close()
	step := func(cmd, args, input string) string { return e.step(t, "rise_test", cmd, args, input) }
	const n = 5
	var meta, recs, moved, answers []string
	for p := range n {
		meta = append(meta, fmt.Sprintf("t-%d leader=1 epoch=1", p))
		recs = append(recs, fmt.Sprintf("t-%d records=0-4 epoch=1 hw=5", p))
		moved = append(moved, fmt.Sprintf("t-%d leader=2 epoch=7", p))
		answers = append(answers, fmt.Sprintf("t-%d epoch=1 end=5", p))
	}
	step("metadata", "", strings.Join(meta, "\n"))
	step("reply", "broker=1", strings.Join(recs, "\n"))
	if out := step("metadata", "", strings.Join(moved, "\n")); !strings.Contains(out, "broker 2 <- OffsetForLeaderEpoch") {
		t.Fatalf("no epoch query to the new leader:\n%s", out)
	}
	step("reply", "broker=2", strings.Join(answers, "\n"))
	for p := range n {
		_, epoch, ok := e.m.CatalogPartition("t", int32(p))
		if !ok || epoch != 7 {
			t.Errorf("t-%d served at epoch %d (served: %v), want 7", p, epoch, ok)
		}
		se, err := storage.OpenServedEpoch(filepath.Join(dir, fmt.Sprintf("t-%d", p)))
		if err != nil {
			t.Fatal(err)
		}
		if se.Epoch() != 7 {
			t.Errorf("t-%d: served epoch on disk %d, want 7", p, se.Epoch())
		}
	}
}

// TestRiseRetriedWhileIdle: a served epoch whose rise failed (its file
// could not be written) is tried again at the worker's next pass even when
// the partition is idle, its long polls carried unstepped
// (follower.Partition.Unchanged): it is not left behind the upstream epoch
// until new records come. Checked that it can fail: publishing only the
// partitions stepped leaves it at epoch 1.
func TestRiseRetriedWhileIdle(t *testing.T) {
	dir := t.TempDir()
	e := newDriverEnvAt(t, dir, slog.New(slog.DiscardHandler))
	defer e.close()
	step := func(cmd, args, input string) string { return e.step(t, "rise_test", cmd, args, input) }
	step("metadata", "", "t-0 leader=1 epoch=1")
	step("reply", "broker=1", "t-0 records=0-4 epoch=1 hw=5")
	step("reply", "broker=1", "t-0 hw=5")
	// A directory in the way of the served epoch's temporary file: its
	// write fails (as root too, which chmod would not stop).
	block := filepath.Join(dir, "t-0", storage.ServedEpochFile+".tmp")
	if err := os.Mkdir(block, 0o755); err != nil {
		t.Fatal(err)
	}
	step("metadata", "", "t-0 leader=1 epoch=7")
	step("reply", "broker=1 side", "t-0 epoch=1 end=5")
	// The first answers the Fetch of epoch 1 (stale), the next in the new
	// epoch is stepped, the others carried.
	for range 4 {
		step("reply", "broker=1", "t-0 hw=5")
	}
	if _, epoch, _ := e.m.CatalogPartition("t", 0); epoch == 7 {
		t.Fatal("the served epoch rose to 7 with its file blocked")
	}
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	// Idle long polls only: nothing the state machine needs to see.
	step("reply", "broker=1", "t-0 hw=5")
	step("reply", "broker=1", "t-0 hw=5")
	if _, epoch, ok := e.m.CatalogPartition("t", 0); !ok || epoch != 7 {
		t.Errorf("after the file could be written again and idle long polls: served at epoch %d (served: %v), want 7", epoch, ok)
	}
}

// riseWatch holds the served-epoch rises of riseAll to count how many are
// under way at once. A rise reads its log's latest epoch (riseTarget)
// right before it writes and fsyncs the epoch file (storage.ServedEpoch.
// Raise), and the log is the one Manager.openLog gave: a wrapper of it
// sees each rise begin, and the rise is over once its store holds the
// target epoch (Raise stores it after the fsyncs). The other readers of
// LatestEpoch (the state machine, dueToRise, changed's own rise, publish)
// are told apart by the stack: only catalog.rise under Manager.riseAll is
// a rise of the parallel pass. The first parallelRises rises wait, up to a
// deadline, until that many are under way together; they are then held
// until riseAll is seen blocked on its bound, or one more rise begins
// beside them: a bound too large is caught every run, not only when the
// extra rise happens to come early.
type riseWatch struct {
	m        *Manager
	target   int32 // the epoch the watched rises raise to
	mu       sync.Mutex
	cond     *sync.Cond
	armed    bool
	deadline time.Time
	entered  []*storage.ServedEpoch // the stores of the rises begun
	most     int
	released bool // the first parallelRises may go on
	failed   error
}

// underway counts the rises begun whose epoch is not durable yet.
func (w *riseWatch) underway() int {
	n := 0
	for _, se := range w.entered {
		if se.Epoch() < w.target {
			n++
		}
	}
	return n
}

// riseLog is tp's log, whose LatestEpoch w watches.
type riseLog struct {
	partLog
	tp wire.TopicPartition
	w  *riseWatch
}

func (l riseLog) LatestEpoch() (int32, bool) {
	w := l.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.armed || !inParallelRise() {
		return l.partLog.LatestEpoch()
	}
	// Under no lock of the catalog: riseTarget reads the log before it
	// takes catalog.mu.
	w.m.catalog.mu.Lock()
	se := w.m.catalog.epochs[l.tp].store
	w.m.catalog.mu.Unlock()
	w.entered = append(w.entered, se)
	now := w.underway()
	w.most = max(w.most, now)
	switch {
	case len(w.entered) > parallelRises:
	case now == parallelRises:
		// The bound is met: hold it until riseAll waits on it, or
		// begins one rise more anyway. Polled: a goroutine that blocks
		// tells no one.
		for w.most <= parallelRises && !riseAllBlocked(len(w.entered)) && time.Now().Before(w.deadline) {
			w.mu.Unlock()
			time.Sleep(time.Millisecond)
			w.mu.Lock()
		}
		if w.most <= parallelRises && !riseAllBlocked(len(w.entered)) && w.failed == nil {
			w.failed = fmt.Errorf("riseAll neither waited on its bound with %d rises under way nor began another", now)
		}
		w.released = true
		w.cond.Broadcast()
	default:
		for !w.released && time.Now().Before(w.deadline) {
			w.cond.Wait()
		}
		if !w.released && w.failed == nil {
			w.failed = fmt.Errorf("only %d served-epoch rises under way at once", w.underway())
		}
	}
	return l.partLog.LatestEpoch()
}

// riseAllBlocked reports whether riseAll can begin no rise more: the
// goroutine running it is blocked sending on a channel (its semaphore
// full), and its rise goroutines are the held ones, none still on its way
// here (or waiting for riseWatch.mu to be counted).
func riseAllBlocked(held int) bool {
	buf := make([]byte, 4<<20)
	blocked, rises := false, 0
	for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		switch {
		case strings.Contains(g, "fetcher.(*Manager).riseAll(") && strings.Contains(g, "[chan send"):
			blocked = true
		case strings.Contains(g, "created by github.com/kfollower/kfollower/fetcher.(*Manager).riseAll"):
			rises++
		}
	}
	return blocked && rises == held
}

// inParallelRise reports whether the caller is a served-epoch rise of
// riseAll (catalog.rise called from it, directly or in its goroutines).
func inParallelRise() bool {
	buf := make([]byte, 64<<10)
	st := string(buf[:runtime.Stack(buf, false)])
	return strings.Contains(st, "fetcher.(*catalog).rise(") && strings.Contains(st, "fetcher.(*Manager).riseAll")
}

// TestRiseAllInParallel: when every partition of a worker moves to a new
// leader at a new epoch in one Metadata answer and reconciles in one
// answer, their served epochs are made durable side by side (riseAll):
// parallelRises rises are under way at once (a serial pass waits out the
// deadline), never more, each partition rises once in that pass, and every
// partition ends served at the new epoch, durable in its directory. Issue
// 14: at 4,000 partitions the serial fsyncs were most of the 18.4 s
// reconciliation after a leader move. Checked that it can fail: riseAll
// calling rise for each partition in turn fails with "only 1 served-epoch
// rises under way at once"; its semaphore made parallelRises+1 (or one
// slot a partition) fails with 17 under way, every run.
func TestRiseAllInParallel(t *testing.T) {
	dir := fastDir(t)
	e := newDriverEnvAt(t, dir, slog.New(slog.DiscardHandler))
	defer e.close()
	w := &riseWatch{m: e.m, target: 7}
	w.cond = sync.NewCond(&w.mu)
	open := e.m.openLog
	e.m.openLog = func(dataDir, topic string, partition int32, opts storage.Options) (partLog, error) {
		l, err := open(dataDir, topic, partition, opts)
		if err != nil {
			return nil, err
		}
		return riseLog{partLog: l, tp: wire.TopicPartition{Topic: topic, Partition: partition}, w: w}, nil
	}
	step := func(cmd, args, input string) string { return e.step(t, "rise_test", cmd, args, input) }
	const n = 64 // four times parallelRises: the bound is met, and held
	var meta, recs, moved, answers []string
	for p := range n {
		meta = append(meta, fmt.Sprintf("t-%d leader=1 epoch=1", p))
		recs = append(recs, fmt.Sprintf("t-%d records=0-4 epoch=1 hw=5", p))
		moved = append(moved, fmt.Sprintf("t-%d leader=2 epoch=7", p))
		answers = append(answers, fmt.Sprintf("t-%d epoch=1 end=5", p))
	}
	step("metadata", "", strings.Join(meta, "\n"))
	step("reply", "broker=1", strings.Join(recs, "\n"))
	if out := step("metadata", "", strings.Join(moved, "\n")); !strings.Contains(out, "broker 2 <- OffsetForLeaderEpoch") {
		t.Fatalf("no epoch query to the new leader:\n%s", out)
	}
	// Watched from here: the epoch answers reconcile every partition at
	// epoch 7 in one pass, whose riseAll has all 64 due.
	w.mu.Lock()
	w.armed, w.deadline = true, time.Now().Add(10*time.Second)
	w.mu.Unlock()
	wake := time.AfterFunc(10*time.Second, func() { w.mu.Lock(); w.cond.Broadcast(); w.mu.Unlock() })
	defer wake.Stop()
	step("reply", "broker=2", strings.Join(answers, "\n"))
	w.mu.Lock()
	failed, most, started := w.failed, w.most, len(w.entered)
	w.armed = false
	w.mu.Unlock()
	if failed != nil {
		t.Fatalf("the served epochs did not rise in parallel: %v", failed)
	}
	if most > parallelRises {
		t.Fatalf("%d served-epoch rises under way at once, want at most %d", most, parallelRises)
	}
	if started != n {
		t.Fatalf("%d served-epoch rises in the parallel pass, want one a partition (%d)", started, n)
	}
	for p := range n {
		_, epoch, ok := e.m.CatalogPartition("t", int32(p))
		if !ok || epoch != 7 {
			t.Errorf("t-%d served at epoch %d (served: %v), want 7", p, epoch, ok)
		}
		se, err := storage.OpenServedEpoch(filepath.Join(dir, fmt.Sprintf("t-%d", p)))
		if err != nil {
			t.Fatal(err)
		}
		if se.Epoch() != 7 {
			t.Errorf("t-%d: served epoch on disk %d, want 7", p, se.Epoch())
		}
	}
}
