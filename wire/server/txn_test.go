package server

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnStoryLog is a log of plain records and transactions of three
// producers (storage's txn tests tell the same story):
//
//	0-1 plain; 2-3 p7; 4 p8; 5 plain; 6 ABORT p7; 7-8 p7; 9 COMMIT p8;
//	10 ABORT p9 (an empty transaction); 11 ABORT p7; 12 p9, still open
//
// so read_committed sees 0, 1, 4, 5 and the LSO is 12.
func txnStoryLog(t *testing.T) Log {
	data := func(base, pid int64, n int) []byte {
		return batch.Build(batch.Spec{BaseOffset: base, Records: n, Transactional: true, ProducerID: pid})
	}
	marker := func(base, pid int64, commit bool) []byte {
		ctrl := byte(0) // ABORT (ControlRecordType)
		if commit {
			ctrl = 1
		}
		return batch.Build(batch.Spec{BaseOffset: base, Records: 1, Control: true, Transactional: true, ProducerID: pid,
			Key: []byte{0, 0, 0, ctrl}, Value: []byte{0, 0, 0, 0, 0, 5}})
	}
	plain := func(base int64, n int) []byte { return batch.Build(batch.Spec{BaseOffset: base, Records: n}) }
	return openLog(t, "t", 0, false,
		plain(0, 2), data(2, 7, 2), data(4, 8, 1), plain(5, 1), marker(6, 7, false),
		data(7, 7, 2), marker(9, 8, true), marker(10, 9, false), marker(11, 7, false), data(12, 9, 1))
}

type aborted = kmsg.FetchResponseTopicPartitionAbortedTransaction

func abortedOf(pairs ...int64) []aborted {
	out := []aborted{}
	for i := 0; i < len(pairs); i += 2 {
		a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		a.ProducerID, a.FirstOffset = pairs[i], pairs[i+1]
		out = append(out, a)
	}
	return out
}

// Fetch under both isolation levels (LocalLog.read, UnifiedLog
// .collectAbortedTransactions), and ListOffsets latest.
func TestFetchTransactions(t *testing.T) {
	cat := newCatalog()
	cat.add("t", 1, 1)
	cat.serve("t", 0, txnStoryLog(t), 0)
	_, addr := testServer(t, cat)
	c := dial(t, addr)

	for _, tc := range []struct {
		name      string
		committed bool
		offset    int64
		maxBytes  int32
		spans     []string
		aborted   []aborted // nil: null
	}{
		{"read_uncommitted", false, 0, 1 << 20, []string{"0-1", "2-3", "4-4", "5-5", "6-6", "7-8", "9-9", "10-10", "11-11", "12-12"}, nil},
		{"read_committed to the LSO", true, 0, 1 << 20, []string{"0-1", "2-3", "4-4", "5-5", "6-6", "7-8", "9-9", "10-10", "11-11"}, abortedOf(7, 2, 7, 7)},
		{"read_committed from 7", true, 7, 1 << 20, []string{"7-8", "9-9", "10-10", "11-11"}, abortedOf(7, 7)},
		{"read_committed, one batch", true, 0, 1, []string{"0-1"}, abortedOf()},
		{"read_committed, one batch of the aborted transaction", true, 2, 1, []string{"2-3"}, abortedOf(7, 2)},
		{"read_committed at the LSO", true, 12, 1 << 20, nil, abortedOf()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fetchOne(12, "t", [16]byte{}, 0, tc.offset)
			r.Topics[0].Partitions[0].PartitionMaxBytes = tc.maxBytes
			if tc.committed {
				r.IsolationLevel = 1
			}
			p := c.do(r).(*kmsg.FetchResponse).Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.HighWatermark != 13 || p.LastStableOffset != 12 {
				t.Errorf("error %d HW %d LSO %d, want 0 13 12", p.ErrorCode, p.HighWatermark, p.LastStableOffset)
			}
			if got := spans(t, p.RecordBatches); !slices.Equal(got, tc.spans) {
				t.Errorf("batches %v, want %v", got, tc.spans)
			}
			same := slices.EqualFunc(p.AbortedTransactions, tc.aborted, func(a, b aborted) bool {
				return a.ProducerID == b.ProducerID && a.FirstOffset == b.FirstOffset
			})
			if (p.AbortedTransactions == nil) != (tc.aborted == nil) || !same {
				t.Errorf("aborted %v (nil %v), want %v", p.AbortedTransactions, p.AbortedTransactions == nil, tc.aborted)
			}
		})
	}

	for _, tc := range []struct {
		v         int16
		replica   int32
		isolation int8
		want      int64
	}{{2, -1, 0, 13}, {2, -1, 1, 12}, {11, -1, 1, 12}, {11, -2, 1, 13}} {
		req := at(kmsg.NewPtrListOffsetsRequest(), tc.v)
		req.ReplicaID, req.IsolationLevel = tc.replica, tc.isolation
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		got := c.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if got.ErrorCode != 0 || got.Offset != tc.want {
			t.Errorf("ListOffsets v%d replica %d isolation %d latest: error %d offset %d, want %d", tc.v, tc.replica, tc.isolation, got.ErrorCode, got.Offset, tc.want)
		}
	}
}

// franz-go's consumer, the judge of what the answers mean: read_committed
// skips exactly the aborted records (and never sees p9's open one),
// read_uncommitted sees every data record; neither sees a marker.
func TestKgoReadCommitted(t *testing.T) {
	cat := newCatalog()
	cat.add("t", 1, 1)
	cat.serve("t", 0, txnStoryLog(t), 0)
	_, addr := testServer(t, cat)
	for _, tc := range []struct {
		name  string
		level kgo.IsolationLevel
		want  []int64
	}{
		{"read_committed", kgo.ReadCommitted(), []int64{0, 1, 4, 5}},
		{"read_uncommitted", kgo.ReadUncommitted(), []int64{0, 1, 2, 3, 4, 5, 7, 8, 12}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(tc.level),
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}}),
				kgo.FetchMaxWait(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var got []int64
			for len(got) < len(tc.want) {
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					t.Fatalf("after %v: %v", got, ctx.Err())
				}
				fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
				fs.EachRecord(func(r *kgo.Record) { got = append(got, r.Offset) })
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("offsets %v, want %v", got, tc.want)
			}
		})
	}
}
