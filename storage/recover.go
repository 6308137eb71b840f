package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kfollower/kfollower/wire/batch"
)

// recover brings the partition directory to a consistent state and loads
// it. Steps, in order (each one's writes are durable before the next):
//
//  1. create the directory if needed; delete leftover *.tmp files and
//     index files (.txnindex and .kfollower-txns too) whose .log is gone;
//  2. read the intent; if it names a lost+found event, put the event in
//     place (rename its complete temporary directory); delete the
//     temporary event directories of saves that never reached an intent;
//     read the list of unreported losses;
//  3. open the segments, except those an intent deletes whole; sealed ones
//     (all but the last) are checked through their indexes only, rebuilt
//     from the .log if the indexes are missing or fail Kafka's sanity
//     checks, in which case a bad batch is a *CorruptionError (a sealed
//     segment was fsynced whole);
//  4. finish an interrupted truncation from its intent file, before
//     anything else can see the data it removes;
//  5. validate the active segment batch by batch (CRC included) and cut a
//     torn tail; a bad batch with a valid batch right after it is not a
//     torn write but corruption (*CorruptionError), unless it lies past
//     the recovery point, where a power loss may have torn and reordered
//     writes (tornFrom);
//  6. load leader-epoch-checkpoint; if it is missing or unreadable,
//     rebuild the cache from the batches' epochs with a warning; else add
//     the epochs of active-segment batches newer than its latest entry (an
//     append that crashed before its checkpoint write), as
//     LogSegment.recover does; then cut the cache to the LEO and from the
//     log start (LogLoader) and rewrite it if it changed;
//  7. apply the log start offset (deleting segments wholly below it);
//  8. transactions (txn.go): trust each sealed segment's .txnindex if it
//     was there and passes its checks and the segment has its snapshot,
//     else rebuild it from the batches; rebuild the active segment's and
//     the open transactions from its snapshot and batches;
//  9. list the intent's loss as unreported, then remove the intent file.
func (l *Log) recover() error {
	// The new directories' entries are fsynced now, or by settle when the
	// log is empty.
	parents, err := mkdirAll(l.fsys, l.dir)
	if err != nil {
		return fmt.Errorf("creating %s: %w", l.dir, err)
	}
	var ents []fs.DirEntry
	// A directory just created is empty (nothing but the Log writes in
	// it: the data directory is locked): not listed, one system call
	// less of the dozen a new log's Open makes.
	if len(parents) == 0 {
		if ents, err = l.fsys.ReadDir(l.dir); err != nil {
			return fmt.Errorf("listing %s: %w", l.dir, err)
		}
	}
	// From here recovery probes the directory through its listing
	// (listedFS): a file the listing lacks costs no system call.
	real := l.fsys
	lf := &listedFS{fileSystem: real, dir: l.dir, names: make(map[string]bool, len(ents))}
	for _, e := range ents {
		lf.names[e.Name()] = true
	}
	l.fsys = lf
	defer func() {
		l.fsys = real
		for _, s := range l.segs {
			s.fsys = real
		}
	}()
	var bases []int64
	logs := map[int64]bool{}
	txnIndexes := map[int64]bool{}
	var indexes []string
	empty := true // no .log holds a byte
	for _, e := range ents {
		name := e.Name()
		if digits, ok := strings.CutSuffix(name, txnIndexSuffix); ok {
			if b, ok := parseSegmentName(digits + logSuffix); ok {
				txnIndexes[b] = true
			}
		}
		switch {
		case strings.HasSuffix(name, tmpSuffix):
			if err := l.fsys.Remove(filepath.Join(l.dir, name)); err != nil {
				return fmt.Errorf("removing leftover %s: %w", name, err)
			}
		case strings.HasSuffix(name, indexSuffix) || strings.HasSuffix(name, timeIndexSuffix) ||
			strings.HasSuffix(name, txnIndexSuffix) || strings.HasSuffix(name, txnStateSuffix):
			indexes = append(indexes, name)
		default:
			if b, ok := parseSegmentName(name); ok {
				bases = append(bases, b)
				logs[b] = true
				if info, err := e.Info(); err != nil || info.Size() > 0 {
					empty = false
				}
			}
		}
	}
	for _, name := range indexes {
		if b, ok := parseSegmentName(name[:strings.IndexByte(name, '.')] + logSuffix); !ok || !logs[b] {
			if err := l.fsys.Remove(filepath.Join(l.dir, name)); err != nil {
				return fmt.Errorf("removing orphan index %s: %w", name, err)
			}
		}
	}
	slices.Sort(bases)

	in, haveIntent, err := l.readIntent()
	if err != nil {
		return err
	}
	// Never settled, so nothing of it was ever declared durable: Open
	// wrote its small files without an fsync, and a power loss may have
	// torn them.
	fresh := !haveIntent && neverSettled(bases, func(name string) bool { return lf.names[name] })
	// An empty log is opened without a directory fsync (settle makes it
	// durable before its first durable end): a crash can only take an
	// empty log, which the next Open creates again. The parents of the
	// directories created are fsynced by settle, and the data directory
	// always (an earlier Open of the empty log may have created the
	// partition directory and never settled).
	if empty && !haveIntent {
		l.unsettled, l.fresh = true, fresh
		l.unsyncedDirs = parents
		if dd := filepath.Dir(l.dir); !slices.Contains(parents, dd) {
			l.unsyncedDirs = append(l.unsyncedDirs, dd)
		}
	} else {
		// The data directory too, always: an earlier process may have
		// created this directory and appended to it, then died before
		// its first fsync settled it (the data directory's entry never
		// synced), and this Open reports a durable end. One fsync of a
		// directory whose entries are already durable costs little.
		dirs := parents
		if dd := filepath.Dir(l.dir); !slices.Contains(parents, dd) {
			dirs = append(dirs, dd)
		}
		for _, p := range dirs {
			if err := l.fsys.SyncDir(p); err != nil {
				return fmt.Errorf("creating %s: syncing %s: %w", l.dir, p, err)
			}
		}
	}
	if err := l.loadTopicID(fresh); err != nil {
		return err
	}
	if haveIntent && in.lost != "" {
		// Its copy is complete: it was durable before the intent was.
		if err := l.commitLost(in.lost); err != nil {
			return fmt.Errorf("finishing truncation of %s (%s): %w", l.tp(), in, err)
		}
	}
	if err := l.removeLostOrphans(); err != nil {
		return err
	}
	if err := l.loadUnreported(); err != nil {
		return err
	}
	logStart := int64(-1)
	if data, err := l.fsys.ReadFile(filepath.Join(l.dir, LogStartFile)); err == nil {
		if logStart, err = ParseLogStart(data); err != nil {
			l.lg.Warn("ignoring unreadable log start offset file", "err", err)
			logStart = -1
		}
	} else if !isNotExist(err) {
		return fmt.Errorf("reading %s: %w", filepath.Join(l.dir, LogStartFile), err)
	}

	if haveIntent {
		// Segments the truncation deletes whole are not loaded (a crash
		// may have left one without its indexes); the intent is redone
		// below for the rest.
		keep := -1
		for i, b := range bases {
			if b < in.offset && !in.full {
				keep = i
			}
		}
		if keep < 0 && !in.full && len(bases) > 0 {
			keep = 0 // the first segment stays, to be cut (or found below the start)
		}
		for _, b := range bases[keep+1:] {
			for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, txnStateSuffix, logSuffix} {
				if err := l.fsys.Remove(filepath.Join(l.dir, segmentName(b, suf))); err != nil && !isNotExist(err) {
					return fmt.Errorf("finishing truncation of %s: %w", l.tp(), err)
				}
			}
		}
		bases = bases[:min(keep+1, len(bases))]
	}
	for _, b := range bases {
		s, err := openSegmentFiles(l.fsys, l.dir, b, l.opts.IndexIntervalBytes, l.opts.Now())
		if err != nil {
			return err
		}
		s.txnLost = !txnIndexes[b]
		l.segs = append(l.segs, s)
	}
	floor := int32(-1)
	for _, s := range l.segs[:max(len(l.segs)-1, 0)] {
		s.epochFloor = floor
		if err := l.loadSealed(s); err != nil {
			return err
		}
		floor = max(floor, s.lastEpoch)
	}
	if len(l.segs) > 0 {
		l.active().epochFloor = floor
	}
	if len(l.segs) > 0 {
		last := l.active()
		size, err := last.fileSize()
		if err != nil {
			return err
		}
		last.ix.size = size // unverified until recoverActive
	}

	if haveIntent {
		l.lg.Warn("finishing an interrupted truncation", "full", in.full, "offset", in.offset)
		if in.full || len(l.segs) == 0 || in.offset < max(logStart, l.segs[0].base) {
			if err := l.truncateFully(in.offset); err != nil {
				return fmt.Errorf("finishing truncation of %s: %w", l.tp(), err)
			}
			logStart = in.offset
		} else if err := l.truncateSegments(in.offset); err != nil {
			return fmt.Errorf("finishing truncation of %s to %d: %w", l.tp(), in.offset, err)
		}
	}

	created := false
	if len(l.segs) == 0 {
		var s *segment
		var err error
		if l.unsettled {
			// No recovery point yet: a log never settled is re-read as
			// torn from its start without one (loadRecoveryPoint), as the
			// point at its start would say; settle writes that point.
			// Its snapshot (no transaction open) comes with settle too.
			s, err = createSegment(l.fsys, l.dir, max(logStart, 0), l.opts.IndexIntervalBytes, l.opts.Now(), false)
		} else {
			s, err = l.createSegment(max(logStart, 0))
		}
		if err != nil {
			return err
		}
		l.segs = []*segment{s}
		created = true
	}
	// A recovery point is only trusted when no truncation was in flight:
	// a truncation may have rewritten the bytes before it.
	var rp *recoveryPoint
	tornAll := false
	if !haveIntent {
		rp, tornAll = l.readRecoveryPoint(fresh)
	}
	var tail []batch.Header
	if err := l.recoverActive(rp, tornAll, created, func(h batch.Header) { tail = append(tail, h) }); err != nil {
		return err
	}

	l.logStart = max(logStart, l.segs[0].base)
	if leo := l.leoLocked(); l.logStart > leo {
		l.lg.Warn("log start offset beyond the recovered log end; lowering it", "logStart", l.logStart, "leo", leo)
		l.logStart = leo
	}
	if err := l.recoverEpochs(tail); err != nil {
		return err
	}
	if err := l.syncEpochs(); err != nil {
		return err
	}
	// Only now: a recovery point covering the tail before its epochs were
	// in the checkpoint would let a crash here drop them, since the next
	// Open reads no epochs back from before the point. An empty log keeps
	// the one it has if it names the segment's start (written when the
	// segment was), so reopening it costs no fsync.
	point := l.active().recoveryPoint()
	keep := false
	if l.unsettled {
		have, err := l.fsys.ReadFile(filepath.Join(l.dir, recoveryPointName))
		keep = err == nil && bytes.Equal(have, formatRecoveryPoint(point))
		if isNotExist(err) {
			// Written by settle, before anything of the log is durable.
			l.startPoint, keep = &point, true
		}
	}
	switch {
	case keep:
	case l.unsettled:
		// Unsynced, as a new log's (above).
		if err := writeFileUnsynced(l.fsys, l.dir, recoveryPointName, formatRecoveryPoint(point)); err != nil {
			return err
		}
		l.lastRecoveryPoint = l.opts.Now()
	default:
		if err := l.writeRecoveryPoint(point); err != nil {
			return err
		}
	}
	l.pointEnd = point.next
	if err := l.deleteSegmentsBelowStart(); err != nil {
		return fmt.Errorf("deleting segments of %s below %d: %w", l.tp(), l.logStart, err)
	}
	if err := l.recoverTxns(); err != nil {
		return fmt.Errorf("recovering the transactions of %s: %w", l.tp(), err)
	}
	if haveIntent {
		if in.lost != "" {
			lost, err := readLost(l.fsys, filepath.Join(LostFoundDir(l.dataDir, l.topic, l.partition), in.lost))
			if err != nil {
				return fmt.Errorf("finishing truncation of %s (%s): %w", l.tp(), in, err)
			}
			if err := l.addUnreported(lost); err != nil {
				return fmt.Errorf("finishing truncation of %s (%s): %w", l.tp(), in, err)
			}
			l.lg.Warn("a loss saved before the crash is complete and still to report", "id", in.lost,
				"from", lost.From, "end", lost.EndOffset, "cause", lost.Cause)
		}
		if err := removeFileSynced(l.fsys, l.dir, intentName); err != nil {
			return err
		}
	}
	return nil
}

func (l *Log) readIntent() (intent, bool, error) {
	path := filepath.Join(l.dir, intentName)
	data, err := l.fsys.ReadFile(path)
	if isNotExist(err) {
		return intent{}, false, nil
	}
	if err != nil {
		return intent{}, false, fmt.Errorf("reading %s: %w", path, err)
	}
	// Written atomically, so unreadable means someone else wrote it: do
	// not guess which batches it meant to remove.
	in, err := parseIntent(data)
	if err != nil {
		return intent{}, false, fmt.Errorf("%s: %w", path, err)
	}
	return in, true, nil
}

// loadTopicID reads partition.metadata, then records Options.TopicID if
// the file has none. Of a log never settled (fresh) the file was written
// without an fsync (setTopicIDLocked), so a power loss may have torn it:
// an unreadable one is then removed and written again from the option
// (nothing of the log was declared durable, so no durable byte is
// without its topic id); a log settled holds it whole (settle syncs it
// first), and an unreadable one fails Open. A fresh log this Open settles
// (it holds batches: recover declares them durable) has its file synced
// now, as settle would: a process that died before its first fsync left
// it in the page cache only.
func (l *Log) loadTopicID(fresh bool) error {
	path := filepath.Join(l.dir, PartitionMetadataFile)
	data, err := l.fsys.ReadFile(path)
	switch {
	case isNotExist(err):
	case err != nil:
		return fmt.Errorf("reading %s: %w", path, err)
	default:
		id, err := ParsePartitionMetadata(data)
		switch {
		case err != nil && fresh:
			l.lg.Warn("removing the torn partition.metadata of a log never made durable", "err", err)
			if err := l.fsys.Remove(path); err != nil && !isNotExist(err) {
				return fmt.Errorf("removing %s: %w", path, err)
			}
		case err != nil:
			return fmt.Errorf("%s: %w", path, err)
		default:
			l.topicID = id
			if fresh && !l.unsettled {
				if err := syncByName(l.fsys, path); err != nil {
					return fmt.Errorf("%s: %w", l.tp(), err)
				}
			}
		}
	}
	return l.setTopicIDLocked(l.opts.TopicID)
}

// loadSealed loads a sealed segment from its indexes, or rebuilds them.
func (l *Log) loadSealed(s *segment) error {
	size, err := s.fileSize()
	if err != nil {
		return err
	}
	if ok, err := s.loadIndexes(size); err != nil || ok {
		return err
	}
	l.lg.Warn("rebuilding indexes of a sealed segment", "segment", s.path(logSuffix))
	valid, err := s.rebuild(true, nil)
	if err != nil || valid != size {
		if err == nil {
			err = fmt.Errorf("%d bytes of a partial batch at the end of a sealed segment", size-valid)
		}
		return l.corruption(s, valid, -1, err)
	}
	s.ix.seal()
	s.sealed = true
	s.rewriteIndexes()
	return s.sync()
}

// readRecoveryPoint is loadRecoveryPoint of the file.
func (l *Log) readRecoveryPoint(fresh bool) (rp *recoveryPoint, torn bool) {
	data, err := l.fsys.ReadFile(filepath.Join(l.dir, recoveryPointName))
	segs := make([]segStart, len(l.segs))
	for i, s := range l.segs {
		segs[i] = segStart{s.base, s.epochFloor}
	}
	rp, torn, warn := loadRecoveryPoint(data, err, fresh, segs)
	if warn != nil {
		l.lg.Warn("ignoring unreadable recovery point", "err", warn, "tornFromStart", torn)
	}
	return rp, torn
}

// writeRecoveryPoint records that the active segment is durable up to its
// current end. Callers hold mu and have just fsynced it; pointMu orders
// the write after a Flush's that is still going on (rewritePoint).
func (l *Log) writeRecoveryPoint(rp recoveryPoint) error {
	l.pointSeq++
	l.pointMu.Lock()
	err := writeFileAtomic(l.fsys, l.dir, recoveryPointName, formatRecoveryPoint(rp))
	l.pointMu.Unlock()
	if err != nil {
		return err
	}
	l.pointEnd = rp.next
	l.lastRecoveryPoint = l.opts.Now()
	return nil
}

// recoverActive validates the active segment, from its recovery point
// when there is a usable one (the bytes before it were fsynced), and cuts
// a torn tail. tornAll says no byte of it is known durable, with no
// usable point (loadRecoveryPoint): a bad batch is a torn tail wherever
// it lies.
//
// created says the active segment was created empty by this Open (a new
// log, or one a full truncation emptied), its creation made durable by
// createSegment's directory fsync.
func (l *Log) recoverActive(rp *recoveryPoint, tornAll, created bool, onBatch func(batch.Header)) error {
	s := l.active()
	size, err := s.fileSize()
	if err != nil {
		return err
	}
	torn := tornFrom(rp, s.base, size)
	if tornAll {
		torn = 0
	}
	var valid int64
	resumed := rp != nil && s.resume(*rp, size)
	if resumed {
		valid, err = s.scanOn(size, true, onBatch)
	} else {
		valid, err = s.rebuild(true, onBatch)
	}
	var be *batch.Error
	if err != nil && !errors.As(err, &be) {
		return err
	}
	if valid < size {
		if err != nil && (torn < 0 || valid < torn) && validBatchFollows(s, valid, size) {
			return l.corruption(s, valid, -1, err)
		}
		l.lg.Warn("cutting a torn tail", "segment", s.path(logSuffix), "position", valid,
			"bytes", size-valid, "nextOffset", s.next, "pastRecoveryPoint", torn >= 0 && valid >= torn, "reason", err)
		if err := s.log.Truncate(valid); err != nil {
			return fmt.Errorf("truncating %s to %d: %w", s.path(logSuffix), valid, err)
		}
	}
	s.sealed = false
	switch {
	case resumed || created && size == 0:
	case l.unsettled && size == 0 && l.emptyIndexes(s):
		// Nothing to cut: rewriting would cost the first flush of a
		// reopened empty log two fsyncs, now that a new log has no
		// recovery point to resume from.
		s.idx, s.tidx = indexFile{}, indexFile{}
	default:
		s.rewriteIndexes()
	}
	// Resumed, the entries up to the recovery point are in the files
	// already (resume): the sync below writes the tail's and cuts what
	// follows (a torn tail's entries, Close's final time entry), so
	// Open's cost follows the tail.
	if (created || l.unsettled) && size == 0 {
		// Nothing to make durable in empty files: createSegment's
		// directory fsync made new ones durable, settle makes an
		// unsettled log's.
		return nil
	}
	// Durable now; the recovery point is written by recover once the
	// checkpoint holds these batches' epochs (a point promises that).
	return s.sync()
}

// emptyIndexes says s's .index and .timeindex are missing or empty.
func (l *Log) emptyIndexes(s *segment) bool {
	for _, suf := range []string{indexSuffix, timeIndexSuffix} {
		fi, err := l.fsys.Stat(s.path(suf))
		if err == nil && fi.Size() > 0 || err != nil && !isNotExist(err) {
			return false
		}
	}
	return true
}

// tornFrom is the position in the active segment (base, size bytes) from
// which its bytes are not known durable: the recovery point's position
// when the point names this segment, 0 when it names an earlier one (this
// segment was created since), -1 when there is no usable point. A power
// loss can tear, and reorder, any write the disk was not told to flush: a
// later batch may survive an earlier one's torn pages. So past that
// position a bad batch is a torn tail whatever follows it, as Kafka's
// LogSegment.recover cuts at the first invalid batch above the recovery
// point; before it, or with no point, validBatchFollows decides.
func tornFrom(rp *recoveryPoint, base, size int64) int64 {
	switch {
	case rp == nil:
		return -1
	case rp.base == base && rp.pos <= size:
		return rp.pos
	case rp.base < base:
		return 0
	}
	return -1
}

// validBatchFollows tells a torn write from corruption: a crash tears only
// the end of what was being written, so if the bad batch's length field
// leads to a batch that passes its CRC, the bad one sits in the middle of
// good data.
func validBatchFollows(s *segment, pos, size int64) bool {
	hdr := make([]byte, batch.LogOverhead)
	if _, err := s.log.ReadAt(hdr, pos); err != nil {
		return false
	}
	length := int64(int32(uint32(hdr[8])<<24 | uint32(hdr[9])<<16 | uint32(hdr[10])<<8 | uint32(hdr[11])))
	next := pos + batch.LogOverhead + length
	if length < batch.MinLength || next+batch.HeaderSize > size {
		return false
	}
	found := false
	_, _ = scanFile(s.log, next, size, true, func(batch.Header, int64, []byte) error {
		found = true
		return errors.New("stop")
	})
	return found
}

// recoverEpochs is step 6 of recover: the cache loadEpochs builds, written
// back when it differs from the file.
func (l *Log) recoverEpochs(tail []batch.Header) error {
	cache, data, rebuilt, err := loadEpochs(l.fsys, l.dir, l.ident, l.segs, tail, l.logStart, l.leoLocked())
	if err != nil {
		return err
	}
	if rebuilt != "" && (rebuilt != "missing" || l.leoLocked() > l.segs[0].base) {
		l.lg.Warn("rebuilding leader-epoch-checkpoint from the batches", "reason", rebuilt)
	}
	if rebuilt == "missing" && cache.Len() == 0 {
		// No file is no epoch: nothing to write (a new log's first
		// append writes it).
		l.epochs = cache
		return nil
	}
	if !bytes.Equal(data, formatEpochCheckpoint(cache.entries)) || rebuilt != "" {
		return l.writeEpochs(cache)
	}
	// The file as read may be an unsynced write of the process before
	// (writeEpochsUnsynced) still in the page cache: the recovery point
	// recover writes next covers the tail, so make the file durable first.
	// Without a tail the point covers nothing new.
	l.epochs, l.epochsUnsynced = cache, len(tail) > 0
	return nil
}

// loadEpochs builds the epoch cache of the log in segs, which holds
// [logStart, leo), without writing anything: leader-epoch-checkpoint, plus
// the epochs of tail batches newer than its latest entry (an append that
// crashed before its checkpoint write, as LogSegment.recover reads them
// back); or, when the file is missing, unreadable or not strictly
// increasing, every batch's epoch (rebuilt says why). The cache is then cut
// to the log end and from the log start, as LogLoader does. data is the
// file as read.
func loadEpochs(fsys fileSystem, dir string, id ident, segs []*segment, tail []batch.Header, logStart, leo int64) (cache Epochs, data []byte, rebuilt string, err error) {
	path := filepath.Join(dir, EpochCheckpointFile)
	data, err = fsys.ReadFile(path)
	switch {
	case isNotExist(err):
		rebuilt = "missing"
	case err != nil:
		return Epochs{}, nil, "", fmt.Errorf("reading %s: %w", path, err)
	case len(data) == 0 || data[len(data)-1] != '\n':
		// Never written so (every line ends with a newline, an empty
		// cache is "0\n0\n"): an Append's unsynced rewrite whose rename
		// reached the disk before its data (writeEpochsUnsynced). Parsed,
		// a prefix could pass for a smaller cache.
		rebuilt = "torn (empty, or no final newline)"
	default:
		entries, perr := ParseEpochCheckpoint(data)
		if perr == nil {
			cache, perr = NewEpochs(entries...)
		}
		// Kafka replays even a non-monotonic file through assign, which
		// drops entries and lets recovery invent later starts. kfollower
		// never writes one, so it is damage: rebuild from the batches.
		if perr == nil && cache.Len() != len(entries) {
			perr = fmt.Errorf("entries %v are not strictly increasing", entries)
		}
		if perr != nil {
			rebuilt = perr.Error()
		}
	}
	if rebuilt != "" {
		if cache, err = epochsFromBatches(id, segs); err != nil {
			return Epochs{}, nil, "", err
		}
	} else {
		for _, h := range tail {
			if latest, ok := cache.Latest(); h.PartitionLeaderEpoch >= 0 && (!ok || h.PartitionLeaderEpoch > latest.Epoch) {
				cache, _, _ = cache.Assign(h.PartitionLeaderEpoch, h.BaseOffset)
			}
		}
	}
	return cache.TruncateFromEnd(leo).TruncateFromStart(logStart), data, rebuilt, nil
}

// epochsFromBatches assigns every stored batch's epoch in order: the cache
// Kafka would have built appending the same batches.
func epochsFromBatches(id ident, segs []*segment) (Epochs, error) {
	var cache Epochs
	for _, s := range segs {
		_, err := scanFile(s.log, 0, s.size(), false, func(h batch.Header, _ int64, _ []byte) error {
			if h.PartitionLeaderEpoch >= 0 {
				cache, _, _ = cache.Assign(h.PartitionLeaderEpoch, h.BaseOffset)
			}
			return nil
		})
		if err != nil {
			return Epochs{}, id.corruption(s, 0, -1, err)
		}
	}
	return cache, nil
}
