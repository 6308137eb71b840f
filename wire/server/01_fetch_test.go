package server

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchOne is a Fetch of one partition at version v, sessionless, with
// room for a MiB and no wait.
func fetchOne(v int16, topic string, id [16]byte, p int32, offset int64) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version, r.MaxBytes = v, 1<<20
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = topic, id
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = p, offset, 1<<20
	t.Partitions = append(t.Partitions, fp)
	r.Topics = append(r.Topics, t)
	return r
}

// spans lists the batches of raw as "base-last" (whole batches only).
func spans(t *testing.T, raw []byte) []string {
	t.Helper()
	var out []string
	s := batch.NewScanner(raw)
	for s.Next() {
		h := s.Header()
		out = append(out, fmt.Sprintf("%d-%d", h.BaseOffset, h.LastOffset()))
	}
	if s.Err() != nil || s.Tail() != 0 {
		t.Fatalf("records: err %v, tail %d", s.Err(), s.Tail())
	}
	return out
}

// withCodec is a batch flagged with codec (its records stay as they are:
// nothing here decompresses a fetched batch), its CRC recomputed.
func withCodec(b []byte, c batch.Compression) []byte {
	b = slices.Clone(b)
	attrs := binary.BigEndian.Uint16(b[21:])
	binary.BigEndian.PutUint16(b[21:], attrs&^7|uint16(c))
	binary.BigEndian.PutUint32(b[17:], batch.Checksum(b))
	return b
}

// fetchFixture: topic "t" (3 partitions) and "z".
//
//	t-0: offsets 0-9 in epoch 0, 10-19 in epoch 2 (batches of 2), served epoch 3
//	t-1: 0-5 durable, 6-9 appended but not flushed (HW 6, LEO 10), epoch 1
//	t-2: not served
//	z-0: a zstd-flagged batch 0-1, then a plain one 2-3
type fetchFixture struct {
	cat       *testCatalog
	addr      string
	s         *Server
	t0, t1    *storage.Log
	z0        *storage.Log
	batchSize int
}

func newFetchFixture(t *testing.T) *fetchFixture {
	f := &fetchFixture{cat: newCatalog()}
	f.cat.add("t", 1, 3)
	f.cat.add("z", 2, 1)
	f.t0 = openLog(t, "t", 0, false, run(0, 0, 5, 2), run(10, 2, 5, 2))
	f.t1 = openLog(t, "t", 1, true, run(0, 1, 3, 2))
	if err := f.t1.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.t1.Append(run(6, 1, 2, 2)); err != nil {
		t.Fatal(err)
	}
	if f.t1.DurableEnd() != 6 || f.t1.LogEndOffset() != 10 {
		t.Fatalf("t-1: durable end %d, log end %d", f.t1.DurableEnd(), f.t1.LogEndOffset())
	}
	f.z0 = openLog(t, "z", 0, false, withCodec(run(0, 0, 1, 2), batch.CompressionZstd), run(2, 0, 1, 2))
	f.cat.serve("t", 0, f.t0, 3)
	f.cat.serve("t", 1, f.t1, 1)
	f.cat.serve("z", 0, f.z0, 0)
	f.batchSize = len(run(0, 0, 1, 2))
	f.s, f.addr = testServer(t, f.cat)
	return f
}

func TestFetch(t *testing.T) {
	f := newFetchFixture(t)
	tid := f.cat.id("t")
	type want struct {
		err       error
		hw, start int64
		batches   []string
		diverging [2]int64 // epoch, end offset; {-1, -1} when none
		leader    [2]int32 // CurrentLeader (id, epoch)
	}
	none := [2]int64{-1, -1}
	noLeader := [2]int32{-1, -1}
	all := []string{"0-1", "2-3", "4-5", "6-7", "8-9", "10-11", "12-13", "14-15", "16-17", "18-19"}
	ok := func(batches ...string) want {
		return want{hw: 20, start: 0, batches: batches, diverging: none, leader: noLeader}
	}
	fail := func(err error) want { return want{err: err, hw: -1, start: -1, diverging: none, leader: noLeader} }
	diverge := func(epoch, end int64) want {
		w := ok()
		w.diverging = [2]int64{epoch, end}
		return w
	}
	req := func(v int16, p int32, offset int64, mod ...func(*kmsg.FetchRequestTopicPartition)) *kmsg.FetchRequest {
		r := fetchOne(v, "t", tid, p, offset)
		for _, m := range mod {
			m(&r.Topics[0].Partitions[0])
		}
		return r
	}
	current := func(e int32) func(*kmsg.FetchRequestTopicPartition) {
		return func(p *kmsg.FetchRequestTopicPartition) { p.CurrentLeaderEpoch = e }
	}
	lastFetched := func(e int32) func(*kmsg.FetchRequestTopicPartition) {
		return func(p *kmsg.FetchRequestTopicPartition) { p.LastFetchedEpoch = e }
	}
	fenced := fail(kerr.FencedLeaderEpoch)
	fenced.leader = [2]int32{7, 3}

	for _, tc := range []struct {
		name string
		req  *kmsg.FetchRequest
		want want
	}{
		{"from the start", req(12, 0, 0), ok(all...)},
		{"v4", req(4, 0, 0), ok(all...)},
		{"by topic id (v13)", req(13, 0, 0), ok(all...)},
		{"v18", req(18, 0, 0), ok(all...)},
		{"mid-batch: the batch holding it", req(12, 0, 13), ok(all[6:]...)},
		{"at the log end: nothing", req(12, 0, 20), ok()},
		{"past the log end", req(12, 0, 21), fail(kerr.OffsetOutOfRange)},
		{"negative offset", req(12, 0, -1), fail(kerr.OffsetOutOfRange)},
		{"only up to the durable end", req(12, 1, 0), want{hw: 6, batches: []string{"0-1", "2-3", "4-5"}, diverging: none, leader: noLeader}},
		{"between HW and log end: nothing, no error", req(12, 1, 8), want{hw: 6, diverging: none, leader: noLeader}},
		{"not served", req(12, 2, 0), fail(kerr.NotLeaderForPartition)},
		{"no such partition", req(12, 3, 0), fail(kerr.UnknownTopicOrPartition)},
		{"no such topic", fetchOne(12, "nope", [16]byte{}, 0, 0), fail(kerr.UnknownTopicOrPartition)},
		{"no such topic id", fetchOne(13, "t", [16]byte{9}, 0, 0), fail(kerr.UnknownTopicID)},
		{"current epoch = served", req(12, 0, 0, current(3)), ok(all...)},
		{"current epoch older: fenced", req(12, 0, 0, current(2)), fail(kerr.FencedLeaderEpoch)},
		{"fenced, v16: the leader named", req(16, 0, 0, current(2)), fenced},
		{"current epoch newer: unknown", req(12, 0, 0, current(4)), fail(kerr.UnknownLeaderEpoch)},
		{"current epoch before v9 is not sent", req(8, 0, 0, current(2)), ok(all...)},
		{"last fetched = latest, at its end", req(12, 0, 20, lastFetched(2)), ok()},
		{"last fetched = served, at the log end", req(12, 0, 20, lastFetched(3)), ok()},
		{"last fetched 0, inside it", req(12, 0, 8, lastFetched(0)), ok(all[4:]...)},
		{"last fetched 0, past its end: diverging", req(12, 0, 12, lastFetched(0)), diverge(0, 10)},
		{"last fetched 1, unknown here: diverging at the floor", req(12, 0, 12, lastFetched(1)), diverge(0, 10)},
		{"last fetched above served: out of range", req(12, 0, 20, lastFetched(4)), fail(kerr.OffsetOutOfRange)},
		{"last fetched before v12 is not sent", req(11, 0, 12, lastFetched(0)), ok(all[6:]...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := dial(t, f.addr).do(tc.req).(*kmsg.FetchResponse)
			if resp.ErrorCode != 0 || resp.SessionID != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Fatalf("answer %+v", resp)
			}
			rt := resp.Topics[0]
			if tc.req.Version >= 13 && rt.TopicID != tc.req.Topics[0].TopicID || tc.req.Version < 13 && rt.Topic != tc.req.Topics[0].Topic {
				t.Errorf("topic %q %x", rt.Topic, rt.TopicID)
			}
			p := rt.Partitions[0]
			w := tc.want
			if err := kerr.ErrorForCode(p.ErrorCode); err != w.err {
				t.Errorf("error %v, want %v", err, w.err)
			}
			lso, start := w.hw, w.start
			if tc.req.Version < 5 {
				start = -1 // LogStartOffset is v5+
			}
			if p.HighWatermark != w.hw || p.LastStableOffset != lso || p.LogStartOffset != start {
				t.Errorf("HW %d LSO %d log start %d, want %d %d %d", p.HighWatermark, p.LastStableOffset, p.LogStartOffset, w.hw, lso, start)
			}
			if got := spans(t, p.RecordBatches); !slices.Equal(got, w.batches) {
				t.Errorf("batches %v, want %v", got, w.batches)
			}
			if p.RecordBatches == nil {
				t.Error("records null, want empty")
			}
			if d := [2]int64{int64(p.DivergingEpoch.Epoch), p.DivergingEpoch.EndOffset}; d != w.diverging {
				t.Errorf("diverging %v, want %v", d, w.diverging)
			}
			if l := [2]int32{p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch}; l != w.leader {
				t.Errorf("current leader %v, want %v", l, w.leader)
			}
			if wantBrokers := w.leader[0] >= 0; (len(resp.Brokers) == 1) != wantBrokers {
				t.Errorf("brokers %+v", resp.Brokers)
			}
			if p.AbortedTransactions != nil || p.PreferredReadReplica != -1 {
				t.Errorf("aborted %v, preferred replica %d", p.AbortedTransactions, p.PreferredReadReplica)
			}
		})
	}
}

// Everything that is not a plain consumer fetch of one partition.
func TestFetchRequestLevel(t *testing.T) {
	f := newFetchFixture(t)
	tid := f.cat.id("t")
	c := dial(t, f.addr)

	t.Run("incremental session", func(t *testing.T) {
		r := fetchOne(12, "t", tid, 0, 0)
		r.SessionID, r.SessionEpoch = 5, 1
		resp := c.do(r).(*kmsg.FetchResponse)
		if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code || len(resp.Topics) != 0 {
			t.Errorf("error %d, %d topics", resp.ErrorCode, len(resp.Topics))
		}
	})
	t.Run("full request opening a session: sessionless", func(t *testing.T) {
		r := fetchOne(12, "t", tid, 0, 0)
		r.SessionID, r.SessionEpoch = 0, 0
		resp := c.do(r).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 || resp.SessionID != 0 || len(resp.Topics[0].Partitions[0].RecordBatches) == 0 {
			t.Errorf("error %d, session %d", resp.ErrorCode, resp.SessionID)
		}
	})
	for _, v := range []int16{12, 15} {
		t.Run(fmt.Sprintf("broker replica id v%d", v), func(t *testing.T) {
			r := fetchOne(v, "t", tid, 0, 0)
			r.ReplicaID, r.ReplicaState.ID = 1, 1
			p := c.do(r).(*kmsg.FetchResponse).Topics[0].Partitions[0]
			if p.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(p.RecordBatches) != 0 {
				t.Errorf("error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
			}
		})
	}
	t.Run("debug replica id reads as a consumer", func(t *testing.T) {
		r := fetchOne(12, "t", tid, 0, 0)
		r.ReplicaID = -2
		if p := c.do(r).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.HighWatermark != 20 {
			t.Errorf("error %d, HW %d", p.ErrorCode, p.HighWatermark)
		}
	})
	t.Run("read_committed", func(t *testing.T) {
		r := fetchOne(12, "t", tid, 1, 0)
		r.IsolationLevel = 1
		p := c.do(r).(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if p.LastStableOffset != 6 || p.HighWatermark != 6 || p.AbortedTransactions == nil || len(p.AbortedTransactions) != 0 {
			t.Errorf("LSO %d HW %d aborted %v", p.LastStableOffset, p.HighWatermark, p.AbortedTransactions)
		}
	})
	t.Run("zstd before v10", func(t *testing.T) {
		for v, want := range map[int16]*kerr.Error{9: kerr.UnsupportedCompressionType, 10: nil} {
			p := c.do(fetchOne(v, "z", [16]byte{}, 0, 0)).(*kmsg.FetchResponse).Topics[0].Partitions[0]
			if err := kerr.ErrorForCode(p.ErrorCode); err != error(want) && !(want == nil && err == nil) {
				t.Errorf("v%d: error %v, want %v", v, err, want)
			}
			if want == nil && len(spans(t, p.RecordBatches)) != 2 {
				t.Errorf("v%d: batches %v", v, spans(t, p.RecordBatches))
			}
		}
		// A read that holds no zstd batch is served to v9.
		if p := c.do(fetchOne(9, "z", [16]byte{}, 0, 2)).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 {
			t.Errorf("plain batch at v9: error %d", p.ErrorCode)
		}
	})
	t.Run("answers in request order, errors in place", func(t *testing.T) {
		r := fetchOne(12, "t", tid, 1, 0)
		p2, p0 := r.Topics[0].Partitions[0], r.Topics[0].Partitions[0]
		p2.Partition, p0.Partition = 2, 0
		r.Topics[0].Partitions = append(r.Topics[0].Partitions, p2, p0)
		nope := kmsg.NewFetchRequestTopic()
		nope.Topic = "nope"
		nope.Partitions = []kmsg.FetchRequestTopicPartition{p0}
		r.Topics = append(r.Topics, nope)
		resp := c.do(r).(*kmsg.FetchResponse)
		var got []string
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				got = append(got, fmt.Sprintf("%s-%d:%d", t.Topic, p.Partition, p.ErrorCode))
			}
		}
		want := []string{"t-1:0", "t-2:6", "t-0:0", "nope-0:3"}
		if !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}

// KIP-74: the response and each partition are capped, except that the
// first batch of the first partition with data comes whole.
func TestFetchSizeLimits(t *testing.T) {
	f := newFetchFixture(t)
	b := int32(f.batchSize)
	two := func(maxBytes, part0, part1 int32) *kmsg.FetchRequest {
		r := fetchOne(12, "t", [16]byte{}, 0, 0)
		r.MaxBytes = maxBytes
		p1 := r.Topics[0].Partitions[0]
		p1.Partition, p1.PartitionMaxBytes = 1, part1
		r.Topics[0].Partitions[0].PartitionMaxBytes = part0
		r.Topics[0].Partitions = append(r.Topics[0].Partitions, p1)
		return r
	}
	c := dial(t, f.addr)
	for _, tc := range []struct {
		name       string
		req        *kmsg.FetchRequest
		got0, got1 int
	}{
		{"room for all", two(1<<20, 1<<20, 1<<20), 10, 3},
		{"partition limit: whole batches only", two(1<<20, 2*b+b/2, 1<<20), 2, 3},
		{"partition limit below one batch: the first whole", two(1<<20, 1, 1<<20), 1, 3},
		{"second partition gets no oversize batch", two(1<<20, 1, 1), 1, 0},
		{"response limit shared in order", two(3*b, 1<<20, 1<<20), 3, 0},
		{"response limit below one batch", two(1, 1<<20, 1<<20), 1, 0},
		{"zero response limit", two(0, 1<<20, 1<<20), 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := c.do(tc.req).(*kmsg.FetchResponse)
			ps := resp.Topics[0].Partitions
			if g0, g1 := len(spans(t, ps[0].RecordBatches)), len(spans(t, ps[1].RecordBatches)); g0 != tc.got0 || g1 != tc.got1 {
				t.Errorf("batches %d and %d, want %d and %d", g0, g1, tc.got0, tc.got1)
			}
		})
	}
	// Segments are 4 KiB here: a read that crosses them comes whole.
	t.Run("across segments", func(t *testing.T) {
		var runs [][]byte
		for i := range 200 {
			runs = append(runs, run(int64(i), 0, 1, 1)) // one append each: a run never splits across segments
		}
		l := openLog(t, "t", 0, false, runs...)
		f.cat.serve("t", 2, l, 0)
		if len(l.Segments()) < 3 {
			t.Fatalf("%d segments", len(l.Segments()))
		}
		p := c.do(fetchOne(12, "t", [16]byte{}, 2, 0)).(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if got := spans(t, p.RecordBatches); len(got) != 200 {
			t.Errorf("%d batches, want 200", len(got))
		}
	})
}

// A long poll waits for MinBytes, is woken by Notify, reads again, and
// answers when the data is there, the epoch moved, or MaxWait passed.
func TestFetchLongPoll(t *testing.T) {
	f := newFetchFixture(t)
	poll := func(p int32, offset int64, current int32) *kmsg.FetchRequest {
		r := fetchOne(12, "t", [16]byte{}, p, offset)
		r.MaxWaitMillis, r.MinBytes = int32(time.Hour/time.Millisecond), 1
		r.Topics[0].Partitions[0].CurrentLeaderEpoch = current
		return r
	}
	answered := func(c *client, r *kmsg.FetchRequest, corr int32) kmsg.FetchResponseTopicPartition {
		t.Helper()
		return c.recv(r, corr).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	}

	t.Run("woken by a durable append", func(t *testing.T) {
		c := dial(t, f.addr)
		r := poll(0, 20, -1)
		corr := c.send(r)
		waitFor(t, func() bool { return f.s.waiting() == 1 })
		if err := f.t0.Append(run(20, 2, 1, 2)); err != nil {
			t.Fatal(err)
		}
		f.s.Notify("t", 0)
		p := answered(c, r, corr)
		if got := spans(t, p.RecordBatches); !slices.Equal(got, []string{"20-21"}) || p.HighWatermark != 22 {
			t.Errorf("batches %v HW %d", got, p.HighWatermark)
		}
	})
	t.Run("an append that is not durable yet does not answer", func(t *testing.T) {
		c := dial(t, f.addr)
		r := poll(1, 6, -1)
		corr := c.send(r)
		waitFor(t, func() bool { return f.s.waiting() == 1 })
		f.s.Notify("t", 1) // nothing new is durable: read again, wait again
		f.s.Notify("t", 0) // another partition: not this wait's
		if err := f.t1.Flush(); err != nil {
			t.Fatal(err)
		}
		f.s.Notify("t", 1)
		p := answered(c, r, corr)
		if got := spans(t, p.RecordBatches); !slices.Equal(got, []string{"6-7", "8-9"}) || p.HighWatermark != 10 {
			t.Errorf("batches %v HW %d", got, p.HighWatermark)
		}
	})
	t.Run("woken by a new served epoch: fenced", func(t *testing.T) {
		c := dial(t, f.addr)
		r := poll(0, 22, 3)
		corr := c.send(r)
		waitFor(t, func() bool { return f.s.waiting() == 1 })
		f.cat.serve("t", 0, f.t0, 4)
		f.s.Notify("t", 0)
		if p := answered(c, r, corr); p.ErrorCode != kerr.FencedLeaderEpoch.Code {
			t.Errorf("error %d, want FENCED_LEADER_EPOCH", p.ErrorCode)
		}
		f.cat.serve("t", 0, f.t0, 3)
	})
	t.Run("MaxWait passes", func(t *testing.T) {
		c := dial(t, f.addr)
		r := poll(0, 0, -1)
		r.MaxWaitMillis, r.MinBytes = 20, 1<<30
		p := c.do(r).(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if p.ErrorCode != 0 || len(spans(t, p.RecordBatches)) != 11 {
			t.Errorf("error %d, %d batches", p.ErrorCode, len(spans(t, p.RecordBatches)))
		}
	})
	t.Run("an error answers at once", func(t *testing.T) {
		c := dial(t, f.addr)
		if p := c.do(poll(0, 99, -1)).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code {
			t.Errorf("error %d", p.ErrorCode)
		}
	})
	t.Run("nothing to read answers at once", func(t *testing.T) {
		c := dial(t, f.addr)
		r := fetchOne(12, "nope", [16]byte{}, 0, 0)
		r.MaxWaitMillis, r.MinBytes = int32(time.Hour/time.Millisecond), 1
		if p := c.do(r).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("error %d", p.ErrorCode)
		}
	})
	if n := f.s.waiting(); n != 0 {
		t.Errorf("%d waiters left", n)
	}
}

// Retention passing the fetch offset, and a storage failure.
func TestFetchLogStart(t *testing.T) {
	f := newFetchFixture(t)
	if err := f.t0.DeleteBefore(6); err != nil {
		t.Fatal(err)
	}
	c := dial(t, f.addr)
	if p := c.do(fetchOne(12, "t", [16]byte{}, 0, 4)).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("below the log start: error %d", p.ErrorCode)
	}
	p := c.do(fetchOne(12, "t", [16]byte{}, 0, 6)).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LogStartOffset != 6 || spans(t, p.RecordBatches)[0] != "6-7" {
		t.Errorf("at the log start: error %d, log start %d, %v", p.ErrorCode, p.LogStartOffset, spans(t, p.RecordBatches))
	}
	f.cat.serve("t", 0, brokenLog{f.t0}, 3)
	for v, want := range map[int16]*kerr.Error{5: kerr.NotLeaderForPartition, 6: kerr.KafkaStorageError} {
		if p := c.do(fetchOne(v, "t", [16]byte{}, 0, 6)).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != want.Code {
			t.Errorf("v%d storage error: code %d, want %v", v, p.ErrorCode, want)
		}
	}
}

// brokenLog fails every read, as a batch that fails its CRC or a failed
// disk would.
type brokenLog struct{ Log }

func (brokenLog) Read(int64, int) ([]byte, error) { return nil, fmt.Errorf("CRC mismatch") }

func (brokenLog) ReadSection(offset int64, _ int, _ int64, _ bool) (Section, int64, error) {
	return nil, offset, fmt.Errorf("reading the log failed")
}

// raceCatalog serves one partition whose log a truncation has already cut
// when the first lookup still sees the old epoch; every later lookup sees
// the epoch the truncation raised (the fetcher unserves a partition while
// it truncates and serves it again at a higher epoch).
type raceCatalog struct {
	*testCatalog
	mu     sync.Mutex
	looked bool
}

func (c *raceCatalog) Partition(topic string, p int32) (Log, int32, bool) {
	l, epoch, ok := c.testCatalog.Partition(topic, p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.looked {
		c.looked = true
		return l, epoch - 1, ok
	}
	return l, epoch, ok
}

// TestFetchDuringTruncation: a Fetch that looked the partition up just
// before a truncation and then finds its offset past the shorter log is
// answered as after a leader change (fenced, or NOT_LEADER_OR_FOLLOWER
// without an epoch), never OFFSET_OUT_OF_RANGE, which would make a
// consumer reset instead of validating its position (KIP-320).
func TestFetchDuringTruncation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version int16
		current int32
		want    error
	}{
		{"names the old epoch", 12, 3, kerr.FencedLeaderEpoch},
		{"names no epoch", 12, -1, kerr.NotLeaderForPartition},
		{"v4", 4, -1, kerr.NotLeaderForPartition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat := &raceCatalog{testCatalog: newCatalog()}
			cat.add("t", 1, 1)
			// The log after the truncation: offsets 0-9, served at epoch 4.
			cat.serve("t", 0, openLog(t, "t", 0, false, run(0, 3, 5, 2)), 4)
			_, addr := testServer(t, cat)
			c := dial(t, addr)
			req := fetchOne(tc.version, "t", cat.id("t"), 0, 15) // read before the cut
			req.Topics[0].Partitions[0].CurrentLeaderEpoch = tc.current
			resp := c.do(req).(*kmsg.FetchResponse)
			got := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
			if got != tc.want {
				t.Fatalf("Fetch at 15 during a truncation to 10: %v, want %v", got, tc.want)
			}
		})
	}
}
