package batch

import (
	"encoding/binary"
	"strconv"
)

// Spec describes a batch for Build. Build is for tests and tools: it makes
// valid, uncompressed v2 batches the way a Kafka producer and leader would.
type Spec struct {
	BaseOffset int64
	Epoch      int32 // partitionLeaderEpoch
	Records    int   // number of records, at least 1
	// Timestamp is the create time of the first record; record i has
	// Timestamp+i. Zero means 1_700_000_000_000 (a fixed, plausible time).
	Timestamp int64
	// Value is every record's value; nil gives "v<offset>".
	Value []byte
	// Key is every record's key; nil gives a null key.
	Key []byte
	// Transactional and Control set the attribute bits; ProducerID and
	// ProducerEpoch are used when either is set (else -1 / -1).
	Transactional bool
	Control       bool
	ProducerID    int64
	ProducerEpoch int16
	// OffsetGap makes record i have offset delta i*(1+OffsetGap), giving a
	// batch whose offsets have holes, as compaction leaves them.
	OffsetGap int
}

// Build returns the bytes of one batch as Spec describes it.
func Build(s Spec) []byte {
	n := s.Records
	if n < 1 {
		n = 1
	}
	ts := s.Timestamp
	if ts == 0 {
		ts = 1_700_000_000_000
	}
	b := make([]byte, HeaderSize, HeaderSize+n*32)
	var lastDelta int
	for i := range n {
		delta := i * (1 + s.OffsetGap)
		lastDelta = delta
		val := s.Value
		if val == nil {
			val = []byte("v" + strconv.FormatInt(s.BaseOffset+int64(delta), 10))
		}
		b = appendRecord(b, int64(i), delta, s.Key, val)
	}
	var attrs Attributes
	pid, pepoch, seq := int64(NoProducerID), int16(-1), int32(NoSequence)
	if s.Transactional {
		attrs |= AttrTransactional
	}
	if s.Control {
		attrs |= AttrControl
	}
	if s.Transactional || s.Control {
		pid, pepoch, seq = s.ProducerID, s.ProducerEpoch, 0
	}
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(s.BaseOffset))
	be.PutUint32(b[8:], uint32(len(b)-LogOverhead))
	be.PutUint32(b[12:], uint32(s.Epoch))
	b[magicPos] = Magic
	be.PutUint16(b[21:], uint16(attrs))
	be.PutUint32(b[23:], uint32(lastDelta))
	be.PutUint64(b[27:], uint64(ts))
	be.PutUint64(b[35:], uint64(ts+int64(n-1)))
	be.PutUint64(b[43:], uint64(pid))
	be.PutUint16(b[51:], uint16(pepoch))
	be.PutUint32(b[53:], uint32(seq))
	be.PutUint32(b[57:], uint32(n))
	be.PutUint32(b[crcPos:], Checksum(b))
	return b
}

// BuildRun returns count consecutive batches of recordsPer records each,
// starting at baseOffset, all stamped with epoch.
func BuildRun(baseOffset int64, epoch int32, count, recordsPer int) []byte {
	var out []byte
	for range count {
		out = append(out, Build(Spec{BaseOffset: baseOffset, Epoch: epoch, Records: recordsPer})...)
		baseOffset += int64(recordsPer)
	}
	return out
}

// appendRecord encodes one v2 record (DefaultRecord.writeTo): varint
// length, attributes, timestamp delta, offset delta, key, value, no headers.
func appendRecord(b []byte, tsDelta int64, offDelta int, key, val []byte) []byte {
	var body []byte
	body = append(body, 0) // record attributes, unused
	body = binary.AppendVarint(body, tsDelta)
	body = binary.AppendVarint(body, int64(offDelta))
	if key == nil {
		body = binary.AppendVarint(body, -1)
	} else {
		body = binary.AppendVarint(body, int64(len(key)))
		body = append(body, key...)
	}
	body = binary.AppendVarint(body, int64(len(val)))
	body = append(body, val...)
	body = binary.AppendVarint(body, 0) // header count
	b = binary.AppendVarint(b, int64(len(body)))
	return append(b, body...)
}
