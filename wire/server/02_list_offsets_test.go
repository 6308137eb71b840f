package server

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func stamped(base int64, epoch int32, n int, ts int64) []byte {
	return batch.Build(batch.Spec{BaseOffset: base, Epoch: epoch, Records: n, Timestamp: ts})
}

// compressed is b with its records gzipped (or, for another codec, only
// flagged as compressed), its length and CRC recomputed.
func compressed(t *testing.T, b []byte, c batch.Compression) []byte {
	t.Helper()
	recs := b[batch.HeaderSize:]
	if c == batch.CompressionGzip {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write(recs)
		w.Close()
		recs = buf.Bytes()
	}
	out := append(slices.Clone(b[:batch.HeaderSize]), recs...)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-batch.LogOverhead))
	return withCodec(out, c)
}

type offsetAnswer struct {
	err   error
	ts    int64
	off   int64
	epoch int32
}

func (a offsetAnswer) String() string {
	return fmt.Sprintf("{%v ts=%d off=%d epoch=%d}", a.err, a.ts, a.off, a.epoch)
}

func listOffset(c *client, v int16, replica int32, topic string, p int32, ts int64, current int32) offsetAnswer {
	req := at(kmsg.NewPtrListOffsetsRequest(), v)
	req.ReplicaID = replica
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, ts, current
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	got := c.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	return offsetAnswer{kerr.ErrorForCode(got.ErrorCode), got.Timestamp, got.Offset, got.LeaderEpoch}
}

func TestListOffsets(t *testing.T) {
	cat := newCatalog()
	cat.add("t", 1, 6)
	// t-0: durable 0-7 (high watermark 8), 8-9 appended but not flushed.
	l0 := openLog(t, "t", 0, true,
		stamped(0, 0, 2, 1000), // 1000 1001
		stamped(2, 0, 2, 5000), // 5000 5001: the max, first
		stamped(4, 2, 2, 3000), // 3000 3001: timestamps go back
		stamped(6, 2, 2, 5000), // 5000 5001: the max again
	)
	if err := l0.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := l0.Append(stamped(8, 2, 2, 9000)); err != nil {
		t.Fatal(err)
	}
	// t-1: a gzip batch 0-2 (100-102), a snappy-flagged one 3-5 (200-202).
	l1 := openLog(t, "t", 1, false, compressed(t, stamped(0, 1, 3, 100), batch.CompressionGzip), compressed(t, stamped(3, 1, 3, 200), batch.CompressionSnappy))
	// t-2: retention moved the start to 4; t-3 deleted everything.
	l2 := openLog(t, "t", 2, false, run(0, 1, 2, 2), run(4, 3, 2, 2))
	l3 := openLog(t, "t", 3, false, run(0, 4, 2, 2))
	for l, start := range map[interface{ DeleteBefore(int64) error }]int64{l2: 4, l3: 4} {
		if err := l.DeleteBefore(start); err != nil {
			t.Fatal(err)
		}
	}
	cat.serve("t", 0, l0, 3)
	cat.serve("t", 1, l1, 1)
	cat.serve("t", 2, l2, 3)
	cat.serve("t", 3, l3, 4)
	// t-5: the max timestamp twice, all durable.
	cat.serve("t", 5, openLog(t, "t", 5, false, stamped(0, 0, 2, 1000), stamped(2, 0, 2, 5000), stamped(4, 2, 2, 3000), stamped(6, 2, 2, 5000)), 2)
	_, addr := testServer(t, cat)
	// The same partitions with a decompressor that knows the flagged
	// snappy batch (its records are plain).
	_, withDecompressor := testServer(t, cat, func(c *Config) {
		c.Decompress = func(codec batch.Compression, data []byte) ([]byte, error) { return data, nil }
	})
	ok := func(ts, off int64, epoch int32) offsetAnswer { return offsetAnswer{nil, ts, off, epoch} }
	none := ok(-1, -1, -1)
	fail := func(err error) offsetAnswer { return offsetAnswer{err, -1, -1, -1} }

	for _, tc := range []struct {
		name     string
		addr     string
		replica  int32
		p        int32
		ts       int64
		current  int32
		from, to int16 // versions; to 0: the newest
		want     offsetAnswer
		earliest bool
	}{
		{name: "latest: the high watermark, served epoch", p: 0, ts: -1, want: ok(-1, 8, 3)},
		{name: "latest, follower id: the log end", replica: -2, p: 0, ts: -1, want: ok(-1, 10, 3)},
		{name: "earliest", p: 0, ts: -2, want: ok(-1, 0, 0)},
		{name: "earliest after retention", p: 2, ts: -2, want: ok(-1, 4, 3)},
		{name: "earliest of an emptied log", p: 3, ts: -2, want: ok(-1, 4, 4)},
		{name: "earliest local", p: 2, ts: -4, from: 8, want: ok(-1, 4, 3)},
		{name: "earliest local before v8", p: 2, ts: -4, to: 7, want: fail(kerr.UnsupportedVersion)},
		{name: "latest tiered: none here", p: 0, ts: -5, from: 9, want: none},
		{name: "latest tiered before v9", p: 0, ts: -5, to: 8, want: fail(kerr.UnsupportedVersion)},
		{name: "earliest pending upload: none", p: 0, ts: -6, from: 11, want: none},
		{name: "max timestamp: first batch with it, first record", p: 5, ts: -3, from: 7, want: ok(5001, 3, 0)},
		{name: "max timestamp past the high watermark", p: 0, ts: -3, from: 7, want: none},
		{name: "max timestamp past the high watermark, follower id", replica: -2, p: 0, ts: -3, from: 7, want: ok(9001, 9, 2)},
		{name: "max timestamp before v7", p: 5, ts: -3, to: 6, want: fail(kerr.UnsupportedVersion)},
		{name: "earliest pending upload before v11", p: 5, ts: -6, to: 10, want: fail(kerr.UnsupportedVersion)},
		{name: "max timestamp, undecodable: the batch's base", p: 1, ts: -3, from: 7, want: ok(202, 3, 1)},
		{name: "max timestamp with a decompressor", addr: withDecompressor, p: 1, ts: -3, from: 7, want: ok(202, 5, 1)},
		{name: "timestamp 0: the first record", p: 0, ts: 0, want: ok(1000, 0, 0)},
		{name: "timestamp inside a batch", p: 0, ts: 1001, want: ok(1001, 1, 0)},
		{name: "timestamp between: the first batch reaching it", p: 0, ts: 1002, want: ok(5000, 2, 0)},
		{name: "first batch reaching it, not the closest", p: 0, ts: 3001, want: ok(5000, 2, 0)},
		{name: "timestamp only past the high watermark", p: 0, ts: 9000, want: none},
		{name: "timestamp past the high watermark, follower id", replica: -2, p: 0, ts: 9001, want: ok(9001, 9, 2)},
		{name: "timestamp past everything", p: 0, ts: 10_000, want: none},
		{name: "timestamp in a gzip batch", p: 1, ts: 101, want: ok(101, 1, 1)},
		{name: "undecodable codec: the batch's first record", p: 1, ts: 201, want: ok(200, 3, 1)},
		{name: "with a decompressor: the record", addr: withDecompressor, p: 1, ts: 201, want: ok(201, 4, 1)},
		{name: "timestamp below the log start", p: 2, ts: 0, want: ok(1_700_000_000_000, 4, 3)},
		{name: "fenced", p: 0, ts: -1, current: 2, from: 4, want: fail(kerr.FencedLeaderEpoch)},
		{name: "unknown leader epoch", p: 0, ts: -1, current: 4, from: 4, want: fail(kerr.UnknownLeaderEpoch)},
		{name: "current epoch = served", p: 0, ts: -1, current: 3, from: 4, want: ok(-1, 8, 3)},
		{name: "not served", p: 4, ts: -1, want: fail(kerr.NotLeaderForPartition)},
		{name: "no such partition", p: 6, ts: -1, want: fail(kerr.UnknownTopicOrPartition)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := addr
			if tc.addr != "" {
				addr = tc.addr
			}
			c := dial(t, addr)
			replica := int32(-1)
			if tc.replica != 0 {
				replica = tc.replica
			}
			current := int32(-1)
			if tc.current != 0 {
				current = tc.current
			}
			to := tc.to
			if to == 0 {
				to = apis[2].max
			}
			for v := max(1, tc.from); v <= to; v++ {
				want := tc.want
				if v < 4 {
					want.epoch = -1 // LeaderEpoch is v4+
				}
				if got := listOffset(c, v, replica, "t", tc.p, tc.ts, current); got != want {
					t.Errorf("v%d: %v, want %v", v, got, want)
				}
			}
		})
	}
	if got := listOffset(dial(t, addr), 9, -1, "u", 0, -1, -1); got.err != kerr.UnknownTopicOrPartition {
		t.Errorf("unknown topic: %v", got)
	}
}

// A partition named twice is INVALID_REQUEST, each time.
func TestListOffsetsDuplicate(t *testing.T) {
	cat := newCatalog()
	cat.add("t", 1, 2)
	cat.serve("t", 0, openLog(t, "t", 0, false, run(0, 0, 1, 1)), 0)
	cat.serve("t", 1, openLog(t, "t", 1, false, run(0, 0, 1, 1)), 0)
	_, addr := testServer(t, cat)
	req := at(kmsg.NewPtrListOffsetsRequest(), 9)
	for _, p := range []int32{0, 1, 0} {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp := dial(t, addr).do(req).(*kmsg.ListOffsetsResponse)
	var got []int16
	for _, rt := range resp.Topics {
		got = append(got, rt.Partitions[0].ErrorCode)
	}
	if want := []int16{kerr.InvalidRequest.Code, 0, kerr.InvalidRequest.Code}; !slices.Equal(got, want) {
		t.Errorf("errors %v, want %v", got, want)
	}
}
