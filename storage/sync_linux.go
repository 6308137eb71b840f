package storage

import (
	"os"
	"syscall"
)

// fdatasync flushes a file's data and the metadata needed to read it back
// (its size), skipping timestamps, which recovery never reads. It runs
// through SyscallConn, which holds the descriptor open for the call: a
// Flush fsyncs without the log's lock (flush.go), and a truncation may
// close the file meanwhile; f.Fd() would race with that close and could
// sync a reused descriptor.
func fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
