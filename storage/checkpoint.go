package storage

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// File names inside a partition directory. The first two are Kafka's; the
// kfollower-* files are ours and Kafka's loader ignores them (LogLoader only
// acts on .log/.index/.timeindex/.txnindex/.snapshot and the transient
// .deleted/.cleaned/.swap suffixes).
const (
	EpochCheckpointFile   = "leader-epoch-checkpoint"
	PartitionMetadataFile = "partition.metadata"
	intentName            = "kfollower-truncation-intent"
	LogStartFile          = "kfollower-log-start-offset"
	recoveryPointName     = "kfollower-recovery-point"
	tmpSuffix             = ".tmp"
)

const checkpointVersion = 0 // LeaderEpochCheckpointFile.CURRENT_VERSION

// formatEpochCheckpoint renders entries as Kafka's CheckpointFile writes a
// leader-epoch-checkpoint (kafka-internals.md §5.4): version line, count
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

// splitLines splits as BufferedReader.readLine does: "\n", "\r" and "\r\n"
// end a line, and a final line without a terminator still counts.
func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
	return out
}

// splitJavaWhitespace mimics Pattern.compile("\\s+").split(line): leading
// whitespace yields an empty first field (and so a malformed line);
// trailing empty fields are dropped.
func splitJavaWhitespace(l string) []string {
	isWS := func(r byte) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\x0b' || r == '\f' || r == '\r' }
	var out []string
	start := 0
	for i := 0; i < len(l); {
		if !isWS(l[i]) {
			i++
			continue
		}
		out = append(out, l[start:i])
		for i < len(l) && isWS(l[i]) {
			i++
		}
		start = i
	}
	out = append(out, l[start:])
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// parseJavaInt accepts what Integer.parseInt / Long.parseLong accept for
// ASCII input: an optional sign and decimal digits, nothing else.
func parseJavaInt(s string, bits int) (int64, error) {
	digits := strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if len(s)-len(digits) > 1 || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, fmt.Errorf("not a number: %q", s)
	}
	return strconv.ParseInt(s, 10, bits)
}

// TopicID is a Kafka topic id (a 16-byte UUID).
type TopicID [16]byte

// String renders the id as Kafka's Uuid.toString does: URL-safe base64
// without padding, 22 characters.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// ParseTopicID parses Uuid.toString's form.
func ParseTopicID(s string) (TopicID, error) {
	var id TopicID
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		return id, fmt.Errorf("topic id %q: not 22 characters of URL-safe base64", s)
	}
	copy(id[:], b)
	return id, nil
}

// formatPartitionMetadata is PartitionMetadata.encode: exactly
// "version: 0\ntopic_id: <uuid>", no trailing newline (§5.6).
func formatPartitionMetadata(id TopicID) []byte {
	return []byte("version: 0\ntopic_id: " + id.String())
}

// ParsePartitionMetadata reads partition.metadata as
// PartitionMetadataReadBuffer does: "version: N" (N >= 0), then
// "topic_id: <uuid>", which must not be the zero UUID.
func ParsePartitionMetadata(data []byte) (TopicID, error) {
	lines := splitLines(string(data))
	if len(lines) < 2 {
		return TopicID{}, errors.New("partition.metadata: fewer than two lines")
	}
	v, ok := strings.CutPrefix(lines[0], "version: ")
	if !ok {
		return TopicID{}, fmt.Errorf("partition.metadata: bad version line %q", lines[0])
	}
	if n, err := parseJavaInt(v, 32); err != nil || n < 0 {
		return TopicID{}, fmt.Errorf("partition.metadata: bad version %q", v)
	}
	s, ok := strings.CutPrefix(lines[1], "topic_id: ")
	if !ok {
		return TopicID{}, fmt.Errorf("partition.metadata: bad topic id line %q", lines[1])
	}
	id, err := ParseTopicID(s)
	if err != nil {
		return TopicID{}, fmt.Errorf("partition.metadata: %w", err)
	}
	if id == (TopicID{}) {
		return TopicID{}, errors.New("partition.metadata: zero topic id")
	}
	return id, nil
}

// writeFileAtomic replaces dir/name with data so that after a crash the
// file is either the old or the new content, never a mix: write
// name.tmp, fsync it, close, rename over name, fsync dir. This is Kafka's
// CheckpointFile + Utils.atomicMoveWithFallback and nats'
// writeAtomicallyWithTemp; the tmp file is removed on failure.
func writeFileAtomic(fsys fileSystem, dir, name string, data []byte) (err error) {
	path := filepath.Join(dir, name)
	tmp := path + tmpSuffix
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = fsys.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp, err)
	}
	if err = fsys.Rename(tmp, path); err != nil {
		return fmt.Errorf("renaming %s: %w", tmp, err)
	}
	if err = fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// removeFileSynced removes dir/name (if present) and fsyncs dir.
func removeFileSynced(fsys fileSystem, dir, name string) error {
	path := filepath.Join(dir, name)
	if err := fsys.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// intent is a truncation recorded durably before any segment is touched
// (go-style-anchors.md §7 item 9). Open finishes it before anything else.
// Its file is "0\n<kind> <offset>\n", kind "to" (TruncateTo) or "full"
// (TruncateFullyAndStartAt).
type intent struct {
	full   bool
	offset int64
}

func formatIntent(in intent) []byte {
	kind := "to"
	if in.full {
		kind = "full"
	}
	return fmt.Appendf(nil, "0\n%s %d\n", kind, in.offset)
}

func parseIntent(data []byte) (intent, error) {
	lines := splitLines(string(data))
	if len(lines) != 2 || lines[0] != "0" {
		return intent{}, fmt.Errorf("truncation intent %q: want version 0 and one line", data)
	}
	kind, off, ok := strings.Cut(lines[1], " ")
	n, err := parseJavaInt(off, 64)
	if !ok || err != nil || n < 0 || (kind != "to" && kind != "full") {
		return intent{}, fmt.Errorf("truncation intent %q: bad line", data)
	}
	return intent{full: kind == "full", offset: n}, nil
}

// formatLogStart / ParseLogStart hold the log start offset when it lies
// inside the first segment (after DeleteBefore); Kafka keeps the same
// number in the log dir's log-start-offset-checkpoint. Framing as §5.5:
// version, count 1, the offset.
func formatLogStart(off int64) []byte { return fmt.Appendf(nil, "0\n1\n%d\n", off) }

func ParseLogStart(data []byte) (int64, error) {
	lines := splitLines(string(data))
	if len(lines) != 3 || lines[0] != "0" || lines[1] != "1" {
		return 0, fmt.Errorf("log start offset file %q: bad framing", data)
	}
	n, err := parseJavaInt(lines[2], 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("log start offset file %q: bad offset", data)
	}
	return n, nil
}
