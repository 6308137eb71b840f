package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// fileSystem is the seam every byte of storage goes through, so tests can
// inject a failed write or fsync and count fsyncs. Production uses osFS.
type fileSystem interface {
	OpenFile(name string, flag int, perm os.FileMode) (file, error)
	Rename(from, to string) error
	Remove(name string) error
	// Mkdir is os.Mkdir: an error satisfying fs.ErrExist if dir is
	// there, fs.ErrNotExist if its parent is not.
	Mkdir(dir string) error
	MkdirAll(dir string) error
	ReadDir(dir string) ([]fs.DirEntry, error)
	ReadFile(name string) ([]byte, error)
	Stat(name string) (os.FileInfo, error)
	// SyncDir fsyncs a directory so creations, renames and removals in it
	// survive a crash.
	SyncDir(dir string) error
}

// file is what storage needs of an open file.
type file interface {
	io.ReaderAt
	io.Writer
	io.WriterAt
	Sync() error
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
	Close() error
	Name() string
}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Rename(from, to string) error { return os.Rename(from, to) }
func (osFS) Remove(name string) error     { return os.Remove(name) }

func (osFS) Mkdir(dir string) error                    { return os.Mkdir(dir, 0o755) }
func (osFS) MkdirAll(dir string) error                 { return os.MkdirAll(dir, 0o755) }
func (osFS) ReadDir(dir string) ([]fs.DirEntry, error) { return os.ReadDir(dir) }
func (osFS) ReadFile(name string) ([]byte, error)      { return os.ReadFile(name) }
func (osFS) Stat(name string) (os.FileInfo, error)     { return os.Stat(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// osFile adds fdatasync where the platform has it (sync_linux.go).
type osFile struct{ *os.File }

func (f osFile) Sync() error { return fdatasync(f.File) }

// MkdirAllSynced creates dir and its missing parents, fsyncing each
// parent whose entry list changed: for a data directory, whose own entry
// storage never syncs (it syncs the data directory itself, for the
// partition directories in it, before a new log's first durable end).
func MkdirAllSynced(dir string) error {
	if err := mkdirAllSynced(osFS{}, dir); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	return nil
}

// mkdirAllSynced creates dir and its missing parents and fsyncs each parent
// whose entry list changed, so a new partition directory survives a crash.
// Only a directory that does not exist is missing: any other Stat error is
// returned.
func mkdirAllSynced(fsys fileSystem, dir string) error {
	parents, err := mkdirAll(fsys, dir)
	if err != nil {
		return err
	}
	for _, p := range parents {
		if err := fsys.SyncDir(p); err != nil {
			return err
		}
	}
	return nil
}

// mkdirAll creates dir and its missing parents and returns the
// directories whose entry lists changed (the parents of those created,
// deepest first), which the caller fsyncs (mkdirAllSynced), now or when
// the new directory must first survive a crash (Log.settle).
func mkdirAll(fsys fileSystem, dir string) ([]string, error) {
	// One mkdir first, what a first start-up needs of each partition: its
	// directory, in a data directory that is there. A stat of the missing
	// name first (and os.MkdirAll's two) waited on the data directory's
	// lock behind the other opens' mkdirs: at 10,000 new partitions, more
	// than half of Open's system call time (execution trace, issue 14).
	err := fsys.Mkdir(dir)
	switch {
	case err == nil:
		return []string{filepath.Dir(dir)}, nil
	case errors.Is(err, fs.ErrExist):
		return nil, nil // not a directory: listing it fails
	case !isNotExist(err):
		return nil, err
	}
	// A parent is missing too.
	var created []string
	for d := dir; ; d = filepath.Dir(d) {
		_, err := fsys.Stat(d)
		if err == nil {
			break
		}
		if !isNotExist(err) {
			return nil, err
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, err
	}
	parents := make([]string, 0, len(created))
	for _, d := range created {
		parents = append(parents, filepath.Dir(d))
	}
	return parents, nil
}

// timedFS reports how long every fsync takes (files and directories), for
// Options.OnSync: fsync latency is what a slow disk looks like to a
// follower.
type timedFS struct {
	fileSystem
	onSync func(time.Duration)
	now    func() time.Time
}

func (t timedFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	f, err := t.fileSystem.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return timedFile{f, t}, nil
}

func (t timedFS) SyncDir(dir string) error {
	start := t.now()
	err := t.fileSystem.SyncDir(dir)
	t.onSync(t.now().Sub(start))
	return err
}

type timedFile struct {
	file
	t timedFS
}

func (f timedFile) Sync() error {
	start := f.t.now()
	err := f.file.Sync()
	f.t.onSync(f.t.now().Sub(start))
	return err
}

// listedFS is the file system as Open's recovery sees it: reads, opens
// without O_CREATE and removes of a name directly in dir that the listing
// Open took (names) does not hold fail with ErrNotExist without a system
// call, and the names recovery creates, renames and removes keep the
// listing current. Open of a new or empty log probes a dozen small files
// that are not there (partition.metadata, the intent, the log start, the
// recovery point, the checkpoint, the snapshot, ...); on a busy disk each
// failed open costs as much as the rest of the Open (issue 14: start-up
// with thousands of partitions). Only recovery uses it: nothing but the
// Log writes in its directory (the data directory is locked), and nothing
// runs beside recovery.
type listedFS struct {
	fileSystem
	dir   string
	names map[string]bool
}

// absent says name is in dir and not in the listing.
func (f *listedFS) absent(name string) bool {
	return filepath.Dir(name) == f.dir && !f.names[filepath.Base(name)]
}

func (f *listedFS) note(name string, present bool) {
	if filepath.Dir(name) == f.dir {
		if present {
			f.names[filepath.Base(name)] = true
		} else {
			delete(f.names, filepath.Base(name))
		}
	}
}

func notExist(op, name string) error { return &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist} }

func (f *listedFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	if flag&os.O_CREATE == 0 && f.absent(name) {
		return nil, notExist("open", name)
	}
	fh, err := f.fileSystem.OpenFile(name, flag, perm)
	if err == nil {
		f.note(name, true)
	}
	return fh, err
}

func (f *listedFS) ReadFile(name string) ([]byte, error) {
	if f.absent(name) {
		return nil, notExist("open", name)
	}
	return f.fileSystem.ReadFile(name)
}

func (f *listedFS) Stat(name string) (os.FileInfo, error) {
	if f.absent(name) {
		return nil, notExist("stat", name)
	}
	return f.fileSystem.Stat(name)
}

func (f *listedFS) Remove(name string) error {
	if f.absent(name) {
		return notExist("remove", name)
	}
	err := f.fileSystem.Remove(name)
	if err == nil || isNotExist(err) {
		f.note(name, false)
	}
	return err
}

func (f *listedFS) Rename(from, to string) error {
	err := f.fileSystem.Rename(from, to)
	if err == nil {
		f.note(from, false)
		f.note(to, true)
	}
	return err
}
