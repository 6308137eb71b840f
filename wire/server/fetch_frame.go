package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Fetch answer is written as a frame of chunks: the bytes this server
// encodes, and the record sections of the log, which go from the segment
// files to the socket without being copied into the answer (sendfile on a
// plain connection, Log.ReadSection). Every other answer is kmsg's
// encoding in one buffer (appendResponse).

// materialize reads every partition's records of r into its
// RecordBatches, for kmsg to encode.
func materialize(r *kmsg.FetchResponse, recs [][]Section) {
	k := 0
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			p := &r.Topics[i].Partitions[j]
			if k < len(recs) && recs[k] != nil {
				var b []byte
				for _, s := range recs[k] {
					at := len(b)
					b = append(b, make([]byte, s.Len())...)
					if _, err := s.ReadAt(b[at:], 0); err != nil {
						b = b[:at] // whole batches before it stand; the client fetches the rest again
						break
					}
				}
				p.RecordBatches = b
			}
			k++
		}
	}
}

// chunk is one piece of a frame: bytes, or a section when sec is set.
type chunk struct {
	b   []byte
	sec Section
}

// fetchFrame is one size-prefixed answer as chunks. buf holds every byte the
// encoder writes; runs of it become chunks only at finish, since buf
// grows (and moves) while the answer is encoded.
type fetchFrame struct {
	buf    []byte
	pieces []piece
	cut    int // end of the last run cut from buf
	chunks []chunk
	size   int // the frame's length, size prefix included
}

// piece is a run buf[from:to], or outside bytes or a section.
type piece struct {
	from, to int
	b        []byte
	sec      Section
}

func (f *fetchFrame) reset() {
	f.buf, f.pieces, f.cut, f.chunks, f.size = f.buf[:0], f.pieces[:0], 0, f.chunks[:0], 0
}

// endRun makes what buf holds since the last cut a piece.
func (f *fetchFrame) endRun() {
	if len(f.buf) > f.cut {
		f.pieces = append(f.pieces, piece{from: f.cut, to: len(f.buf)})
		f.cut = len(f.buf)
	}
}

func (f *fetchFrame) outside(b []byte, sec Section) {
	f.endRun()
	f.pieces = append(f.pieces, piece{b: b, sec: sec})
}

// finish fixes the size prefix and lays the chunks out.
func (f *fetchFrame) finish() {
	f.endRun()
	f.size = 0
	for _, p := range f.pieces {
		switch {
		case p.sec != nil:
			f.chunks = append(f.chunks, chunk{sec: p.sec})
			f.size += p.sec.Len()
		case p.b != nil:
			if len(p.b) > 0 {
				f.chunks = append(f.chunks, chunk{b: p.b})
				f.size += len(p.b)
			}
		default:
			f.chunks = append(f.chunks, chunk{b: f.buf[p.from:p.to]})
			f.size += p.to - p.from
		}
	}
	binary.BigEndian.PutUint32(f.buf, uint32(f.size-4))
}

// encodeFetch lays out r's size-prefixed answer to correlationID in f,
// byte for byte kmsg's FetchResponse.AppendTo with each partition's
// RecordBatches the concatenation of its sections: recs[k] are the records
// of the k-th partition in answer order (topic by topic), nil for one
// whose records are its RecordBatches (an error answer, or a read below
// v10) (fetch_frame_test.go
// proves it for every version served). It returns false for an answer
// with unknown tags, which this server never sets: the caller then
// encodes it with kmsg.
func encodeFetch(f *fetchFrame, correlationID int32, r *kmsg.FetchResponse, recs [][]Section) bool {
	if hasUnknownTags(r) {
		return false
	}
	v := r.Version
	flex := v >= 12
	f.reset()
	b := f.buf
	b = binary.BigEndian.AppendUint32(b, 0) // the size, set by finish
	b = binary.BigEndian.AppendUint32(b, uint32(correlationID))
	if flex {
		b = append(b, 0) // response header v1's tags
	}
	if v >= 1 {
		b = be32(b, r.ThrottleMillis)
	}
	if v >= 7 {
		b = be16(b, r.ErrorCode)
		b = be32(b, r.SessionID)
	}
	b = arrayLen(b, len(r.Topics), flex)
	k := 0
	for i := range r.Topics {
		t := &r.Topics[i]
		if v <= 12 {
			b = str(b, t.Topic, flex)
		}
		if v >= 13 {
			b = append(b, t.TopicID[:]...)
		}
		b = arrayLen(b, len(t.Partitions), flex)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			var secs []Section
			if k < len(recs) {
				secs = recs[k]
			}
			k++
			b = be32(b, p.Partition)
			b = be16(b, p.ErrorCode)
			b = be64(b, p.HighWatermark)
			if v >= 4 {
				b = be64(b, p.LastStableOffset)
			}
			if v >= 5 {
				b = be64(b, p.LogStartOffset)
			}
			if v >= 4 {
				if p.AbortedTransactions == nil {
					b = nullLen(b, flex)
				} else {
					b = arrayLen(b, len(p.AbortedTransactions), flex)
				}
				for _, at := range p.AbortedTransactions {
					b = be64(b, at.ProducerID)
					b = be64(b, at.FirstOffset)
					if flex {
						b = append(b, 0)
					}
				}
			}
			if v >= 11 {
				b = be32(b, p.PreferredReadReplica)
			}
			switch {
			case secs != nil:
				n := 0
				for _, s := range secs {
					n += s.Len()
				}
				b = bytesLen(b, n, flex)
				f.buf = b
				for _, s := range secs {
					f.outside(nil, s)
				}
				b = f.buf
			case p.RecordBatches == nil:
				b = nullLen(b, flex)
			default:
				b = bytesLen(b, len(p.RecordBatches), flex)
				f.buf = b
				f.outside(p.RecordBatches, nil)
				b = f.buf
			}
			if flex {
				b = partitionTags(b, p)
			}
		}
		if flex {
			b = append(b, 0)
		}
	}
	if flex {
		if len(r.Brokers) == 0 {
			b = append(b, 0)
		} else {
			b = append(b, 1, 0) // one tag: 0, the brokers
			var body []byte
			body = arrayLen(body, len(r.Brokers), true)
			for _, br := range r.Brokers {
				body = be32(body, br.NodeID)
				body = str(body, br.Host, true)
				body = be32(body, br.Port)
				if br.Rack == nil {
					body = append(body, 0)
				} else {
					body = str(body, *br.Rack, true)
				}
				body = append(body, 0)
			}
			b = binary.AppendUvarint(b, uint64(len(body)))
			b = append(b, body...)
		}
	}
	f.buf = b
	f.finish()
	return true
}

// partitionTags is a partition's tagged fields, in tag order, each only
// when it differs from its default (-1s), as kmsg writes them.
func partitionTags(b []byte, p *kmsg.FetchResponseTopicPartition) []byte {
	de, cl, sn := p.DivergingEpoch, p.CurrentLeader, p.SnapshotID
	hasDE := de.Epoch != -1 || de.EndOffset != -1
	hasCL := cl.LeaderID != -1 || cl.LeaderEpoch != -1
	hasSN := sn.EndOffset != -1 || sn.Epoch != -1
	n := 0
	for _, has := range []bool{hasDE, hasCL, hasSN} {
		if has {
			n++
		}
	}
	b = append(b, byte(n))
	if hasDE {
		b = append(b, 0, 4+8+1)
		b = be32(b, de.Epoch)
		b = be64(b, de.EndOffset)
		b = append(b, 0)
	}
	if hasCL {
		b = append(b, 1, 4+4+1)
		b = be32(b, cl.LeaderID)
		b = be32(b, cl.LeaderEpoch)
		b = append(b, 0)
	}
	if hasSN {
		b = append(b, 2, 8+4+1)
		b = be64(b, sn.EndOffset)
		b = be32(b, sn.Epoch)
		b = append(b, 0)
	}
	return b
}

func hasUnknownTags(r *kmsg.FetchResponse) bool {
	if r.UnknownTags.Len() > 0 {
		return true
	}
	for i := range r.Topics {
		t := &r.Topics[i]
		if t.UnknownTags.Len() > 0 {
			return true
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.UnknownTags.Len() > 0 || p.DivergingEpoch.UnknownTags.Len() > 0 ||
				p.CurrentLeader.UnknownTags.Len() > 0 || p.SnapshotID.UnknownTags.Len() > 0 {
				return true
			}
			for k := range p.AbortedTransactions {
				if p.AbortedTransactions[k].UnknownTags.Len() > 0 {
					return true
				}
			}
		}
	}
	for i := range r.Brokers {
		if r.Brokers[i].UnknownTags.Len() > 0 {
			return true
		}
	}
	return false
}

// The primitives of Kafka's protocol encoding (kmsg's appendInt32,
// appendArrayLen, ...): compact (flexible) lengths are unsigned varints of
// the length plus one, 0 for null (KIP-482).

func be16(b []byte, v int16) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) }
func be32(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }
func be64(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }

func arrayLen(b []byte, n int, flex bool) []byte {
	if flex {
		return binary.AppendUvarint(b, uint64(n)+1)
	}
	return be32(b, int32(n))
}

func bytesLen(b []byte, n int, flex bool) []byte { return arrayLen(b, n, flex) }

func nullLen(b []byte, flex bool) []byte {
	if flex {
		return append(b, 0)
	}
	return be32(b, -1)
}

func str(b []byte, s string, flex bool) []byte {
	if flex {
		b = binary.AppendUvarint(b, uint64(len(s))+1)
	} else {
		b = be16(b, int16(len(s)))
	}
	return append(b, s...)
}

// errSectionChanged is a truncation of the log that began while records
// of it were being sent: the answer's last byte is held back and the
// connection closed, so the client never gets a whole frame that may
// hold changed bytes, and fetches again on a new connection (Kafka
// closes the connection when a file shrank during writeTo).
var errSectionChanged = errors.New("the log was truncated while its records were sent")

// writeFrame writes f to w: runs of bytes with writev (net.Buffers), each
// section by its Send. The frame's last byte goes out only after every
// section is seen not Stale; it is read before that check, so no byte
// read after a truncation began reaches the client in a whole frame.
func writeFrame(w io.Writer, f *fetchFrame) error {
	if len(f.chunks) == 0 {
		return nil
	}
	var bufs net.Buffers
	flush := func() error {
		if len(bufs) == 0 {
			return nil
		}
		_, err := bufs.WriteTo(w)
		bufs = bufs[:0]
		return err
	}
	var last [1]byte
	for i, c := range f.chunks {
		final := i == len(f.chunks)-1
		if c.sec == nil {
			b := c.b
			if final {
				last[0], b = b[len(b)-1], b[:len(b)-1]
			}
			if len(b) > 0 {
				bufs = append(bufs, b)
			}
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		n := c.sec.Len()
		if final {
			if _, err := c.sec.ReadAt(last[:], int64(n-1)); err != nil {
				return fmt.Errorf("reading the last byte of a section: %w", err)
			}
			n--
		}
		if err := c.sec.Send(w, 0, n); err != nil {
			return err
		}
	}
	if err := flush(); err != nil {
		return err
	}
	for _, c := range f.chunks {
		if c.sec != nil && c.sec.Stale() {
			return errSectionChanged
		}
	}
	_, err := w.Write(last[:])
	return err
}
