package wire

import (
	"fmt"
	"iter"
	"sort"

	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// TopicID is a topic's UUID, as Metadata reports it and Fetch v13+ uses it.
type TopicID = [16]byte

// EpochEndOffset is a leader epoch and the offset where it ends, as
// OffsetsForLeaderEpoch answers it and a Fetch reply's DivergingEpoch
// carries it; both -1 when absent or unknown.
type EpochEndOffset struct {
	Epoch     int32
	EndOffset int64
}

// byTopic groups partitions by topic, topics and partitions sorted, so
// requests are deterministic (and golden-testable).
func byTopic[T any](m map[TopicPartition]T) ([]string, map[string][]int32) {
	parts := map[string][]int32{}
	for tp := range m {
		parts[tp.Topic] = append(parts[tp.Topic], tp.Partition)
	}
	topics := make([]string, 0, len(parts))
	for t, ps := range parts {
		topics = append(topics, t)
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	}
	sort.Strings(topics)
	return topics, parts
}

// matchSent keeps the answers for the partitions sent (one not asked about
// is ignored rather than trusted) and lists in missing those sent and not
// answered, to be failed.
func matchSent[Q, A any](sent map[TopicPartition]Q, got iter.Seq2[TopicPartition, A]) (answers map[TopicPartition]A, missing []TopicPartition) {
	answers = make(map[TopicPartition]A, len(sent))
	for tp, a := range got {
		if _, ok := sent[tp]; ok {
			answers[tp] = a
		}
	}
	for tp := range sent {
		if _, ok := answers[tp]; !ok {
			missing = append(missing, tp)
		}
	}
	return answers, missing
}

// ---- OffsetsForLeaderEpoch (KIP-101, KIP-279) -------------------------------

// EpochQuery asks a partition's leader where LeaderEpoch ends.
type EpochQuery struct {
	CurrentLeaderEpoch int32 // KIP-320 fence: only this leader answers
	LeaderEpoch        int32 // the epoch asked about
}

// EpochAnswer is one partition's answer: the largest epoch the leader knows
// at or below the one asked about and where it ends, both -1 when it had no
// information.
type EpochAnswer struct {
	ErrorCode int16
	EpochEndOffset
}

// OffsetsForLeaderEpochRequest batches one broker's epoch queries into one
// request (as Kafka's fetcher thread does). ReplicaID is -1, the consumer id:
// the broker does not read it for this API (KafkaApis.
// handleOffsetForLeaderEpochRequest answers from the leader only), and kmsg's
// default of -2 (debug) would misdescribe us.
func OffsetsForLeaderEpochRequest(qs map[TopicPartition]EpochQuery) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	topics, parts := byTopic(qs)
	for _, t := range topics {
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = t
		for _, p := range parts[t] {
			q := qs[TopicPartition{t, p}]
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition = p
			rp.CurrentLeaderEpoch = q.CurrentLeaderEpoch // KIP-320 fence
			rp.LeaderEpoch = q.LeaderEpoch
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// OffsetsForLeaderEpochReplies matches a response to the queries sent. A
// partition the response lacks is reported in missing, to be failed; one
// not asked about is ignored rather than trusted.
func OffsetsForLeaderEpochReplies(resp *kmsg.OffsetForLeaderEpochResponse, sent map[TopicPartition]EpochQuery) (answers map[TopicPartition]EpochAnswer, missing []TopicPartition) {
	return matchSent(sent, func(yield func(TopicPartition, EpochAnswer) bool) {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				a := EpochAnswer{ErrorCode: p.ErrorCode, EpochEndOffset: EpochEndOffset{Epoch: p.LeaderEpoch, EndOffset: p.EndOffset}}
				if !yield(TopicPartition{t.Topic, p.Partition}, a) {
					return
				}
			}
		}
	})
}

// ---- Fetch -------------------------------------------------------------------

// FetchLimits bound one Fetch request.
type FetchLimits struct {
	MaxWaitMillis     int32
	MinBytes          int32
	MaxBytes          int32
	PartitionMaxBytes int32
}

// DefaultFetchLimits favour catch-up throughput: 8 MiB a partition, 64 MiB a
// request, and a 500 ms long poll once caught up (replica.fetch.wait.max.ms).
var DefaultFetchLimits = FetchLimits{MaxWaitMillis: 500, MinBytes: 1, MaxBytes: 64 << 20, PartitionMaxBytes: 8 << 20}

// FetchPartition is one partition's part of a Fetch request.
type FetchPartition struct {
	Offset             int64
	CurrentLeaderEpoch int32 // KIP-320 fence
	// LastFetchedEpoch is the epoch of the batch just before Offset, -1 when
	// unknown; the leader answers with DivergingEpoch if it does not match
	// its history (KIP-595's truncate-on-fetch).
	LastFetchedEpoch int32
	// LogStartOffset is our log start (Fetch v5+), -1 for none; a leader
	// ignores it from a consumer.
	LogStartOffset int64
}

// FetchRequest batches one broker's fetches into one sessionless request
// (SessionID 0, SessionEpoch -1: a full fetch each time, KIP-227;
// FetchSession builds the incremental ones on top of it). ReplicaID
// stays -1, a consumer: the leader serves only data up to its high watermark
// (FetchIsolation.of), so only committed data is copied, and never counts us
// as a replica. The isolation level is read_uncommitted, so control batches
// and aborted transactions are copied as a broker follower copies them.
// Topics carry both name and id; kmsg writes the one the negotiated version
// uses (ids from v13).
func FetchRequest(fs map[TopicPartition]FetchPartition, ids map[string]TopicID, lim FetchLimits) *kmsg.FetchRequest {
	topics, parts := byTopic(fs)
	order := make([]TopicPartition, 0, len(fs))
	for _, t := range topics {
		for _, p := range parts[t] {
			order = append(order, TopicPartition{t, p})
		}
	}
	return FetchRequestInOrder(order, fs, ids, lim)
}

// FetchRequestInOrder is FetchRequest with the partitions in the order
// given (each of fs once; those of order not in fs are skipped). A broker
// fills a Fetch response in request order until MaxBytes, so a fetcher
// rotates the order for fairness, as Kafka's replica fetcher moves the
// partitions it got data for to the end (AbstractFetcherThread's
// partitionStates.updateAndMoveToEnd). Consecutive partitions of one topic
// share a topic entry, and a topic may have more than one, as Kafka's
// FetchRequest.Builder writes them.
func FetchRequestInOrder(order []TopicPartition, fs map[TopicPartition]FetchPartition, ids map[string]TopicID, lim FetchLimits) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.ReplicaState.ID = -1, -1 // v15+ carries it in ReplicaState (KIP-903)
	req.MaxWaitMillis = lim.MaxWaitMillis
	req.MinBytes = lim.MinBytes
	req.MaxBytes = lim.MaxBytes
	req.IsolationLevel = 0 // read_uncommitted
	req.SessionID, req.SessionEpoch = 0, -1
	for _, tp := range order {
		f, ok := fs[tp]
		if !ok {
			continue
		}
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.Topic {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = tp.Topic, ids[tp.Topic]
			req.Topics = append(req.Topics, rt)
		}
		rt := &req.Topics[len(req.Topics)-1]
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = tp.Partition
		rp.CurrentLeaderEpoch = f.CurrentLeaderEpoch // KIP-320
		rp.FetchOffset = f.Offset
		rp.LastFetchedEpoch = f.LastFetchedEpoch // KIP-595 truncate-on-fetch
		rp.LogStartOffset = f.LogStartOffset
		rp.PartitionMaxBytes = lim.PartitionMaxBytes
		rt.Partitions = append(rt.Partitions, rp)
	}
	return req
}

// LeaderHint is the KIP-951 CurrentLeader of a Fetch reply: the leader the
// broker knows of.
type LeaderHint struct {
	Leader      int32
	LeaderEpoch int32
}

// FetchAnswer is one partition's part of a Fetch response.
type FetchAnswer struct {
	ErrorCode      int16
	HighWatermark  int64 // -1 when unknown (error replies carry -1)
	LogStartOffset int64 // the leader's log start; -1 when unknown
	// Diverging is the DivergingEpoch tagged field (Fetch v12+, KIP-595):
	// Epoch >= 0 means present; kmsg decodes an absent field as {-1, -1}.
	Diverging EpochEndOffset
	// Records are the record batches as received, less a partial last
	// batch: a broker may cut the last batch to fit the size limits (kmsg
	// FetchResponseTopicPartition.RecordBatches; Kafka's
	// ByteBufferLogInputStream.nextBatch stops there), and it is fetched
	// again from the next offset. When a batch cannot be framed, Records
	// keeps everything from it on, and Batches.Err says why.
	Records []byte
	// Batches is what the one scan of Records read from the batch headers.
	Batches Batches
	// Leader is the KIP-951 hint (Fetch v12+, filled by brokers for
	// NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH); nil when absent.
	Leader *LeaderHint
}

// Batches describes the record batches of a Fetch answer, read once, from
// their headers alone, where the reply is converted: the driver needs the
// record counts and epochs and the partial tail gone, and the CRCs are
// left to storage.Log.Append, which checks every byte it writes.
type Batches struct {
	// Whole is the length of the whole batches at the front of Records:
	// all of Records unless Err is set.
	Whole int
	// Records is the number of records the whole batches hold, from the
	// headers (nothing is decompressed).
	Records int64
	// Tail is the length of the partial last batch dropped from Records.
	Tail int
	// Epochs are the partition leader epochs the whole batches carry, one
	// entry per run of consecutive batches stamped with the same epoch.
	Epochs []EpochRun
	// Err is a *batch.Error when the batch after the whole ones cannot be
	// framed (a length below the minimum, a magic other than 2).
	Err error
}

// EpochRun is a run of consecutive batches stamped with one partition
// leader epoch.
type EpochRun struct {
	Epoch      int32
	BaseOffset int64 // of the run's first batch
	Batches    int
}

// scanBatches frames raw into whole batches, drops a partial tail and
// describes what it read.
func scanBatches(raw []byte) ([]byte, Batches) {
	var b Batches
	s := batch.NewFrameScanner(raw)
	for s.Next() {
		h := s.Header()
		b.Records += int64(h.RecordCount)
		if n := len(b.Epochs); n == 0 || b.Epochs[n-1].Epoch != h.PartitionLeaderEpoch {
			b.Epochs = append(b.Epochs, EpochRun{Epoch: h.PartitionLeaderEpoch, BaseOffset: h.BaseOffset})
		}
		b.Epochs[len(b.Epochs)-1].Batches++
	}
	b.Whole, b.Tail, b.Err = s.Valid(), s.Tail(), s.Err()
	if b.Err != nil {
		return raw, b
	}
	return raw[:b.Whole], b
}

// FetchReplies matches a Fetch response to the fetches sent. Topics are
// looked up by name or, for v13+, by id. A response-level error fails every
// partition with that code. Each answer's record batches are framed here,
// once (FetchAnswer.Batches).
func FetchReplies(resp *kmsg.FetchResponse, sent map[TopicPartition]FetchPartition, ids map[string]TopicID) (answers map[TopicPartition]FetchAnswer, missing []TopicPartition) {
	if resp.ErrorCode != 0 {
		answers = make(map[TopicPartition]FetchAnswer, len(sent))
		for tp := range sent {
			answers[tp] = FetchAnswer{ErrorCode: resp.ErrorCode, HighWatermark: -1, LogStartOffset: -1,
				Diverging: EpochEndOffset{Epoch: -1, EndOffset: -1}}
		}
		return answers, nil
	}
	names := make(map[TopicID]string, len(ids))
	for n, id := range ids {
		names[id] = n
	}
	return matchSent(sent, func(yield func(TopicPartition, FetchAnswer) bool) {
		for _, t := range resp.Topics {
			name := t.Topic
			if name == "" {
				name = names[t.TopicID]
			}
			for _, p := range t.Partitions {
				a := FetchAnswer{
					ErrorCode:      p.ErrorCode,
					HighWatermark:  p.HighWatermark,
					LogStartOffset: p.LogStartOffset,
					Diverging:      EpochEndOffset{Epoch: p.DivergingEpoch.Epoch, EndOffset: p.DivergingEpoch.EndOffset},
				}
				a.Records, a.Batches = scanBatches(p.RecordBatches)
				if p.CurrentLeader.LeaderID >= 0 && p.CurrentLeader.LeaderEpoch >= 0 {
					a.Leader = &LeaderHint{Leader: p.CurrentLeader.LeaderID, LeaderEpoch: p.CurrentLeader.LeaderEpoch}
				}
				if !yield(TopicPartition{name, p.Partition}, a) {
					return
				}
			}
		}
	})
}

// ---- ListOffsets ------------------------------------------------------------

// Timestamps and replica ids of ListOffsets (ListOffsetsRequest.java).
const (
	latestTimestamp   = -1
	earliestTimestamp = -2

	consumerReplicaID  = -1
	debuggingReplicaID = -2
)

// ListOffsetsQuery asks a partition's leader for its log start and log end.
type ListOffsetsQuery struct {
	CurrentLeaderEpoch int32 // KIP-320 fence
}

// ListOffsetsAnswer is the leader's log start and log end for one
// partition, the two halves of ListOffsetsRequests merged.
type ListOffsetsAnswer struct {
	ErrorCode      int16 // the first error of the two halves, 0 if neither
	LogStartOffset int64 // EARLIEST_TIMESTAMP
	LogEndOffset   int64 // LATEST_TIMESTAMP, the leader's log end (see ListOffsetsRequests)
}

// ListOffsetsRequests asks, for each partition, its log start (earliest)
// and its log end (latest): two requests, because a request may name a
// partition only once. ReplicaID -2 (debug) makes LATEST answer the leader's
// log end offset rather than its high watermark (ReplicaManager.fetchOffset
// applies isolation only for -1); CurrentLeaderEpoch still fences it to the
// leader we mean.
func ListOffsetsRequests(qs map[TopicPartition]ListOffsetsQuery) (earliest, latest *kmsg.ListOffsetsRequest) {
	return listOffsetsRequest(qs, debuggingReplicaID, earliestTimestamp), listOffsetsRequest(qs, debuggingReplicaID, latestTimestamp)
}

// ListOffsetsReplies merges the answers to the two ListOffsetsRequests. A
// partition either half lacks is reported in missing, to be failed.
func ListOffsetsReplies(earliest, latest *kmsg.ListOffsetsResponse, sent map[TopicPartition]ListOffsetsQuery) (answers map[TopicPartition]ListOffsetsAnswer, missing []TopicPartition) {
	e, _ := ListedOffsets(earliest, sent)
	l, _ := ListedOffsets(latest, sent)
	return matchSent(sent, func(yield func(TopicPartition, ListOffsetsAnswer) bool) {
		for tp, eo := range e {
			lo, ok := l[tp]
			if !ok {
				continue
			}
			code := eo.ErrorCode
			if code == 0 {
				code = lo.ErrorCode
			}
			if !yield(tp, ListOffsetsAnswer{ErrorCode: code, LogStartOffset: eo.Offset, LogEndOffset: lo.Offset}) {
				return
			}
		}
	})
}

// LogStartRequest asks, for each partition, its log start (earliest) alone,
// as a consumer (replica id -1): only the leader answers
// (ReplicaManager.fetchOffset reads from a follower only for -2).
func LogStartRequest(qs map[TopicPartition]ListOffsetsQuery) *kmsg.ListOffsetsRequest {
	return listOffsetsRequest(qs, consumerReplicaID, earliestTimestamp)
}

// ListedOffset is one partition's answer to one ListOffsets request.
type ListedOffset struct {
	ErrorCode int16
	Offset    int64
}

// ListedOffsets matches the answer to one ListOffsets request (LogStartRequest
// or one half of ListOffsetsRequests) to the queries sent. A partition the
// answer lacks is reported in missing, to be failed.
func ListedOffsets(resp *kmsg.ListOffsetsResponse, sent map[TopicPartition]ListOffsetsQuery) (answers map[TopicPartition]ListedOffset, missing []TopicPartition) {
	return matchSent(sent, func(yield func(TopicPartition, ListedOffset) bool) {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if !yield(TopicPartition{t.Topic, p.Partition}, ListedOffset{ErrorCode: p.ErrorCode, Offset: p.Offset}) {
					return
				}
			}
		}
	})
}

func listOffsetsRequest(qs map[TopicPartition]ListOffsetsQuery, replicaID int32, ts int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = replicaID
	topics, parts := byTopic(qs)
	for _, t := range topics {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = t
		for _, p := range parts[t] {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition = p
			rp.CurrentLeaderEpoch = qs[TopicPartition{t, p}].CurrentLeaderEpoch
			rp.Timestamp = ts
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}
