package storage

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kfollower/kfollower/wire/batch"
)

// legalTopic is Kafka's topic name rule (Topic.validate): at most 249 of
// [a-zA-Z0-9._-]; "." and ".." are refused separately.
var legalTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

func checkName(topic string, partition int32) error {
	if !legalTopic.MatchString(topic) || topic == "." || topic == ".." || partition < 0 {
		return fmt.Errorf("illegal topic-partition %q-%d", topic, partition)
	}
	return nil
}

// PartitionDir is the directory of a partition under dataDir, as Kafka
// names it (LocalLog.logDirName): "<topic>-<partition>".
func PartitionDir(dataDir, topic string, partition int32) string {
	return filepath.Join(dataDir, fmt.Sprintf("%s-%d", topic, partition))
}

// PartitionName is the topic and partition a partition directory is named
// after.
type PartitionName struct {
	Topic     string
	Partition int32
}

// ParsePartitionDir is the inverse of PartitionDir's last element: it
// splits "<topic>-<partition>" at the last '-' (topics may hold '-',
// partitions never do), as Kafka's LocalLog.parseTopicPartitionName reads
// a live partition's directory. Kafka's renamed directories
// ("<topic>-<partition>.<id>-delete", -future, -stray) and lost+found do
// not parse.
func ParsePartitionDir(name string) (PartitionName, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return PartitionName{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != name[i+1:] || checkName(name[:i], int32(p)) != nil {
		return PartitionName{}, false
	}
	return PartitionName{Topic: name[:i], Partition: int32(p)}, true
}

// ListPartitions lists the partition directories under dataDir that hold
// at least one segment, sorted by topic and partition. Hidden entries
// (".name") are skipped.
func ListPartitions(dataDir string) ([]PartitionName, error) {
	ents, err := os.ReadDir(dataDir)
	if err != nil {
		return nil, fmt.Errorf("listing data dir %s: %w", dataDir, err)
	}
	var out []PartitionName
	for _, e := range ents {
		pn, ok := ParsePartitionDir(e.Name())
		if !e.IsDir() || !ok || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		segs, err := os.ReadDir(filepath.Join(dataDir, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", filepath.Join(dataDir, e.Name()), err)
		}
		if slices.ContainsFunc(segs, func(s os.DirEntry) bool { _, ok := parseSegmentName(s.Name()); return ok }) {
			out = append(out, pn)
		}
	}
	slices.SortFunc(out, func(a, b PartitionName) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out, nil
}

// ident names a partition in messages and errors.
type ident struct {
	topic     string
	partition int32
}

func (id ident) tp() string { return fmt.Sprintf("%s-%d", id.topic, id.partition) }

// corruption is the *CorruptionError for a batch of s that failed its
// checks at pos (a *batch.Error in err gives the exact position and the
// offset the batch claims).
func (id ident) corruption(s *segment, pos, offset int64, err error) *CorruptionError {
	var be *batch.Error
	if errors.As(err, &be) {
		pos, offset = int64(be.Pos), be.BaseOffset
		if pos < 0 {
			pos = 0
		}
	}
	return &CorruptionError{Topic: id.topic, Partition: id.partition, Segment: s.path(logSuffix), Position: pos, Offset: offset, Err: err}
}
