package fetcher

import (
	"fmt"
	"path/filepath"
	"syscall"

	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire/batch"
)

// disk is the failing disk a story's logs live on: every log the Manager
// opens is a faultLog over the real storage.Log, and the story arms the
// faults (the disk command).
type disk struct {
	// fail, while set, fails every write a log does (append, save to
	// lost+found, truncation, flush, retention) with it: ENOSPC or EIO.
	fail error
	// failOpen: opening a log fails with fail too, as recovery may on a
	// disk that is still full.
	failOpen bool
	// corrupt: the next SaveLost finds a corrupt batch in our own segment.
	corrupt bool
}

// openLog is Manager.openLog over d.
func (d *disk) openLog(dataDir, topic string, partition int32, opts storage.Options) (partLog, error) {
	if d.fail != nil && d.failOpen {
		return nil, fmt.Errorf("recovering %s-%d: writing the recovery point: %w", topic, partition, d.fail)
	}
	l, err := storage.Open(dataDir, topic, partition, opts)
	if err != nil {
		return nil, err
	}
	return &faultLog{partLog: l, d: d, dir: l.Dir()}, nil
}

// faultLog fails as storage.Log does on a failing disk: the write that
// meets the fault returns it, and every later write refuses until the log
// is reopened (storage/doc.go, Recovery). Reads answer from the real log.
type faultLog struct {
	partLog
	d      *disk
	dir    string
	failed error
}

// write returns the error of a write named what, if the disk fails it.
func (l *faultLog) write(what string) error {
	if l.failed != nil {
		return fmt.Errorf("%s: an earlier write failed, reopen the log to recover: %w", filepath.Base(l.dir), l.failed)
	}
	if l.d.fail != nil {
		l.failed = fmt.Errorf("%s %s: %w", what, l.segment(), l.d.fail)
		return l.failed
	}
	return nil
}

// segment names the first segment as the story prints it: the temporary
// data dir left out.
func (l *faultLog) segment() string {
	return filepath.Join(filepath.Base(l.dir), "00000000000000000000.log")
}

func (l *faultLog) Append(raw []byte) error {
	if err := l.write("write"); err != nil {
		return err
	}
	return l.partLog.Append(raw)
}

func (l *faultLog) TruncateWithLost(t storage.Truncation) (storage.Lost, error) {
	if l.d.corrupt {
		l.d.corrupt = false
		return storage.Lost{}, &storage.CorruptionError{Topic: "t", Partition: 0, Segment: l.segment(), Position: 4096, Offset: t.Offset,
			Err: &batch.Error{Pos: 4096, BaseOffset: t.Offset, Reason: "CRC mismatch"}}
	}
	if err := l.write("write"); err != nil {
		return storage.Lost{}, err
	}
	return l.partLog.TruncateWithLost(t)
}

func (l *faultLog) TruncateTo(offset int64) error {
	if err := l.write("fsync"); err != nil {
		return err
	}
	return l.partLog.TruncateTo(offset)
}

func (l *faultLog) TruncateFullyAndStartAt(offset int64) error {
	if err := l.write("fsync"); err != nil {
		return err
	}
	return l.partLog.TruncateFullyAndStartAt(offset)
}

func (l *faultLog) Flush() error {
	if err := l.write("fsync"); err != nil {
		return err
	}
	return l.partLog.Flush()
}

// Failed is the fault that failed the log, as storage.Log's: a failed
// flush of the flusher's shows there.
func (l *faultLog) Failed() error {
	if l.failed != nil {
		return l.failed
	}
	return l.partLog.Failed()
}

func (l *faultLog) EnforceRetention() (int, error) {
	if err := l.write("remove"); err != nil {
		return 0, err
	}
	return l.partLog.EnforceRetention()
}

// diskErrors are the disk command's fail= values.
var diskErrors = map[string]error{"ENOSPC": syscall.ENOSPC, "EIO": syscall.EIO, "none": nil}
