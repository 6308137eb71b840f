package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/kfollower/kfollower/wire/batch"
)

// FlushPolicy says when appended bytes are fsynced.
type FlushPolicy int

const (
	// FlushEveryAppend fsyncs the active segment before Append returns.
	FlushEveryAppend FlushPolicy = iota
	// FlushInterval fsyncs on the first Append at least FlushInterval after
	// the previous flush; the owner may also call Flush from a timer.
	FlushInterval
	// FlushOS leaves it to the OS, as Kafka does by default
	// (flush.messages = Long.MAX_VALUE); only roll, truncation and Close
	// fsync. A follower can refetch what a power loss takes.
	FlushOS
)

// Options configure a Log. Zero values take Kafka's defaults where Kafka
// has one.
type Options struct {
	// SegmentBytes rolls the active segment before it would grow past this
	// size (segment.bytes, default 1 GiB; at most math.MaxInt32 because
	// index positions are int32).
	SegmentBytes int64
	// SegmentAge rolls a non-empty segment whose first batch is older than
	// this, measured in batch timestamps as LogSegment.timeWaitedForRoll
	// does (segment.ms, default 7 days).
	SegmentAge time.Duration
	// IndexIntervalBytes is the byte distance between index entries
	// (index.interval.bytes, default 4096).
	IndexIntervalBytes int
	// RetentionBytes: EnforceRetention deletes the oldest sealed segments
	// while the log minus that segment stays at or above it. <= 0: no limit
	// (retention.bytes default -1).
	RetentionBytes int64
	// RetentionAge: EnforceRetention deletes sealed segments whose largest
	// timestamp is older than this. <= 0: no limit.
	RetentionAge time.Duration
	// Flush and FlushInterval: see FlushPolicy.
	Flush         FlushPolicy
	FlushInterval time.Duration
	// TopicID, when not zero, is written to partition.metadata, or checked
	// against it.
	TopicID TopicID
	// Logger receives warnings about repairs (torn tail cut, checkpoint
	// rebuilt). Default slog.Default().
	Logger *slog.Logger
	// Now is the clock for segment age, flush interval and retention.
	Now func() time.Time
	// OnSync, if set, is told how long each fsync took (segments,
	// indexes, checkpoints, directories), for a latency histogram. It is
	// called on the writer's goroutine and must not block.
	OnSync func(time.Duration)
}

func (o Options) withDefaults() Options {
	if o.SegmentBytes <= 0 || o.SegmentBytes > math.MaxInt32 {
		o.SegmentBytes = 1 << 30
	}
	if o.SegmentAge <= 0 {
		o.SegmentAge = 7 * 24 * time.Hour
	}
	if o.IndexIntervalBytes <= 0 {
		o.IndexIntervalBytes = 4096
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Log is one followed partition's local log. One goroutine writes (Append,
// the truncations, DeleteBefore, EnforceRetention, SaveLost, Flush,
// Close); any number may read (Read and the offset/epoch queries)
// concurrently with it.
//
// It satisfies follower.LocalLog.
type Log struct {
	fsys      fileSystem
	opts      Options
	dataDir   string
	dir       string
	topic     string
	partition int32
	lg        *slog.Logger

	// mu guards everything below: the writer holds it exclusively, readers
	// shared.
	mu        sync.RWMutex
	segs      []*segment // by base offset; the last is the active segment
	logStart  int64
	epochs    Epochs
	topicID   TopicID
	dirty     bool // appended since the last fsync of the active segment
	lastFlush time.Time
	failed    error // sticky: an I/O error left disk and memory unsure
	// lastRecoveryPoint is when kfollower-recovery-point was last written;
	// flushes rewrite it at most once a second.
	lastRecoveryPoint time.Time
	closed            bool
}

var legalTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// PartitionDir is the directory of a partition under dataDir, as Kafka
// names it (LocalLog.logDirName): "<topic>-<partition>".
func PartitionDir(dataDir, topic string, partition int32) string {
	return filepath.Join(dataDir, fmt.Sprintf("%s-%d", topic, partition))
}

// Open opens or creates the log of topic-partition under dataDir and
// recovers it (recover.go): it finishes an interrupted truncation, cuts a
// torn tail, and cuts the epoch cache back to the log end.
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
	if !legalTopic.MatchString(topic) || topic == "." || topic == ".." || partition < 0 {
		return nil, fmt.Errorf("opening log: illegal topic-partition %q-%d", topic, partition)
	}
	opts = opts.withDefaults()
	l := &Log{
		fsys: fsys, opts: opts, dataDir: dataDir, topic: topic, partition: partition,
		dir: PartitionDir(dataDir, topic, partition),
		lg:  opts.Logger.With("topic", topic, "partition", partition),
	}
	if err := l.recover(); err != nil {
		l.closeFiles()
		return nil, err
	}
	l.lastFlush = opts.Now()
	return l, nil
}

func (l *Log) tp() string { return fmt.Sprintf("%s-%d", l.topic, l.partition) }

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
	if err := writeFileAtomic(l.fsys, l.dir, PartitionMetadataFile, formatPartitionMetadata(id)); err != nil {
		return err
	}
	l.topicID = id
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

// Append validates raw — one or more whole v2 batches as fetched — and
// appends it unchanged. Validation comes first and covers the whole run
// (UnifiedLog.appendAsFollower): magic 2, lengths, CRC, no partial tail,
// base offset >= LEO, offsets increasing (gaps are legal: compaction),
// leader epochs >= 0 and non-decreasing, also against the cache. On any
// violation it returns an *AppendError and writes nothing.
//
// The one exception to base >= LEO is Kafka's for an empty log: a first
// batch that starts below the LEO but covers it restarts the log at its
// base offset (kafka-internals.md §10 item 12).
//
// Then: roll if due, write the bytes and index entries, assign each
// batch's epoch to the cache (rewriting leader-epoch-checkpoint
// atomically when it changes), and fsync per the flush policy.
func (l *Log) Append(raw []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	if len(raw) == 0 {
		return nil
	}
	hs, restart, err := l.validate(raw)
	if err != nil {
		return err
	}
	first, last := hs[0], hs[len(hs)-1]
	if restart {
		if err := l.truncateFullyWithIntent(first.BaseOffset); err != nil {
			return err
		}
	}
	if err := l.maybeRoll(len(raw), hs); err != nil {
		return err
	}
	s := l.active()
	if !s.canHold(last.LastOffset()) || first.BaseOffset < s.base {
		return &AppendError{Topic: l.topic, Partition: l.partition, Offset: first.BaseOffset,
			Reason: fmt.Sprintf("offsets %d..%d do not fit one segment based at %d", first.BaseOffset, last.LastOffset(), s.base)}
	}
	if err := s.append(raw, hs); err != nil {
		return l.fail(fmt.Errorf("appending to %s: %w", l.tp(), err))
	}
	l.dirty = true
	// The checkpoint goes before the flush: once a recovery point covers
	// these batches, Open no longer reads their epochs back.
	cache := l.epochs
	changed := false
	for _, h := range hs {
		var ch bool
		cache, ch, _ = cache.Assign(h.PartitionLeaderEpoch, h.BaseOffset) // validated: no error
		changed = changed || ch
	}
	if changed {
		if err := l.writeEpochs(cache); err != nil {
			return l.fail(err)
		}
	}
	return l.maybeFlush()
}

// validate checks a whole run before anything is written. restart is the
// empty-log case of Append's doc.
func (l *Log) validate(raw []byte) (hs []batch.Header, restart bool, err error) {
	leo := l.leoLocked()
	empty := leo == l.logStart && l.active().empty()
	next := leo
	prevEpoch := int32(-1)
	if e, ok := l.epochs.Latest(); ok {
		prevEpoch = e.Epoch
	}
	reject := func(off int64, err error, format string, args ...any) ([]batch.Header, bool, error) {
		return nil, false, &AppendError{Topic: l.topic, Partition: l.partition, Offset: off, Reason: fmt.Sprintf(format, args...), Err: err}
	}
	sc := batch.NewScanner(raw)
	for sc.Next() {
		h := sc.Header()
		switch {
		case h.PartitionLeaderEpoch < 0:
			return reject(h.BaseOffset, nil, "batch has no partition leader epoch (%d)", h.PartitionLeaderEpoch)
		case h.PartitionLeaderEpoch < prevEpoch:
			return reject(h.BaseOffset, nil, "leader epoch %d below the previous epoch %d", h.PartitionLeaderEpoch, prevEpoch)
		case h.BaseOffset < next && len(hs) == 0 && empty && h.LastOffset() >= next:
			restart = true
		case h.BaseOffset < next && len(hs) == 0:
			return reject(h.BaseOffset, nil, "base offset %d below the log end offset %d", h.BaseOffset, leo)
		case h.BaseOffset < next:
			return reject(h.BaseOffset, nil, "base offset %d overlaps the previous batch, which ends at %d", h.BaseOffset, next-1)
		}
		hs = append(hs, h)
		next, prevEpoch = h.NextOffset(), h.PartitionLeaderEpoch
	}
	if err := sc.Err(); err != nil {
		var be *batch.Error
		off := next
		if errors.As(err, &be) && be.BaseOffset >= 0 {
			off = be.BaseOffset
		}
		return reject(off, err, "invalid batch: %v", err)
	}
	if sc.Tail() > 0 {
		return reject(next, nil, "%d bytes of a partial batch at the end", sc.Tail())
	}
	return hs, restart, nil
}

// maybeRoll starts a new segment when the active one is due
// (LogSegment.shouldRoll: size, age by batch timestamps, relative offset
// overflow). The new base is max(first incoming offset, LEO), as
// UnifiedLog.maybeRoll gives a follower.
func (l *Log) maybeRoll(size int, hs []batch.Header) error {
	s := l.active()
	first, last := hs[0], hs[len(hs)-1]
	var maxTs int64 = batch.NoTimestamp
	for _, h := range hs {
		maxTs = max(maxTs, h.MaxTimestamp)
	}
	waited := l.opts.Now().Sub(s.created)
	if s.firstTs >= 0 {
		waited = time.Duration(maxTs-s.firstTs) * time.Millisecond
	}
	due := s.size() > l.opts.SegmentBytes-int64(size) ||
		(!s.empty() && waited > l.opts.SegmentAge) ||
		!s.canHold(last.LastOffset())
	if !due {
		return nil
	}
	base := max(first.BaseOffset, l.leoLocked())
	if s.empty() {
		if s.base == base {
			return nil
		}
		// An empty active segment whose base cannot index the batch:
		// replace it rather than leave an empty sealed segment behind.
		if err := s.remove(); err != nil {
			return l.fail(err)
		}
		l.segs = l.segs[:len(l.segs)-1]
	} else if err := s.seal(); err != nil {
		return l.fail(fmt.Errorf("rolling %s: %w", l.tp(), err))
	}
	floor := s.lastEpoch
	if s.empty() {
		floor = s.epochFloor
	}
	ns, err := createSegment(l.fsys, l.dir, base, l.opts.IndexIntervalBytes, l.opts.Now())
	if err != nil {
		return l.fail(fmt.Errorf("rolling %s: %w", l.tp(), err))
	}
	ns.epochFloor, ns.lastEpoch = floor, floor
	l.segs = append(l.segs, ns)
	l.dirty = false
	return nil
}

func (l *Log) maybeFlush() error {
	switch l.opts.Flush {
	case FlushEveryAppend:
		return l.flushLocked()
	case FlushInterval:
		if l.opts.Now().Sub(l.lastFlush) >= l.opts.FlushInterval {
			return l.flushLocked()
		}
	}
	return nil
}

// Flush fsyncs what was appended since the last flush.
func (l *Log) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	return l.flushLocked()
}

func (l *Log) flushLocked() error {
	if !l.dirty {
		return nil
	}
	if err := l.active().sync(); err != nil {
		return l.fail(fmt.Errorf("flushing %s: %w", l.tp(), err))
	}
	l.dirty = false
	l.lastFlush = l.opts.Now()
	if l.lastFlush.Sub(l.lastRecoveryPoint) >= time.Second {
		if err := l.writeRecoveryPoint(l.active().recoveryPoint()); err != nil {
			return l.fail(fmt.Errorf("flushing %s: %w", l.tp(), err))
		}
	}
	return nil
}

func (l *Log) writeEpochs(c Epochs) error {
	if err := writeFileAtomic(l.fsys, l.dir, EpochCheckpointFile, formatEpochCheckpoint(c.entries)); err != nil {
		return fmt.Errorf("%s: %w", l.tp(), err)
	}
	l.epochs = c
	return nil
}

// Read returns whole batches starting with the one that holds offset (or
// the first after it, across a compaction gap), at most maxBytes of them
// but always at least one, all from one segment (as LogSegment.read with
// minOneMessage). It returns nil at the log end. Every returned batch has
// passed its CRC check; a batch that fails it is a *CorruptionError.
func (l *Log) Read(offset int64, maxBytes int) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usable(); err != nil {
		return nil, err
	}
	leo := l.leoLocked()
	if offset < l.logStart || offset > leo {
		return nil, fmt.Errorf("reading %s at %d (log holds %d..%d): %w", l.tp(), offset, l.logStart, leo, ErrOffsetOutOfRange)
	}
	i, _ := slices.BinarySearchFunc(l.segs, offset, func(s *segment, off int64) int {
		if s.base <= off {
			return -1
		}
		return 1
	})
	for i = max(i-1, 0); i < len(l.segs); i++ {
		s := l.segs[i]
		pos, h, found, err := s.findPosition(offset)
		if err != nil {
			return nil, l.corruption(s, pos, -1, err)
		}
		if !found {
			continue
		}
		n := min(max(int64(maxBytes), int64(h.Size())), s.size()-pos)
		buf := make([]byte, n)
		if _, err := s.log.ReadAt(buf, pos); err != nil {
			return nil, fmt.Errorf("reading %s at %d: %w", s.path(logSuffix), pos, err)
		}
		whole, err := batch.Whole(buf)
		if len(whole) == 0 && err != nil {
			return nil, l.corruption(s, pos, h.BaseOffset, err)
		}
		return whole, nil
	}
	return nil, nil
}

func (l *Log) corruption(s *segment, pos, offset int64, err error) *CorruptionError {
	var be *batch.Error
	if errors.As(err, &be) {
		pos, offset = int64(be.Pos), be.BaseOffset
		if pos < 0 {
			pos = 0
		}
	}
	return &CorruptionError{Topic: l.topic, Partition: l.partition, Segment: s.path(logSuffix), Position: pos, Offset: offset, Err: err}
}

// TruncateTo removes every batch that holds an offset >= offset and cuts
// the epoch cache to the new end (UnifiedLog.truncateTo). Whole batches
// go: when offset falls inside a batch the log ends before that batch, so
// the new LEO is <= offset. At or past the LEO no batch goes, but the
// cache is still cut at the LEO (KAFKA-10706). Below the log start it is
// TruncateFullyAndStartAt(offset), as in Kafka.
//
// Order of durable steps: the intent file (atomic), then the segments
// (later ones deleted, the one holding offset cut and fsynced, directory
// fsynced), then leader-epoch-checkpoint (atomic), then the intent is
// removed. A crash anywhere in between is finished by Open, so truncated
// batches and epochs never come back. Save them first with SaveLost if
// they must be kept.
func (l *Log) TruncateTo(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	leo := l.leoLocked()
	if offset >= leo {
		if c := l.epochs.TruncateFromEnd(leo); !c.Equal(l.epochs) {
			if err := l.writeEpochs(c); err != nil {
				return l.fail(err)
			}
		}
		return nil
	}
	if offset < l.logStart {
		return l.truncateFullyWithIntent(offset)
	}
	if err := writeFileAtomic(l.fsys, l.dir, intentName, formatIntent(intent{offset: offset})); err != nil {
		return fmt.Errorf("truncating %s to %d: %w", l.tp(), offset, err)
	}
	if err := l.truncateSegments(offset); err != nil {
		return l.fail(fmt.Errorf("truncating %s to %d: %w", l.tp(), offset, err))
	}
	if err := l.finishTruncation(); err != nil {
		return l.fail(fmt.Errorf("truncating %s to %d: %w", l.tp(), offset, err))
	}
	return nil
}

// finishTruncation cuts the epoch cache to the LEO, writes it, and removes
// the intent: the last two durable steps of a truncation.
func (l *Log) finishTruncation() error {
	if c := l.epochs.TruncateFromEnd(l.leoLocked()); !c.Equal(l.epochs) {
		if err := l.writeEpochs(c); err != nil {
			return err
		}
	}
	return removeFileSynced(l.fsys, l.dir, intentName)
}

// truncateSegments drops every batch holding an offset >= offset from the
// segments. It is idempotent, so Open can redo it from the intent.
func (l *Log) truncateSegments(offset int64) error {
	i := 0
	for j, s := range l.segs {
		if s.base < offset {
			i = j
		}
	}
	for _, s := range l.segs[i+1:] {
		if err := s.remove(); err != nil {
			return err
		}
	}
	l.segs = l.segs[:i+1]
	s := l.segs[i]
	pos, _, found, err := s.findPosition(offset)
	var be *batch.Error
	if err != nil && !errors.As(err, &be) {
		return err
	}
	// A header that does not parse before offset is a torn tail (only
	// possible when Open redoes a truncation): cut there too.
	if found || err != nil || s.sealed {
		if err := s.truncateAt(pos); err != nil {
			return err
		}
	}
	if err := s.sync(); err != nil {
		return err
	}
	l.dirty = false
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return fmt.Errorf("syncing directory %s: %w", l.dir, err)
	}
	// Before the intent goes: the old point may lie past the cut, and new
	// bytes written there later are not durable.
	return l.writeRecoveryPoint(s.recoveryPoint())
}

// TruncateFullyAndStartAt deletes every segment and the epoch cache and
// restarts the log empty at offset (UnifiedLog.truncateFullyAndStartAt):
// the answer to a leader whose log starts above our end. Durable steps as
// TruncateTo: intent, segments, log start, checkpoint, intent removed.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	return l.truncateFullyWithIntent(offset)
}

func (l *Log) truncateFullyWithIntent(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("truncating %s fully: negative start offset %d", l.tp(), offset)
	}
	if err := writeFileAtomic(l.fsys, l.dir, intentName, formatIntent(intent{full: true, offset: offset})); err != nil {
		return fmt.Errorf("truncating %s fully to start at %d: %w", l.tp(), offset, err)
	}
	if err := l.truncateFully(offset); err != nil {
		return l.fail(fmt.Errorf("truncating %s fully to start at %d: %w", l.tp(), offset, err))
	}
	return nil
}

// truncateFully is idempotent; Open redoes it from a "full" intent.
func (l *Log) truncateFully(offset int64) error {
	for _, s := range l.segs {
		if err := s.remove(); err != nil {
			return err
		}
	}
	l.segs = nil
	s, err := createSegment(l.fsys, l.dir, offset, l.opts.IndexIntervalBytes, l.opts.Now())
	if err != nil {
		return err
	}
	l.segs = []*segment{s}
	l.dirty = false
	if err := l.writeRecoveryPoint(s.recoveryPoint()); err != nil {
		return err
	}
	if err := writeFileAtomic(l.fsys, l.dir, LogStartFile, formatLogStart(offset)); err != nil {
		return err
	}
	l.logStart = offset
	if err := l.writeEpochs(Epochs{}); err != nil {
		return err
	}
	return removeFileSynced(l.fsys, l.dir, intentName)
}

// DeleteBefore moves the log start offset up to offset (at most the LEO),
// deletes the segments that then lie wholly below it and cuts the epoch
// cache from the start (UnifiedLog.maybeIncrementLogStartOffset +
// deleteOldSegments). The new start is written first, so a crash before
// the deletions only leaves segments Open deletes.
func (l *Log) DeleteBefore(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	return l.deleteBefore(offset)
}

func (l *Log) deleteBefore(offset int64) error {
	if offset <= l.logStart {
		return nil
	}
	if leo := l.leoLocked(); offset > leo {
		return fmt.Errorf("moving the start of %s to %d past its end %d: %w", l.tp(), offset, leo, ErrOffsetOutOfRange)
	}
	if err := writeFileAtomic(l.fsys, l.dir, LogStartFile, formatLogStart(offset)); err != nil {
		return fmt.Errorf("moving the start of %s to %d: %w", l.tp(), offset, err)
	}
	l.logStart = offset
	if c := l.epochs.TruncateFromStart(offset); !c.Equal(l.epochs) {
		if err := l.writeEpochs(c); err != nil {
			return l.fail(err)
		}
	}
	if err := l.deleteSegmentsBelowStart(); err != nil {
		return l.fail(fmt.Errorf("deleting segments of %s below %d: %w", l.tp(), offset, err))
	}
	return nil
}

// deleteSegmentsBelowStart removes segments whose successor starts at or
// below the log start offset. The active segment always stays.
func (l *Log) deleteSegmentsBelowStart() error {
	n := 0
	for n+1 < len(l.segs) && l.segs[n+1].base <= l.logStart {
		n++
	}
	if n == 0 {
		return nil
	}
	for _, s := range l.segs[:n] {
		if err := s.remove(); err != nil {
			return err
		}
	}
	l.segs = slices.Delete(l.segs, 0, n)
	return l.fsys.SyncDir(l.dir)
}

// EnforceRetention deletes the oldest sealed segments that are over the
// size limit or older than the age limit (UnifiedLog.deleteRetentionSizeBreachedSegments
// and deleteRetentionMsBreachedSegments: a prefix of segments, never the
// active one) and moves the log start to the first remaining segment. It
// returns how many segments went.
func (l *Log) EnforceRetention() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return 0, err
	}
	var total int64
	for _, s := range l.segs {
		total += s.size()
	}
	nowMs := l.opts.Now().UnixMilli()
	n := 0
	for ; n+1 < len(l.segs); n++ {
		s := l.segs[n]
		bySize := l.opts.RetentionBytes > 0 && total-s.size() >= l.opts.RetentionBytes
		byAge := l.opts.RetentionAge > 0 && nowMs-l.largestTimestamp(s) > l.opts.RetentionAge.Milliseconds()
		if !bySize && !byAge {
			break
		}
		total -= s.size()
	}
	if n == 0 {
		return 0, nil
	}
	return n, l.deleteBefore(l.segs[n].base)
}

// largestTimestamp is LogSegment.largestTimestamp: the max batch
// timestamp, or the file's modification time when no batch has one.
func (l *Log) largestTimestamp(s *segment) int64 {
	if ts := s.ix.largestTimestamp(); ts >= 0 {
		return ts
	}
	if fi, err := s.log.Stat(); err == nil {
		return fi.ModTime().UnixMilli()
	}
	return l.opts.Now().UnixMilli()
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
	var err error
	if l.failed == nil && len(l.segs) > 0 {
		// The recovery point keeps the index counts from before the
		// close-time time entry, so a reopened segment indexes on exactly
		// as a rebuild from its .log would.
		s := l.active()
		rp := s.recoveryPoint()
		s.ix.seal()
		if werr := s.writeIndexes(); werr != nil {
			err = werr
		} else if serr := s.sync(); serr != nil {
			err = fmt.Errorf("closing %s: %w", l.tp(), serr)
		} else {
			err = l.writeRecoveryPoint(rp)
		}
	}
	return errors.Join(err, l.closeFiles())
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
