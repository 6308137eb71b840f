package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Log is one followed partition's local log. One goroutine writes (Append,
// the truncations, DeleteBefore, EnforceRetention, SaveLost, Close); any
// number may read (Read and the offset/epoch queries) concurrently with
// it, and Flush may run on another goroutine beside the writer (flush.go).
//
// It satisfies Reader, and follower.LocalLog.
type Log struct {
	ident
	fsys    fileSystem
	opts    Options
	dataDir string
	dir     string
	lg      *slog.Logger

	// mu guards everything below: the writer holds it exclusively, readers
	// shared.
	mu       sync.RWMutex
	segs     []*segment // by base offset; the last is the active segment
	logStart int64
	epochs   Epochs
	topicID  TopicID
	// durable is the log end at the last fsync of the active segment
	// (DurableEnd); below the LEO while appended bytes are unsynced.
	durable int64
	// gen is bumped by every roll and truncation, so a Flush that fsynced
	// without the lock records its end only if neither came between.
	gen    uint64
	failed error // sticky: an I/O error left disk and memory unsure
	// pending is a truncation whose intent may be on disk although writing
	// it failed, and rolling it back failed too: writes are refused until
	// a truncation call rolls it back (TruncateTo).
	pending *intent
	// unreported are the losses whose truncation is durable and whose
	// report is not confirmed (UnreportedLosses), as
	// kfollower-unreported-losses lists them.
	unreported []Lost
	// txns are the transactions open at the log end; recent those that
	// markers in the active segment ended at or past durable (txn.go):
	// still unstable to a reader of the durable log.
	txns   txnState
	recent []completedTxn
	// epochsUnsynced says leader-epoch-checkpoint was last written by an
	// Append, without an fsync: syncEpochs makes it durable before any
	// recovery point or seal can cover the batches whose epochs it holds.
	epochsUnsynced bool
	// unsettled says the log was empty when opened and nothing of it has
	// been declared durable since (settle): a crash can take it whole,
	// and with it only batches no durable end covered. unsyncedDirs are
	// the directories whose new entries (the partition directory's own)
	// settle fsyncs.
	unsettled    bool
	unsyncedDirs []string
	// fresh says Open found the log never settled (neverSettled) and
	// nothing has settled it since: only then does Open tolerate a torn
	// partition.metadata (loadTopicID), so only then is it written
	// without an fsync.
	fresh bool
	// startPoint is the recovery point at the segment's start that settle
	// writes, when a log opened empty has none (a new log's Open writes
	// none).
	startPoint *recoveryPoint
	// lastRecoveryPoint is when kfollower-recovery-point was last written;
	// flushes rewrite it at most once a second. pointEnd is the log offset
	// the point on disk covers (its next offset): a Flush with nothing new
	// to fsync still rewrites a point behind the durable end (flush.go).
	// stg is what Stage wrote past the active segment's end, nil if
	// nothing (stage.go); stagedAppended counts the bytes Append took
	// where Stage had written them (StagedAppended).
	stg            *staged
	stagedAppended atomic.Int64

	lastRecoveryPoint time.Time
	pointEnd          int64
	closed            bool

	// flushMu serializes Flush calls (flush.go), which hold mu only around
	// their fsync; it is taken before mu, never while holding it.
	flushMu sync.Mutex
	// pointMu serializes writes of the recovery point file in an open log
	// (Open's own writes run before anything else can): taken while
	// holding mu, which Flush then releases during its write
	// (rewritePoint); Close waits for it. pointSeq, under mu, counts the
	// points decided, so that Flush records its point's end only if no
	// later one came.
	pointMu  sync.Mutex
	pointSeq uint64

	// truncations counts the truncations begun (runTruncation), for
	// Section.Stale; read without mu.
	truncations atomic.Uint64
}

// Open opens or creates the log of topic-partition under dataDir and
// recovers it (recover.go): it finishes an interrupted truncation (and its
// lost+found save: UnreportedLosses then lists the loss), cuts a torn
// tail, and cuts the epoch cache back to the log end.
func Open(dataDir, topic string, partition int32, opts Options) (*Log, error) {
	var fsys fileSystem = osFS{}
	if opts.OnSync != nil {
		// Wall-clock time, not opts.Now: a test clock must not stretch
		// a latency.
		fsys = timedFS{fileSystem: fsys, onSync: opts.OnSync, now: time.Now}
	}
	return openLog(fsys, dataDir, topic, partition, opts)
}

func openLog(fsys fileSystem, dataDir, topic string, partition int32, opts Options) (*Log, error) {
	if err := checkName(topic, partition); err != nil {
		return nil, fmt.Errorf("opening log: %w", err)
	}
	opts = opts.withDefaults()
	l := &Log{
		fsys: fsys, opts: opts, dataDir: dataDir, ident: ident{topic, partition},
		dir: PartitionDir(dataDir, topic, partition),
		lg:  opts.Logger.With("topic", topic, "partition", partition),
	}
	if err := l.recover(); err != nil {
		l.closeFiles()
		return nil, err
	}
	l.durable = l.leoLocked() // recoverActive fsynced the active segment
	return l, nil
}

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

func (l *Log) leoLocked() int64 { return l.active().next }

// LogStartOffset is the first offset the log holds (or would hold).
func (l *Log) LogStartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logStart
}

// LogEndOffset is the offset after the last stored batch.
func (l *Log) LogEndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.leoLocked()
}

// DurableEnd is the log end at the last fsync of the active segment: the
// end that survives a power loss (Reader.DurableEnd says when that is
// under each FlushPolicy). It is at most LogEndOffset.
func (l *Log) DurableEnd() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.durable
}

// synced records that the active segment was just fsynced whole (and every
// earlier segment with it), so the log is durable up to its end.
func (l *Log) synced() { l.durable, l.recent = l.leoLocked(), nil }

// LastStableOffset is UnifiedLog.lastStableOffset with DurableEnd as the
// high watermark: the first offset of the earliest transaction that is
// still open, or whose marker is not durable yet, else DurableEnd. A
// read_committed reader is served no further.
func (l *Log) LastStableOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return lastStable(l.txns, l.recent, l.logStart, l.durable)
}

// AbortedTransactions lists the aborted transactions that may hold
// records in [from, to), from the .txnindex entries
// (UnifiedLog.collectAbortedTransactions); never nil.
func (l *Log) AbortedTransactions(from, to int64) []AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return collectAborted(l.segs, func(i int) []abortedTxn { return l.segs[i].txns }, from, to)
}

// LatestEpoch is the newest leader epoch in the cache.
func (l *Log) LatestEpoch() (epoch int32, ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e, ok := l.epochs.Latest()
	return e.Epoch, ok
}

// EndOffsetForEpoch is Kafka's LeaderEpochFileCache.endOffsetFor(epoch,
// LEO); see Epochs.EndOffsetFor.
func (l *Log) EndOffsetForEpoch(epoch int32) (found int32, end int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.EndOffsetFor(epoch, l.leoLocked())
}

// Epochs is a snapshot of the leader-epoch cache.
func (l *Log) Epochs() Epochs {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs
}

// TopicID is the id from partition.metadata; ok is false when there is none.
func (l *Log) TopicID() (id TopicID, ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.topicID, l.topicID != TopicID{}
}

// SetTopicID writes partition.metadata (atomically) if the log has no topic
// id yet, and fails if it has a different one.
func (l *Log) SetTopicID(id TopicID) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	return l.setTopicIDLocked(id)
}

func (l *Log) setTopicIDLocked(id TopicID) error {
	if id == (TopicID{}) || id == l.topicID {
		return nil
	}
	if l.topicID != (TopicID{}) {
		return fmt.Errorf("%s: topic id %s does not match partition.metadata's %s", l.tp(), id, l.topicID)
	}
	if l.unsettled && l.fresh {
		// Without an fsync, for readers: settle makes it durable before
		// anything of the log is declared durable, and a power loss that
		// tears it before then tears a log Open treats as never settled
		// (loadTopicID). Only such a log: one settled before and opened
		// empty (after TruncateFullyAndStartAt, say) has its snapshot,
		// so Open takes a torn file there for damage and refuses the
		// partition; it gets the fsynced write below, a rare case. Kafka writes it lazily too: UnifiedLog records
		// the id and leaves the write (with its fsync) to a scheduled
		// "flush-metadata-file" task, or to the first append
		// (PartitionMetadataFile.record, maybeFlush).
		if err := writeFileUnsynced(l.fsys, l.dir, PartitionMetadataFile, formatPartitionMetadata(id)); err != nil {
			return err
		}
		l.topicID = id
		return nil
	}
	if err := writeFileAtomic(l.fsys, l.dir, PartitionMetadataFile, formatPartitionMetadata(id)); err != nil {
		return err
	}
	l.topicID = id
	return nil
}

// settle makes a log opened empty durable before anything of it is
// declared durable (a Flush, a roll, a truncation, Close):
// partition.metadata's data (Open or SetTopicID wrote it unsynced), the
// recovery point at the segment's start if the log has none (a new log's
// Open writes none), unsynced, then the first segment's .kfollower-txns (written and fsynced under a tmp
// name, then renamed: once it is there, so is a whole partition.metadata,
// and Open no longer takes the log for one never settled:
// neverSettled), leader-epoch-checkpoint if an Append wrote it, then one
// fsync of the partition directory for all of them and the segment's
// files, then the fsync of the data directory and of any other parent
// Open created. Appends need none of it: a crash that takes the rest
// takes batches no durable end ever covered, and Open re-reads a log
// never settled as torn from its start (loadRecoveryPoint: a torn tail is
// cut, never taken for corruption). That first recovery point is not
// synced: a torn one is read as that one (unsyncedPoint), and it is not
// rewritten by the fsync that settles (it counts as just written: the
// flushes rewrite it at most once a second), so a whole one says the
// segment is to be re-read from its start, which is all that Open reads
// of a log its first fsync settled: under FlushEveryAppend a first append
// of thousands of new logs at start-up made two more fsyncs each (issue
// 14). Five fsyncs, off the fetch path under FlushInterval.
func (l *Log) settle() error {
	if !l.unsettled {
		return nil
	}
	if l.topicID != (TopicID{}) {
		if err := syncByName(l.fsys, filepath.Join(l.dir, PartitionMetadataFile)); err != nil {
			return fmt.Errorf("%s: %w", l.tp(), err)
		}
	}
	s := l.active() // the segment Open found or made: a roll settles first
	if l.startPoint != nil {
		// Before the snapshot, which tells Open the log was settled: a
		// crash that keeps that name keeps this one, whole or torn, and
		// a torn point reads as this one (unsyncedPoint).
		l.pointMu.Lock()
		err := writeFileUnsynced(l.fsys, l.dir, recoveryPointName, formatRecoveryPoint(*l.startPoint))
		l.pointMu.Unlock()
		if err != nil {
			return fmt.Errorf("%s: %w", l.tp(), err)
		}
		l.startPoint = nil
	}
	if _, have, err := readTxnState(l.fsys, l.dir, s.base); err != nil {
		return err
	} else if !have {
		// The log was empty at its base: no transaction open there.
		if err := writeFileRenamed(l.fsys, l.dir, segmentName(s.base, txnStateSuffix), formatTxnState(txnState{})); err != nil {
			return fmt.Errorf("%s: %w", l.tp(), err)
		}
	}
	if l.epochsUnsynced {
		if err := syncByName(l.fsys, filepath.Join(l.dir, EpochCheckpointFile)); err != nil {
			return fmt.Errorf("%s: %w", l.tp(), err)
		}
	}
	// A new log's first segment has no index files yet (createSegment),
	// nor has an empty one reopened since; any there are kept as they
	// are (their state is s.idx's and s.tidx's).
	if err := s.makeIndexes(0); err != nil {
		return fmt.Errorf("%s: %w", l.tp(), err)
	}
	for _, d := range append([]string{l.dir}, l.unsyncedDirs...) {
		if err := l.fsys.SyncDir(d); err != nil {
			return fmt.Errorf("%s: syncing directory %s: %w", l.tp(), d, err)
		}
	}
	l.unsettled, l.fresh, l.unsyncedDirs, l.epochsUnsynced = false, false, nil, false
	l.lastRecoveryPoint = l.opts.Now()
	return nil
}

// Segments lists the base offsets of the segments, oldest first.
func (l *Log) Segments() []int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]int64, len(l.segs))
	for i, s := range l.segs {
		out[i] = s.base
	}
	return out
}

// Size is the total size of the .log files.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size()
	}
	return n
}

func (l *Log) usable() error {
	if l.closed {
		return fmt.Errorf("%s: %w", l.tp(), ErrClosed)
	}
	if l.failed != nil {
		return fmt.Errorf("%s: an earlier write failed, reopen the log to recover: %w", l.tp(), l.failed)
	}
	return nil
}

// Failed returns the error after which the log refuses every call until
// it is reopened (a failed write or fsync: memory and disk may disagree,
// and Open's recovery repairs the files), or nil. An error from a call
// while Failed is nil was not of that kind: the call changed nothing, and
// can be retried (after ErrTruncationPending, with a truncation).
func (l *Log) Failed() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.failed
}

// writable is usable for a call that adds to the log or moves its start:
// refused while a truncation is pending.
func (l *Log) writable() error {
	if err := l.usable(); err != nil {
		return err
	}
	if l.pending != nil {
		return fmt.Errorf("%s: complete or roll back the truncation (%s) first: %w", l.tp(), *l.pending, ErrTruncationPending)
	}
	return nil
}

// fail records an I/O error after which memory and disk may disagree (a
// failed write may have left part of a batch; after a failed fsync the
// page cache can no longer be trusted). Every later call refuses until the
// log is reopened, and Open's recovery then repairs the disk state.
func (l *Log) fail(err error) error {
	if l.failed == nil {
		l.failed = err
	}
	return err
}

func (l *Log) writeEpochs(c Epochs) error {
	if err := writeFileAtomic(l.fsys, l.dir, EpochCheckpointFile, formatEpochCheckpoint(c.entries)); err != nil {
		return fmt.Errorf("%s: %w", l.tp(), err)
	}
	l.epochs, l.epochsUnsynced = c, false
	return nil
}

// writeEpochsUnsynced is writeEpochs on the append path: the file is
// replaced (tmp, rename) so that readers see the new cache at once, but
// nothing is fsynced: Kafka fsyncs in LeaderEpochFileCache.assign
// (CheckpointFile.write with sync), which kfollower leaves to syncEpochs
// at the log's next fsync, so an Append that starts an epoch waits on no
// fsync. Until then a crash leaves the old cache (whose missing epochs
// Open reads back from the batches past the recovery point, as
// LogSegment.recover assigns them) or the new one, or, where the rename
// reached the disk before the data, a torn file, which loadEpochs rebuilds
// from the batches.
func (l *Log) writeEpochsUnsynced(c Epochs) error {
	if err := writeFileUnsynced(l.fsys, l.dir, EpochCheckpointFile, formatEpochCheckpoint(c.entries)); err != nil {
		return fmt.Errorf("%s: %w", l.tp(), err)
	}
	l.epochs, l.epochsUnsynced = c, true
	return nil
}

// syncEpochs makes an unsynced leader-epoch-checkpoint durable (its data,
// then the directory for its rename): before a recovery point is written
// (Open then reads no epoch back from the batches before it) and before a
// seal (Open reads no epoch back from a sealed segment).
func (l *Log) syncEpochs() error {
	if !l.epochsUnsynced {
		return nil
	}
	path := filepath.Join(l.dir, EpochCheckpointFile)
	if err := syncByName(l.fsys, path); err != nil {
		return fmt.Errorf("%s: %w", l.tp(), err)
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return fmt.Errorf("%s: syncing directory %s: %w", l.tp(), l.dir, err)
	}
	l.epochsUnsynced = false
	return nil
}

// Close seals nothing new but leaves the active segment's files as Kafka's
// LogSegment.close does (final time-index entry, fsync) and closes them.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	// Staged bytes are cut before anything is made durable: a reopen
	// must find the segment as it ends (stage.go).
	uerr := l.unstage()
	// A Flush's recovery point write still under way (rewritePoint, which
	// holds pointMu but not mu) ends before Close returns, on every path
	// below (a failed log's, too, which writes no point of its own): a reopened Log on the same directory has a pointMu of its own
	// and would otherwise race it for the one temporary file, and a stale
	// point could land after the reopen finished a truncation's intent.
	// No new one can begin: Flush checks closed under mu first.
	defer l.waitPointWrite()
	var err error
	// An unsettled empty log has nothing to make durable, and its next
	// Open is as cheap.
	if l.unsettled && l.failed == nil && len(l.segs) == 1 && l.active().empty() {
		return errors.Join(uerr, l.closeFiles())
	}
	if l.failed == nil {
		if serr := l.settle(); serr != nil {
			return errors.Join(l.fail(fmt.Errorf("closing %s: %w", l.tp(), serr)), l.closeFiles())
		}
	}
	if l.failed == nil && len(l.segs) > 0 {
		// The recovery point keeps the index counts from before the
		// close-time time entry, so a reopened segment indexes on exactly
		// as a rebuild from its .log would.
		s := l.active()
		rp := s.recoveryPoint()
		s.ix.seal()
		if eerr := l.syncEpochs(); eerr != nil {
			err = eerr
		} else if serr := s.sync(); serr != nil {
			err = fmt.Errorf("closing %s: %w", l.tp(), serr)
		} else {
			l.synced()
			err = l.writeRecoveryPoint(rp)
		}
	}
	return errors.Join(uerr, err, l.closeFiles())
}

// waitPointWrite returns once no recovery point write is under way.
func (l *Log) waitPointWrite() {
	l.pointMu.Lock()
	l.pointMu.Unlock() //lint:ignore SA2001 a barrier, not a critical section
}

func (l *Log) closeFiles() error {
	var errs []error
	for _, s := range l.segs {
		errs = append(errs, s.close())
	}
	return errors.Join(errs...)
}

// isNotExist is os.ErrNotExist through wrapping.
func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }
