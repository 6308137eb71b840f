package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// checkDataDir makes sure dir is, or can be created as, a writable
// directory, without leaving anything behind.
func checkDataDir(dir string) error {
	probe := dir
	for {
		fi, err := os.Stat(probe)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("data dir %s: %s is not a directory", dir, probe)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("data dir %s: %w", dir, err)
		}
		parent := filepath.Dir(probe)
		if parent == probe {
			return fmt.Errorf("data dir %s: no existing parent directory", dir)
		}
		probe = parent
	}
	// Access(2) says yes to root whatever the mode, and no to nothing on a
	// read-only mount; creating a file is the only honest test.
	f, err := os.CreateTemp(probe, ".kfollower-write-test-*")
	if err != nil {
		return fmt.Errorf("data dir %s is not writable: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("data dir %s: removing the write test file: %w", dir, err)
	}
	return nil
}

// lockName is the lock file in the data dir.
const lockName = ".kfollower.lock"

// checkUnlocked fails early, before the cluster is contacted, when another
// instance holds the data dir; it creates nothing.
func checkUnlocked(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR, 0)
	if err != nil {
		return nil // no lock file yet: nobody holds it
	}
	f.Close()
	unlock, err := lockDataDir(dir, false)
	if err != nil {
		return err
	}
	unlock()
	return nil
}

// lockDataDir takes an exclusive flock on the data dir's lock file, so two
// instances never write one copy; the kernel releases it if we die. The
// file keeps the holder's pid for the message a second instance prints.
func lockDataDir(dir string, writePid bool) (unlock func(), err error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			if b, rerr := os.ReadFile(path); rerr == nil && len(strings.TrimSpace(string(b))) > 0 {
				holder = "pid " + strings.TrimSpace(string(b))
			}
			return nil, fmt.Errorf("data dir %s is in use by another kfollower (%s holds %s); stop it or choose another --data-dir", dir, holder, path)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if writePid && f.Truncate(0) == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}

func lostFoundRoot(dataDir string) string { return filepath.Join(dataDir, "lost+found") }

// dirSize adds up the sizes of the regular files under dir; 0 if it does
// not exist.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return nil // removed meanwhile
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}
