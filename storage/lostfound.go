package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kfollower/kfollower/wire/batch"
)

// LostFoundDir is where a partition's removed batches go:
// <dataDir>/lost+found/<topic>-<partition>/, one event directory per loss.
func LostFoundDir(dataDir, topic string, partition int32) string {
	return filepath.Join(dataDir, "lost+found", fmt.Sprintf("%s-%d", topic, partition))
}

// The causes of a loss, as lost.json's cause field holds them. The first
// three are the names follower.Cause gives what revealed committed data
// the cluster lost; storage takes the cause as a string so that it does
// not import follower, and keeps any token of [a-z0-9-] as given.
const (
	// CauseOffsetsForLeaderEpoch: an OffsetsForLeaderEpoch answer
	// (KIP-101, KIP-279).
	CauseOffsetsForLeaderEpoch = "offsets-for-leader-epoch"
	// CauseDivergingEpoch: a Fetch answer's DivergingEpoch (KIP-595).
	CauseDivergingEpoch = "diverging-epoch"
	// CauseOutOfRangeHigh: OFFSET_OUT_OF_RANGE with the leader's log end
	// below ours, and no epoch information to do better
	// (AbstractFetcherThread.fetchOffsetAndTruncate).
	CauseOutOfRangeHigh = "out-of-range-high"
	// CauseDiscardedOnGap: not a loss by the cluster: --discard-on-gap
	// dropped our own history when the leader's log start had passed our
	// log end, as Kafka's truncateFullyAndStartAt does.
	CauseDiscardedOnGap = "discarded-on-gap"
)

// validCause is a cause token: what TruncateWithLost accepts.
func validCause(c string) bool {
	if c == "" || len(c) > 64 {
		return false
	}
	return strings.Trim(c, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

// Lost is one lost+found event: the batches one truncation removed, and
// the content of the lost.json beside them.
type Lost struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// ID names the event: its directory's name under LostFoundDir,
	// "<first>-<end>" (20-digit offsets), with ".1", ".2", ... for a later
	// loss of the same range. It is unique within the partition and the
	// same across restarts, so a report repeated after a crash
	// (UnreportedLosses) can be told from a new loss.
	ID string `json:"-"`
	// Dir is the directory holding the saved segments and lost.json.
	Dir string `json:"-"`
	// Cause says why the batches were removed (the Cause constants). It is
	// empty in files written by SaveLost, or by kfollower before the field.
	Cause string `json:"cause,omitempty"`
	// From is the first offset lost: the truncation's offset, or the log
	// start when the truncation went below it or was full. It is the loss
	// event's From (follower's MoveToLostFound.From and TruncationEvent.From
	// or GapEvent.DiscardedFrom), so [From, EndOffset) is the loss.
	From int64 `json:"from"`
	// FirstOffset and LastOffset are what the saved batches cover. Whole
	// batches are saved, so when the cut falls inside a batch FirstOffset is
	// below From: that batch's records below From were not lost (the leader
	// has them). After a compaction gap FirstOffset can lie above From.
	FirstOffset int64 `json:"firstOffset"`
	LastOffset  int64 `json:"lastOffset"`
	// EndOffset is the log end when saved.
	EndOffset int64 `json:"endOffset"`
	// Truncation is the truncation that removed the batches, with the
	// leader epochs the caller gave; nil in SaveLost's files.
	Truncation *Truncation `json:"truncation,omitempty"`
	Batches    int         `json:"batches"`
	Records    int64       `json:"records"`
	Bytes      int64       `json:"bytes"`
	// Epochs lists the leader epochs of the saved batches, in order.
	Epochs []LostEpoch `json:"epochs"`
	// Segments are the saved .log files, in offset order, each with its
	// .index and .timeindex: Kafka segments DumpLogSegments can read. A
	// range rolls into a new segment as the log itself does (size, or
	// offsets more than 2^31-1 past the base). Segment is the first of them,
	// the only one older readers know.
	Segment  string    `json:"segment"`
	Segments []string  `json:"segments"`
	SavedAt  time.Time `json:"savedAt"`
}

// ClusterLoss reports whether the batches are committed data the cluster
// lost, as the follower's reconciliation finds it (offsets-for-leader-epoch,
// diverging-epoch, out-of-range-high), rather than history kfollower
// dropped on purpose (discarded-on-gap). `lost replay` replays only these
// unless told otherwise. A file without a cause (SaveLost, or an older
// kfollower) counts as cluster loss, the only reason those kept batches
// unless --discard-on-gap was set; an unknown cause does not.
func (l Lost) ClusterLoss() bool {
	switch l.Cause {
	case "", CauseOffsetsForLeaderEpoch, CauseDivergingEpoch, CauseOutOfRangeHigh:
		return true
	}
	return false
}

// LostEpoch is the part of a lost range written in one leader epoch.
type LostEpoch struct {
	Epoch       int32 `json:"epoch"`
	FirstOffset int64 `json:"firstOffset"`
	LastOffset  int64 `json:"lastOffset"`
	Batches     int   `json:"batches"`
	Records     int64 `json:"records"`
}

// IsLostEventName reports whether name is the name of a complete
// lost+found event directory, "<first>-<end>" or "<first>-<end>.<n>"
// (20-digit offsets). A save in progress, or one a crash interrupted, is
// "<event>.tmp" until it is complete and renamed: readers of lost+found
// skip every other name.
func IsLostEventName(name string) bool {
	rng, n, hasN := strings.Cut(name, ".")
	first, end, ok := strings.Cut(rng, "-")
	digits := func(s string) bool { return len(s) == 20 && strings.Trim(s, "0123456789") == "" }
	if !ok || !digits(first) || !digits(end) {
		return false
	}
	if hasN {
		v, err := strconv.Atoi(n)
		return err == nil && v > 0 && strconv.Itoa(v) == n
	}
	return true
}

// SaveLost copies every batch holding an offset in [from, LEO) into a new
// event directory under LostFoundDir, complete and fsynced, and returns
// it. It does not change the log, and records no loss to report. With
// nothing at or after from it returns a Lost with Batches == 0 and writes
// nothing.
//
// It is kept for the driver until it moves to TruncateWithLost, which
// saves, truncates and records the loss as one crash-atomic unit: a crash
// between SaveLost and the truncation after it leaves a copy of batches
// that are still in the log, and the next attempt saves them again.
func (l *Log) SaveLost(from int64) (Lost, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return Lost{}, err
	}
	if err := l.unstage(); err != nil { // stage.go
		return Lost{}, err
	}
	lost, err := l.saveLost(from, nil)
	if err != nil || lost.Batches == 0 {
		return lost, err
	}
	if err := l.commitLost(lost.ID); err != nil {
		return Lost{}, fmt.Errorf("saving lost batches of %s: %w", l.tp(), err)
	}
	return lost, nil
}

// saveLost copies every batch holding an offset >= from, at or after the
// log start, into a new event directory, complete and durable but under
// its temporary name <ID>.tmp: the segments (each sealed and fsynced),
// then lost.json, then the directory and its parent fsynced. Nothing
// refers to it yet, so a crash leaves an orphan that Open deletes, while
// the batches are still in the log. Batches == 0 when nothing is at or
// after from; then nothing is written.
//
// A batch of our own segments that fails its checks is a
// *CorruptionError naming the segment and the offset; any failure removes
// the partial copy.
func (l *Log) saveLost(from int64, t *Truncation) (lost Lost, err error) {
	leo := l.leoLocked()
	from = max(from, l.logStart)
	lost = Lost{Topic: l.topic, Partition: l.partition, From: from, FirstOffset: -1, LastOffset: -1, EndOffset: leo, Truncation: t}
	if t != nil {
		lost.Cause = t.Cause
	}
	if from >= leo {
		return lost, nil
	}
	si, pos := -1, int64(0)
	var first batch.Header
	for i, s := range l.segs {
		if i+1 < len(l.segs) && l.segs[i+1].base <= from {
			continue
		}
		p, h, found, err := s.findPosition(from)
		if err != nil {
			return Lost{}, l.corruption(s, p, -1, err)
		}
		if found {
			si, pos, first = i, p, h
			break
		}
	}
	if si < 0 {
		return lost, nil
	}
	lost.FirstOffset = first.BaseOffset
	parent := LostFoundDir(l.dataDir, l.topic, l.partition)
	if err := mkdirAllSynced(l.fsys, parent); err != nil {
		return Lost{}, fmt.Errorf("saving lost batches of %s: %w", l.tp(), err)
	}
	id, err := l.newLostID(parent, first.BaseOffset, leo)
	if err != nil {
		return Lost{}, err
	}
	tmp := filepath.Join(parent, id+tmpSuffix)
	fail := func(err error) (Lost, error) {
		if rerr := removeDirAll(l.fsys, tmp); rerr != nil {
			l.lg.Warn("removing a failed lost+found save", "dir", tmp, "err", rerr)
		}
		return Lost{}, err
	}
	// A stale attempt under the same name (Open normally removes those).
	if err := removeDirAll(l.fsys, tmp); err != nil {
		return Lost{}, fmt.Errorf("saving lost batches of %s: %w", l.tp(), err)
	}
	if err := l.fsys.MkdirAll(tmp); err != nil {
		return fail(fmt.Errorf("saving lost batches of %s: %w", l.tp(), err))
	}
	lost.ID, lost.Dir = id, filepath.Join(parent, id)

	var out *segment
	closeOut := func() {
		if out != nil {
			out.close()
			out = nil
		}
	}
	defer closeOut()
	// roll seals the current copy segment and starts one at base, where
	// the log itself would roll: before the size limit, or when the next
	// batch's offsets do not fit an index entry (LogSegment.shouldRoll).
	roll := func(base int64) error {
		if out != nil {
			if err := out.seal(); err != nil {
				return err
			}
			closeOut()
		}
		s, err := createSegment(l.fsys, tmp, base, l.opts.IndexIntervalBytes, l.opts.Now(), true)
		if err != nil {
			return err
		}
		out = s
		lost.Segments = append(lost.Segments, segmentName(base, logSuffix))
		return nil
	}
	errCopy := errors.New("copy")
	var copyErr error
	copyBatch := func(h batch.Header, _ int64, b []byte) error {
		if out == nil || !out.canHold(h.LastOffset()) || (!out.empty() && out.size() > l.opts.SegmentBytes-int64(len(b))) {
			if err := roll(h.BaseOffset); err != nil {
				copyErr = err
				return errCopy
			}
		}
		if err := out.append(b, []batch.Header{h}); err != nil {
			copyErr = err
			return errCopy
		}
		lost.Batches++
		lost.Records += int64(h.RecordCount)
		lost.Bytes += int64(h.Size())
		lost.LastOffset = h.LastOffset()
		if n := len(lost.Epochs); n > 0 && lost.Epochs[n-1].Epoch == h.PartitionLeaderEpoch {
			e := &lost.Epochs[n-1]
			e.LastOffset, e.Batches, e.Records = h.LastOffset(), e.Batches+1, e.Records+int64(h.RecordCount)
		} else {
			lost.Epochs = append(lost.Epochs, LostEpoch{h.PartitionLeaderEpoch, h.BaseOffset, h.LastOffset(), 1, int64(h.RecordCount)})
		}
		return nil
	}
	for i := si; i < len(l.segs); i++ {
		s := l.segs[i]
		start := int64(0)
		if i == si {
			start = pos
		}
		end, err := scanFile(s.log, start, s.size(), true, copyBatch)
		var be *batch.Error
		switch {
		case errors.Is(err, errCopy):
			return fail(fmt.Errorf("saving lost batches of %s to %s: %w", l.tp(), tmp, copyErr))
		case errors.As(err, &be) || (err == nil && end != s.size()):
			// Our own segment, not a broker's answer: the caller must stop,
			// not retry (docs/storage-format.md §12).
			return fail(l.corruption(s, end, -1, err))
		case err != nil:
			return fail(fmt.Errorf("saving lost batches of %s: %w", l.tp(), err))
		}
	}
	if err := out.seal(); err != nil {
		return fail(fmt.Errorf("saving lost batches of %s to %s: %w", l.tp(), tmp, err))
	}
	closeOut()
	lost.Segment = lost.Segments[0]
	lost.SavedAt = l.opts.Now().UTC()
	js, err := json.MarshalIndent(lost, "", "  ")
	if err != nil {
		return fail(err)
	}
	// lost.json last: writeFileAtomic fsyncs it and the directory.
	if err := writeFileAtomic(l.fsys, tmp, lostJSON, append(js, '\n')); err != nil {
		return fail(fmt.Errorf("saving lost batches of %s: %w", l.tp(), err))
	}
	// The temporary directory's own entry, so that an intent naming it
	// never outlives it.
	if err := l.fsys.SyncDir(parent); err != nil {
		return fail(fmt.Errorf("saving lost batches of %s: syncing directory %s: %w", l.tp(), parent, err))
	}
	return lost, nil
}

const lostJSON = "lost.json"

// newLostID picks the event name for [first, end): "<first>-<end>", or
// with ".n" when a complete event of that range exists (a later loss at
// offsets the cluster reused). Only a name that does not exist is free:
// any other Stat error is returned, never taken to mean "try the next".
func (l *Log) newLostID(parent string, first, end int64) (string, error) {
	base := fmt.Sprintf("%020d-%020d", first, end)
	for n := 0; ; n++ {
		id := base
		if n > 0 {
			id = fmt.Sprintf("%s.%d", base, n)
		}
		_, err := l.fsys.Stat(filepath.Join(parent, id))
		if isNotExist(err) {
			return id, nil
		}
		if err != nil {
			return "", fmt.Errorf("saving lost batches of %s: %w", l.tp(), err)
		}
	}
}

// commitLost puts the event directory id in place: its temporary
// directory renamed, and the parent fsynced. It is idempotent, so Open
// can redo it from the intent; the parent is fsynced even when the rename
// is done already, since Open may follow a failure in the same boot.
func (l *Log) commitLost(id string) error {
	parent := LostFoundDir(l.dataDir, l.topic, l.partition)
	final := filepath.Join(parent, id)
	tmp := final + tmpSuffix
	if _, err := l.fsys.Stat(final); isNotExist(err) {
		if _, err := l.fsys.Stat(tmp); err != nil {
			if isNotExist(err) {
				return fmt.Errorf("lost+found event %s is missing: neither %s nor its temporary directory exists", id, final)
			}
			return err
		}
		if err := l.fsys.Rename(tmp, final); err != nil {
			return fmt.Errorf("renaming %s: %w", tmp, err)
		}
	} else if err != nil {
		return err
	}
	if err := l.fsys.SyncDir(parent); err != nil {
		return fmt.Errorf("syncing directory %s: %w", parent, err)
	}
	return nil
}

// removeLostOrphans deletes the temporary event directories a crash left
// in this partition's lost+found (saves that never reached their intent:
// the log still holds their batches).
func (l *Log) removeLostOrphans() error {
	parent := LostFoundDir(l.dataDir, l.topic, l.partition)
	ents, err := l.fsys.ReadDir(parent)
	if isNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing %s: %w", parent, err)
	}
	removed := false
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), tmpSuffix) {
			continue
		}
		l.lg.Warn("removing an interrupted lost+found save", "dir", filepath.Join(parent, e.Name()))
		if err := removeDirAll(l.fsys, filepath.Join(parent, e.Name())); err != nil {
			return err
		}
		removed = true
	}
	if removed {
		return l.fsys.SyncDir(parent)
	}
	return nil
}

// removeDirAll removes a flat directory and the files in it, if present.
func removeDirAll(fsys fileSystem, dir string) error {
	ents, err := fsys.ReadDir(dir)
	if isNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	for _, e := range ents {
		if err := fsys.Remove(filepath.Join(dir, e.Name())); err != nil && !isNotExist(err) {
			return fmt.Errorf("removing %s: %w", filepath.Join(dir, e.Name()), err)
		}
	}
	if err := fsys.Remove(dir); err != nil && !isNotExist(err) {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	return nil
}

// ReadLost reads the lost.json of an event directory.
func ReadLost(dir string) (Lost, error) { return readLost(osFS{}, dir) }

func readLost(fsys fileSystem, dir string) (Lost, error) {
	path := filepath.Join(dir, lostJSON)
	data, err := fsys.ReadFile(path)
	if err != nil {
		return Lost{}, err
	}
	var lost Lost
	if err := json.Unmarshal(data, &lost); err != nil {
		return Lost{}, fmt.Errorf("reading %s: %w", path, err)
	}
	lost.ID, lost.Dir = filepath.Base(dir), dir
	if len(lost.Segments) == 0 && lost.Segment != "" {
		lost.Segments = []string{lost.Segment} // written before segments existed
	}
	return lost, nil
}
