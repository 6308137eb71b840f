package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// memFS is a strict in-memory fileSystem, in the spirit of pebble's
// vfs.NewStrictMem with ResetToSyncedState: it keeps, beside what a
// process sees, what a power loss would leave, and crashImage builds the
// file system a restart after a power cut would find.
//
//   - A file's data is durable as of its last Sync; every Write, WriteAt and
//     Truncate after it is in the page cache only.
//   - A directory's entries (create, rename, remove, mkdir) are durable as
//     of its last SyncDir; a file synced but never linked durably is gone.
//
// A strict image forgets everything not durable. A torn image
// (crashImage with a random source) also keeps an arbitrary part of it, as
// a kernel writing pages back on its own would: each unsynced write, cut
// into sectors, keeps each sector or not, in any order (so a later batch
// can survive where an earlier one did not, with zeros between), each
// unsynced truncate happens or not, and each directory keeps a prefix of
// its unsynced entry changes, in the order they were made.
//
// before, when set, is called before every operation that changes
// anything (the crash points), with the operation's index from 1, while
// the file system is locked: it may call imageLocked, nothing else of m.
type memFS struct {
	mu     sync.Mutex
	root   *memNode
	ops    int
	before func(op int, what string)
}

type memNode struct {
	dir bool
	// A directory: its entries now, as of its last SyncDir, and the
	// changes since, in order.
	entries, durable map[string]*memNode
	dirLog           []memDirOp
	// A file: its data now (shared with synced while cow is set: copy
	// before writing), as of its last Sync, and the writes and truncates
	// since, in order.
	data, synced []byte
	cow          bool
	fileLog      []memFileOp
}

// memDirOp is one change of a directory's entries: name linked to node
// (nil: name removed), and, for a rename within the directory, from
// removed in the same step (a rename is atomic).
type memDirOp struct {
	name string
	node *memNode
	from string
}

type memFileOp struct {
	off  int64
	data []byte // nil: a truncate to off
}

func newMemFS() *memFS { return &memFS{root: newMemDir()} }

func newMemDir() *memNode {
	return &memNode{dir: true, entries: map[string]*memNode{}, durable: map[string]*memNode{}}
}

// op counts a change and runs the before hook; callers hold mu.
func (m *memFS) op(what string) {
	m.ops++
	if m.before != nil {
		m.before(m.ops, what)
	}
}

func memErr(op, path string, err error) error { return &fs.PathError{Op: op, Path: path, Err: err} }

// split cleans an absolute path into its elements.
func split(path string) []string {
	p := strings.Trim(filepath.Clean(path), "/")
	if p == "" || p == "." {
		return nil
	}
	return strings.Split(p, "/")
}

// lookup finds the node at path; callers hold mu.
func (m *memFS) lookup(path string) (*memNode, error) {
	n := m.root
	for _, e := range split(path) {
		if !n.dir {
			return nil, syscall.ENOTDIR
		}
		c, ok := n.entries[e]
		if !ok {
			return nil, os.ErrNotExist
		}
		n = c
	}
	return n, nil
}

// parent returns the directory holding path and path's last element.
func (m *memFS) parent(path string) (*memNode, string, error) {
	el := split(path)
	if len(el) == 0 {
		return nil, "", syscall.EBUSY
	}
	d, err := m.lookup("/" + strings.Join(el[:len(el)-1], "/"))
	if err != nil {
		return nil, "", err
	}
	if !d.dir {
		return nil, "", syscall.ENOTDIR
	}
	return d, el[len(el)-1], nil
}

func (d *memNode) link(name string, n *memNode) {
	if n == nil {
		delete(d.entries, name)
	} else {
		d.entries[name] = n
	}
	d.dirLog = append(d.dirLog, memDirOp{name: name, node: n})
}

func (m *memFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent(name)
	if err != nil {
		return nil, memErr("open", name, err)
	}
	n, ok := d.entries[base]
	switch {
	case ok && n.dir && flag&(os.O_WRONLY|os.O_RDWR) != 0:
		return nil, memErr("open", name, syscall.EISDIR)
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, memErr("open", name, os.ErrExist)
	case !ok && flag&os.O_CREATE == 0:
		return nil, memErr("open", name, os.ErrNotExist)
	case !ok:
		m.op("create " + name)
		n = &memNode{}
		d.link(base, n)
	}
	f := &memFile{fs: m, node: n, name: name, flag: flag}
	if flag&os.O_TRUNC != 0 && len(n.data) > 0 {
		m.op("truncate " + name)
		n.truncate(0)
	}
	return f, nil
}

func (n *memNode) own() {
	if n.cow {
		n.data = slices.Clone(n.data)
		n.cow = false
	}
}

func (n *memNode) truncate(size int64) {
	n.own()
	if size <= int64(len(n.data)) {
		n.data = n.data[:size]
	} else {
		n.data = append(n.data, make([]byte, size-int64(len(n.data)))...)
	}
	n.fileLog = append(n.fileLog, memFileOp{off: size})
}

func (n *memNode) writeAt(b []byte, off int64) {
	n.own()
	if end := off + int64(len(b)); end > int64(len(n.data)) {
		n.data = append(n.data, make([]byte, end-int64(len(n.data)))...)
	}
	copy(n.data[off:], b)
	n.fileLog = append(n.fileLog, memFileOp{off: off, data: slices.Clone(b)})
}

func (m *memFS) Rename(from, to string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	fd, fb, err := m.parent(from)
	if err != nil {
		return memErr("rename", from, err)
	}
	n, ok := fd.entries[fb]
	if !ok {
		return memErr("rename", from, os.ErrNotExist)
	}
	td, tb, err := m.parent(to)
	if err != nil {
		return memErr("rename", to, err)
	}
	if old, ok := td.entries[tb]; ok && (old.dir != n.dir || (old.dir && len(old.entries) > 0)) {
		return memErr("rename", to, syscall.EEXIST)
	}
	m.op("rename " + from + " " + to)
	if fd == td {
		delete(fd.entries, fb)
		fd.entries[tb] = n
		fd.dirLog = append(fd.dirLog, memDirOp{name: tb, node: n, from: fb})
		return nil
	}
	// Across directories each one's entry is durable by its own SyncDir.
	td.link(tb, n)
	fd.link(fb, nil)
	return nil
}

func (m *memFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent(name)
	if err != nil {
		return memErr("remove", name, err)
	}
	n, ok := d.entries[base]
	if !ok {
		return memErr("remove", name, os.ErrNotExist)
	}
	if n.dir && len(n.entries) > 0 {
		return memErr("remove", name, syscall.ENOTEMPTY)
	}
	m.op("remove " + name)
	d.link(base, nil)
	return nil
}

func (m *memFS) Mkdir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent(dir)
	if err != nil {
		return memErr("mkdir", dir, err)
	}
	if _, ok := d.entries[base]; ok {
		return memErr("mkdir", dir, syscall.EEXIST)
	}
	m.op("mkdir " + base)
	d.link(base, newMemDir())
	return nil
}

func (m *memFS) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, e := range split(dir) {
		c, ok := n.entries[e]
		if !ok {
			m.op("mkdir " + e)
			c = newMemDir()
			n.link(e, c)
		} else if !c.dir {
			return memErr("mkdir", dir, syscall.ENOTDIR)
		}
		n = c
	}
	return nil
}

func (m *memFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.lookup(dir)
	if err != nil {
		return nil, memErr("readdir", dir, err)
	}
	if !d.dir {
		return nil, memErr("readdir", dir, syscall.ENOTDIR)
	}
	var out []fs.DirEntry
	for _, name := range slices.Sorted(maps.Keys(d.entries)) {
		out = append(out, fs.FileInfoToDirEntry(memInfo{name, d.entries[name]}))
	}
	return out, nil
}

func (m *memFS) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, memErr("open", name, err)
	}
	if n.dir {
		return nil, memErr("read", name, syscall.EISDIR)
	}
	return slices.Clone(n.data), nil
}

func (m *memFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, memErr("stat", name, err)
	}
	return memInfo{filepath.Base(name), n}, nil
}

func (m *memFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.lookup(dir)
	if err != nil {
		return memErr("sync", dir, err)
	}
	m.op("syncdir " + dir)
	d.durable = maps.Clone(d.entries)
	d.dirLog = nil
	return nil
}

// crashImage is the file system a restart after a power cut at this
// instant finds: strict (rng nil) or torn (see memFS). The image shares
// no mutable state with m.
func (m *memFS) crashImage(rng *rand.Rand) *memFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.imageLocked(rng)
}

func (m *memFS) imageLocked(rng *rand.Rand) *memFS {
	seen := map[*memNode]*memNode{}
	var img func(n *memNode) *memNode
	img = func(n *memNode) *memNode {
		if c, ok := seen[n]; ok {
			return c
		}
		c := &memNode{dir: n.dir}
		seen[n] = c
		if n.dir {
			ents := maps.Clone(n.durable)
			if rng != nil && len(n.dirLog) > 0 {
				for _, o := range n.dirLog[:rng.IntN(len(n.dirLog)+1)] {
					if o.from != "" {
						delete(ents, o.from)
					}
					if o.node == nil {
						delete(ents, o.name)
					} else {
						ents[o.name] = o.node
					}
				}
			}
			c.entries = map[string]*memNode{}
			for name, e := range ents {
				c.entries[name] = img(e)
			}
			c.durable = maps.Clone(c.entries)
			return c
		}
		data := n.synced
		if rng != nil && len(n.fileLog) > 0 {
			data = tornData(n.synced, n.fileLog, rng)
		}
		c.data, c.synced, c.cow = data, data, true
		return c
	}
	return &memFS{root: img(m.root)}
}

// tornSector is how much of an unsynced write survives or not as one
// piece: smaller than a test batch, so a batch can be half there.
const tornSector = 32

// tornData applies a random part of the unsynced operations to the
// synced content.
func tornData(synced []byte, ops []memFileOp, rng *rand.Rand) []byte {
	data := slices.Clone(synced)
	for _, o := range ops {
		if o.data == nil {
			if rng.IntN(2) == 0 {
				if o.off <= int64(len(data)) {
					data = data[:o.off]
				} else {
					data = append(data, make([]byte, o.off-int64(len(data)))...)
				}
			}
			continue
		}
		for s := int64(0); s < int64(len(o.data)); s += tornSector {
			if rng.IntN(2) == 0 {
				continue
			}
			chunk := o.data[s:min(s+tornSector, int64(len(o.data)))]
			off := o.off + s
			if end := off + int64(len(chunk)); end > int64(len(data)) {
				data = append(data, make([]byte, end-int64(len(data)))...)
			}
			copy(data[off:], chunk)
		}
	}
	return data
}

type memInfo struct {
	name string
	n    *memNode
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return int64(len(i.n.data)) }
func (i memInfo) Mode() fs.FileMode {
	if i.n.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.n.dir }
func (i memInfo) Sys() any           { return nil }

type memFile struct {
	fs     *memFS
	node   *memNode
	name   string
	flag   int
	off    int64
	closed bool
}

func (f *memFile) check(op string, write bool) error {
	if f.closed {
		return memErr(op, f.name, os.ErrClosed)
	}
	if write && f.flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return memErr(op, f.name, syscall.EBADF)
	}
	return nil
}

func (f *memFile) ReadAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(b, f.node.data[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(b []byte) (int, error) {
	f.fs.mu.Lock()
	if f.flag&os.O_APPEND != 0 {
		f.off = int64(len(f.node.data))
	}
	off := f.off
	f.fs.mu.Unlock()
	n, err := f.WriteAt(b, off)
	f.fs.mu.Lock()
	f.off += int64(n)
	f.fs.mu.Unlock()
	return n, err
}

func (f *memFile) WriteAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	f.fs.op(fmt.Sprintf("write %s %d+%d", f.name, off, len(b)))
	f.node.writeAt(b, off)
	return len(b), nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	f.fs.op(fmt.Sprintf("truncate %s %d", f.name, size))
	f.node.truncate(size)
	return nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", false); err != nil {
		return err
	}
	f.fs.op("sync " + f.name)
	f.node.synced, f.node.cow, f.node.fileLog = f.node.data, true, nil
	return nil
}

func (f *memFile) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat", false); err != nil {
		return nil, err
	}
	return memInfo{filepath.Base(f.name), f.node}, nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("close", false); err != nil {
		return err
	}
	f.closed = true
	return nil
}

func (f *memFile) Name() string { return f.name }

// The strict file system keeps exactly what was synced: file data by
// Sync, directory entries by SyncDir of their directory; a torn image
// keeps some of the rest.
func TestMemFS(t *testing.T) {
	m := newMemFS()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	content := func(fsys *memFS, name string) string {
		t.Helper()
		b, err := fsys.ReadFile(name)
		if errors.Is(err, os.ErrNotExist) {
			return "<none>"
		}
		must(err)
		return string(b)
	}
	must(m.MkdirAll("/d"))
	must(m.SyncDir("/"))
	f, err := m.OpenFile("/d/a", os.O_RDWR|os.O_CREATE, 0o644)
	must(err)
	_, err = f.Write([]byte("synced"))
	must(err)
	must(f.Sync())
	if got := content(m.crashImage(nil), "/d/a"); got != "<none>" {
		t.Fatalf("a file whose entry was never synced survived: %q", got)
	}
	must(m.SyncDir("/d"))
	_, err = f.WriteAt([]byte(" and not"), 6)
	must(err)
	if got := content(m.crashImage(nil), "/d/a"); got != "synced" {
		t.Fatalf("after a crash a holds %q, want what was synced", got)
	}
	if got := content(m, "/d/a"); got != "synced and not" {
		t.Fatalf("the live file holds %q", got)
	}
	must(m.Rename("/d/a", "/d/b"))
	img := m.crashImage(nil)
	if content(img, "/d/a") != "synced" || content(img, "/d/b") != "<none>" {
		t.Fatal("an unsynced rename survived a crash")
	}
	must(m.SyncDir("/d"))
	img = m.crashImage(nil)
	if content(img, "/d/a") != "<none>" || content(img, "/d/b") != "synced" {
		t.Fatal("a synced rename did not survive")
	}
	// The image is independent of m, and usable.
	g, err := img.OpenFile("/d/b", os.O_RDWR, 0)
	must(err)
	_, err = g.WriteAt([]byte("X"), 0)
	must(err)
	if content(m, "/d/b") != "synced and not" || content(img, "/d/b") != "Xynced" {
		t.Fatal("an image shares data with its origin")
	}
	// Torn images keep any part of unsynced writes, sector by sector.
	h, err := m.OpenFile("/d/b", os.O_RDWR, 0)
	must(err)
	must(h.Sync())
	_, err = h.WriteAt(bytes.Repeat([]byte{'z'}, 4*tornSector), 100)
	must(err)
	seen := map[string]bool{}
	for i := range 64 {
		got := content(m.crashImage(rand.New(rand.NewPCG(uint64(i), 0))), "/d/b")
		if !strings.HasPrefix(got, "synced and not") {
			t.Fatalf("a torn image lost synced data: %q", got)
		}
		seen[fmt.Sprintf("%d/%d", len(got), strings.Count(got, "z"))] = true
	}
	if !seen[fmt.Sprintf("%d/0", len("synced and not"))] || !seen[fmt.Sprintf("%d/%d", 100+4*tornSector, 4*tornSector)] || len(seen) < 4 {
		t.Fatalf("torn images are not varied: %v", seen)
	}
	if n := m.ops; n == 0 {
		t.Fatal("no operations counted")
	}
}
