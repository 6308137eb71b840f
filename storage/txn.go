package storage

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/kfollower/kfollower/wire/batch"
)

// Transactions, as a Kafka broker keeps them for its own log
// (ProducerStateManager, LogSegment.updateTxnIndex, TransactionIndex):
//
//   - <base>.txnindex, one per segment: an entry for each transaction that
//     an ABORT marker in the segment ends (a COMMIT ends one without an
//     entry; a marker of a producer with no transaction open, an empty
//     transaction, makes none: ProducerAppendInfo.appendEndTxnMarker);
//   - the open transactions, the first offset of each producer's ongoing
//     one: in memory at the log end, and at every segment's base in
//     <base>.kfollower-txns (written before the segment is created), so a
//     truncation or Open rebuilds the active segment's state and index
//     from its own snapshot and its own batches alone.
//
// A sealed segment's .txnindex is fsynced when it is sealed and trusted
// on Open (TransactionIndex.sanityCheck, plus ordering); the active
// segment's is rebuilt from its batches on Open and after a truncation,
// so it is never ahead of or behind the log it indexes.
const (
	txnIndexSuffix = ".txnindex"
	txnStateSuffix = ".kfollower-txns"

	// abortedTxnSize is AbortedTxn.TOTAL_SIZE: int16 version, int64
	// producerId, firstOffset, lastOffset, lastStableOffset.
	abortedTxnSize = 34
)

// Control record types (ControlRecordType.java): the key of a control
// record is int16 version, int16 type.
const (
	controlAbort  = 0
	controlCommit = 1
)

// AbortedTxn is one aborted transaction as a FetchResponse lists it
// (FetchResponseData.AbortedTransaction): the producer and the first
// offset of its transaction. It is an alias of an unnamed struct type so
// that a package that may not import storage (wire/server) can declare
// the same type.
type AbortedTxn = struct {
	ProducerID  int64
	FirstOffset int64
}

// abortedTxn is one .txnindex entry (AbortedTxn.java, version 0).
type abortedTxn struct {
	pid, first, last, lso int64
}

func encodeTxnIndex(es []abortedTxn) []byte {
	b := make([]byte, 0, len(es)*abortedTxnSize)
	for _, e := range es {
		b = binary.BigEndian.AppendUint16(b, 0)
		b = binary.BigEndian.AppendUint64(b, uint64(e.pid))
		b = binary.BigEndian.AppendUint64(b, uint64(e.first))
		b = binary.BigEndian.AppendUint64(b, uint64(e.last))
		b = binary.BigEndian.AppendUint64(b, uint64(e.lso))
	}
	return b
}

// decodeTxnIndex parses a .txnindex of the segment [base, next) with the
// checks of TransactionIndex.sanityCheck (whole entries) and of its
// iterator (version 0), plus what TransactionIndex.append asserts (last
// offsets strictly increasing) and what any entry of the segment must
// hold: its marker inside the segment, its first offset at or before it,
// its last stable offset after the first.
func decodeTxnIndex(b []byte, base, next int64) ([]abortedTxn, error) {
	if len(b)%abortedTxnSize != 0 {
		return nil, fmt.Errorf("transaction index size %d is not a multiple of %d", len(b), abortedTxnSize)
	}
	es := make([]abortedTxn, 0, len(b)/abortedTxnSize)
	for i := 0; i < len(b); i += abortedTxnSize {
		if v := int16(binary.BigEndian.Uint16(b[i:])); v != 0 {
			return nil, fmt.Errorf("transaction index entry %d: version %d", len(es), v)
		}
		e := abortedTxn{
			pid:   int64(binary.BigEndian.Uint64(b[i+2:])),
			first: int64(binary.BigEndian.Uint64(b[i+10:])),
			last:  int64(binary.BigEndian.Uint64(b[i+18:])),
			lso:   int64(binary.BigEndian.Uint64(b[i+26:])),
		}
		switch {
		case e.pid < 0 || e.first < 0 || e.first > e.last || e.last < base || e.last >= next || e.lso < 0 || e.lso > e.last+1:
			return nil, fmt.Errorf("transaction index entry %d %+v does not fit the segment [%d, %d)", len(es), e, base, next)
		case len(es) > 0 && e.last <= es[len(es)-1].last:
			return nil, fmt.Errorf("transaction index entry %d %+v not after the previous one", len(es), e)
		}
		es = append(es, e)
	}
	return es, nil
}

// txnState is the first offset of each producer's ongoing transaction at
// one point of the log: ProducerStateManager's ongoingTxns, the one part
// of a producer's state a follower's LSO and .txnindex depend on.
type txnState map[int64]int64

// completedTxn is a transaction a marker ended (CompletedTxn.java).
type completedTxn struct {
	pid, first, last int64
	aborted          bool
}

// apply moves st past one batch, as ProducerAppendInfo.append does for a
// batch with a producer id: a transactional data batch opens its
// producer's transaction if none is open; a COMMIT or ABORT marker (the
// first record of a control batch) ends it. It returns the transaction
// ended, if any, and the index entry's last stable offset
// (ProducerStateManager.lastStableOffset: the first offset of the earliest
// transaction still open, all of other producers now, else the offset
// after the marker). ctrl is the marker's control type, -1 when h is not
// a marker or has no record left (compaction removed it: nothing ends).
func (st txnState) apply(h batch.Header, ctrl int16) (c completedTxn, lso int64, ok bool) {
	if h.ProducerID < 0 {
		return completedTxn{}, 0, false
	}
	if !h.Attributes.Control() {
		if _, open := st[h.ProducerID]; !open && h.Attributes.Transactional() {
			st[h.ProducerID] = h.BaseOffset
		}
		// A plain batch while a transaction is open is refused by a
		// leader (InvalidTxnStateException); it never reaches a log.
		return completedTxn{}, 0, false
	}
	first, open := st[h.ProducerID]
	if !open || (ctrl != controlAbort && ctrl != controlCommit) {
		return completedTxn{}, 0, false
	}
	delete(st, h.ProducerID)
	lso = h.BaseOffset + 1
	for _, f := range st {
		lso = min(lso, f)
	}
	return completedTxn{h.ProducerID, first, h.BaseOffset, ctrl == controlAbort}, lso, true
}

// firstOpen is the first offset of the earliest open transaction, or end.
func (st txnState) firstOpen(end int64) int64 {
	for _, f := range st {
		end = min(end, f)
	}
	return end
}

// markerType is the control type of the first record of the whole
// control batch b, or -1 when it has none or it cannot be read (Kafka
// writes markers uncompressed: MemoryRecords.withEndTransactionMarker).
func markerType(h batch.Header, b []byte) int16 {
	if !h.Attributes.Control() || h.RecordCount == 0 || h.Attributes.Compression() != batch.CompressionNone || len(b) <= batch.HeaderSize {
		return -1
	}
	rec := b[batch.HeaderSize:]
	_, n := binary.Varint(rec) // record length
	if n <= 0 || n >= len(rec) {
		return -1
	}
	rec = rec[n+1:] // and the attributes byte
	for range 2 {   // timestamp delta, offset delta
		if _, n = binary.Varint(rec); n <= 0 {
			return -1
		}
		rec = rec[n:]
	}
	klen, n := binary.Varint(rec)
	if n <= 0 || klen < 4 || int64(len(rec)-n) < klen {
		return -1
	}
	key := rec[n:]
	if int16(binary.BigEndian.Uint16(key)) < 0 { // ControlRecordType.parse: a negative version is invalid
		return -1
	}
	return int16(binary.BigEndian.Uint16(key[2:]))
}

// formatTxnState is <base>.kfollower-txns: "0\n<n>\n<producerId>
// <firstOffset>\n" × n, by first offset (Kafka's checkpoint framing).
func formatTxnState(st txnState) []byte {
	pids := slices.SortedFunc(maps.Keys(st), func(a, b int64) int { return cmp.Or(cmp.Compare(st[a], st[b]), cmp.Compare(a, b)) })
	out := fmt.Appendf(nil, "0\n%d\n", len(pids))
	for _, p := range pids {
		out = fmt.Appendf(out, "%d %d\n", p, st[p])
	}
	return out
}

// parseTxnState reads <base>.kfollower-txns; every first offset must lie
// below the segment's base.
func parseTxnState(data []byte, base int64) (txnState, error) {
	lines := splitLines(string(data))
	if len(lines) < 2 || lines[0] != "0" {
		return nil, fmt.Errorf("transaction state %q: bad framing", data)
	}
	n, err := parseJavaInt(lines[1], 32)
	if err != nil || n < 0 || int64(len(lines)) != 2+n {
		return nil, fmt.Errorf("transaction state %q: bad count", data)
	}
	st := txnState{}
	for _, l := range lines[2:] {
		f := splitJavaWhitespace(l)
		if len(f) != 2 {
			return nil, fmt.Errorf("transaction state line %q: want 2 fields", l)
		}
		pid, err1 := parseJavaInt(f[0], 64)
		first, err2 := parseJavaInt(f[1], 64)
		if err1 != nil || err2 != nil || pid < 0 || first < 0 || first >= base {
			return nil, fmt.Errorf("transaction state line %q: bad entry for a segment based at %d", l, base)
		}
		if _, dup := st[pid]; dup {
			return nil, fmt.Errorf("transaction state: producer %d twice", pid)
		}
		st[pid] = first
	}
	return st, nil
}

// readTxnState reads the snapshot of the segment based at base; ok is
// false when it is missing or unreadable (the caller derives it).
func readTxnState(fsys fileSystem, dir string, base int64) (st txnState, ok bool, err error) {
	path := segmentPath(dir, base, txnStateSuffix)
	data, err := fsys.ReadFile(path)
	if isNotExist(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading %s: %w", path, err)
	}
	if st, err = parseTxnState(data, base); err != nil {
		return nil, false, nil
	}
	return st, true, nil
}

// scanTxns walks the batches of s below limit from st, the state at s's
// base, and returns the state at limit, the segment's .txnindex entries
// and every transaction ended in it. On a batch whose header does not
// parse it returns what it found before it, with a *CorruptionError.
func scanTxns(id ident, s *segment, limit int64, st txnState) (txnState, []abortedTxn, []completedTxn, error) {
	st = maps.Clone(st)
	if st == nil {
		st = txnState{}
	}
	var es []abortedTxn
	var done []completedTxn
	// Headers alone, and the few markers whole: Open walks the whole
	// active segment this way.
	_, err := walkHeaders(s.log, 0, limit, func(h batch.Header, pos int64) error {
		ctrl := int16(-1)
		if h.Attributes.Control() && h.ProducerID >= 0 && h.Size() <= maxMarkerSize {
			b := make([]byte, h.Size())
			if _, err := s.log.ReadAt(b, pos); err != nil {
				return fmt.Errorf("reading %s at %d: %w", s.path(logSuffix), pos, err)
			}
			ctrl = markerType(h, b)
		}
		c, lso, ok := st.apply(h, ctrl)
		if ok {
			done = append(done, c)
			if c.aborted {
				es = append(es, abortedTxn{c.pid, c.first, c.last, lso})
			}
		}
		return nil
	})
	if err != nil {
		return st, es, done, id.corruption(s, 0, -1, err)
	}
	return st, es, done, nil
}

// maxMarkerSize bounds what is read of a control batch: a marker is one
// small record (EndTransactionMarker: a 4-byte key, a 6-byte value).
const maxMarkerSize = 64 << 10

// txnStateAt is the open transactions at the base of segs[i]: its
// snapshot, or the nearest earlier one carried forward through the
// segments between (none at all: no transaction open at the first
// segment's base, which is all a log without snapshots can tell).
func txnStateAt(fsys fileSystem, id ident, dir string, segs []*segment, i int) (txnState, error) {
	j := i
	var st txnState
	for ; j >= 0; j-- {
		s, ok, err := readTxnState(fsys, dir, segs[j].base)
		if err != nil {
			return nil, err
		}
		if ok {
			st = s
			break
		}
	}
	j = max(j, 0)
	for ; j < i; j++ {
		var err error
		if st, _, _, err = scanTxns(id, segs[j], segs[j].size(), st); err != nil {
			return nil, err
		}
	}
	if st == nil {
		st = txnState{}
	}
	return st, nil
}

// loadSealedTxns loads the .txnindex of a sealed segment, segs[i], or, if
// it fails its checks or the segment has no snapshot of its own (it was
// written before kfollower kept transactions), rebuilds it from the
// batches; write says whether a rebuilt one may be written back (Log, not
// View).
func loadSealedTxns(fsys fileSystem, id ident, dir string, segs []*segment, i int, write bool) (es []abortedTxn, rebuilt bool, err error) {
	s := segs[i]
	_, have, err := readTxnState(fsys, dir, s.base)
	if err != nil {
		return nil, false, err
	}
	if have {
		// Every segment is created with its .txnindex, so a missing one
		// was lost (s.txnLost: it was missing before Open created it).
		data, err := fsys.ReadFile(s.path(txnIndexSuffix))
		if err != nil && !isNotExist(err) {
			return nil, false, fmt.Errorf("reading %s: %w", s.path(txnIndexSuffix), err)
		}
		if err == nil && !s.txnLost {
			if es, err := decodeTxnIndex(data, s.base, segs[i+1].base); err == nil {
				return es, false, nil
			}
		}
	}
	st, err := txnStateAt(fsys, id, dir, segs, i)
	if err != nil {
		return nil, false, err
	}
	_, es, _, err = scanTxns(id, s, s.size(), st)
	if err != nil || !write {
		return es, true, err
	}
	// Replaced atomically: rewritten in place, a crash could leave it
	// empty, which reads as a valid index of no entries. The snapshot
	// goes after it, so until both are there the next Open rebuilds.
	s.txns = es
	if err := s.replaceTxnIndex(); err != nil {
		return nil, false, err
	}
	if !have {
		if err := writeFileAtomic(fsys, dir, segmentName(s.base, txnStateSuffix), formatTxnState(st)); err != nil {
			return nil, false, err
		}
	}
	return es, true, nil
}

// segmentPath is dir/<base><suffix>.
func segmentPath(dir string, base int64, suffix string) string {
	return dir + string(os.PathSeparator) + segmentName(base, suffix)
}

// collectAborted is UnifiedLog.collectAbortedTransactions over segments
// whose .txnindex entries txns gives: from the segment holding from on,
// every entry with a last offset >= from and a first offset < to, until
// an entry whose last stable offset reaches to (TransactionIndex
// .collectAbortedTxns: no later entry can start before to then).
func collectAborted(segs []*segment, txns func(i int) []abortedTxn, from, to int64) []AbortedTxn {
	i, _ := slices.BinarySearchFunc(segs, from, func(s *segment, off int64) int {
		if s.base <= off {
			return -1
		}
		return 1
	})
	out := []AbortedTxn{}
	for i = max(i-1, 0); i < len(segs); i++ {
		for _, e := range txns(i) {
			if e.last >= from && e.first < to {
				out = append(out, AbortedTxn{ProducerID: e.pid, FirstOffset: e.first})
			}
			if e.lso >= to {
				return out
			}
		}
	}
	return out
}

// lastStable is UnifiedLog.lastStableOffset over a log durable to durable:
// the first offset of the earliest transaction that is open, or whose
// marker is not durable yet (ProducerStateManager.firstUnstableOffset:
// ongoing and unreplicated transactions), capped by durable and never
// below the log start (UnifiedLog.maybeIncrementFirstUnstableOffset).
func lastStable(open txnState, recent []completedTxn, logStart, durable int64) int64 {
	lso := open.firstOpen(durable)
	for _, c := range recent {
		if c.last >= durable {
			lso = min(lso, c.first)
		}
	}
	return max(lso, min(logStart, durable))
}

// createSegment writes the snapshot of the open transactions at base,
// then creates the segment: a segment never exists without the state at
// its base (a crash in between leaves a snapshot without a .log, which
// Open deletes).
func (l *Log) createSegment(base int64) (*segment, error) {
	if err := writeFileAtomic(l.fsys, l.dir, segmentName(base, txnStateSuffix), formatTxnState(l.txns)); err != nil {
		return nil, err
	}
	return createSegment(l.fsys, l.dir, base, l.opts.IndexIntervalBytes, l.opts.Now(), true)
}

// reloadActiveTxns rebuilds the active segment's .txnindex and the open
// transactions from its snapshot and its batches: after a truncation cut
// it (TransactionIndex.truncateTo and
// ProducerStateManager.truncateAndReload in one), and on Open.
func (l *Log) reloadActiveTxns() error {
	i := len(l.segs) - 1
	s := l.segs[i]
	st, have, err := readTxnState(l.fsys, l.dir, s.base)
	if err != nil {
		return err
	}
	if !have {
		if st, err = txnStateAt(l.fsys, l.ident, l.dir, l.segs, i); err != nil {
			return err
		}
		if !l.unsettled { // else settle writes it
			if err := writeFileAtomic(l.fsys, l.dir, segmentName(s.base, txnStateSuffix), formatTxnState(st)); err != nil {
				return err
			}
		}
	}
	open, es, _, err := scanTxns(l.ident, s, s.size(), st)
	if err != nil {
		return err
	}
	l.txns, l.recent = open, nil
	data, err := l.fsys.ReadFile(s.path(txnIndexSuffix))
	s.txns = es
	// A missing file is the empty index: created on demand (segment).
	if (err == nil && bytes.Equal(data, encodeTxnIndex(es))) || (isNotExist(err) && len(es) == 0) {
		s.txnf = indexFile{written: len(es)}
		return nil
	}
	return s.rewriteTxnIndex()
}

// recoverTxns is recover's step for transactions: each sealed segment's
// .txnindex loaded (rebuilt if it fails its checks), the active one's
// rebuilt.
func (l *Log) recoverTxns() error {
	for i := range len(l.segs) - 1 {
		es, rebuilt, err := loadSealedTxns(l.fsys, l.ident, l.dir, l.segs, i, true)
		if err != nil {
			return err
		}
		if rebuilt {
			l.lg.Warn("rebuilding the transaction index of a sealed segment", "segment", l.segs[i].path(txnIndexSuffix))
		}
		l.segs[i].txns = es
	}
	return l.reloadActiveTxns()
}
