package wire

import (
	"encoding/binary"
	"io"

	"github.com/kfollower/kfollower/wire/batch"
)

// RecordsSink is shown each partition's records as a Fetch response is
// read off a FetchConn (FetchStreaming): records is the partition's
// records field from its first byte up to its last whole batch in so far,
// first says it is the field's first showing, and each later showing of
// the same field is longer. It runs on the reading goroutine, between
// reads, and must not keep records past the response buffer's Release.
// storage.Log.Stage is the one the fetcher passes on: written then, the
// batches are still in the CPU's cache (storage's stage.go says why that
// matters).
type RecordsSink func(topic TopicID, partition int32, records []byte, first bool)

// fetchStream walks a Fetch response (v13+: flexible, KIP-482, and with
// topic ids) as it is read, to show a RecordsSink each partition's whole
// batches as soon as they are in. It walks the response as
// FetchResponse's schema lays it out: header, throttle, error, session,
// then each topic (its id) and each partition (index, error, high
// watermark, last stable offset, log start offset, aborted transactions,
// preferred read replica, records), every struct closed by its tagged
// fields. It frames batches by their length alone; validating them is the
// sink's. Whatever it cannot walk (bytes that do not fit the schema) ends
// its walk, and kmsg's decoding of the whole response says what is wrong.
type fetchStream struct {
	sink   RecordsSink
	corr   int32 // the request's correlation id: another's response is not walked
	total  int   // the frame's size, from its size prefix
	pos    int   // the next element starts here, in the response frame
	stage  streamStage
	topics int // topics left to walk, in stageTopic
	parts  int // partitions of the current topic left, in stagePartition
	topic  TopicID
	part   int32
	// The current records field, in stageRecords: where it starts and
	// ends in the frame, how many bytes of whole batches from its start
	// are in, and how many of them the sink was shown; framing stops at
	// a length that cannot be (framed false).
	recStart, recEnd int
	whole, shown     int
	framed           bool
}

type streamStage uint8

const (
	stageHeader streamStage = iota
	stageTop
	stageTopic
	stagePartition
	stageRecords
	stagePartitionTags
	stageTopicTags
	stageTopTags
	stageDone // walked to the end, or given up
)

// minStreamVersion is the first Fetch version with topic ids in its
// response (KIP-516), by which the sink is told the partition.
const minStreamVersion = 13

// streamChunk bounds each read of a streamed response, so that what the
// sink is shown is still in the CPU's cache: its second level holds 1-2
// MiB, and a read may otherwise return as much as the socket holds,
// several MiB.
const streamChunk = 256 << 10

// readStreaming fills frame, a Fetch response's to the request with
// correlation id corr, from r as io.ReadFull does, walking what is in
// after each read.
func readStreaming(r io.Reader, frame []byte, corr int32, sink RecordsSink) error {
	s := &fetchStream{sink: sink, corr: corr, total: len(frame)}
	for got := 0; got < len(frame); {
		n, err := r.Read(frame[got:min(got+streamChunk, len(frame))])
		got += n
		if got == len(frame) {
			break // a reader may return the last bytes with io.EOF
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		s.advance(frame[:got])
	}
	s.advance(frame)
	return nil
}

// advance walks frame, the response read so far, as far as it is whole,
// and shows the sink the current field's batches in so far.
func (s *fetchStream) advance(frame []byte) {
	for s.stage != stageDone && s.step(frame) {
	}
	if s.stage == stageRecords {
		s.show(frame)
	}
}

// show shows the sink the current field's whole batches, if more are in
// than it was shown.
func (s *fetchStream) show(frame []byte) {
	if s.whole > s.shown {
		s.sink(s.topic, s.part, frame[s.recStart:s.recStart+s.whole], s.shown == 0)
		s.shown = s.whole
	}
}

// step walks one element of the response; false if it is not all in yet.
// An element is walked whole or not at all: pos moves only past a whole
// one, so a step that finds too few bytes is tried again with more.
func (s *fetchStream) step(frame []byte) bool {
	r := frameReader{b: frame, pos: s.pos, total: s.total}
	was := *s // what a step cut short leaves, to be tried again
	switch s.stage {
	case stageHeader:
		if len(frame) >= 4 && int32(binary.BigEndian.Uint32(frame)) != s.corr {
			r.bad = true // the read fails on it (FetchConn.read); nothing is shown
			break
		}
		r.skip(4) // correlation id
		r.tags()
		s.stage = stageTop
	case stageTop:
		r.skip(4 + 2 + 4) // throttle_time_ms, error_code, session_id
		s.topics = r.arrayLen()
		s.stage = stageTopic
	case stageTopic:
		if s.topics == 0 {
			s.stage = stageTopTags
			return true
		}
		copy(s.topic[:], r.take(16)) // topic_id
		s.parts = r.arrayLen()
		s.stage = stagePartition
	case stagePartition:
		if s.parts == 0 {
			s.stage = stageTopicTags
			return true
		}
		if b := r.take(4); b != nil { // partition_index
			s.part = int32(binary.BigEndian.Uint32(b))
		}
		r.skip(2 + 8 + 8 + 8)                         // error_code, high_watermark, last_stable_offset, log_start_offset
		for n := r.arrayLen(); n > 0 && r.ok(); n-- { // aborted_transactions
			r.skip(8 + 8) // producer_id, first_offset
			r.tags()
		}
		r.skip(4)            // preferred_read_replica
		size := r.arrayLen() // records: compact nullable bytes
		if !r.ok() {
			break
		}
		if size > s.total-r.pos {
			r.bad = true
			break
		}
		s.recStart, s.recEnd, s.whole, s.shown, s.framed = r.pos, r.pos+size, 0, 0, true
		s.stage = stageRecords
	case stageRecords:
		return s.stepRecords(frame)
	case stagePartitionTags:
		r.tags()
		s.parts--
		s.stage = stagePartition
	case stageTopicTags:
		r.tags()
		s.topics--
		s.stage = stageTopic
	case stageTopTags:
		r.tags()
		s.stage = stageDone
	}
	if r.bad {
		s.stage = stageDone
		return false
	}
	if !r.ok() {
		*s = was
		return false
	}
	s.pos = r.pos
	return true
}

// stepRecords frames the next batch of the current records field once it
// is all in, or, past the last whole batch (a partial tail, or a length
// that cannot be), skips to the field's end once that is in; the sink is
// shown the field's batches before the walk leaves it.
func (s *fetchStream) stepRecords(frame []byte) bool {
	rest := s.recEnd - s.pos
	if rest == 0 {
		s.show(frame)
		s.stage = stagePartitionTags
		return true
	}
	if s.framed && rest >= batch.LogOverhead {
		if len(frame) < s.pos+batch.LogOverhead {
			return false // the batch's length is not in yet
		}
		if length := int32(binary.BigEndian.Uint32(frame[s.pos+8:])); length >= batch.MinLength && int(length) <= rest-batch.LogOverhead {
			size := int(length) + batch.LogOverhead
			if len(frame) < s.pos+size {
				return false
			}
			s.whole += size
			s.pos += size
			return true
		}
	}
	// A partial tail, or a length that cannot be: no more batches of
	// this field.
	s.framed = false
	if len(frame) < s.recEnd {
		return false
	}
	s.pos = s.recEnd
	return true
}

// frameReader reads the elements of a response frame from pos: b is what
// is in so far, total the frame's size. Reading past b sets short (to be
// tried again with more); reading past total, or bytes that do not fit
// the schema, set bad. Either way what follows is not read.
type frameReader struct {
	b          []byte
	pos, total int
	short, bad bool
}

func (r *frameReader) ok() bool { return !r.short && !r.bad }

func (r *frameReader) skip(n int) {
	if !r.ok() {
		return
	}
	if n < 0 || n > r.total-r.pos {
		r.bad = true
		return
	}
	if len(r.b)-r.pos < n {
		r.short = true
		return
	}
	r.pos += n
}

// take reads the next n bytes, nil if they are not all in (or cannot be).
func (r *frameReader) take(n int) []byte {
	from := r.pos
	r.skip(n)
	if !r.ok() {
		return nil
	}
	return r.b[from:r.pos]
}

func (r *frameReader) uvarint() uint64 {
	if !r.ok() {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.pos:])
	switch {
	case n == 0:
		r.short = true
	case n < 0:
		r.bad = true
	default:
		r.pos += n
	}
	return v
}

// arrayLen reads a compact array's, string's or bytes' length (KIP-482:
// the length plus one, zero for null, read here as empty).
func (r *frameReader) arrayLen() int {
	v := r.uvarint()
	if v > uint64(r.total) {
		// More than the frame holds (a compact length counts bytes, or
		// elements of at least a byte): not this schema.
		r.bad = true
		return 0
	}
	if v == 0 {
		return 0
	}
	return int(v - 1)
}

// tags skips a tagged-fields section: a count, then each field's tag,
// size and bytes.
func (r *frameReader) tags() {
	for n := r.uvarint(); n > 0 && r.ok(); n-- {
		r.uvarint() // tag
		size := r.uvarint()
		if size > uint64(r.total) {
			r.bad = true
			return
		}
		r.skip(int(size))
	}
}
