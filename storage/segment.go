package storage

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kfollower/kfollower/wire/batch"
)

// Segment file suffixes (LogFileUtils.java).
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
)

// segmentName is the 20-digit zero-padded base offset plus suffix
// (LogFileUtils.filenamePrefixFromOffset).
func segmentName(base int64, suffix string) string {
	return fmt.Sprintf("%020d%s", base, suffix)
}

// parseSegmentName returns the base offset of a "<20 digits>.log" name.
func parseSegmentName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, logSuffix)
	if !ok || len(digits) != 20 || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil
}

// segment is one <base>.log with its .index, .timeindex and .txnindex.
// The .log holds fetched batches byte for byte, and is the one file kept
// open (as Kafka keeps each segment's FileRecords channel open): the
// indexes are kept in memory (indexer) and written to their files through
// a descriptor opened for the write and closed after it, at the log's
// syncs (Flush, seal, Close, truncation, recovery), never per append, so a
// log holds one descriptor per segment however many partitions there are
// (issue 14: 10,000 partitions under a 20,000-descriptor limit). Index
// files are never preallocated, so a sealed segment's are exactly what
// Kafka leaves after trimToValidSize.
type segment struct {
	fsys    fileSystem
	dir     string
	base    int64
	log     file
	ix      indexer
	next    int64 // offset after the last batch, base when empty
	sealed  bool
	created time.Time
	// firstTs is the max timestamp of the first batch, the time a segment's
	// age is measured from (LogSegment.rollingBasedTimestamp); -1 if none.
	firstTs int64
	// lastEpoch is the leader epoch of the last batch (epochFloor when
	// empty); epochFloor is the previous segment's last epoch. Append only
	// ever stores non-decreasing epochs, so a batch below lastEpoch read
	// back from disk is not ours: recovery treats it as invalid.
	lastEpoch, epochFloor int32
	// idx and tidx say how much of the in-memory indexes the .index and
	// .timeindex files hold.
	idx, tidx indexFile
	// txns are the .txnindex entries (txn.go); txnf says how many of them
	// the file holds. The file is created on demand, as Kafka's
	// TransactionIndex opens its channel lazily: when an ABORT marker is
	// appended, and at seal (a sealed segment always has one, which Open
	// trusts).
	txns []abortedTxn
	txnf indexFile
	// txnLost is set by Open for a segment whose .txnindex was missing.
	txnLost bool
	// removed is set by remove: a Flush fsyncing the segment's files
	// meanwhile may fail on them, and that concerns no byte of the log.
	removed bool
}

// indexFile is what a segment knows of one of its index files, which it
// does not hold open: the file holds the first written entries of the
// in-memory index, synced of them known durable; trunc says the file may
// hold bytes past them (a rebuilt index, a recovery point's count behind
// the file), cut at the next write.
type indexFile struct {
	written, synced int
	trunc           bool
}

// unknownIndex is an index file of a segment Open found: its content is
// not known until it is loaded or rebuilt.
var unknownIndex = indexFile{trunc: true}

func (s *segment) path(suffix string) string {
	return filepath.Join(s.dir, segmentName(s.base, suffix))
}
func (s *segment) size() int64 { return s.ix.size }
func (s *segment) empty() bool { return s.ix.size == 0 }

// openSegmentFiles opens (creating if needed) a segment's .log, the one
// file it holds open.
func openSegmentFiles(fsys fileSystem, dir string, base int64, interval int, now time.Time) (*segment, error) {
	s := &segment{fsys: fsys, dir: dir, base: base, ix: newIndexer(base, interval), next: base, created: now, firstTs: -1, lastEpoch: -1, epochFloor: -1,
		idx: unknownIndex, tidx: unknownIndex, txnf: unknownIndex}
	var err error
	if s.log, err = fsys.OpenFile(s.path(logSuffix), os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return nil, fmt.Errorf("opening segment %s: %w", s.path(logSuffix), err)
	}
	return s, nil
}

// createSegment makes a new, empty segment: its .log (held open) and its
// empty .index and .timeindex files (closed again), which Kafka's tools
// expect beside every .log; the .txnindex comes on demand (segment). It is
// durable when dir is fsynced next: durable says whether createSegment
// does it now or the caller does it later (a new log's first segment,
// Log.settle). A segment made durable later gets its index files then
// too (makeIndexes), as Kafka creates an index file on first use
// (LazyIndex): where file creation is slow (an ext4 without a journal
// skips every inode deleted in the last minute, fs/ext4/ialloc.c
// recently_deleted), the two were a third of the cost of opening a new
// log, paid by each of thousands at a first start-up.
func createSegment(fsys fileSystem, dir string, base int64, interval int, now time.Time, durable bool) (*segment, error) {
	s, err := openSegmentFiles(fsys, dir, base, interval, now)
	if err != nil {
		return nil, err
	}
	if err := s.log.Truncate(0); err != nil {
		s.close()
		return nil, fmt.Errorf("creating segment %s: %w", s.path(logSuffix), err)
	}
	s.idx, s.tidx, s.txnf = indexFile{}, indexFile{}, indexFile{}
	if durable {
		if err := s.makeIndexes(os.O_TRUNC); err != nil {
			s.close()
			return nil, err
		}
	}
	// A stale .txnindex of a segment once at this base (a full truncation
	// restarting where a segment began) would be read as this one's.
	if err := fsys.Remove(s.path(txnIndexSuffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.close()
		return nil, fmt.Errorf("creating segment %s: %w", s.path(txnIndexSuffix), err)
	}
	if durable {
		if err := fsys.SyncDir(dir); err != nil {
			s.close()
			return nil, fmt.Errorf("syncing directory %s: %w", dir, err)
		}
	}
	return s, nil
}

// makeIndexes creates the .index and .timeindex files if they are not
// there (flag os.O_TRUNC: empties them if they are), closed again.
func (s *segment) makeIndexes(flag int) error {
	for _, suf := range []string{indexSuffix, timeIndexSuffix} {
		f, err := s.fsys.OpenFile(s.path(suf), os.O_WRONLY|os.O_CREATE|flag, 0o644)
		if err == nil {
			err = f.Close()
		}
		if err != nil {
			return fmt.Errorf("creating %s: %w", s.path(suf), err)
		}
	}
	return nil
}

func (s *segment) close() error {
	if s.log == nil {
		return nil
	}
	return s.log.Close()
}

// remove closes and deletes the segment's files, indexes and transaction
// snapshot first, so that a crash leaves at worst a .log without them,
// which Open rebuilds. The caller fsyncs the directory.
func (s *segment) remove() error {
	s.removed = true
	s.close()
	for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, txnStateSuffix, logSuffix} {
		if err := s.fsys.Remove(s.path(suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing %s: %w", s.path(suf), err)
		}
	}
	return nil
}

// canHold reports whether a batch ending at lastOffset can go into this
// segment: index entries hold offsets relative to the base as int32
// (LogSegment.canConvertToRelativeOffset).
func (s *segment) canHold(lastOffset int64) bool {
	return lastOffset >= s.base && lastOffset-s.base <= math.MaxInt32
}

// append writes whole, validated batches at the end of the .log and adds
// the index entries they produce in memory; the index files get them at
// the next sync. Nothing is synced here.
func (s *segment) append(raw []byte, hs []batch.Header) error {
	if _, err := s.log.WriteAt(raw, s.ix.size); err != nil {
		return fmt.Errorf("writing %s at %d: %w", s.path(logSuffix), s.ix.size, err)
	}
	s.index(hs)
	return nil
}

// index takes the batches hs, just written at the segment's end, into
// its indexes and its end.
func (s *segment) index(hs []batch.Header) {
	for _, h := range hs {
		if s.ix.size == 0 {
			s.firstTs = h.MaxTimestamp
		}
		s.ix.add(h)
		s.next = h.NextOffset()
		s.lastEpoch = h.PartitionLeaderEpoch
	}
}

// appendStaged is append for bytes Stage wrote past the end already,
// all but the first batch's first 12 bytes, which it writes now: from
// here a crash keeps the batches (stage.go).
func (s *segment) appendStaged(raw []byte, hs []batch.Header) error {
	if _, err := s.log.WriteAt(raw[:batch.LogOverhead], s.ix.size); err != nil {
		return fmt.Errorf("writing %s at %d: %w", s.path(logSuffix), s.ix.size, err)
	}
	s.index(hs)
	return nil
}

// putIndex brings the file suffix up to n entries of size bytes (enc
// encodes them from an index) through a descriptor opened for it, and
// returns that descriptor still open (nil when nothing was to be written
// and, with sync, nothing is unsynced): the caller fsyncs it if it must,
// and closes it.
func (s *segment) putIndex(f *indexFile, suffix string, n, size int, enc func(from int) []byte, sync bool) (file, error) {
	if n <= f.written && !f.trunc && (!sync || f.synced >= f.written) {
		return nil, nil
	}
	path := s.path(suffix)
	fh, err := s.fsys.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if f.trunc {
		if err := fh.Truncate(int64(f.written * size)); err != nil {
			fh.Close()
			return nil, fmt.Errorf("truncating %s: %w", path, err)
		}
		f.trunc = false
	}
	if n > f.written {
		if _, err := fh.WriteAt(enc(f.written), int64(f.written*size)); err != nil {
			fh.Close()
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
		f.written = n
	}
	return fh, nil
}

// putIndexes writes the index entries not yet in the .index and
// .timeindex files and returns the descriptors written through (sync: and
// those of files with unsynced entries), open, for the caller to fsync and
// close.
func (s *segment) putIndexes(sync bool) ([]file, error) {
	var out []file
	f, err := s.putIndex(&s.idx, indexSuffix, len(s.ix.offsets), offsetEntrySize,
		func(from int) []byte { return encodeOffsetIndex(s.ix.offsets[from:]) }, sync)
	if f != nil {
		out = append(out, f)
	}
	if err != nil {
		return out, err
	}
	f, err = s.putIndex(&s.tidx, timeIndexSuffix, len(s.ix.times), timeEntrySize,
		func(from int) []byte { return encodeTimeIndex(s.ix.times[from:]) }, sync)
	if f != nil {
		out = append(out, f)
	}
	return out, err
}

// closeAll closes fs, returning the first error.
func closeAll(fs []file) error {
	var errs []error
	for _, f := range fs {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// addTxn records an aborted transaction whose marker is the segment's
// latest batch; writeTxnIndex puts it in the file.
func (s *segment) addTxn(e abortedTxn) { s.txns = append(s.txns, e) }

// writeTxnIndex writes the entries not yet in the .txnindex (creating
// it), unsynced: the active segment's is rebuilt by Open, never trusted.
func (s *segment) writeTxnIndex() error {
	f, err := s.putTxnIndex(false)
	if f != nil {
		err = errors.Join(err, f.Close())
	}
	return err
}

func (s *segment) putTxnIndex(sync bool) (file, error) {
	return s.putIndex(&s.txnf, txnIndexSuffix, len(s.txns), abortedTxnSize,
		func(from int) []byte { return encodeTxnIndex(s.txns[from:]) }, sync)
}

// replaceTxnIndex replaces the .txnindex with the in-memory entries
// atomically (writeFileAtomic): for a sealed segment, whose file Open
// trusts.
func (s *segment) replaceTxnIndex() error {
	name := segmentName(s.base, txnIndexSuffix)
	if err := writeFileAtomic(s.fsys, s.dir, name, encodeTxnIndex(s.txns)); err != nil {
		return err
	}
	s.txnf = indexFile{written: len(s.txns), synced: len(s.txns)}
	return nil
}

// rewriteTxnIndex replaces the .txnindex with the in-memory entries in
// place: for the active segment, whose file Open rebuilds anyway.
func (s *segment) rewriteTxnIndex() error {
	s.txnf = indexFile{trunc: true}
	return s.writeTxnIndex()
}

// rewriteIndexes makes the next sync replace both index files with the
// in-memory entries (after a rebuild).
func (s *segment) rewriteIndexes() {
	s.idx, s.tidx = indexFile{trunc: true}, indexFile{trunc: true}
}

// sync makes the segment durable: the index entries not yet in their
// files written, then the .log and every index file with unsynced entries
// fsynced.
func (s *segment) sync() error {
	fs, err := s.putIndexes(true)
	if err == nil {
		err = syncFiles(append([]file{s.log}, fs...))
	}
	if cerr := closeAll(fs); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	s.idx.synced, s.tidx.synced = s.idx.written, s.tidx.written
	return nil
}

// seal makes the segment inactive: the final time-index entry, then
// everything fsynced, the .txnindex too, created if the segment had no
// aborted transaction (LogSegment.onBecomeInactiveSegment + flush on
// roll). Only here is the .txnindex fsynced: Open rebuilds the active
// segment's from its batches, and trusts a sealed one's. The caller
// fsyncs the directory (the .txnindex may be new).
func (s *segment) seal() error {
	if !s.sealed {
		s.ix.seal()
		s.sealed = true
	}
	if err := s.sync(); err != nil {
		return err
	}
	if s.txnf.written == 0 && !s.txnf.trunc {
		s.txnf.trunc = true // create it, empty
	}
	f, err := s.putTxnIndex(true)
	if f == nil || err != nil {
		if f != nil {
			f.Close()
		}
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing %s: %w", f.Name(), err)
	}
	s.txnf.synced = s.txnf.written
	return f.Close()
}

// unseal makes a sealed segment active again after a truncation cut into
// it: its indexes are rebuilt from the remaining batches, so the final
// time entry of the seal is dropped (Kafka's truncateTo re-opens the
// segment's indexes the same way).
func (s *segment) unseal() { s.sealed = false }

// scanFile reads batches of f from position from up to limit, in chunks,
// calling fn for each whole batch. verify selects a full check (CRC) or a
// header-only walk. It returns the position after the last good batch and
// the *batch.Error that stopped it, or nil at limit or at a partial tail.
func scanFile(f file, from, limit int64, verify bool, fn func(h batch.Header, pos int64, b []byte) error) (int64, error) {
	// Start small (a Read's lookup walks a few KiB from an index entry)
	// and grow the chunk for long scans such as recovery.
	const maxChunk = 1 << 20
	chunk := 16 << 10
	pos := from
	var buf []byte
	for pos < limit {
		want := min(limit-pos, int64(max(cap(buf), chunk)))
		chunk = min(2*chunk, maxChunk)
		if want > int64(cap(buf)) {
			buf = make([]byte, want)
		}
		buf = buf[:want]
		n, err := f.ReadAt(buf, pos)
		if err != nil && !errors.Is(err, io.EOF) {
			return pos, fmt.Errorf("reading %s at %d: %w", f.Name(), pos, err)
		}
		buf = buf[:n]
		consumed, need, serr := scanChunk(buf, pos, verify, fn)
		pos += int64(consumed)
		if serr != nil {
			return pos, serr
		}
		if consumed == 0 {
			// The next batch does not fit in buf: grow to hold it, unless
			// the file ends first (a partial tail).
			if need <= int64(len(buf)) || pos+need > limit || n < len(buf) {
				return pos, nil
			}
			buf = make([]byte, 0, need)
		}
	}
	return pos, nil
}

// scanChunk walks whole batches in buf (which starts at file position
// base). It returns the bytes consumed, and when it stops at an incomplete
// batch, that batch's full size if the header said it (else 0).
func scanChunk(buf []byte, base int64, verify bool, fn func(h batch.Header, pos int64, b []byte) error) (int, int64, error) {
	off := 0
	for {
		rest := buf[off:]
		if len(rest) < batch.HeaderSize {
			return off, batch.HeaderSize, nil
		}
		h, err := batch.ParseHeader(rest)
		if err != nil {
			return off, 0, shiftErr(err, base+int64(off))
		}
		if len(rest) < h.Size() {
			return off, int64(h.Size()), nil
		}
		b := rest[:h.Size()]
		if verify {
			if _, err := batch.Check(b); err != nil {
				return off, 0, shiftErr(err, base+int64(off))
			}
		}
		if err := fn(h, base+int64(off), b); err != nil {
			return off, 0, err
		}
		off += h.Size()
	}
}

// shiftErr makes a *batch.Error's position a file position.
func shiftErr(err error, pos int64) error {
	var be *batch.Error
	if errors.As(err, &be) {
		c := *be
		c.Pos = int(pos)
		return &c
	}
	return err
}

// rebuild re-reads the segment's .log from the start and rebuilds its
// in-memory index state. verify checks CRCs; the valid length and the
// error that stopped the walk are returned (the caller decides whether
// that is a torn tail or corruption).
func (s *segment) rebuild(verify bool, onBatch func(h batch.Header)) (valid int64, err error) {
	fi, err := s.log.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", s.path(logSuffix), err)
	}
	s.ix = newIndexer(s.base, int(s.ix.interval))
	s.next, s.firstTs, s.lastEpoch = s.base, -1, s.epochFloor
	return s.scanOn(fi.Size(), verify, onBatch)
}

// scanOn continues indexing from s.ix.size to limit.
func (s *segment) scanOn(limit int64, verify bool, onBatch func(h batch.Header)) (valid int64, err error) {
	return scanFile(s.log, s.ix.size, limit, verify, func(h batch.Header, pos int64, _ []byte) error {
		if !s.canHold(h.LastOffset()) || h.BaseOffset < s.next {
			return &batch.Error{Pos: int(pos), BaseOffset: h.BaseOffset,
				Reason: fmt.Sprintf("offsets %d..%d do not follow %d in segment with base %d", h.BaseOffset, h.LastOffset(), s.next, s.base)}
		}
		if h.PartitionLeaderEpoch < 0 || h.PartitionLeaderEpoch < s.lastEpoch {
			return &batch.Error{Pos: int(pos), BaseOffset: h.BaseOffset,
				Reason: fmt.Sprintf("leader epoch %d below the previous batch's %d", h.PartitionLeaderEpoch, s.lastEpoch)}
		}
		if pos == 0 {
			s.firstTs = h.MaxTimestamp
		}
		s.ix.add(h)
		s.next = h.NextOffset()
		s.lastEpoch = h.PartitionLeaderEpoch
		if onBatch != nil {
			onBatch(h)
		}
		return nil
	})
}

// resume restores the indexer state at a recovery point from the index
// files, so only the bytes after it need reading. ok is false when the
// point does not fit this segment's files; the caller then reads the
// whole segment.
func (s *segment) resume(rp recoveryPoint, fileSize int64) bool {
	if rp.base != s.base || rp.pos > fileSize {
		return false
	}
	ib, err1 := s.fsys.ReadFile(s.path(indexSuffix))
	tb, err2 := s.fsys.ReadFile(s.path(timeIndexSuffix))
	if err1 != nil || err2 != nil || int64(len(ib)) < rp.nOff*offsetEntrySize || int64(len(tb)) < rp.nTime*timeEntrySize {
		return false
	}
	offs, err1 := decodeOffsetIndex(ib[:rp.nOff*offsetEntrySize], max(rp.pos, 1))
	times, err2 := decodeTimeIndex(tb[:rp.nTime*timeEntrySize])
	if err1 != nil || err2 != nil {
		return false
	}
	s.ix = newIndexer(s.base, int(s.ix.interval))
	s.ix.offsets, s.ix.times, s.ix.size = offs, times, rp.pos
	if n := len(offs); n > 0 {
		s.ix.lastEntry = int64(offs[n-1].pos)
	}
	s.ix.maxTs, s.ix.maxTsOffset = rp.maxTs, rp.maxTsOffset
	s.next, s.firstTs, s.lastEpoch = rp.next, rp.firstTs, int32(rp.lastEpoch)
	// Durable up to the point (it promises that); the files may hold
	// more (Close's final time entry, a torn tail's): cut at the next
	// write.
	s.idx = indexFile{written: len(offs), synced: len(offs), trunc: int64(len(ib)) > rp.nOff*offsetEntrySize}
	s.tidx = indexFile{written: len(times), synced: len(times), trunc: int64(len(tb)) > rp.nTime*timeEntrySize}
	return true
}

// fileSize is the current length of the .log file.
func (s *segment) fileSize() (int64, error) {
	fi, err := s.log.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", s.path(logSuffix), err)
	}
	return fi.Size(), nil
}

// loadIndexes reads and sanity-checks the index files of a sealed segment
// and derives what the log needs without reading the .log: the next offset
// (from the last index entry, then a header walk of the rest) and the max
// timestamp (the time index's last entry, as Kafka's largestTimestamp).
// ok is false when the files are missing or fail the checks; the caller
// then rebuilds from the .log.
func (s *segment) loadIndexes(logSize int64) (ok bool, err error) {
	ib, err1 := s.fsys.ReadFile(s.path(indexSuffix))
	tb, err2 := s.fsys.ReadFile(s.path(timeIndexSuffix))
	if err1 != nil || err2 != nil {
		return false, nil
	}
	offs, err1 := decodeOffsetIndex(ib, logSize)
	times, err2 := decodeTimeIndex(tb)
	if err1 != nil || err2 != nil {
		return false, nil
	}
	// Walk headers from the last indexed batch to the end: this finds the
	// next offset and proves the index and the log agree there.
	start := int64(0)
	if n := len(offs); n > 0 {
		start = int64(offs[n-1].pos)
	}
	// The walk also proves the index complete: no batch after the last
	// entry may be one the indexer would have indexed, and the sealed time
	// index must end at or above every later batch's max timestamp.
	next := s.base
	lastTs := int64(batch.NoTimestamp)
	if n := len(times); n > 0 {
		lastTs = times[n-1].ts
	}
	complete := true
	size, err := scanFile(s.log, start, logSize, false, func(h batch.Header, pos int64, _ []byte) error {
		if pos-start > s.ix.interval || h.MaxTimestamp > lastTs {
			complete = false
		}
		next = h.NextOffset()
		s.lastEpoch = h.PartitionLeaderEpoch
		return nil
	})
	if err != nil || size != logSize || !complete {
		return false, nil
	}
	if n := len(offs); n > 0 && s.base+int64(offs[n-1].rel) >= next {
		return false, nil
	}
	s.ix.offsets, s.ix.times, s.ix.size = offs, times, logSize
	if n := len(offs); n > 0 {
		s.ix.lastEntry = int64(offs[n-1].pos)
	}
	if n := len(times); n > 0 {
		s.ix.maxTs, s.ix.maxTsOffset = times[n-1].ts, s.base+int64(times[n-1].rel)
	}
	s.idx = indexFile{written: len(offs), synced: len(offs)}
	s.tidx = indexFile{written: len(times), synced: len(times)}
	s.next, s.sealed = next, true
	return true, nil
}

// findPosition returns the position of the first batch whose last offset
// is >= offset, and that batch's header; found is false when every batch
// ends before offset (then pos is the segment size).
func (s *segment) findPosition(offset int64) (pos int64, h batch.Header, found bool, err error) {
	start := s.ix.lookup(offset)
	stop := errors.New("stop")
	end, err := scanFile(s.log, start, s.ix.size, false, func(bh batch.Header, p int64, _ []byte) error {
		if bh.LastOffset() >= offset {
			pos, h, found = p, bh, true
			return stop
		}
		return nil
	})
	if errors.Is(err, stop) {
		return pos, h, true, nil
	}
	if err != nil {
		return 0, h, false, err
	}
	return end, h, false, nil
}

// truncateAt cuts the .log at pos (a batch boundary) and rebuilds the
// in-memory index from the remaining headers; the caller's sync rewrites
// the index files. The segment becomes active again.
func (s *segment) truncateAt(pos int64) error {
	if err := s.log.Truncate(pos); err != nil {
		return fmt.Errorf("truncating %s to %d: %w", s.path(logSuffix), pos, err)
	}
	if _, err := s.rebuild(false, nil); err != nil {
		return fmt.Errorf("re-indexing %s: %w", s.path(logSuffix), err)
	}
	s.unseal()
	s.rewriteIndexes()
	return nil
}
