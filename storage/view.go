package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/kfollower/kfollower/wire/batch"
)

// View is a read-only view of one partition directory, for a reader that
// must not write: the audit tools, beside a running `kfollower run` or
// after it stopped. OpenReadOnly never recovers, never writes and takes no
// lock; what Open would repair it leaves on disk and reads the way Open
// would see it:
//
//   - the segments are opened together and each is read no further than
//     its size at open, so a batch appended later is not seen and a
//     segment deleted later (retention, truncation) stays readable as it
//     was;
//   - the log end is the end of the last whole batch of the last segment
//     at open (a batch being written, or a torn tail, is left out, as
//     Open's recovery would cut it), unless a valid batch follows the bad
//     bytes: then they are corruption, and reading reaches them as a
//     *CorruptionError;
//   - the epoch cache is the one Open builds (loadEpochs): the checkpoint
//     plus newer epochs of the last segment's batches, or all batches'
//     epochs when the checkpoint is damaged, cut to the log start and end.
//
// An interrupted truncation (its intent file) is not finished: the view
// shows the files as they are, and a truncation while the view is open can
// make it read the log as it was before, or part of it. Open a new view to
// see the new state.
//
// A View is safe for concurrent use; each Batches iterator belongs to one
// goroutine. Close releases the files; nothing may use the view after it.
type View struct {
	ident
	dir string
	// segs are the .log files, opened for reading only; each one's ix.size
	// is how far it is read, and after indexOnce ix.offsets is its .index
	// when that was sane. Only Read looks a position up, so the iterator's
	// users (the audit tools) never read the index files.
	segs      []*segment
	indexOnce sync.Once
	logStart  int64
	end       int64
	durable   int64
	epochs    Epochs
	topicID   TopicID
	// txns are each segment's .txnindex entries (the last segment's
	// rebuilt from its batches); open and recent as Log's, at end.
	txns   [][]abortedTxn
	open   txnState
	recent []completedTxn
}

var _ Reader = (*View)(nil)

// OpenReadOnly opens a View of topic-partition under dataDir. An error
// wraps os.ErrNotExist when the partition directory does not exist.
func OpenReadOnly(dataDir, topic string, partition int32) (*View, error) {
	if err := checkName(topic, partition); err != nil {
		return nil, fmt.Errorf("opening a view: %w", err)
	}
	v := &View{ident: ident{topic, partition}, dir: PartitionDir(dataDir, topic, partition)}
	// The writer may delete a segment between the listing and its open
	// (retention, truncation): list again.
	var err error
	for range 5 {
		if err = v.openSegments(); err == nil || !errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	if err == nil {
		err = v.load()
	}
	if err != nil {
		v.Close()
		return nil, err
	}
	return v, nil
}

func (v *View) openSegments() error {
	v.Close()
	ents, err := os.ReadDir(v.dir)
	if err != nil {
		return fmt.Errorf("opening %s: %w", v.dir, err)
	}
	var bases []int64
	for _, e := range ents {
		if b, ok := parseSegmentName(e.Name()); ok {
			bases = append(bases, b)
		}
	}
	slices.Sort(bases)
	for _, b := range bases {
		s := &segment{fsys: osFS{}, dir: v.dir, base: b, ix: newIndexer(b, 0), next: b, firstTs: -1, lastEpoch: -1, epochFloor: -1}
		if s.log, err = s.fsys.OpenFile(s.path(logSuffix), os.O_RDONLY, 0); err != nil {
			return fmt.Errorf("opening segment %s: %w", s.path(logSuffix), err)
		}
		v.segs = append(v.segs, s)
		if s.ix.size, err = s.fileSize(); err != nil {
			return err
		}
	}
	return nil
}

// load reads the small files and finds the end, the durable end and the
// epochs. Unreadable partition.metadata, log start and recovery point
// files are ignored, as Open ignores the last two (it refuses a bad
// partition.metadata; a reader can do without the topic id).
func (v *View) load() error {
	if data, err := os.ReadFile(filepath.Join(v.dir, PartitionMetadataFile)); err == nil {
		if id, err := ParsePartitionMetadata(data); err == nil {
			v.topicID = id
		}
	}
	logStart := int64(-1)
	if data, err := os.ReadFile(filepath.Join(v.dir, LogStartFile)); err == nil {
		if n, err := ParseLogStart(data); err == nil {
			logStart = n
		}
	}
	// A recovery point is only trusted when no truncation is in flight,
	// as recover does: a truncation may have rewritten the bytes before it.
	var rp *recoveryPoint
	if _, err := os.Stat(filepath.Join(v.dir, intentName)); errors.Is(err, os.ErrNotExist) {
		if data, err := os.ReadFile(filepath.Join(v.dir, recoveryPointName)); err == nil {
			if p, err := parseRecoveryPoint(data); err == nil {
				rp = &p
			}
		}
	}
	var tail []batch.Header
	if len(v.segs) == 0 {
		v.logStart = max(logStart, 0)
		v.end, v.durable = v.logStart, v.logStart
	} else {
		// Only the last segment can be written to; the earlier ones end
		// at or below its base.
		last := v.segs[len(v.segs)-1]
		torn := tornFrom(rp, last.base, last.ix.size)
		if rp != nil && rp.base != last.base {
			rp = nil // for a segment since rolled
		}
		var err error
		if tail, rp, err = findEnd(last, rp, torn); err != nil {
			return err
		}
		v.end = last.next
		// As recover: the log start is at least the first segment's base
		// and at most the log end.
		v.logStart = min(max(logStart, v.segs[0].base), v.end)
		v.durable = last.base
		if rp != nil {
			v.durable = max(v.durable, rp.next)
		}
		v.durable = min(v.durable, v.end)
	}
	epochs, _, _, err := loadEpochs(osFS{}, v.dir, v.ident, v.segs, tail, v.logStart, v.end)
	if err != nil {
		return err
	}
	v.epochs = epochs
	return v.loadTxns()
}

// loadTxns reads the transaction indexes as Open would leave them: a
// sealed segment's file when it passes its checks (else rebuilt in
// memory), the last segment's from its batches up to the view's end. A
// bad batch there ends the walk: Read reports it.
func (v *View) loadTxns() error {
	v.open = txnState{}
	if len(v.segs) == 0 {
		return nil
	}
	v.txns = make([][]abortedTxn, len(v.segs))
	for i := range len(v.segs) - 1 {
		es, _, err := loadSealedTxns(osFS{}, v.ident, v.dir, v.segs, i, false)
		var ce *CorruptionError
		if err != nil && !errors.As(err, &ce) {
			return err
		}
		v.txns[i] = es
	}
	last := len(v.segs) - 1
	st, err := txnStateAt(osFS{}, v.ident, v.dir, v.segs, last)
	var ce *CorruptionError
	if err != nil && !errors.As(err, &ce) {
		return err
	}
	open, es, done, _ := scanTxns(v.ident, v.segs[last], v.segs[last].size(), st)
	v.txns[last], v.open = es, open
	for _, c := range done {
		if c.last >= v.durable {
			v.recent = append(v.recent, c)
		}
	}
	return nil
}

// findEnd walks the batch headers of s, the last segment, from its
// recovery point rp when there is one (the bytes before it were fsynced
// and their epochs checkpointed), else from its start. It reads the
// headers alone (no CRC: reading checks those) and cuts how far s is read
// to the end of the last whole batch, unless a valid batch follows the
// bytes that stopped the walk before torn (validBatchFollows and tornFrom,
// as recoverActive decides): those are corruption and stay in reach. It
// returns the first batch of each epoch it walked, the tail loadEpochs
// takes, and rp, or nil when rp did not sit on a batch and so is not
// trusted.
func findEnd(s *segment, rp *recoveryPoint, torn int64) ([]batch.Header, *recoveryPoint, error) {
	if rp != nil && rp.pos > s.ix.size {
		rp = nil // past the file's end, as recover ignores it
	}
	start := int64(0)
	s.next = s.base
	if rp != nil {
		start, s.next = rp.pos, rp.next
	}
	var tail []batch.Header
	valid, err := walkHeaders(s.log, start, s.ix.size, func(h batch.Header, _ int64) error {
		if n := len(tail); n == 0 || tail[n-1].PartitionLeaderEpoch != h.PartitionLeaderEpoch {
			tail = append(tail, h)
		}
		s.next = h.NextOffset()
		return nil
	})
	var be *batch.Error
	if err != nil && !errors.As(err, &be) {
		return nil, nil, err
	}
	if err != nil && valid == start && start > 0 {
		return findEnd(s, nil, torn) // not a batch at the recovery point
	}
	if valid < s.ix.size && (err == nil || (torn >= 0 && valid >= torn) || !validBatchFollows(s, valid, s.ix.size)) {
		s.ix.size = valid
	}
	return tail, rp, nil
}

// walkHeaders reads the header of each batch of f from position from on,
// skipping the records, up to limit, calling fn for each batch that lies
// whole below limit, with its position. It returns the position after the
// last one, and the *batch.Error (at its file position) of a header that
// does not parse, or fn's error.
func walkHeaders(f file, from, limit int64, fn func(h batch.Header, pos int64) error) (int64, error) {
	var hdr [batch.HeaderSize]byte
	pos := from
	for pos+batch.HeaderSize <= limit {
		n, err := f.ReadAt(hdr[:], pos)
		if n < len(hdr) {
			if err != nil && !errors.Is(err, io.EOF) {
				return pos, fmt.Errorf("reading %s at %d: %w", f.Name(), pos, err)
			}
			return pos, nil // cut since the size was taken
		}
		h, err := batch.ParseHeader(hdr[:])
		if err != nil {
			return pos, shiftErr(err, pos)
		}
		if pos+int64(h.Size()) > limit {
			break
		}
		if err := fn(h, pos); err != nil {
			return pos, err
		}
		pos += int64(h.Size())
	}
	return pos, nil
}

// readViewIndex returns the entries of s's .index that point inside what
// the view reads, or nil when the file is missing or fails Kafka's sanity
// checks (then a Read walks the segment from its start). The writer may be
// appending to it: only whole entries count.
func readViewIndex(s *segment) []offsetEntry {
	b, err := os.ReadFile(s.path(indexSuffix))
	if err != nil {
		return nil
	}
	es, err := decodeOffsetIndex(b[:len(b)/offsetEntrySize*offsetEntrySize], 1<<31)
	if err != nil {
		return nil
	}
	n, _ := slices.BinarySearchFunc(es, s.ix.size, func(e offsetEntry, size int64) int {
		if int64(e.pos) < size {
			return -1
		}
		return 1
	})
	return es[:n]
}

// Dir is the partition directory.
func (v *View) Dir() string { return v.dir }

// TopicID is the id from partition.metadata; ok is false when there is
// none (or it is unreadable).
func (v *View) TopicID() (id TopicID, ok bool) { return v.topicID, v.topicID != TopicID{} }

// LogStartOffset is the first offset the log holds.
func (v *View) LogStartOffset() int64 { return v.logStart }

// LogEndOffset is the offset after the last whole batch at open.
func (v *View) LogEndOffset() int64 { return v.end }

// DurableEnd is the end the writer last recorded as fsynced; see
// Reader.DurableEnd.
func (v *View) DurableEnd() int64 { return v.durable }

// LatestEpoch is the newest leader epoch in the cache.
func (v *View) LatestEpoch() (epoch int32, ok bool) {
	e, ok := v.epochs.Latest()
	return e.Epoch, ok
}

// EndOffsetForEpoch is Kafka's LeaderEpochFileCache.endOffsetFor(epoch,
// LEO); see Epochs.EndOffsetFor.
func (v *View) EndOffsetForEpoch(epoch int32) (found int32, end int64) {
	return v.epochs.EndOffsetFor(epoch, v.end)
}

// Epochs is the leader-epoch cache.
func (v *View) Epochs() Epochs { return v.epochs }

// LastStableOffset is Reader.LastStableOffset at the view's DurableEnd.
func (v *View) LastStableOffset() int64 {
	return lastStable(v.open, v.recent, v.logStart, v.durable)
}

// AbortedTransactions is Reader.AbortedTransactions over the view.
func (v *View) AbortedTransactions(from, to int64) []AbortedTxn {
	return collectAborted(v.segs, func(i int) []abortedTxn { return v.txns[i] }, from, to)
}

// Read is Reader.Read over the view.
func (v *View) Read(offset int64, maxBytes int) ([]byte, error) {
	v.indexOnce.Do(func() {
		for _, s := range v.segs {
			s.ix.offsets = readViewIndex(s)
		}
	})
	return readSegments(v.ident, v.segs, v.logStart, v.end, offset, maxBytes)
}

// Close closes the segment files.
func (v *View) Close() error {
	var errs []error
	for _, s := range v.segs {
		errs = append(errs, s.close())
	}
	v.segs = nil
	return errors.Join(errs...)
}

// Batches iterates over the batches that hold offsets in [from, to) (to is
// capped at LogEndOffset), in offset order, checking each one's CRC: the
// first is the batch that holds from (or the first after it), and it ends
// before the first batch that starts at or after to. The segments are read
// in large sequential chunks, so a 1 GiB partition is a few hundred reads.
func (v *View) Batches(from, to int64) *Batches {
	return &Batches{v: v, from: from, to: min(to, v.end), seg: -1, chunk: 8 << 20}
}

// Batches is an iterator over a View's batches, used as
//
//	for it.Next() {
//		h := it.Header()
//		...
//	}
//	if err := it.Err(); err != nil { ... }
//
// Err is a *CorruptionError for a batch that fails its checks.
type Batches struct {
	v     *View
	from  int64
	to    int64
	seg   int   // index into v.segs
	pos   int64 // file position of buf[0]
	buf   []byte
	data  []byte // unread part of buf: whole batches and maybe a partial one
	eof   bool   // the current segment is read as far as the view reads it
	cut   bool   // ... and the file ended before that: cut since the view opened
	chunk int
	cur   batch.Header
	err   error
}

// Next advances to the next batch. It returns false at the end or on an
// error (Err).
func (it *Batches) Next() bool {
	for it.err == nil {
		if it.seg < 0 {
			if !it.nextSegment() {
				return false
			}
			continue
		}
		sc := batch.NewScanner(it.data)
		if sc.Next() {
			h := sc.Header()
			if h.BaseOffset >= it.to {
				it.seg = len(it.v.segs) // done: nothing at or after to is read
				return false
			}
			it.cur = h
			it.data = it.data[h.Size():]
			if h.NextOffset() <= it.from {
				continue
			}
			return true
		}
		pos := it.pos + int64(len(it.buf)-len(it.data))
		if err := sc.Err(); err != nil {
			var be *batch.Error
			if errors.As(err, &be) {
				err = shiftErr(err, pos+int64(be.Pos))
			}
			it.err = it.v.corruption(it.v.segs[it.seg], pos, -1, err)
			return false
		}
		if it.eof {
			if len(it.data) > 0 && !it.cut {
				// The view reads a segment to a batch boundary (findEnd),
				// so a partial batch there is in a sealed segment, which a
				// roll fsynced whole.
				s := it.v.segs[it.seg]
				it.err = it.v.corruption(s, pos, -1, fmt.Errorf("%d bytes of a partial batch at the end of the segment", s.size()-pos))
				return false
			}
			if !it.nextSegment() {
				return false
			}
			continue
		}
		it.fill()
	}
	return false
}

// fill moves the unread bytes to the front of the buffer and reads more of
// the current segment, growing the buffer when one batch is larger than it.
func (it *Batches) fill() {
	s := it.v.segs[it.seg]
	consumed := len(it.buf) - len(it.data)
	it.pos += int64(consumed)
	need := it.chunk
	if len(it.data) >= batch.LogOverhead {
		// One batch larger than the chunk: grow to hold it, but never past
		// the segment's end (a corrupt length must not allocate gigabytes).
		size := int64(binary.BigEndian.Uint32(it.data[8:])) + batch.LogOverhead
		need = int(max(int64(need), min(size, s.size()-it.pos)))
	}
	if cap(it.buf) < need {
		nb := make([]byte, len(it.data), need)
		copy(nb, it.data)
		it.buf = nb
	} else {
		n := copy(it.buf[:cap(it.buf)], it.data)
		it.buf = it.buf[:n]
	}
	off := it.pos + int64(len(it.buf))
	want := min(int64(cap(it.buf)-len(it.buf)), s.size()-off)
	if want <= 0 {
		it.eof = true
		it.data = it.buf
		return
	}
	n, err := s.log.ReadAt(it.buf[len(it.buf):len(it.buf)+int(want)], off)
	it.buf = it.buf[:len(it.buf)+n]
	it.data = it.buf
	if err != nil && !errors.Is(err, io.EOF) {
		it.err = fmt.Errorf("reading %s at %d: %w", s.path(logSuffix), off, err)
		return
	}
	if n < int(want) {
		it.eof, it.cut = true, true
	} else if off+int64(n) >= s.size() {
		it.eof = true
	}
}

// nextSegment moves to the next segment that can hold offsets >= from.
func (it *Batches) nextSegment() bool {
	for {
		it.seg++
		if it.seg >= len(it.v.segs) {
			return false
		}
		// Skip a segment when the next one starts at or below from: it
		// holds only offsets below from.
		if it.seg+1 < len(it.v.segs) && it.v.segs[it.seg+1].base <= it.from {
			continue
		}
		it.pos, it.buf, it.data, it.eof, it.cut = 0, it.buf[:0], nil, false, false
		it.fill()
		return it.err == nil
	}
}

// Header is the current batch's header.
func (it *Batches) Header() batch.Header { return it.cur }

// Err is what stopped the iterator early, nil at the end.
func (it *Batches) Err() error { return it.err }
