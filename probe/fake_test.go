package probe

import (
	"context"
	"fmt"
	"testing"

	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeLeader is a crafted broker: the leader of one partition, topic "t"
// partition 0, that answers as Kafka does, written from Kafka's rules
// directly (not from the probe's model): the epoch cache is a list of
// entries and endOffsetFor is LeaderEpochFileCache.endOffsetFor, Fetch
// follows Partition.readRecords, ListOffsets ReplicaManager.fetchOffset.
// A test makes it wrong in exactly one way through wrong, which may
// rewrite any answer, or through the switches below.
type fakeLeader struct {
	id                int32
	epoch             int32 // the partition's current leader epoch
	topicID           [16]byte
	cache             []Epoch // (epoch, start), ascending
	batches           []fakeBatch
	logStart, hw, lso int64

	// maxVersions overrides the ApiVersions answer per key.
	maxVersions map[kmsg.Key]int16
	// noFence makes an API answer as if CurrentLeaderEpoch were absent;
	// swapFence answers FENCED for a future epoch and UNKNOWN for a stale
	// one.
	noFence, swapFence map[kmsg.Key]bool
	// ignoreLastFetched reads records whatever LastFetchedEpoch says
	// (kfake's Fetch).
	ignoreLastFetched bool
	// wrong, if set, may rewrite the correct answer to req sent to
	// broker.
	wrong func(broker int32, req kmsg.Request, resp kmsg.Response)
	// onRequest, if set, sees every request first.
	onRequest func(broker int32, req kmsg.Request)
	// requests counts requests by key.
	requests map[kmsg.Key]int
}

type fakeBatch struct {
	base    int64
	records int
	epoch   int32
}

// standardLeader's history: epochs 0, 2, 5 and the current 7 (1, 3, 4 and
// 6 never wrote: elections without writes, or leaders that were replaced),
// ten-record batches, an open transaction from 230 and 10 records above
// the high watermark.
//
//	cache 0@0 2@100 5@150 7@200; log start 0, LSO 230, HW 240, log end 250
func standardLeader() *fakeLeader {
	f := &fakeLeader{id: 1, epoch: 7, topicID: [16]byte{1, 2, 3}, lso: 230, hw: 240}
	f.cache = []Epoch{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 100}, {Epoch: 5, StartOffset: 150}, {Epoch: 7, StartOffset: 200}}
	f.write(0, 100, 0)
	f.write(100, 50, 2)
	f.write(150, 50, 5)
	f.write(200, 50, 7)
	return f
}

// retainedLeader's log was cut by retention to 120, inside epoch 3, whose
// entry truncateFromStart moved there: no epoch 0 to infer, and epochs 0–2
// are below the first entry.
//
//	cache 3@120 5@150 7@200; log start 120, HW = LSO = log end 250
func retainedLeader() *fakeLeader {
	f := &fakeLeader{id: 1, epoch: 7, topicID: [16]byte{4, 5, 6}, logStart: 120, lso: 250, hw: 250}
	f.cache = []Epoch{{Epoch: 3, StartOffset: 120}, {Epoch: 5, StartOffset: 150}, {Epoch: 7, StartOffset: 200}}
	f.write(120, 30, 3)
	f.write(150, 50, 5)
	f.write(200, 50, 7)
	return f
}

// write appends n records stamped epoch from base, in batches of ten.
func (f *fakeLeader) write(base int64, n int, epoch int32) {
	for o := base; o < base+int64(n); o += 10 {
		f.batches = append(f.batches, fakeBatch{base: o, records: int(min(10, base+int64(n)-o)), epoch: epoch})
	}
}

func (f *fakeLeader) logEnd() int64 {
	if n := len(f.batches); n > 0 {
		return f.batches[n-1].base + int64(f.batches[n-1].records)
	}
	return f.logStart
}

// endOffsetFor is LeaderEpochFileCache.endOffsetFor.
func (f *fakeLeader) endOffsetFor(r int32) (int32, int64) {
	if r < 0 || len(f.cache) == 0 {
		return -1, -1
	}
	if f.cache[len(f.cache)-1].Epoch == r {
		return r, f.logEnd()
	}
	var floor, higher *Epoch
	for i := range f.cache {
		e := &f.cache[i]
		if e.Epoch <= r {
			floor = e
		} else if higher == nil {
			higher = e
		}
	}
	switch {
	case higher == nil:
		return -1, -1
	case floor == nil:
		return r, higher.StartOffset
	}
	return floor.Epoch, higher.StartOffset
}

// fence is Partition.checkCurrentLeaderEpoch for key.
func (f *fakeLeader) fence(key kmsg.Key, current int32) int16 {
	if current < 0 || f.noFence[key] {
		return 0
	}
	fenced, unknown := kerr.FencedLeaderEpoch.Code, kerr.UnknownLeaderEpoch.Code
	if f.swapFence[key] {
		fenced, unknown = unknown, fenced
	}
	switch {
	case current < f.epoch:
		return fenced
	case current > f.epoch:
		return unknown
	}
	return 0
}

// read returns the whole batches a consumer may read from offset: those
// below the high watermark holding or after offset, the first one whole
// whatever maxBytes says (KIP-74).
func (f *fakeLeader) read(offset int64, maxBytes int32) []byte {
	var out []byte
	for _, b := range f.batches {
		if b.base+int64(b.records) <= offset || b.base >= f.hw {
			continue
		}
		raw := batch.Build(batch.Spec{BaseOffset: b.base, Epoch: b.epoch, Records: b.records})
		if len(out) > 0 && len(out)+len(raw) > int(maxBytes) {
			break
		}
		out = append(out, raw...)
	}
	return out
}

var _ Cluster = (*fakeLeader)(nil)

func (f *fakeLeader) Request(_ context.Context, broker int32, req kmsg.Request) (kmsg.Response, error) {
	if f.requests == nil {
		f.requests = map[kmsg.Key]int{}
	}
	f.requests[kmsg.Key(req.Key())]++
	if f.onRequest != nil {
		f.onRequest(broker, req)
	}
	if broker != AnyBroker && broker != f.id {
		return nil, fmt.Errorf("fake: no broker %d", broker)
	}
	resp, err := f.answer(req)
	if err == nil && f.wrong != nil {
		f.wrong(broker, req, resp)
	}
	return resp, err
}

func (f *fakeLeader) answer(req kmsg.Request) (kmsg.Response, error) {
	switch req := req.(type) {
	case *kmsg.ApiVersionsRequest:
		resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
		for key, max := range map[kmsg.Key]int16{kmsg.Fetch: 17, kmsg.ListOffsets: 10, kmsg.Metadata: 12, kmsg.OffsetForLeaderEpoch: 4, kmsg.ApiVersions: 4} {
			if v, ok := f.maxVersions[key]; ok {
				max = v
			}
			k := kmsg.NewApiVersionsResponseApiKey()
			k.ApiKey, k.MaxVersion = int16(key), max
			resp.ApiKeys = append(resp.ApiKeys, k)
		}
		return resp, nil

	case *kmsg.MetadataRequest:
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = f.id, "fake", 9092
		resp.Brokers = append(resp.Brokers, b)
		for _, rt := range req.Topics {
			t := kmsg.NewMetadataResponseTopic()
			t.Topic = rt.Topic
			if *rt.Topic != "t" {
				t.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				t.TopicID = f.topicID
				p := kmsg.NewMetadataResponseTopicPartition()
				p.Partition, p.Leader, p.LeaderEpoch = 0, f.id, f.epoch
				p.Replicas, p.ISR = []int32{f.id}, []int32{f.id}
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil

	case *kmsg.OffsetForLeaderEpochRequest:
		resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		for _, rt := range req.Topics {
			t := kmsg.NewOffsetForLeaderEpochResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				p.Partition = rp.Partition
				if p.ErrorCode = f.fence(kmsg.OffsetForLeaderEpoch, rp.CurrentLeaderEpoch); p.ErrorCode == 0 {
					p.LeaderEpoch, p.EndOffset = f.endOffsetFor(rp.LeaderEpoch)
				}
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil

	case *kmsg.ListOffsetsRequest:
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range req.Topics {
			t := kmsg.NewListOffsetsResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewListOffsetsResponseTopicPartition()
				p.Partition = rp.Partition
				if p.ErrorCode = f.fence(kmsg.ListOffsets, rp.CurrentLeaderEpoch); p.ErrorCode == 0 {
					switch {
					case rp.Timestamp == -2:
						p.Offset = f.logStart
					case req.ReplicaID == -2: // no isolation: the log end
						p.Offset = f.logEnd()
					default:
						p.Offset = f.hw
					}
					p.LeaderEpoch = f.epoch
				}
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil

	case *kmsg.FetchRequest:
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range req.Topics {
			t := kmsg.NewFetchResponseTopic()
			t.Topic, t.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				p := kmsg.NewFetchResponseTopicPartition()
				p.Partition = rp.Partition
				p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
				p.ErrorCode = f.fence(kmsg.Fetch, rp.CurrentLeaderEpoch)
				diverged := false
				if p.ErrorCode == 0 && rp.LastFetchedEpoch >= 0 && !f.ignoreLastFetched {
					e, end := f.endOffsetFor(rp.LastFetchedEpoch)
					switch {
					case e < 0 || end < 0, rp.FetchOffset < f.logStart:
						p.ErrorCode = kerr.OffsetOutOfRange.Code
					case e < rp.LastFetchedEpoch || end < rp.FetchOffset:
						p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = e, end
						diverged = true
					}
				}
				if p.ErrorCode == 0 && !diverged && (rp.FetchOffset < f.logStart || rp.FetchOffset > f.logEnd()) {
					p.ErrorCode = kerr.OffsetOutOfRange.Code
				}
				if p.ErrorCode == 0 {
					p.HighWatermark, p.LastStableOffset, p.LogStartOffset = f.hw, f.lso, f.logStart
					if !diverged {
						p.RecordBatches = f.read(rp.FetchOffset, min(req.MaxBytes, rp.PartitionMaxBytes))
					}
				}
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil
	}
	return nil, fmt.Errorf("fake: no answer for %T", req)
}
