package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBuildParsesBack(t *testing.T) {
	b := Build(Spec{BaseOffset: 42, Epoch: 7, Records: 3, Timestamp: 1000, Transactional: true, ProducerID: 9, ProducerEpoch: 2})
	h, err := Check(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{
		BaseOffset: 42, Length: int32(len(b) - 12), PartitionLeaderEpoch: 7, Magic: 2, CRC: h.CRC,
		Attributes: AttrTransactional, LastOffsetDelta: 2, BaseTimestamp: 1000, MaxTimestamp: 1002,
		ProducerID: 9, ProducerEpoch: 2, BaseSequence: 0, RecordCount: 3,
	}
	if h != want {
		t.Fatalf("header\n got %+v\nwant %+v", h, want)
	}
	if h.LastOffset() != 44 || h.NextOffset() != 45 || h.Size() != len(b) {
		t.Fatalf("derived fields: last %d next %d size %d", h.LastOffset(), h.NextOffset(), h.Size())
	}
	if !h.Attributes.Transactional() || h.Attributes.Control() || h.Attributes.Compression() != CompressionNone || h.Attributes.LogAppendTime() {
		t.Fatalf("attributes %#x", h.Attributes)
	}
}

func TestAttributes(t *testing.T) {
	a := Attributes(0x7f)
	if a.Compression() != CompressionZstd+3 || !a.LogAppendTime() || !a.Transactional() || !a.Control() || !a.DeleteHorizon() {
		t.Fatalf("attributes 0x7f decoded wrongly")
	}
	if CompressionLZ4.String() != "lz4" {
		t.Fatal(CompressionLZ4.String())
	}
}

// The CRC excludes the partition leader epoch (DefaultRecordBatch.computeChecksum).
func TestEpochOutsideCRC(t *testing.T) {
	b := Build(Spec{BaseOffset: 0, Epoch: 1, Records: 1})
	SetPartitionLeaderEpoch(b, 99)
	h, err := Check(b)
	if err != nil || h.PartitionLeaderEpoch != 99 {
		t.Fatalf("after restamp: %v %+v", err, h)
	}
	b[len(b)-1] ^= 1
	if _, err := Check(b); err == nil {
		t.Fatal("flipped record byte passed the CRC")
	}
}

// A golden batch: the bytes Kafka's producer would write for one record
// with null key and value "a", timestamp 1, at offset 0, epoch 0.
func TestGoldenBatch(t *testing.T) {
	got := Build(Spec{Records: 1, Timestamp: 1, Value: []byte("a")})
	rec := []byte{0, 0, 0, 1, 2, 'a', 0} // attrs, tsDelta 0, offDelta 0, key -1, len 1, "a", 0 headers
	want := make([]byte, 61)
	binary.BigEndian.PutUint32(want[8:], uint32(61-12+1+len(rec)))
	want[16] = 2
	binary.BigEndian.PutUint64(want[27:], 1)
	binary.BigEndian.PutUint64(want[35:], 1)
	binary.BigEndian.PutUint64(want[43:], ^uint64(0))
	binary.BigEndian.PutUint16(want[51:], 0xffff)
	binary.BigEndian.PutUint32(want[53:], 0xffffffff)
	binary.BigEndian.PutUint32(want[57:], 1)
	want = append(want, byte(len(rec)<<1))
	want = append(want, rec...)
	binary.BigEndian.PutUint32(want[17:], Checksum(want))
	if !bytes.Equal(got, want) {
		t.Fatalf("golden batch\n got %x\nwant %x", got, want)
	}
}

func TestParseHeaderErrors(t *testing.T) {
	good := Build(Spec{BaseOffset: 5, Records: 2})
	mut := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	cases := map[string]struct {
		b     []byte
		check bool
	}{
		"short":               {good[:60], false},
		"magic 1":             {mut(func(b []byte) { b[16] = 1 }), false},
		"length too small":    {mut(func(b []byte) { binary.BigEndian.PutUint32(b[8:], 10) }), false},
		"negative base":       {mut(func(b []byte) { b[0] = 0x80 }), false},
		"negative delta":      {mut(func(b []byte) { b[23] = 0x80 }), false},
		"negative count":      {mut(func(b []byte) { b[57] = 0x80 }), false},
		"offset overflow":     {mut(func(b []byte) { binary.BigEndian.PutUint64(b, 1<<63-2) }), false},
		"crc":                 {mut(func(b []byte) { b[17] ^= 0xff }), true},
		"length != len(b)":    {append(bytes.Clone(good), 0), true},
		"attributes flipped":  {mut(func(b []byte) { b[22] ^= 1 }), true},
		"last record flipped": {mut(func(b []byte) { b[len(b)-1] ^= 1 }), true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var err error
			if c.check {
				_, err = Check(c.b)
			} else {
				_, err = ParseHeader(c.b)
			}
			var be *Error
			if !errors.As(err, &be) {
				t.Fatalf("got %v, want *Error", err)
			}
			if be.Pos != 0 {
				t.Fatalf("pos %d", be.Pos)
			}
		})
	}
}

func TestScanner(t *testing.T) {
	b1 := Build(Spec{BaseOffset: 0, Epoch: 1, Records: 2})
	b2 := Build(Spec{BaseOffset: 2, Epoch: 1, Records: 1})
	b3 := Build(Spec{BaseOffset: 10, Epoch: 2, Records: 4, OffsetGap: 1})
	run := append(append(bytes.Clone(b1), b2...), b3...)
	cases := []struct {
		name      string
		in        []byte
		bases     []int64
		tail      int
		errPos    int // -1: no error
		errReason string
	}{
		{"empty", nil, nil, 0, -1, ""},
		{"three", run, []int64{0, 2, 10}, 0, -1, ""},
		{"partial tail in header", run[:len(run)-len(b3)+5], []int64{0, 2}, 5, -1, ""},
		{"partial tail after magic", run[:len(run)-len(b3)+20], []int64{0, 2}, 20, -1, ""},
		{"partial tail one short", run[:len(run)-1], []int64{0, 2}, len(b3) - 1, -1, ""},
		{"zero tail", append(bytes.Clone(b1), make([]byte, 100)...), []int64{0}, 0, len(b1), "below the minimum"},
		{"bad magic", append(bytes.Clone(b1), func() []byte { b := bytes.Clone(b2); b[16] = 0; return b }()...), []int64{0}, 0, len(b1), "magic 0"},
		{"crc", append(bytes.Clone(b1), func() []byte { b := bytes.Clone(b2); b[len(b)-1] ^= 1; return b }()...), []int64{0}, 0, len(b1), "CRC mismatch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewScanner(c.in)
			var bases []int64
			for s.Next() {
				bases = append(bases, s.Header().BaseOffset)
				if !bytes.Equal(s.Batch(), c.in[s.Pos():s.Pos()+s.Header().Size()]) {
					t.Fatal("Batch is not the slice at Pos")
				}
			}
			if len(bases) != len(c.bases) {
				t.Fatalf("bases %v want %v", bases, c.bases)
			}
			for i := range bases {
				if bases[i] != c.bases[i] {
					t.Fatalf("bases %v want %v", bases, c.bases)
				}
			}
			if s.Tail() != c.tail {
				t.Fatalf("tail %d want %d", s.Tail(), c.tail)
			}
			var be *Error
			if c.errPos < 0 {
				if s.Err() != nil {
					t.Fatal(s.Err())
				}
				if s.Valid()+s.Tail() != len(c.in) {
					t.Fatalf("valid %d + tail %d != %d", s.Valid(), s.Tail(), len(c.in))
				}
			} else if !errors.As(s.Err(), &be) || be.Pos != c.errPos || !bytes.Contains([]byte(be.Reason), []byte(c.errReason)) {
				t.Fatalf("err %v, want *Error at %d containing %q", s.Err(), c.errPos, c.errReason)
			}
			w, err := Whole(c.in)
			if len(w) != s.Valid() || (err == nil) != (s.Err() == nil) {
				t.Fatalf("Whole disagrees with Scanner: %d %v", len(w), err)
			}
		})
	}
}
