package batch

import "encoding/binary"

// Scanner splits a run of bytes (a fetch response's RecordBatches, or a
// segment file read into memory) into whole, valid v2 batches.
//
// A short tail is not an error: a fetch response may cut its last batch
// (kmsg FetchResponseTopicPartition.RecordBatches; Kafka's
// ByteBufferLogInputStream.nextBatch returns null when fewer bytes remain
// than the batch claims). Scanning stops there and Tail reports how many
// bytes were dropped. Anything else that is wrong (a length that cannot
// hold a header, magic other than 2, a CRC mismatch) stops the scan with a
// *Error from Err.
//
//	s := batch.NewScanner(raw)
//	for s.Next() {
//		use(s.Header(), s.Batch())
//	}
//	if err := s.Err(); err != nil { ... }
type Scanner struct {
	b    []byte
	pos  int // start of the next batch to read
	cur  []byte
	h    Header
	hpos int
	err  error
	tail int
	done bool
	// frameOnly skips the CRC: see NewFrameScanner.
	frameOnly bool
}

// NewScanner returns a scanner over b. It does not copy b; Batch returns
// sub-slices of it.
func NewScanner(b []byte) *Scanner { return &Scanner{b: b} }

// NewFrameScanner returns a scanner that frames batches and checks their
// headers but not their CRCs, for a caller that hands the bytes on to a
// validator that checks them anyway (storage.Log.Append): a CRC over every
// fetched byte is the costliest step of copying a log, and need not be
// paid twice.
func NewFrameScanner(b []byte) *Scanner { return &Scanner{b: b, frameOnly: true} }

// Next advances to the next whole batch and reports whether there is one.
func (s *Scanner) Next() bool {
	if s.done {
		return false
	}
	rest := s.b[s.pos:]
	if len(rest) == 0 {
		return s.stop(0, nil)
	}
	if len(rest) < LogOverhead {
		return s.stop(len(rest), nil)
	}
	length := int32(binary.BigEndian.Uint32(rest[8:]))
	base := int64(binary.BigEndian.Uint64(rest))
	if length < MinLength {
		return s.stop(0, errorf(s.pos, base, "batch length %d below the minimum %d", length, MinLength))
	}
	if len(rest) <= magicPos {
		return s.stop(len(rest), nil)
	}
	if m := int8(rest[magicPos]); m != Magic {
		return s.stop(0, errorf(s.pos, base, "magic %d, only magic %d is supported", m, Magic))
	}
	size := int64(length) + LogOverhead
	if int64(len(rest)) < size {
		return s.stop(len(rest), nil)
	}
	var h Header
	var err error
	if s.frameOnly {
		h, err = parseHeader(rest[:size], s.pos)
	} else {
		h, err = check(rest[:size], s.pos)
	}
	if err != nil {
		return s.stop(0, err)
	}
	s.cur, s.h, s.hpos = rest[:size], h, s.pos
	s.pos += int(size)
	return true
}

func (s *Scanner) stop(tail int, err error) bool {
	s.done, s.tail, s.err, s.cur = true, tail, err, nil
	return false
}

// Batch is the current batch's bytes, a sub-slice of the scanned run.
func (s *Scanner) Batch() []byte { return s.cur }

// Header is the current batch's header.
func (s *Scanner) Header() Header { return s.h }

// Pos is the byte position of the current batch in the run.
func (s *Scanner) Pos() int { return s.hpos }

// Valid is the number of bytes of whole, valid batches read so far: after
// the scan stops, the length of the usable prefix of the run.
func (s *Scanner) Valid() int { return s.pos }

// Tail is the number of bytes of a partial last batch dropped at the end
// (0 while scanning, when there was none, or when the scan stopped on an
// error).
func (s *Scanner) Tail() int { return s.tail }

// Err is the reason the scan stopped early, a *Error, or nil when it
// reached the end of the run or a partial tail.
func (s *Scanner) Err() error { return s.err }

// Whole returns the prefix of b made of whole, valid batches, dropping a
// partial tail. If a batch is invalid, it returns the valid prefix before
// it and the error.
func Whole(b []byte) ([]byte, error) {
	s := NewScanner(b)
	for s.Next() {
	}
	return b[:s.Valid()], s.Err()
}
