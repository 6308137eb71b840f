package wire

import (
	"testing"

	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kgo sends each request at min(kmsg's maximum, the broker's maximum from
// ApiVersions), so kfollower may speak any version from the oldest a
// supported broker accepts to the newest kmsg encodes. The oldest, per
// KIP-896 (removed in Kafka 4.0, docs/kafka.md §13.1):
//
//	API                   Kafka 3.9  Kafka 4.x  kmsg v1.15.1 max
//	Fetch                 0-17       4-17/18    18
//	ListOffsets           0-9        1-10/11    11
//	OffsetForLeaderEpoch  0-4        2-4        4
//
// A 3.9 broker still accepts the removed versions, but kgo asks at the
// broker's maximum when kmsg's is higher, so against 3.9 we speak Fetch 17, ListOffsets 9 and
// OffsetForLeaderEpoch 4. The tests below run from the 4.x minimums up, so
// they cover the versions below where kfollower's fields begin, as an older
// broker gets them (Fetch < 12 before Kafka 2.7: no DivergingEpoch).
//
// Each test builds with wire's builder, encodes at the version, decodes as
// a broker would (fields the version lacks keep the schema default), and
// checks which of kfollower's fields survive.

// versionsTo lists from..to.
func versionsTo(from, to int16) []int16 {
	var vs []int16
	for v := from; v <= to; v++ {
		vs = append(vs, v)
	}
	return vs
}

// since is what a broker reads at version v for a field that exists from
// version first: the value sent, or the schema default.
func since[T any](v, first int16, sent, absent T) T {
	if v >= first {
		return sent
	}
	return absent
}

// Fetch v4..max: CurrentLeaderEpoch (KIP-320) from v9, LogStartOffset from
// v5, sessions from v7, LastFetchedEpoch (KIP-595) from v12, topic ids
// from v13 (names before), the replica id in ReplicaState from v15
// (KIP-903); read_uncommitted and replica id -1 at every version.
func TestFetchRequestVersions(t *testing.T) {
	sent := FetchPartition{Offset: 100, CurrentLeaderEpoch: 4, LastFetchedEpoch: 3, LogStartOffset: 10}
	fs := map[TopicPartition]FetchPartition{tpA0: sent}
	ids := map[string]TopicID{"a": idA}
	for _, v := range versionsTo(4, (*kmsg.FetchRequest)(nil).MaxVersion()) {
		req := roundTrip(t, FetchRequest(fs, ids, DefaultFetchLimits), v, kmsg.NewPtrFetchRequest())
		if req.ReplicaID != -1 || req.ReplicaState.ID != -1 {
			t.Errorf("v%d: replica id %d, replica state id %d; want a consumer's -1", v, req.ReplicaID, req.ReplicaState.ID)
		}
		if req.IsolationLevel != 0 {
			t.Errorf("v%d: isolation level %d, want read_uncommitted (0)", v, req.IsolationLevel)
		}
		if req.SessionID != 0 || req.SessionEpoch != -1 {
			t.Errorf("v%d: session %d/%d, want sessionless 0/-1", v, req.SessionID, req.SessionEpoch)
		}
		if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d: topics %+v", v, req.Topics)
		}
		rt, p := req.Topics[0], req.Topics[0].Partitions[0]
		// Names up to v12, ids from v13 (KIP-516): the decoded request
		// holds only the one the version carries.
		if want := since(v, 13, idA, TopicID{}); rt.TopicID != want {
			t.Errorf("v%d: topic id %x, want %x", v, rt.TopicID, want)
		}
		if want := since(v, 13, "", "a"); rt.Topic != want {
			t.Errorf("v%d: topic name %q, want %q", v, rt.Topic, want)
		}
		if p.Partition != 0 || p.FetchOffset != sent.Offset {
			t.Errorf("v%d: partition %d offset %d", v, p.Partition, p.FetchOffset)
		}
		if want := since(v, 9, sent.CurrentLeaderEpoch, -1); p.CurrentLeaderEpoch != want {
			t.Errorf("v%d: CurrentLeaderEpoch %d, want %d", v, p.CurrentLeaderEpoch, want)
		}
		if want := since(v, 12, sent.LastFetchedEpoch, -1); p.LastFetchedEpoch != want {
			t.Errorf("v%d: LastFetchedEpoch %d, want %d", v, p.LastFetchedEpoch, want)
		}
		if want := since(v, 5, sent.LogStartOffset, -1); p.LogStartOffset != want {
			t.Errorf("v%d: LogStartOffset %d, want %d", v, p.LogStartOffset, want)
		}
	}
}

// A Fetch response at each version, with a DivergingEpoch and a KIP-951
// leader hint set by the broker, read through FetchReplies: both tagged
// fields exist from v12 (flexible versions); below, the reply reports no
// divergence ({-1, -1}) and no hint, and kfollower has only the
// OffsetsForLeaderEpoch walk it does at every new leader epoch. The topic
// is found by name below v13 and by id from v13.
func TestFetchRepliesVersions(t *testing.T) {
	sent := map[TopicPartition]FetchPartition{tpA0: {Offset: 100, CurrentLeaderEpoch: 4, LastFetchedEpoch: 3}}
	ids := map[string]TopicID{"a": idA}
	records := batch.BuildRun(100, 4, 1, 2)
	for _, v := range versionsTo(4, (*kmsg.FetchRequest)(nil).MaxVersion()) {
		resp := kmsg.NewPtrFetchResponse()
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = "a", idA
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LogStartOffset, rp.RecordBatches = 120, 10, records
		rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = 2, 90
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = 3, 4
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		resp.SetVersion(v)
		got := kmsg.NewPtrFetchResponse()
		got.SetVersion(v)
		if err := got.ReadFrom(resp.AppendTo(nil)); err != nil {
			t.Fatalf("decoding FetchResponse v%d: %v", v, err)
		}

		answers, missing := FetchReplies(got, sent, ids)
		a, ok := answers[tpA0]
		if !ok || len(missing) != 0 {
			t.Fatalf("v%d: a-0 not matched (answers %+v, missing %v)", v, answers, missing)
		}
		if want := since(v, 12, EpochEndOffset{Epoch: 2, EndOffset: 90}, EpochEndOffset{Epoch: -1, EndOffset: -1}); a.Diverging != want {
			t.Errorf("v%d: Diverging %+v, want %+v", v, a.Diverging, want)
		}
		if present := a.Leader != nil; present != (v >= 12) {
			t.Errorf("v%d: leader hint %+v, want one only from v12", v, a.Leader)
		} else if present && *a.Leader != (LeaderHint{Leader: 3, LeaderEpoch: 4}) {
			t.Errorf("v%d: leader hint %+v", v, *a.Leader)
		}
		if a.HighWatermark != 120 || a.Batches.Records != 2 {
			t.Errorf("v%d: high watermark %d, %d records", v, a.HighWatermark, a.Batches.Records)
		}
		if want := since[int64](v, 5, 10, -1); a.LogStartOffset != want {
			t.Errorf("v%d: log start %d, want %d", v, a.LogStartOffset, want)
		}
	}
}

// OffsetForLeaderEpoch v2..max: v2 is the 4.x baseline and carries
// CurrentLeaderEpoch (KIP-320); the replica id exists from v3, and below it
// a broker reads the schema default -2, which it does not use for this API
// (KafkaApis.handleOffsetForLeaderEpochRequest). The answer's epoch and end
// offset (KIP-279) are read at every version.
func TestOffsetsForLeaderEpochVersions(t *testing.T) {
	qs := map[TopicPartition]EpochQuery{tpA0: {CurrentLeaderEpoch: 7, LeaderEpoch: 5}}
	for _, v := range versionsTo(2, (*kmsg.OffsetForLeaderEpochRequest)(nil).MaxVersion()) {
		req := roundTrip(t, OffsetsForLeaderEpochRequest(qs), v, kmsg.NewPtrOffsetForLeaderEpochRequest())
		if want := since[int32](v, 3, -1, -2); req.ReplicaID != want {
			t.Errorf("v%d: replica id %d, want %d", v, req.ReplicaID, want)
		}
		if len(req.Topics) != 1 || req.Topics[0].Topic != "a" || len(req.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d: topics %+v", v, req.Topics)
		}
		if p := req.Topics[0].Partitions[0]; p.Partition != 0 || p.CurrentLeaderEpoch != 7 || p.LeaderEpoch != 5 {
			t.Errorf("v%d: partition %d current leader epoch %d leader epoch %d, want 0/7/5", v, p.Partition, p.CurrentLeaderEpoch, p.LeaderEpoch)
		}

		resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = "a"
		rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
		rp.LeaderEpoch, rp.EndOffset = 3, 120
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		resp.SetVersion(v)
		got := kmsg.NewPtrOffsetForLeaderEpochResponse()
		got.SetVersion(v)
		if err := got.ReadFrom(resp.AppendTo(nil)); err != nil {
			t.Fatalf("decoding OffsetForLeaderEpochResponse v%d: %v", v, err)
		}
		answers, missing := OffsetsForLeaderEpochReplies(got, qs)
		if a := answers[tpA0]; len(missing) != 0 || a != (EpochAnswer{EpochEndOffset: EpochEndOffset{Epoch: 3, EndOffset: 120}}) {
			t.Errorf("v%d: answer %+v, missing %v", v, a, missing)
		}
	}
}

// ListOffsets v1..max (v0 removed in 4.0): the replica id and timestamp at
// every version, read_uncommitted from v2, the CurrentLeaderEpoch fence
// (KIP-320) from v4; below v4 the request is unfenced. The answer's offset
// is read at every version.
func TestListOffsetsVersions(t *testing.T) {
	qs := map[TopicPartition]ListOffsetsQuery{tpA0: {CurrentLeaderEpoch: 6}}
	earliest, latest := ListOffsetsRequests(qs)
	for _, v := range versionsTo(1, (*kmsg.ListOffsetsRequest)(nil).MaxVersion()) {
		for _, c := range []struct {
			name      string
			req       *kmsg.ListOffsetsRequest
			replica   int32
			timestamp int64
		}{
			{"earliest", earliest, -2, -2},
			{"latest", latest, -2, -1},
			{"log start", LogStartRequest(qs), -1, -2},
		} {
			req := roundTrip(t, c.req, v, kmsg.NewPtrListOffsetsRequest())
			if req.ReplicaID != c.replica || req.IsolationLevel != 0 {
				t.Errorf("v%d %s: replica id %d isolation %d, want %d and read_uncommitted", v, c.name, req.ReplicaID, req.IsolationLevel, c.replica)
			}
			if len(req.Topics) != 1 || req.Topics[0].Topic != "a" || len(req.Topics[0].Partitions) != 1 {
				t.Fatalf("v%d %s: topics %+v", v, c.name, req.Topics)
			}
			p := req.Topics[0].Partitions[0]
			if p.Partition != 0 || p.Timestamp != c.timestamp {
				t.Errorf("v%d %s: partition %d timestamp %d, want 0 and %d", v, c.name, p.Partition, p.Timestamp, c.timestamp)
			}
			if want := since[int32](v, 4, 6, -1); p.CurrentLeaderEpoch != want {
				t.Errorf("v%d %s: CurrentLeaderEpoch %d, want %d", v, c.name, p.CurrentLeaderEpoch, want)
			}
		}

		resp := kmsg.NewPtrListOffsetsResponse()
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = "a"
		rp := kmsg.NewListOffsetsResponseTopicPartition()
		rp.Offset = 42
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		resp.SetVersion(v)
		got := kmsg.NewPtrListOffsetsResponse()
		got.SetVersion(v)
		if err := got.ReadFrom(resp.AppendTo(nil)); err != nil {
			t.Fatalf("decoding ListOffsetsResponse v%d: %v", v, err)
		}
		answers, missing := ListedOffsets(got, qs)
		if a := answers[tpA0]; len(missing) != 0 || a != (ListedOffset{Offset: 42}) {
			t.Errorf("v%d: answer %+v, missing %v", v, a, missing)
		}
	}
}
