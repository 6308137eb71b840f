package audit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire/batch"
)

// localPartition is a read-only view of one partition directory. It does
// not use storage.Open: Open recovers the log (cuts a torn tail, finishes
// an intent, rewrites checkpoints), which only the single writer may do.
// Instead it opens every .log file at once, so a segment that a running
// daemon deletes or cuts afterwards is still read as it was (or shorter),
// and reads the small files (checkpoint, partition.metadata, log start) as
// they are.
type localPartition struct {
	topic     string
	partition int32
	dir       string
	topicID   storage.TopicID // zero when partition.metadata is missing
	logStart  int64           // from kfollower-log-start-offset, else the first segment's base
	epochs    []storage.EpochEntry
	segs      []localSegment
}

type localSegment struct {
	base int64
	path string
	f    *os.File
	size int64
}

// openLocal opens the partition directory of topic-partition under
// dataDir. A daemon may delete a segment between the listing and the open
// (retention, truncation); the listing is then retried.
func openLocal(dataDir, topic string, partition int32) (*localPartition, error) {
	dir := storage.PartitionDir(dataDir, topic, partition)
	lp := &localPartition{topic: topic, partition: partition, dir: dir}
	var err error
	for range 5 {
		if err = lp.openSegments(); err == nil || !errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(filepath.Join(dir, storage.PartitionMetadataFile)); err == nil {
		if id, err := storage.ParsePartitionMetadata(b); err == nil {
			lp.topicID = id
		}
	}
	lp.epochs, err = readEpochCheckpoint(filepath.Join(dir, storage.EpochCheckpointFile))
	if err != nil {
		lp.close()
		return nil, err
	}
	lp.logStart = -1
	if b, err := os.ReadFile(filepath.Join(dir, storage.LogStartFile)); err == nil {
		if v, err := storage.ParseLogStart(b); err == nil {
			lp.logStart = v
		}
	}
	if lp.logStart < 0 {
		lp.logStart = 0
		if len(lp.segs) > 0 {
			lp.logStart = lp.segs[0].base
		}
	}
	return lp, nil
}

func (lp *localPartition) openSegments() error {
	lp.close()
	names, err := filepath.Glob(filepath.Join(lp.dir, "*.log"))
	if err != nil {
		return fmt.Errorf("listing segments of %s: %w", lp.dir, err)
	}
	if len(names) == 0 {
		if _, err := os.Stat(lp.dir); err != nil {
			return fmt.Errorf("opening %s: %w", lp.dir, err)
		}
	}
	for _, n := range names {
		base, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(n), ".log"), 10, 64)
		if err != nil || len(filepath.Base(n)) != 24 {
			continue // not a 20-digit segment name
		}
		f, err := os.Open(n)
		if err != nil {
			lp.close()
			return fmt.Errorf("opening segment %s: %w", n, err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			lp.close()
			return fmt.Errorf("opening segment %s: %w", n, err)
		}
		lp.segs = append(lp.segs, localSegment{base: base, path: n, f: f, size: fi.Size()})
	}
	slices.SortFunc(lp.segs, func(a, b localSegment) int { return int(min(max(a.base-b.base, -1), 1)) })
	return nil
}

func (lp *localPartition) close() {
	for _, s := range lp.segs {
		s.f.Close()
	}
	lp.segs = nil
}

// readEpochCheckpoint reads a leader-epoch-checkpoint (version 0, count,
// "<epoch> <startOffset>" lines). A missing file is an empty sequence: a
// log that never stored a batch.
func readEpochCheckpoint(path string) ([]storage.EpochEntry, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	es, err := storage.ParseEpochCheckpoint(b)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return es, nil
}

// localBatch is what the tools need of one stored batch.
type localBatch struct {
	h    batch.Header
	path string // segment file
	pos  int64  // byte position in it
}

// batchReader streams the headers of the stored batches in offset order,
// starting with the first batch that holds an offset >= from, checking
// every batch's CRC (batch.Scanner) on the way. Segments are read in large
// chunks so a 1 GiB partition is a few hundred reads.
type batchReader struct {
	lp    *localPartition
	from  int64
	seg   int   // index into lp.segs
	pos   int64 // file position of buf[0]
	buf   []byte
	data  []byte // unread part of buf: whole batches and a partial tail
	eof   bool   // current segment read to its end
	chunk int
	cur   localBatch
	err   error
	// end is the offset after the last batch read so far, or the base of
	// an empty last segment: the local log end once Next returned false.
	end int64
	// stopAt, when >= 0, ends the reading before the first batch that
	// starts at or after it (a snapshot end: later appends are ignored).
	stopAt int64
}

func (lp *localPartition) batches(from int64, chunk int) *batchReader {
	if chunk <= 0 {
		chunk = 8 << 20
	}
	r := &batchReader{lp: lp, from: from, chunk: chunk, seg: -1, end: lp.logStart, stopAt: -1}
	return r
}

// Next advances to the next batch. It returns false at the local log end
// or on an error (Err).
func (r *batchReader) Next() bool {
	for r.err == nil {
		if r.seg < 0 {
			if !r.nextSegment() {
				return false
			}
			continue
		}
		sc := batch.NewScanner(r.data)
		if sc.Next() {
			h := sc.Header()
			if r.stopAt >= 0 && h.BaseOffset >= r.stopAt {
				r.seg = len(r.lp.segs) // done: nothing at or past stopAt is read
				return false
			}
			b := len(r.buf) - len(r.data)
			r.cur = localBatch{h: h, path: r.lp.segs[r.seg].path, pos: r.pos + int64(b)}
			r.data = r.data[h.Size():]
			r.end = max(r.end, h.NextOffset())
			if h.NextOffset() <= r.from {
				continue
			}
			return true
		}
		if err := sc.Err(); err != nil {
			var be *batch.Error
			pos := r.pos + int64(len(r.buf)-len(r.data))
			if errors.As(err, &be) {
				pos += int64(be.Pos)
			}
			r.err = &CorruptError{Path: r.lp.segs[r.seg].path, Position: pos, Err: err}
			return false
		}
		if r.eof {
			// A partial batch at the end of a segment: a write in progress
			// (the daemon appends to the last segment) or a torn tail that
			// its recovery will cut. Either way it is not part of the log.
			if !r.nextSegment() {
				return false
			}
			continue
		}
		r.fill()
	}
	return false
}

// fill moves the unread bytes to the front of the buffer and reads more of
// the current segment, growing the buffer when one batch is larger than it.
func (r *batchReader) fill() {
	s := r.lp.segs[r.seg]
	consumed := len(r.buf) - len(r.data)
	r.pos += int64(consumed)
	need := r.chunk
	if len(r.data) >= batch.LogOverhead {
		// One batch larger than the chunk: grow to hold it, but never past
		// the file's end (a corrupt length must not allocate gigabytes).
		size := int64(binary.BigEndian.Uint32(r.data[8:])) + batch.LogOverhead
		need = int(max(int64(need), min(size, s.size-r.pos)))
	}
	if cap(r.buf) < need {
		nb := make([]byte, len(r.data), need)
		copy(nb, r.data)
		r.buf = nb
	} else {
		n := copy(r.buf[:cap(r.buf)], r.data)
		r.buf = r.buf[:n]
	}
	off := r.pos + int64(len(r.buf))
	want := min(int64(cap(r.buf)-len(r.buf)), s.size-off)
	if want <= 0 {
		r.eof = true
		r.data = r.buf
		return
	}
	n, err := s.f.ReadAt(r.buf[len(r.buf):len(r.buf)+int(want)], off)
	r.buf = r.buf[:len(r.buf)+n]
	r.data = r.buf
	if err != nil && !errors.Is(err, io.EOF) {
		r.err = fmt.Errorf("reading %s at %d: %w", s.path, off, err)
		return
	}
	if n < int(want) || off+int64(n) >= s.size {
		r.eof = true // a daemon may have cut the file since we stat'ed it
	}
}

// nextSegment moves to the next segment that can hold offsets >= from.
func (r *batchReader) nextSegment() bool {
	for {
		r.seg++
		if r.seg >= len(r.lp.segs) {
			return false
		}
		// Skip a segment when the next one starts at or below from: it
		// holds only offsets below from.
		if r.seg+1 < len(r.lp.segs) && r.lp.segs[r.seg+1].base <= r.from {
			continue
		}
		r.end = max(r.end, r.lp.segs[r.seg].base)
		r.pos, r.buf, r.data, r.eof = 0, r.buf[:0], nil, false
		r.fill()
		return r.err == nil
	}
}

// Batch is the current batch.
func (r *batchReader) Batch() localBatch { return r.cur }

// Err is what stopped the reader early.
func (r *batchReader) Err() error { return r.err }

// End is the local log end offset once Next has returned false without an
// error (the offset after the last whole batch, or the base offset of an
// empty last segment).
func (r *batchReader) End() int64 { return r.end }

// CorruptError is a stored batch that fails its checks (CRC, magic,
// length) in the middle of a segment.
type CorruptError struct {
	Path     string
	Position int64
	Err      error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("corrupt batch in %s at byte %d: %v", e.Path, e.Position, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// listLocal lists the partition directories under dataDir: names
// "<topic>-<partition>" that hold a .log segment, skipping lost+found and
// Kafka's renamed forms (-delete, -future, -stray), sorted.
func listLocal(dataDir string) ([]topicPartition, error) {
	ents, err := os.ReadDir(dataDir)
	if err != nil {
		return nil, fmt.Errorf("listing data dir %s: %w", dataDir, err)
	}
	var out []topicPartition
	for _, e := range ents {
		if !e.IsDir() || e.Name() == "lost+found" || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		tp, ok := parsePartitionDir(e.Name())
		if !ok {
			continue
		}
		if segs, _ := filepath.Glob(filepath.Join(dataDir, e.Name(), "*.log")); len(segs) == 0 {
			continue
		}
		out = append(out, tp)
	}
	sortTPs(out)
	return out, nil
}

// parsePartitionDir splits "<topic>-<partition>" at the last '-' (topic
// names may hold '-', partitions never do).
func parsePartitionDir(name string) (topicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return topicPartition{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != name[i+1:] {
		return topicPartition{}, false
	}
	return topicPartition{Topic: name[:i], Partition: int32(p)}, true
}
