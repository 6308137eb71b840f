package storage

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kfollower/kfollower/wire/batch"
)

// Section is a run of whole batches of one segment file, taken for a
// Fetch answer and written to the client without being read into memory
// first where the platform allows it (sendfile(2) to a plain TCP
// connection), as Kafka's broker sends a FileRecords slice
// (FileRecords.slice, FileRecords.writeTo). It is an unnamed interface
// type, as wire/server's Section is, so that *Log satisfies the server's
// Log without the server importing storage.
//
// The bytes are not CRC-checked on the way out, as Kafka's broker does not
// check them: every batch was validated when it was appended, and clients
// check CRCs themselves. Read is the CRC-checking read.
type Section = interface {
	// Len is the section's size in bytes.
	Len() int
	// Send writes the bytes [from, to) of the section to w.
	Send(w io.Writer, from, to int) error
	// ReadAt reads bytes of the section into p from its byte off.
	ReadAt(p []byte, off int64) (int, error)
	// Stale reports whether the log may have changed the section's bytes
	// since it was taken (a truncation began): bytes sent since then may
	// not be what the log held when the section was taken.
	Stale() bool
}

// ReadSection is the section of whole batches starting with the one that
// holds offset (or the first after it, across a compaction gap), all from
// one segment, none with a base offset at or past end, at most maxBytes of
// them; when minOne is set the first batch is taken whatever its size.
// next is the offset after the section's last batch. It returns a nil
// Section (and next = offset) when no batch fits, an error wrapping
// ErrOffsetOutOfRange outside [LogStartOffset, LogEndOffset], and a
// *CorruptionError for a batch header that does not parse. Unlike Read it
// checks no CRC.
//
// The section stays valid while the segment file is open: its bytes
// below the log end change only by a truncation, which makes it Stale
// before it changes any (truncate.go); a segment closed meanwhile (retention,
// Close) fails Send.
func (l *Log) ReadSection(offset int64, maxBytes int, end int64, minOne bool) (_ Section, next int64, _ error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usable(); err != nil {
		return nil, offset, err
	}
	return sectionOf(l.ident, l.segs, l.logStart, l.leoLocked(), offset, maxBytes, end, minOne, &l.truncations)
}

// ReadSection is Log.ReadSection over the view. A view's sections are never
// Stale: it cannot see its writer's truncations (as its Read cannot).
func (v *View) ReadSection(offset int64, maxBytes int, end int64, minOne bool) (Section, int64, error) {
	v.indexOnce.Do(func() {
		for _, s := range v.segs {
			s.ix.offsets = readViewIndex(s)
		}
	})
	return sectionOf(v.ident, v.segs, v.logStart, v.end, offset, maxBytes, end, minOne, nil)
}

// sectionOf is ReadSection over segs, which hold the offsets [start,
// logEnd); gen is the log's truncation count (nil: never changes). It reads
// batch headers only, and no further than a segment's size.
func sectionOf(id ident, segs []*segment, start, logEnd, offset int64, maxBytes int, end int64, minOne bool, gen *atomic.Uint64) (Section, int64, error) {
	if offset < start || offset > logEnd {
		return nil, offset, fmt.Errorf("reading %s at %d (log holds %d..%d): %w", id.tp(), offset, start, logEnd, ErrOffsetOutOfRange)
	}
	var taken uint64
	if gen != nil {
		taken = gen.Load()
	}
	i, _ := slices.BinarySearchFunc(segs, offset, func(s *segment, off int64) int {
		if s.base <= off {
			return -1
		}
		return 1
	})
	for i = max(i-1, 0); i < len(segs); i++ {
		s := segs[i]
		w := headerWalk{f: s.log, size: s.size()}
		pos := s.ix.lookup(offset)
		found := false
		var h batch.Header
		for pos < w.size {
			var err error
			if h, err = w.at(pos); err != nil {
				return nil, offset, id.corruption(s, pos, -1, err)
			}
			if h.LastOffset() >= offset {
				found = true
				break
			}
			pos += int64(h.Size())
		}
		if !found {
			continue
		}
		from, n, next := pos, 0, offset
		for pos < w.size {
			if pos > from {
				var err error
				if h, err = w.at(pos); err != nil {
					break // the next read reports it
				}
			}
			size := h.Size()
			if h.BaseOffset >= end || pos+int64(size) > w.size || n+size > maxBytes && !(minOne && n == 0) {
				break
			}
			n += size
			next = h.NextOffset()
			pos += int64(size)
		}
		if n == 0 {
			return nil, offset, nil
		}
		return &fileSection{f: s.log, pos: from, n: n, gen: gen, taken: taken}, next, nil
	}
	return nil, offset, nil
}

// headerWalk reads batch headers of a segment file through a small
// window, so that walking small batches is not a read per batch, and
// large ones are never read whole.
type headerWalk struct {
	f    file
	size int64 // the segment's size when the walk began
	buf  [4 << 10]byte
	at0  int64 // file position of buf[0]
	n    int   // valid bytes in buf
}

func (w *headerWalk) at(pos int64) (batch.Header, error) {
	if pos < w.at0 || pos+batch.HeaderSize > w.at0+int64(w.n) {
		want := int(min(int64(len(w.buf)), w.size-pos))
		n, err := w.f.ReadAt(w.buf[:want], pos)
		if err != nil && !errors.Is(err, io.EOF) {
			return batch.Header{}, fmt.Errorf("reading %s at %d: %w", w.f.Name(), pos, err)
		}
		w.at0, w.n = pos, n
	}
	off := int(pos - w.at0)
	return batch.ParseHeader(w.buf[off:w.n])
}

// fileSection is a Section of a segment's .log.
type fileSection struct {
	f     file
	pos   int64 // the section's first byte in the file
	n     int
	gen   *atomic.Uint64
	taken uint64
}

func (s *fileSection) Len() int { return s.n }

func (s *fileSection) Stale() bool { return s.gen != nil && s.gen.Load() != s.taken }

func (s *fileSection) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(s.n) {
		return 0, fmt.Errorf("reading %s: offset %d outside a %d-byte section", s.f.Name(), off, s.n)
	}
	p = p[:min(int64(len(p)), int64(s.n)-off)]
	n, err := s.f.ReadAt(p, s.pos+off)
	if err == nil && n < len(p) {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (s *fileSection) Send(w io.Writer, from, to int) error {
	if from < 0 || to > s.n || from > to {
		return fmt.Errorf("sending %s: bytes [%d, %d) outside a %d-byte section", s.f.Name(), from, to, s.n)
	}
	if from == to {
		return nil
	}
	if done, err := sendfile(w, s.f, s.pos+int64(from), to-from); done {
		if err != nil {
			return fmt.Errorf("sending %s at %d: %w", s.f.Name(), s.pos+int64(from), err)
		}
		return nil
	}
	bp := sendBufs.Get().(*[]byte)
	defer sendBufs.Put(bp)
	buf := *bp
	for off := from; off < to; {
		n := min(len(buf), to-off)
		if _, err := s.ReadAt(buf[:n], int64(off)); err != nil {
			return fmt.Errorf("sending %s: %w", s.f.Name(), err)
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// sendBufs are the buffers of Send without sendfile (TLS): a file's bytes
// are read into one and written from it, never into a fresh zeroed buffer
// per read.
var sendBufs = sync.Pool{New: func() any {
	b := make([]byte, 256<<10)
	return &b
}}
