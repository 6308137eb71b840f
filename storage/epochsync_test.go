package storage

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kfollower/kfollower/wire/batch"
)

// An Append that starts an epoch writes leader-epoch-checkpoint (readers
// see it at once) and fsyncs nothing; the next Flush makes the file
// durable (its data, the directory) before it writes the recovery point
// that covers the batch. Kafka's LeaderEpochFileCache.assign fsyncs
// instead (CheckpointFile.write with sync); here the append path waits on
// no fsync under FlushInterval and FlushOS.
func TestEpochCheckpointOffTheAppendPath(t *testing.T) {
	fsys := &countFS{}
	now := time.UnixMilli(1_700_000_000_000)
	opts := Options{Logger: quiet, Flush: FlushInterval, Now: func() time.Time { return now }}
	l, err := openLog(fsys, t.TempDir(), "t", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The first append settles the new log (its own fsyncs, counted in
	// TestNewLogFsyncs).
	if err := l.Append(batch.BuildRun(0, 2, 1, 5)); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	fsys.n.Store(0)
	if err := l.Append(batch.BuildRun(5, 3, 1, 5)); err != nil {
		t.Fatal(err)
	}
	if n := fsys.n.Load(); n != 0 {
		t.Fatalf("an append in a new epoch made %d fsyncs, want none", n)
	}
	data, err := os.ReadFile(filepath.Join(l.Dir(), EpochCheckpointFile))
	if err != nil || string(data) != "0\n2\n2 0\n3 5\n" {
		t.Fatalf("leader-epoch-checkpoint after the append: %q (%v), want the new epoch", data, err)
	}
	now = now.Add(time.Second)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	// The checkpoint (file, directory), the .log, the recovery point
	// (tmp file, directory).
	if n := fsys.n.Load(); n != 2+1+2 {
		t.Fatalf("the flush made %d fsyncs, want 5", n)
	}
	fsys.n.Store(0)
	if err := l.Append(batch.BuildRun(10, 3, 1, 5)); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	// No epoch started: the .log and the recovery point only.
	if n := fsys.n.Load(); n != 1+2 {
		t.Fatalf("a flush with no new epoch made %d fsyncs, want 3", n)
	}
}

// After a power loss the epochs a recovery point covers are in the
// checkpoint as it was read, not rebuilt: the Flush that wrote the point
// had made the Append's unsynced checkpoint durable. A power loss before
// that Flush loses the unsynced batch and its epoch together. Checked that
// it can fail: without syncEpochs in Flush the point is written over an
// empty checkpoint (its rename made durable by the point's directory
// fsync, its data not), which Open has to rebuild from the batches.
func TestEpochCheckpointDurableBeforeRecoveryPoint(t *testing.T) {
	m := newMemFS()
	now := time.UnixMilli(1_700_000_000_000)
	opts := Options{Logger: quiet, Flush: FlushInterval, Now: func() time.Time { return now }}
	l, err := openLog(m, memData, "t", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	flush := func() {
		t.Helper()
		now = now.Add(time.Second) // the recovery point is due
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	reopen := func(img *memFS) (*Log, string) {
		t.Helper()
		var logs bytes.Buffer
		o := opts
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		r, err := openLog(img, memData, "t", 0, o)
		if err != nil {
			t.Fatal(err)
		}
		return r, logs.String()
	}
	if err := l.Append(batch.BuildRun(0, 1, 2, 5)); err != nil {
		t.Fatal(err)
	}
	flush()
	if err := l.Append(batch.BuildRun(10, 2, 2, 5)); err != nil {
		t.Fatal(err)
	}
	// Cut before the Flush: the epoch-2 batches were never synced.
	r, _ := reopen(m.crashImage(nil))
	if got, want := r.Epochs().Entries(), []EpochEntry{{1, 0}}; r.LogEndOffset() != 10 || !slices.Equal(got, want) {
		t.Fatalf("crash before the flush: log end %d, epochs %v; want 10, %v", r.LogEndOffset(), got, want)
	}
	r.Close()
	flush()
	r, logs := reopen(m.crashImage(nil))
	defer r.Close()
	if got, want := r.Epochs().Entries(), []EpochEntry{{1, 0}, {2, 10}}; r.LogEndOffset() != 20 || !slices.Equal(got, want) {
		t.Fatalf("crash after the flush: log end %d, epochs %v; want 20, %v", r.LogEndOffset(), got, want)
	}
	if strings.Contains(logs, "rebuilding leader-epoch-checkpoint") {
		t.Fatalf("the checkpoint the recovery point relies on was not durable, Open rebuilt it:\n%s", logs)
	}
}
