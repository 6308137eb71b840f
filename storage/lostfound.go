package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kfollower/kfollower/wire/batch"
)

// LostFoundDir is where SaveLost puts a partition's removed batches:
// <dataDir>/lost+found/<topic>-<partition>/.
func LostFoundDir(dataDir, topic string, partition int32) string {
	return filepath.Join(dataDir, "lost+found", fmt.Sprintf("%s-%d", topic, partition))
}

// Lost describes batches saved by SaveLost; it is also the content of the
// lost.json file written beside them.
type Lost struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Dir is the directory holding the saved segment and lost.json.
	Dir string `json:"-"`
	// From is the offset asked for; FirstOffset..LastOffset the offsets the
	// saved batches cover; EndOffset the log end when they were saved.
	From        int64 `json:"from"`
	FirstOffset int64 `json:"firstOffset"`
	LastOffset  int64 `json:"lastOffset"`
	EndOffset   int64 `json:"endOffset"`
	Batches     int   `json:"batches"`
	Records     int64 `json:"records"`
	Bytes       int64 `json:"bytes"`
	// Epochs lists the leader epochs of the saved batches, in order.
	Epochs []LostEpoch `json:"epochs"`
	// Segment is the name of the saved .log file (with its .index and
	// .timeindex beside it): a Kafka segment DumpLogSegments can read.
	Segment string    `json:"segment"`
	SavedAt time.Time `json:"savedAt"`
}

// LostEpoch is the part of a lost range written in one leader epoch.
type LostEpoch struct {
	Epoch       int32 `json:"epoch"`
	FirstOffset int64 `json:"firstOffset"`
	LastOffset  int64 `json:"lastOffset"`
	Batches     int   `json:"batches"`
	Records     int64 `json:"records"`
}

// SaveLost copies every batch holding an offset in [from, LEO) into a new
// directory under LostFoundDir, as one Kafka segment (20-digit base-offset
// .log with .index and .timeindex built by the same rules as the log's
// own) plus lost.json, all fsynced, before the caller truncates them away
// (docs/design.md: copy to lost+found, make the truncation durable, fetch
// again). It does not change the log. With nothing at or after from it
// returns a Lost with Batches == 0 and writes nothing.
//
// Each call gets its own directory, "<first>-<end>" (20-digit offsets) or
// that name with ".1", ".2"... when the same range was lost before.
func (l *Log) SaveLost(from int64) (Lost, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return Lost{}, err
	}
	leo := l.leoLocked()
	lost := Lost{Topic: l.topic, Partition: l.partition, From: from, EndOffset: leo, FirstOffset: -1, LastOffset: -1}
	from = max(from, l.logStart)
	if from >= leo {
		return lost, nil
	}
	// Find the first batch to save.
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
	name := fmt.Sprintf("%020d-%020d", first.BaseOffset, leo)
	dir := filepath.Join(parent, name)
	for n := 1; ; n++ {
		if _, err := l.fsys.Stat(dir); isNotExist(err) {
			break
		}
		dir = filepath.Join(parent, fmt.Sprintf("%s.%d", name, n))
	}
	lost.Dir = dir
	if err := mkdirAllSynced(l.fsys, dir); err != nil {
		return Lost{}, fmt.Errorf("saving lost batches of %s: %w", l.tp(), err)
	}
	out, err := createSegment(l.fsys, dir, first.BaseOffset, l.opts.IndexIntervalBytes, l.opts.Now())
	if err != nil {
		return Lost{}, fmt.Errorf("saving lost batches of %s: %w", l.tp(), err)
	}
	defer out.close()
	lost.Segment = segmentName(first.BaseOffset, logSuffix)
	copyBatch := func(h batch.Header, _ int64, b []byte) error {
		if !out.canHold(h.LastOffset()) {
			return fmt.Errorf("offset %d too far from %d for one segment", h.LastOffset(), out.base)
		}
		if err := out.append(b, []batch.Header{h}); err != nil {
			return err
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
		if errors.As(err, &be) || (err == nil && end != s.size()) {
			return Lost{}, l.corruption(s, end, -1, err)
		}
		if err != nil {
			return Lost{}, fmt.Errorf("saving lost batches of %s to %s: %w", l.tp(), dir, err)
		}
	}
	if err := out.seal(); err != nil {
		return Lost{}, fmt.Errorf("saving lost batches of %s to %s: %w", l.tp(), dir, err)
	}
	lost.SavedAt = l.opts.Now().UTC()
	js, err := json.MarshalIndent(lost, "", "  ")
	if err != nil {
		return Lost{}, err
	}
	if err := writeFileAtomic(l.fsys, dir, "lost.json", append(js, '\n')); err != nil {
		return Lost{}, fmt.Errorf("saving lost batches of %s: %w", l.tp(), err)
	}
	return lost, nil
}

// ReadLost reads a lost.json written by SaveLost.
func ReadLost(dir string) (Lost, error) {
	data, err := os.ReadFile(filepath.Join(dir, "lost.json"))
	if err != nil {
		return Lost{}, err
	}
	var lost Lost
	if err := json.Unmarshal(data, &lost); err != nil {
		return Lost{}, fmt.Errorf("reading %s: %w", filepath.Join(dir, "lost.json"), err)
	}
	lost.Dir = dir
	return lost, nil
}
