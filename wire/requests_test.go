package wire

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	tpA0 = TopicPartition{"a", 0}
	tpA1 = TopicPartition{"a", 1}
	tpB0 = TopicPartition{"b", 0}
	idA  = TopicID{1, 2, 3}
	idB  = TopicID{9}
)

// roundTrip encodes req at version v and decodes it again, as a broker
// reads it: what we mean to send is what goes on the wire.
func roundTrip[T kmsg.Request](t *testing.T, req T, v int16, into T) T {
	t.Helper()
	req.SetVersion(v)
	into.SetVersion(v)
	if err := into.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatalf("decoding %T v%d: %v", req, v, err)
	}
	return into
}

// OffsetsForLeaderEpoch goes out as a consumer's (replica id -1, not
// kmsg's default -2), fenced with CurrentLeaderEpoch, one entry per
// partition, topics and partitions sorted.
func TestOffsetsForLeaderEpochRequest(t *testing.T) {
	qs := map[TopicPartition]EpochQuery{
		tpB0: {CurrentLeaderEpoch: 7, LeaderEpoch: 5},
		tpA1: {CurrentLeaderEpoch: 4, LeaderEpoch: 2},
		tpA0: {CurrentLeaderEpoch: 4, LeaderEpoch: 3},
	}
	req := roundTrip(t, OffsetsForLeaderEpochRequest(qs), 4, kmsg.NewPtrOffsetForLeaderEpochRequest())
	if req.ReplicaID != -1 {
		t.Fatalf("replica id %d, want -1", req.ReplicaID)
	}
	var got []string
	for _, rt := range req.Topics {
		for _, p := range rt.Partitions {
			got = append(got, rt.Topic+string(rune('0'+p.Partition)))
			q := qs[TopicPartition{rt.Topic, p.Partition}]
			if p.CurrentLeaderEpoch != q.CurrentLeaderEpoch || p.LeaderEpoch != q.LeaderEpoch {
				t.Fatalf("%s-%d: sent %d/%d, want %d/%d", rt.Topic, p.Partition, p.CurrentLeaderEpoch, p.LeaderEpoch, q.CurrentLeaderEpoch, q.LeaderEpoch)
			}
		}
	}
	if !slices.Equal(got, []string{"a0", "a1", "b0"}) {
		t.Fatalf("order %v", got)
	}

	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
	rt.Topic = "a"
	p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
	p.Partition, p.LeaderEpoch, p.EndOffset = 0, 3, 120
	q := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
	q.Partition, q.ErrorCode = 9, kerr.NotLeaderForPartition.Code // not asked: ignored
	rt.Partitions = append(rt.Partitions, p, q)
	resp.Topics = append(resp.Topics, rt)
	replies, missing := OffsetsForLeaderEpochReplies(resp, qs)
	if r := replies[tpA0]; r.ErrorCode != 0 || r.EpochEndOffset != (EpochEndOffset{Epoch: 3, EndOffset: 120}) || len(replies) != 1 {
		t.Fatalf("replies %+v", replies)
	}
	slices.SortFunc(missing, func(x, y TopicPartition) int { return compareTP(x, y) })
	if !slices.Equal(missing, []TopicPartition{tpA1, tpB0}) {
		t.Fatalf("missing %v, want a-1 and b-0", missing)
	}
}

func compareTP(x, y TopicPartition) int {
	if x.Topic != y.Topic {
		if x.Topic < y.Topic {
			return -1
		}
		return 1
	}
	return int(x.Partition - y.Partition)
}

// Fetch goes out sessionless, read_uncommitted, as a consumer, with the
// KIP-320 fence and KIP-595's LastFetchedEpoch; from v13 topics travel by
// id, before by name.
func TestFetchRequest(t *testing.T) {
	fs := map[TopicPartition]FetchPartition{
		tpA0: {Offset: 100, CurrentLeaderEpoch: 4, LastFetchedEpoch: 3, LogStartOffset: 0},
		tpB0: {Offset: 7, CurrentLeaderEpoch: 2, LastFetchedEpoch: -1, LogStartOffset: 5},
	}
	ids := map[string]TopicID{"a": idA, "b": idB}
	for _, v := range []int16{12, 13, 17} {
		req := roundTrip(t, FetchRequest(fs, ids, DefaultFetchLimits), v, kmsg.NewPtrFetchRequest())
		if v >= 15 {
			if req.ReplicaState.ID != -1 {
				t.Fatalf("v%d: replica state id %d, want -1", v, req.ReplicaState.ID)
			}
		} else if req.ReplicaID != -1 {
			t.Fatalf("v%d: replica id %d, want -1", v, req.ReplicaID)
		}
		if req.IsolationLevel != 0 || req.SessionID != 0 || req.SessionEpoch != -1 {
			t.Fatalf("v%d: isolation %d session %d/%d, want read_uncommitted and sessionless", v, req.IsolationLevel, req.SessionID, req.SessionEpoch)
		}
		for _, rt := range req.Topics {
			name := rt.Topic
			if v >= 13 {
				for n, id := range ids {
					if id == rt.TopicID {
						name = n
					}
				}
				if rt.Topic != "" {
					t.Fatalf("v%d carries the topic name %q; from v13 only the id", v, rt.Topic)
				}
			}
			for _, p := range rt.Partitions {
				f, ok := fs[TopicPartition{name, p.Partition}]
				if !ok || p.FetchOffset != f.Offset || p.CurrentLeaderEpoch != f.CurrentLeaderEpoch ||
					p.LastFetchedEpoch != f.LastFetchedEpoch || p.LogStartOffset != f.LogStartOffset {
					t.Fatalf("v%d: %s-%d sent %+v, want %+v", v, name, p.Partition, p, f)
				}
			}
		}
	}
}

// A v13+ response names topics by id; a response-level error fails every
// partition; the KIP-951 leader hint is passed on only when present.
func TestFetchReplies(t *testing.T) {
	fs := map[TopicPartition]FetchPartition{tpA0: {Offset: 1}, tpA1: {Offset: 2}, tpB0: {Offset: 3}}
	ids := map[string]TopicID{"a": idA, "b": idB}

	resp := kmsg.NewPtrFetchResponse()
	rt := kmsg.NewFetchResponseTopic()
	rt.TopicID = idA
	p0 := kmsg.NewFetchResponseTopicPartition()
	p0.Partition, p0.HighWatermark, p0.LogStartOffset, p0.RecordBatches = 0, 50, 0, batch.BuildRun(1, 0, 3, 1)
	p1 := kmsg.NewFetchResponseTopicPartition()
	p1.Partition, p1.ErrorCode = 1, kerr.NotLeaderForPartition.Code
	p1.CurrentLeader.LeaderID, p1.CurrentLeader.LeaderEpoch = 3, 9
	p1.DivergingEpoch.Epoch, p1.DivergingEpoch.EndOffset = 2, 40
	rt.Partitions = append(rt.Partitions, p0, p1)
	resp.Topics = append(resp.Topics, rt)

	results, missing := FetchReplies(resp, fs, ids)
	r0, r1 := results[tpA0], results[tpA1]
	if r0.ErrorCode != 0 || r0.HighWatermark != 50 || r0.Batches.Records != 3 || r0.Leader != nil ||
		r0.Diverging != (EpochEndOffset{Epoch: -1, EndOffset: -1}) {
		t.Fatalf("a-0: %+v", r0)
	}
	if r1.ErrorCode != kerr.NotLeaderForPartition.Code || r1.Leader == nil || *r1.Leader != (LeaderHint{Leader: 3, LeaderEpoch: 9}) ||
		r1.Diverging != (EpochEndOffset{Epoch: 2, EndOffset: 40}) {
		t.Fatalf("a-1: %+v", r1)
	}
	if !slices.Equal(missing, []TopicPartition{tpB0}) {
		t.Fatalf("missing %v, want b-0", missing)
	}

	top := kmsg.NewPtrFetchResponse()
	top.ErrorCode = kerr.UnknownServerError.Code
	results, missing = FetchReplies(top, fs, ids)
	if len(results) != 3 || len(missing) != 0 {
		t.Fatalf("a response-level error: %d results, missing %v", len(results), missing)
	}
	for tp, r := range results {
		if _, ok := fs[tp]; !ok || r.ErrorCode != kerr.UnknownServerError.Code || r.HighWatermark != -1 || r.LogStartOffset != -1 {
			t.Fatalf("%s: %+v", tp, r)
		}
	}
}

// The one scan of a Fetch answer's batches: a partial last batch (a broker
// may cut it) is dropped from Records and measured in Tail; records are
// counted from the headers of the whole batches; epochs come in runs; a
// batch that cannot be framed stops the scan with a *batch.Error, and
// Records then keeps it for the driver to report.
func TestFetchRepliesScanBatches(t *testing.T) {
	e1 := batch.BuildRun(10, 1, 2, 3) // offsets 10..15, epoch 1
	e3 := batch.BuildRun(16, 3, 1, 4) // offsets 16..19, epoch 3
	cut := batch.BuildRun(20, 3, 1, 2)
	whole := slices.Concat(e1, e3)
	bad := slices.Clone(cut)
	bad[16] = 1 // magic 1
	for _, c := range []struct {
		name       string
		raw        []byte
		records    []byte
		want       Batches
		wantFramed bool // Err is a *batch.Error
	}{
		{name: "empty", raw: nil, records: nil, want: Batches{}},
		{name: "whole", raw: whole, records: whole,
			want: Batches{Whole: len(whole), Records: 10, Epochs: []EpochRun{{Epoch: 1, BaseOffset: 10, Batches: 2}, {Epoch: 3, BaseOffset: 16, Batches: 1}}}},
		{name: "partial tail", raw: slices.Concat(whole, cut[:len(cut)-1]), records: whole,
			want: Batches{Whole: len(whole), Records: 10, Tail: len(cut) - 1, Epochs: []EpochRun{{1, 10, 2}, {3, 16, 1}}}},
		{name: "only a partial batch", raw: e1[:20], records: []byte{}, want: Batches{Tail: 20}},
		{name: "unframable", raw: slices.Concat(e1, bad), records: slices.Concat(e1, bad),
			want: Batches{Whole: len(e1), Records: 6, Epochs: []EpochRun{{1, 10, 2}}}, wantFramed: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sent := map[TopicPartition]FetchPartition{tpA0: {}}
			resp := kmsg.NewPtrFetchResponse()
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = "a"
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.RecordBatches = c.raw
			rt.Partitions = append(rt.Partitions, rp)
			resp.Topics = append(resp.Topics, rt)
			answers, _ := FetchReplies(resp, sent, nil)
			a := answers[tpA0]
			if !slices.Equal(a.Records, c.records) {
				t.Errorf("records: %d bytes, want %d", len(a.Records), len(c.records))
			}
			var be *batch.Error
			if framed := errors.As(a.Batches.Err, &be); framed != c.wantFramed {
				t.Errorf("err %v, want a *batch.Error: %v", a.Batches.Err, c.wantFramed)
			}
			got := a.Batches
			got.Err = nil
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("batches %+v, want %+v", got, c.want)
			}
		})
	}
}

// ListOffsets goes out as two requests, EARLIEST and LATEST, with replica
// id -2 so LATEST is the leader's log end, not its high watermark
// (ReplicaManager.fetchOffset), each fenced; audit's log-start request goes
// out as a consumer (-1), so only the leader answers.
func TestListOffsetsRequests(t *testing.T) {
	qs := map[TopicPartition]ListOffsetsQuery{tpA0: {CurrentLeaderEpoch: 6}}
	earliest, latest := ListOffsetsRequests(qs)
	start := LogStartRequest(qs)
	for _, c := range []struct {
		name      string
		req       *kmsg.ListOffsetsRequest
		replica   int32
		timestamp int64
	}{
		{"earliest", earliest, -2, -2},
		{"latest", latest, -2, -1},
		{"log start", start, -1, -2},
	} {
		req := roundTrip(t, c.req, 7, kmsg.NewPtrListOffsetsRequest())
		if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 {
			t.Fatalf("%s: %+v", c.name, req.Topics)
		}
		p := req.Topics[0].Partitions[0]
		if req.ReplicaID != c.replica || p.Timestamp != c.timestamp || p.CurrentLeaderEpoch != 6 || req.Topics[0].Topic != "a" || p.Partition != 0 {
			t.Fatalf("%s: replica %d timestamp %d fence %d, want replica %d timestamp %d fence 6",
				c.name, req.ReplicaID, p.Timestamp, p.CurrentLeaderEpoch, c.replica, c.timestamp)
		}
	}
}

// The two ListOffsets halves merge into one answer per partition: log start
// from EARLIEST, log end from LATEST, the first error of the two; a
// partition either half lacks is missing.
func TestListOffsetsReplies(t *testing.T) {
	qs := map[TopicPartition]ListOffsetsQuery{tpA0: {}, tpA1: {}, tpB0: {}}
	listed := func(parts map[TopicPartition]ListedOffset) *kmsg.ListOffsetsResponse {
		resp := kmsg.NewPtrListOffsetsResponse()
		topics, byT := byTopic(parts)
		for _, tn := range topics {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = tn
			for _, p := range byT[tn] {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition = p
				rp.ErrorCode, rp.Offset = parts[TopicPartition{tn, p}].ErrorCode, parts[TopicPartition{tn, p}].Offset
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	fenced := kerr.FencedLeaderEpoch.Code
	earliest := listed(map[TopicPartition]ListedOffset{tpA0: {Offset: 5}, tpA1: {Offset: 0}, tpB0: {Offset: 1}, {"c", 0}: {Offset: 9}})
	latest := listed(map[TopicPartition]ListedOffset{tpA0: {Offset: 80}, tpA1: {ErrorCode: fenced, Offset: -1}})
	answers, missing := ListOffsetsReplies(earliest, latest, qs)
	if a := answers[tpA0]; a != (ListOffsetsAnswer{LogStartOffset: 5, LogEndOffset: 80}) {
		t.Fatalf("a-0: %+v", a)
	}
	if a := answers[tpA1]; a.ErrorCode != fenced {
		t.Fatalf("a-1: the LATEST half's error is lost: %+v", a)
	}
	if len(answers) != 2 || !slices.Equal(missing, []TopicPartition{tpB0}) {
		t.Fatalf("answers %+v, missing %v; want b-0 missing (no LATEST half) and c-0 (not asked) ignored", answers, missing)
	}
	// The EARLIEST half's error comes first.
	earliest = listed(map[TopicPartition]ListedOffset{tpA0: {ErrorCode: kerr.NotLeaderForPartition.Code}})
	answers, _ = ListOffsetsReplies(earliest, latest, qs)
	if a := answers[tpA0]; a.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("a-0: %+v", a)
	}
}

// FetchRequestInOrder keeps the order given, a topic entry for each run of
// one topic's partitions (as Kafka's FetchRequest.Builder writes them),
// and skips what the order names without a fetch.
func TestFetchRequestInOrder(t *testing.T) {
	fs := map[TopicPartition]FetchPartition{tpA0: {Offset: 1}, tpA1: {Offset: 2}, tpB0: {Offset: 3}}
	order := []TopicPartition{tpA1, tpB0, {Topic: "c", Partition: 9}, tpA0}
	req := FetchRequestInOrder(order, fs, map[string]TopicID{"a": idA, "b": idB}, DefaultFetchLimits)
	var got []string
	for _, rt := range req.Topics {
		var ps []string
		for _, p := range rt.Partitions {
			ps = append(ps, fmt.Sprintf("%d@%d", p.Partition, p.FetchOffset))
		}
		got = append(got, fmt.Sprintf("%s[%s]", rt.Topic, strings.Join(ps, " ")))
	}
	if s := strings.Join(got, " "); s != "a[1@2] b[0@3] a[0@1]" {
		t.Fatalf("topics in the request: %s, want a[1@2] b[0@3] a[0@1]", s)
	}
	if req.Topics[2].TopicID != idA {
		t.Fatalf("the second entry of topic a carries id %x, want %x", req.Topics[2].TopicID, idA)
	}
}
