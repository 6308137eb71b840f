package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

const tmpSuffix = ".tmp"

// writeFileAtomic replaces dir/name with data so that after a crash the
// file is either the old or the new content, never a mix: write
// name.tmp, fsync it, close, rename over name, fsync dir. This is Kafka's
// CheckpointFile + Utils.atomicMoveWithFallback; the tmp file is removed on
// failure.
func writeFileAtomic(fsys fileSystem, dir, name string, data []byte) error {
	if err := writeFileRenamed(fsys, dir, name, data); err != nil {
		return err
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// writeFileRenamed is writeFileAtomic without its directory fsync, which
// the caller makes later, for several files at once (Log.settle).
func writeFileRenamed(fsys fileSystem, dir, name string, data []byte) (err error) {
	path := filepath.Join(dir, name)
	tmp := path + tmpSuffix
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = fsys.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp, err)
	}
	if err = fsys.Rename(tmp, path); err != nil {
		return fmt.Errorf("renaming %s: %w", tmp, err)
	}
	return nil
}

// syncByName fsyncs the file at path through a descriptor opened for it:
// a small file written unsynced, made durable later. Its directory entry
// is the caller's to fsync.
func syncByName(fsys fileSystem, path string) error {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	return nil
}

// writeFileUnsynced replaces dir/name with data as writeFileAtomic does
// but fsyncs nothing: after a crash the file may hold the old content, the
// new one, or (the rename durable before the data) a torn one, which its
// reader must detect.
func writeFileUnsynced(fsys fileSystem, dir, name string, data []byte) (err error) {
	path := filepath.Join(dir, name)
	tmp := path + tmpSuffix
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = fsys.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp, err)
	}
	if err = fsys.Rename(tmp, path); err != nil {
		return fmt.Errorf("renaming %s: %w", tmp, err)
	}
	return nil
}

// removeFileSynced removes dir/name (if present) and fsyncs dir.
func removeFileSynced(fsys fileSystem, dir, name string) error {
	path := filepath.Join(dir, name)
	if err := fsys.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}
