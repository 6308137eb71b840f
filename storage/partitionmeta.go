package storage

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// PartitionMetadataFile is Kafka's name for the file that holds a
// partition's topic id (Kafka's PartitionMetadataFile).
const PartitionMetadataFile = "partition.metadata"

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
// "version: 0\ntopic_id: <uuid>", no trailing newline.
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
