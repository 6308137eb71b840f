package storage

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"sync"
)

// faultFS is the fault-injecting fileSystem for tests: it passes through
// to the OS, except that the next Sync or write on a file whose name
// contains the armed substring fails. A failed write first writes half of
// its bytes, as a full disk or an I/O error mid-request can.
type faultFS struct {
	osFS
	mu         sync.Mutex
	syncMatch  string // fail the next Sync of a matching file
	writeMatch string
	dirSyncs   int    // fail the next dirSyncs SyncDir calls
	dirPath    string // if set, of this directory only
	// statMatch makes Stat of a matching path fail with statErr, statLimit
	// times (then it answers: not found), counting the calls in stats.
	statMatch string
	statErr   error
	statLimit int
	stats     int
	fired     int
}

var errInjected = errors.New("injected I/O error")

func (f *faultFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	fl, err := f.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{file: fl, fs: f}, nil
}

func (f *faultFS) SyncDir(dir string) error {
	f.mu.Lock()
	fail := f.dirSyncs > 0 && (f.dirPath == "" || f.dirPath == dir)
	if fail {
		f.dirSyncs--
		f.fired++
	}
	f.mu.Unlock()
	if fail {
		return errInjected
	}
	return f.osFS.SyncDir(dir)
}

func (f *faultFS) Stat(name string) (os.FileInfo, error) {
	f.mu.Lock()
	match := f.statMatch != "" && strings.Contains(name, f.statMatch)
	if match {
		f.stats++
		f.fired++
		if f.stats > f.statLimit {
			f.mu.Unlock()
			return nil, &fs.PathError{Op: "stat", Path: name, Err: os.ErrNotExist}
		}
	}
	f.mu.Unlock()
	if match {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: f.statErr}
	}
	return f.osFS.Stat(name)
}

func (f *faultFS) take(match *string, name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *match != "" && strings.Contains(name, *match) {
		*match = ""
		f.fired++
		return true
	}
	return false
}

type faultFile struct {
	file
	fs *faultFS
}

func (f *faultFile) Sync() error {
	if f.fs.take(&f.fs.syncMatch, f.Name()) {
		return errInjected
	}
	return f.file.Sync()
}

func (f *faultFile) Write(b []byte) (int, error) {
	if f.fs.take(&f.fs.writeMatch, f.Name()) {
		n, _ := f.file.Write(b[:len(b)/2])
		return n, errInjected
	}
	return f.file.Write(b)
}

func (f *faultFile) WriteAt(b []byte, off int64) (int, error) {
	if f.fs.take(&f.fs.writeMatch, f.Name()) {
		n, _ := f.file.WriteAt(b[:len(b)/2], off)
		return n, errInjected
	}
	return f.file.WriteAt(b, off)
}

// noSyncFS skips every fsync: for fuzzing, where durability is not the
// question and fsyncs would make each run take milliseconds.
type noSyncFS struct{ osFS }

func (noSyncFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

func (noSyncFS) SyncDir(string) error { return nil }

type noSyncFile struct{ *os.File }

func (noSyncFile) Sync() error { return nil }
