package storage

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
)

// ServedEpochFile holds the leader epoch a server of the copy (kfollower
// run --serve) names for the partition (docs/storage-format.md §15).
const ServedEpochFile = "kfollower-served-epoch"

// ServedEpoch is one partition's served leader epoch, persisted in the
// partition directory beside the log, never in leader-epoch-checkpoint:
// that file stays the upstream lineage the batches carry, while the served
// epoch is this copy's own leadership epoch, which also rises on every
// local truncation (so a downstream reader that read what the copy then
// lost is fenced and asks OffsetsForLeaderEpoch, KIP-320).
//
// It only goes up, and a value above 0 is durable before Epoch returns it:
// after a crash the file holds the last such value Epoch returned, or a
// later one whose Raise had not returned yet. 0, the floor a server raises
// every partition to when it opens its log, is not written while no file
// holds an epoch: a missing file reads as -1, and the server raises it to
// 0 again before it serves anything, so no reader ever sees it go down;
// writing it cost a first start-up two fsyncs per partition. One
// goroutine raises it; Epoch is safe beside it from any goroutine.
type ServedEpoch struct {
	fsys   fileSystem
	dir    string
	epoch  atomic.Int32
	onDisk bool // the file holds an epoch (the raiser's)
}

// OpenServedEpoch reads dir's served epoch; without the file it is -1
// (none yet). A file that does not parse is an error: guessing could
// serve an epoch below one already served.
func OpenServedEpoch(dir string) (*ServedEpoch, error) { return openServedEpoch(osFS{}, dir) }

func openServedEpoch(fsys fileSystem, dir string) (*ServedEpoch, error) {
	s := &ServedEpoch{fsys: fsys, dir: dir}
	s.epoch.Store(-1)
	path := filepath.Join(dir, ServedEpochFile)
	data, err := fsys.ReadFile(path)
	switch {
	case isNotExist(err):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	e, err := ParseServedEpoch(data)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w (delete it to serve from the log's latest epoch, bumped)", path, err)
	}
	s.epoch.Store(e)
	s.onDisk = true
	return s, nil
}

// Epoch is the served epoch, -1 before the first Raise.
func (s *ServedEpoch) Epoch() int32 { return s.epoch.Load() }

// Raise makes epoch the served epoch if it is higher, durably (written
// atomically, fsynced) before Epoch returns it, but for 0 while no file
// holds an epoch (ServedEpoch). On error the served epoch is unchanged, in
// memory and on disk.
func (s *ServedEpoch) Raise(epoch int32) error {
	if epoch <= s.epoch.Load() {
		return nil
	}
	if epoch == 0 && !s.onDisk {
		s.epoch.Store(0)
		return nil
	}
	if err := writeFileAtomic(s.fsys, s.dir, ServedEpochFile, formatServedEpoch(epoch)); err != nil {
		return fmt.Errorf("raising the served leader epoch to %d: %w", epoch, err)
	}
	if !s.onDisk {
		// The partition directory's own entry too: a new log's is synced
		// by its first fsync (Log.settle), which may come later.
		if dd := filepath.Dir(s.dir); dd != s.dir {
			if err := s.fsys.SyncDir(dd); err != nil {
				return fmt.Errorf("raising the served leader epoch to %d: syncing %s: %w", epoch, dd, err)
			}
		}
	}
	s.epoch.Store(epoch)
	s.onDisk = true
	return nil
}

// formatServedEpoch / ParseServedEpoch: the framing of Kafka's checkpoint
// files (version 0, one entry), as kfollower-log-start-offset.
func formatServedEpoch(epoch int32) []byte { return fmt.Appendf(nil, "0\n1\n%d\n", epoch) }

// ParseServedEpoch parses kfollower-served-epoch.
func ParseServedEpoch(data []byte) (int32, error) {
	lines := splitLines(string(data))
	if len(lines) != 3 || lines[0] != "0" || lines[1] != "1" {
		return 0, fmt.Errorf("served epoch file %q: bad framing", data)
	}
	n, err := parseJavaInt(lines[2], 32)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("served epoch file %q: bad epoch", data)
	}
	return int32(n), nil
}
