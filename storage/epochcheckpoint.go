package storage

import (
	"bytes"
	"errors"
	"fmt"
)

// EpochCheckpointFile is Kafka's name for the leader-epoch cache on disk
// (LeaderEpochCheckpointFile.newFile).
const EpochCheckpointFile = "leader-epoch-checkpoint"

const checkpointVersion = 0 // LeaderEpochCheckpointFile.CURRENT_VERSION

// formatEpochCheckpoint renders entries as Kafka's CheckpointFile writes a
// leader-epoch-checkpoint (LeaderEpochCheckpointFile): version line, count
// line, then "<epoch> <startOffset>" per line, each ended by "\n"
// (BufferedWriter.newLine on Linux).
func formatEpochCheckpoint(entries []EpochEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", checkpointVersion, len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b.Bytes()
}

// ParseEpochCheckpoint reads a leader-epoch-checkpoint the way
// CheckpointFile.read does: an empty file, or one with only the version
// line, is no entries; the version must be 0; each entry line splits on
// whitespace into exactly two integers; the count must match. It does not
// check monotonicity: like Kafka's cache constructor, the caller replays
// the entries through Assign (NewEpochs). Exported, with the other parsers
// here, for read-only tools that must not Open a log another process
// writes (package audit).
func ParseEpochCheckpoint(data []byte) ([]EpochEntry, error) {
	lines := splitLines(string(data))
	if len(lines) == 0 {
		return nil, nil
	}
	v, err := parseJavaInt(lines[0], 32)
	if err != nil {
		return nil, fmt.Errorf("version line %q: %w", lines[0], err)
	}
	if v != checkpointVersion {
		return nil, fmt.Errorf("unrecognised version %d", v)
	}
	if len(lines) == 1 {
		return nil, nil
	}
	n, err := parseJavaInt(lines[1], 32)
	if err != nil {
		return nil, fmt.Errorf("count line %q: %w", lines[1], err)
	}
	entries := make([]EpochEntry, 0, min(max(n, 0), int64(len(lines))))
	for _, l := range lines[2:] {
		f := splitJavaWhitespace(l)
		if len(f) != 2 {
			return nil, fmt.Errorf("malformed line %q", l)
		}
		ep, err1 := parseJavaInt(f[0], 32)
		off, err2 := parseJavaInt(f[1], 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("malformed line %q: %w", l, err)
		}
		entries = append(entries, EpochEntry{int32(ep), off})
	}
	if int64(len(entries)) != n {
		return nil, fmt.Errorf("expected %d entries but found %d", n, len(entries))
	}
	return entries, nil
}
