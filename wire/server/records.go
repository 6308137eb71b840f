package server

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/kfollower/kfollower/wire/batch"
)

// scanChunk is how many bytes each Read of a scan asks for.
const scanChunk = 1 << 20

// scan calls fn for every batch of l with a base offset in [from, end),
// in offset order (the first may start before from, as Read gives the
// batch holding from), until fn returns false.
func scan(l Log, from, end int64, fn func(h batch.Header, b []byte) bool) error {
	for off := from; off < end; {
		b, err := l.Read(off, scanChunk)
		if err != nil {
			return err
		}
		if len(b) == 0 {
			return nil
		}
		next := off
		s := batch.NewFrameScanner(b)
		for s.Next() {
			h := s.Header()
			if h.BaseOffset >= end || !fn(h, s.Batch()) {
				return nil
			}
			next = h.NextOffset()
		}
		if err := s.Err(); err != nil {
			return fmt.Errorf("reading at %d: %w", off, err)
		}
		if next <= off {
			return fmt.Errorf("reading at %d: the log returned no batch past it", off)
		}
		off = next
	}
	return nil
}

// errUndecodable is a batch whose records this server cannot read: a codec
// without a decompressor.
var errUndecodable = errors.New("no decompressor for the batch's codec")

// records calls fn with the offset and timestamp of every record of one
// whole batch b (header h), in order, until fn returns false. A record's
// timestamp is the batch's max timestamp under LogAppendTime, else the
// base timestamp plus its delta (DefaultRecord.readFrom).
func (s *Server) records(h batch.Header, b []byte, fn func(offset, ts int64) bool) error {
	data := b[batch.HeaderSize:]
	if c := h.Attributes.Compression(); c != batch.CompressionNone {
		var err error
		if data, err = s.decompress(c, data); err != nil {
			return err
		}
	}
	for i := int32(0); i < h.RecordCount; i++ {
		size, n := binary.Varint(data)
		if n <= 0 || size < 1 || size > int64(len(data)-n) {
			return fmt.Errorf("batch at offset %d: record %d: bad length", h.BaseOffset, i)
		}
		rec := data[n : n+int(size)]
		data = data[n+int(size):]
		tsDelta, n1 := binary.Varint(rec[1:]) // rec[0]: the unused attributes
		if n1 <= 0 {
			return fmt.Errorf("batch at offset %d: record %d: bad timestamp delta", h.BaseOffset, i)
		}
		offDelta, n2 := binary.Varint(rec[1+n1:])
		if n2 <= 0 {
			return fmt.Errorf("batch at offset %d: record %d: bad offset delta", h.BaseOffset, i)
		}
		ts := h.BaseTimestamp + tsDelta
		if h.Attributes.LogAppendTime() {
			ts = h.MaxTimestamp
		}
		if !fn(h.BaseOffset+offDelta, ts) {
			return nil
		}
	}
	return nil
}

func (s *Server) decompress(c batch.Compression, data []byte) ([]byte, error) {
	if s.cfg.Decompress != nil {
		return s.cfg.Decompress(c, data)
	}
	if c != batch.CompressionGzip {
		return nil, fmt.Errorf("%w (%s)", errUndecodable, c)
	}
	r, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}
