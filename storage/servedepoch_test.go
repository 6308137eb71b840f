package storage

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestServedEpochRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenServedEpoch(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Epoch(); got != -1 {
		t.Fatalf("without the file: epoch %d, want -1", got)
	}
	for _, e := range []int32{0, 3, 3, 2, 7} {
		if err := s.Raise(e); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Epoch(); got != 7 {
		t.Fatalf("after raises to 0, 3, 3, 2, 7: epoch %d, want 7 (it never goes down)", got)
	}
	again, err := OpenServedEpoch(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Epoch(); got != 7 {
		t.Fatalf("reopened: epoch %d, want 7", got)
	}
}

func TestServedEpochFileFormat(t *testing.T) {
	if got, want := string(formatServedEpoch(12)), "0\n1\n12\n"; got != want {
		t.Fatalf("format: %q, want %q", got, want)
	}
	for _, bad := range []string{"", "0\n1\n", "1\n1\n3\n", "0\n2\n3\n", "0\n1\n-1\n", "0\n1\nx\n", "0\n1\n2147483648\n"} {
		if _, err := ParseServedEpoch([]byte(bad)); err == nil {
			t.Errorf("ParseServedEpoch(%q): no error", bad)
		}
	}
	dir := t.TempDir()
	fsys := newMemFS()
	if err := fsys.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(fsys, dir, ServedEpochFile, []byte("0\n1\nseven\n")); err != nil {
		t.Fatal(err)
	}
	_, err := openServedEpoch(fsys, dir)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, ServedEpochFile)) {
		t.Fatalf("an unreadable file: err %v, want one naming the file", err)
	}
}

// A crash at any step of a Raise leaves the old epoch or the new one,
// never less, and the new one once Raise has returned.
func TestServedEpochRaiseIsCrashAtomic(t *testing.T) {
	dir := "/data/t-0"
	fsys := newMemFS()
	if err := mkdirAllSynced(fsys, dir); err != nil {
		t.Fatal(err)
	}
	s, err := openServedEpoch(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Raise(4); err != nil {
		t.Fatal(err)
	}
	var images []*memFS
	fsys.before = func(int, string) { images = append(images, fsys.imageLocked(nil)) }
	if err := s.Raise(9); err != nil {
		t.Fatal(err)
	}
	fsys.before = nil
	images = append(images, fsys.crashImage(nil))
	if len(images) < 3 {
		t.Fatalf("only %d crash points in a Raise", len(images))
	}
	for i, img := range images {
		r, err := openServedEpoch(img, dir)
		if err != nil {
			t.Fatalf("crash point %d: %v", i, err)
		}
		last := i == len(images)-1
		if got := r.Epoch(); got != 4 && got != 9 || last && got != 9 {
			t.Fatalf("crash point %d of %d: epoch %d, want 4 or 9 (9 after Raise returned)", i, len(images), got)
		}
	}
}

// failRename fails every rename: the step that publishes a small file.
type failRename struct{ fileSystem }

var errRename = errors.New("injected rename failure")

func (failRename) Rename(string, string) error { return errRename }

func TestServedEpochFailedRaiseKeepsTheOldEpoch(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenServedEpoch(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Raise(5); err != nil {
		t.Fatal(err)
	}
	s.fsys = failRename{osFS{}}
	if err := s.Raise(6); !errors.Is(err, errRename) {
		t.Fatalf("Raise on a failing disk: %v, want the injected error", err)
	}
	if got := s.Epoch(); got != 5 {
		t.Fatalf("after a failed raise: epoch %d, want 5", got)
	}
	r, err := OpenServedEpoch(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Epoch(); got != 5 {
		t.Fatalf("reopened after a failed raise: epoch %d, want 5", got)
	}
}

// 0, the floor every open raises a partition to, costs no write while no
// file holds an epoch: a missing file reads as -1, which the server raises
// to 0 again. Any higher epoch is written, and from then on 0 could not be
// raised to anyway.
func TestServedEpochZeroIsNotWritten(t *testing.T) {
	dir := "/data/t-0"
	fsys := newMemFS()
	if err := mkdirAllSynced(fsys, dir); err != nil {
		t.Fatal(err)
	}
	s, err := openServedEpoch(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	ops := fsys.ops
	if err := s.Raise(0); err != nil {
		t.Fatal(err)
	}
	if s.Epoch() != 0 || fsys.ops != ops {
		t.Fatalf("Raise(0) on a new partition: epoch %d, %d file system changes; want 0, none", s.Epoch(), fsys.ops-ops)
	}
	if r, err := openServedEpoch(fsys, dir); err != nil {
		t.Fatal(err)
	} else if r.Epoch() != -1 {
		t.Fatalf("reopened: epoch %d, want -1 (none on disk)", r.Epoch())
	}
	if err := s.Raise(2); err != nil {
		t.Fatal(err)
	}
	if r, err := openServedEpoch(fsys.crashImage(nil), dir); err != nil {
		t.Fatal(err)
	} else if r.Epoch() != 2 {
		t.Fatalf("after Raise(2) and a crash: epoch %d, want 2", r.Epoch())
	}
}

// The first served epoch written for a new partition, whose directory's
// entry in the data directory only its log's first fsync (settle) would
// sync, survives a power loss: Raise promises it durable. Checked that it
// can fail: without the data directory's fsync on the first write the
// strict crash image reads -1.
func TestServedEpochFirstRaiseOnNewPartition(t *testing.T) {
	fsys := newMemFS()
	if err := mkdirAllSynced(fsys, "/data"); err != nil { // as kfollower run does
		t.Fatal(err)
	}
	l, err := openLog(fsys, "/data", "t", 0, Options{Logger: quiet, Flush: FlushOS, TopicID: TopicID{1}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := openServedEpoch(fsys, l.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Raise(0); err != nil {
		t.Fatal(err)
	}
	if err := s.Raise(7); err != nil {
		t.Fatal(err)
	}
	if r, err := openServedEpoch(fsys.crashImage(nil), l.Dir()); err != nil {
		t.Fatal(err)
	} else if r.Epoch() != 7 {
		t.Errorf("after Raise(7) and a power loss: epoch %d, want 7", r.Epoch())
	}
}
