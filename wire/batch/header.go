package batch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Sizes and positions of the record-batch v2 header, as in Kafka's
// DefaultRecordBatch.java and Records.java (docs/kafka.md §9.1).
const (
	// LogOverhead is the baseOffset and batchLength prefix (Records.LOG_OVERHEAD).
	LogOverhead = 12
	// HeaderSize is the fixed part of a v2 batch before its records
	// (DefaultRecordBatch.RECORD_BATCH_OVERHEAD).
	HeaderSize = 61
	// MinLength is the smallest legal batchLength: the header after the
	// length field, with no records.
	MinLength = HeaderSize - LogOverhead
	// Magic is the only batch format kfollower stores.
	Magic = 2

	magicPos      = 16
	crcPos        = 17
	attributesPos = 21 // the CRC covers [attributesPos, end of batch)
)

// Sentinels from RecordBatch.java.
const (
	NoPartitionLeaderEpoch = -1
	NoProducerID           = -1
	NoSequence             = -1
	NoTimestamp            = -1
)

// castagnoli is CRC-32C, the checksum of magic-2 batches (Crc32C.java).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Compression is the codec in attribute bits 0-2.
type Compression int8

// Codecs (CompressionType.java).
const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionGzip:
		return "gzip"
	case CompressionSnappy:
		return "snappy"
	case CompressionLZ4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("compression(%d)", int8(c))
}

// Attributes is the 16-bit attributes field of a v2 batch.
type Attributes int16

// Attribute masks (DefaultRecordBatch.java).
const (
	AttrCompressionMask Attributes = 0x07
	AttrLogAppendTime   Attributes = 0x08
	AttrTransactional   Attributes = 0x10
	AttrControl         Attributes = 0x20
	AttrDeleteHorizon   Attributes = 0x40
)

// Compression returns the codec the records are compressed with.
func (a Attributes) Compression() Compression { return Compression(a & AttrCompressionMask) }

// LogAppendTime reports whether timestamps are broker append times
// (otherwise they are producer create times).
func (a Attributes) LogAppendTime() bool { return a&AttrLogAppendTime != 0 }

// Transactional reports whether the batch belongs to a transaction.
func (a Attributes) Transactional() bool { return a&AttrTransactional != 0 }

// Control reports whether the batch holds a control record (commit/abort marker).
func (a Attributes) Control() bool { return a&AttrControl != 0 }

// DeleteHorizon reports whether baseTimestamp is a compaction delete horizon.
func (a Attributes) DeleteHorizon() bool { return a&AttrDeleteHorizon != 0 }

// Header is the fixed 61-byte head of a record batch v2.
type Header struct {
	BaseOffset           int64
	Length               int32 // bytes after the Length field; the batch is Length+12 bytes
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           Attributes
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// Size is the whole batch's size in bytes.
func (h Header) Size() int { return int(h.Length) + LogOverhead }

// LastOffset is the offset of the last record the batch covers.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset after the batch.
func (h Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Error says what is wrong with a record batch and where: Pos is the byte
// position of the batch in the run being parsed, BaseOffset its base offset
// when at least the first 8 bytes were there (else -1).
type Error struct {
	Pos        int
	BaseOffset int64
	Reason     string
}

func (e *Error) Error() string {
	if e.BaseOffset < 0 {
		return fmt.Sprintf("record batch at byte %d: %s", e.Pos, e.Reason)
	}
	return fmt.Sprintf("record batch at byte %d (base offset %d): %s", e.Pos, e.BaseOffset, e.Reason)
}

func errorf(pos int, base int64, format string, args ...any) *Error {
	return &Error{Pos: pos, BaseOffset: base, Reason: fmt.Sprintf(format, args...)}
}

// ParseHeader decodes the 61-byte header at the start of b. It checks only
// what the header alone can say: magic 2, a batchLength that can hold a
// header, a non-negative lastOffsetDelta and recordCount, and no offset
// overflow. It does not check the CRC; Check does.
func ParseHeader(b []byte) (Header, error) {
	return parseHeader(b, 0)
}

func parseHeader(b []byte, pos int) (Header, error) {
	base := int64(-1)
	if len(b) >= 8 {
		base = int64(binary.BigEndian.Uint64(b))
	}
	if len(b) < HeaderSize {
		return Header{}, errorf(pos, base, "%d bytes, a v2 header needs %d", len(b), HeaderSize)
	}
	h := Header{
		BaseOffset:           base,
		Length:               int32(binary.BigEndian.Uint32(b[8:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[12:])),
		Magic:                int8(b[magicPos]),
		CRC:                  binary.BigEndian.Uint32(b[crcPos:]),
		Attributes:           Attributes(binary.BigEndian.Uint16(b[21:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[23:])),
		BaseTimestamp:        int64(binary.BigEndian.Uint64(b[27:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[35:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[43:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[51:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[53:])),
		RecordCount:          int32(binary.BigEndian.Uint32(b[57:])),
	}
	switch {
	case h.Magic != Magic:
		return h, errorf(pos, base, "magic %d, only magic %d is supported", h.Magic, Magic)
	case h.Length < MinLength:
		return h, errorf(pos, base, "batch length %d below the minimum %d", h.Length, MinLength)
	case h.BaseOffset < 0:
		return h, errorf(pos, base, "negative base offset")
	case h.LastOffsetDelta < 0:
		return h, errorf(pos, base, "negative last offset delta %d", h.LastOffsetDelta)
	case h.BaseOffset > (1<<63-1)-int64(h.LastOffsetDelta)-1:
		return h, errorf(pos, base, "last offset overflows int64")
	case h.RecordCount < 0:
		return h, errorf(pos, base, "negative record count %d", h.RecordCount)
	}
	return h, nil
}

// Checksum computes the CRC-32C of a whole batch over attributes..end, the
// range DefaultRecordBatch.computeChecksum covers. It excludes the
// partition leader epoch so a leader can stamp it without recomputing.
func Checksum(batch []byte) uint32 {
	return crc32.Checksum(batch[attributesPos:], castagnoli)
}

// Check validates one whole batch: b must be exactly one batch (header
// fields as ParseHeader checks, length matching len(b)) and its CRC must
// match.
func Check(b []byte) (Header, error) {
	return check(b, 0)
}

func check(b []byte, pos int) (Header, error) {
	h, err := parseHeader(b, pos)
	if err != nil {
		return h, err
	}
	if h.Size() != len(b) {
		return h, errorf(pos, h.BaseOffset, "batch length %d does not match the %d bytes given", h.Length, len(b)-LogOverhead)
	}
	if got := Checksum(b); got != h.CRC {
		return h, errorf(pos, h.BaseOffset, "CRC mismatch: stored %#08x, computed %#08x", h.CRC, got)
	}
	return h, nil
}

// SetPartitionLeaderEpoch overwrites the epoch field of a whole batch in
// place. The CRC does not cover it, so the batch stays valid; a leader does
// exactly this when it stamps a batch.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[12:], uint32(epoch))
}
