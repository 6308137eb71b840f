package probe

import (
	"context"
	"fmt"

	"github.com/kfollower/kfollower/cluster"
	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cluster is the probe's only way to the brokers: send one request to one
// broker and return its answer. A test stands in for a broker by
// implementing it.
type Cluster interface {
	// Request sends req to broker (AnyBroker: whichever the client picks,
	// for Metadata).
	Request(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error)
}

// AnyBroker asks Cluster.Request to pick the broker.
const AnyBroker int32 = -1

// KgoCluster sends through a kgo client: to a broker by id, or, for
// AnyBroker, as kgo routes the request. kgo negotiates each request's
// version as min(kmsg's maximum, the broker's).
func KgoCluster(cl *kgo.Client) Cluster { return kgoCluster{cl} }

type kgoCluster struct{ cl *kgo.Client }

func (k kgoCluster) Request(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error) {
	if broker == AnyBroker {
		return k.cl.Request(ctx, req)
	}
	return k.cl.Broker(int(broker)).Request(ctx, req)
}

// loadMetadata asks broker (AnyBroker: any) for the metadata of topics
// (cluster.MetadataRequest, read by cluster.MetadataOf).
func loadMetadata(ctx context.Context, c Cluster, broker int32, topics []string) (*cluster.Metadata, error) {
	kr, err := c.Request(ctx, broker, cluster.MetadataRequest(topics))
	if err != nil {
		if broker != AnyBroker {
			return nil, fmt.Errorf("metadata for %v from broker %d: %w", topics, broker, err)
		}
		return nil, fmt.Errorf("metadata for %v: %w", topics, err)
	}
	return cluster.MetadataOf(kr.(*kmsg.MetadataResponse)), nil
}

// apiVersions is the highest version of each API a broker supports.
type apiVersions map[int16]int16

func loadAPIVersions(ctx context.Context, c Cluster, broker int32) (apiVersions, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	// v3+ brokers refuse an empty software name (KIP-511).
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kfollower", "probe"
	kr, err := c.Request(ctx, broker, req)
	if err != nil {
		return nil, fmt.Errorf("ApiVersions to broker %d: %w", broker, err)
	}
	resp := kr.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("ApiVersions to broker %d: %w", broker, err)
	}
	v := apiVersions{}
	for _, k := range resp.ApiKeys {
		v[k.ApiKey] = k.MaxVersion
	}
	return v, nil
}

// has reports whether the broker speaks key at version min or later (kgo
// sends the highest both sides know, and kmsg knows every version the
// checks need).
func (v apiVersions) has(key kmsg.Key, min int16) bool {
	max, ok := v[int16(key)]
	return ok && max >= min
}

// The versions that added the fields the checks rely on (docs/kafka.md
// §5, §6.1).
const (
	fetchCurrentLeaderEpoch = 9  // KIP-320
	fetchLastFetchedEpoch   = 12 // KIP-595's DivergingEpoch
	listOffsetsCurrentEpoch = 4  // KIP-320
	epochsCurrentEpoch      = 2  // KIP-320
)

// leaderConn sends the probe's requests for one partition to its leader,
// every one built by wire's builders, and keeps the high watermarks the
// leader reported, in order, for the watermark check.
type leaderConn struct {
	c     Cluster
	tp    wire.TopicPartition
	id    wire.TopicID
	pm    cluster.Partition
	epoch int32 // the current epoch, from Metadata
	// hws are the answers of every Fetch fenced with the current epoch
	// that the leader answered NONE, in the order they came.
	hws []hwSample
	// maxBatchEpoch is the highest epoch of a batch fetched, -1 for none.
	maxBatchEpoch int32
	maxBatchAt    int64
}

// hwSample is what one Fetch answer said of the partition's offsets.
type hwSample struct {
	request           string
	logStart, lso, hw int64
	// earliest is the log start ListOffsets EARLIEST gave before it.
	earliest int64
}

// epochs asks the leader OffsetsForLeaderEpoch(epoch) fenced with current
// (wire.OffsetsForLeaderEpochRequest: replica id -1).
func (l *leaderConn) epochs(ctx context.Context, current, epoch int32) (wire.EpochAnswer, error) {
	qs := map[wire.TopicPartition]wire.EpochQuery{l.tp: {CurrentLeaderEpoch: current, LeaderEpoch: epoch}}
	kr, err := l.c.Request(ctx, l.pm.Leader, wire.OffsetsForLeaderEpochRequest(qs))
	if err != nil {
		return wire.EpochAnswer{}, fmt.Errorf("OffsetsForLeaderEpoch for %s to broker %d: %w", l.tp, l.pm.Leader, err)
	}
	as, _ := wire.OffsetsForLeaderEpochReplies(kr.(*kmsg.OffsetForLeaderEpochResponse), qs)
	a, ok := as[l.tp]
	if !ok {
		return a, fmt.Errorf("OffsetsForLeaderEpoch for %s to broker %d: the partition is missing from the answer", l.tp, l.pm.Leader)
	}
	return a, nil
}

// logStart asks ListOffsets EARLIEST as a consumer (wire.LogStartRequest),
// fenced with current.
func (l *leaderConn) logStart(ctx context.Context, current int32) (wire.ListedOffset, error) {
	qs := map[wire.TopicPartition]wire.ListOffsetsQuery{l.tp: {CurrentLeaderEpoch: current}}
	return l.listed(ctx, wire.LogStartRequest(qs), qs, "EARLIEST")
}

// logEnd asks ListOffsets LATEST with the debug replica id, which answers
// the leader's log end rather than its high watermark (the latest half of
// wire.ListOffsetsRequests; ReplicaManager.fetchOffset, docs/kafka.md §7.2).
func (l *leaderConn) logEnd(ctx context.Context, current int32) (wire.ListedOffset, error) {
	qs := map[wire.TopicPartition]wire.ListOffsetsQuery{l.tp: {CurrentLeaderEpoch: current}}
	_, latest := wire.ListOffsetsRequests(qs)
	return l.listed(ctx, latest, qs, "LATEST")
}

func (l *leaderConn) listed(ctx context.Context, req *kmsg.ListOffsetsRequest, qs map[wire.TopicPartition]wire.ListOffsetsQuery, what string) (wire.ListedOffset, error) {
	kr, err := l.c.Request(ctx, l.pm.Leader, req)
	if err != nil {
		return wire.ListedOffset{}, fmt.Errorf("ListOffsets %s for %s to broker %d: %w", what, l.tp, l.pm.Leader, err)
	}
	as, _ := wire.ListedOffsets(kr.(*kmsg.ListOffsetsResponse), qs)
	a, ok := as[l.tp]
	if !ok {
		return a, fmt.Errorf("ListOffsets %s for %s to broker %d: the partition is missing from the answer", what, l.tp, l.pm.Leader)
	}
	return a, nil
}

// fetched is one Fetch answer, with the first whole batch that holds or
// follows the offset asked for.
type fetched struct {
	wire.FetchAnswer
	// LastStableOffset is read from the kmsg answer: wire.FetchAnswer does
	// not carry it.
	LastStableOffset int64
	first            *batch.Header
	scanErr          error
}

func (f fetched) String() string {
	s := fmt.Sprintf("error %s", wire.ErrorName(f.ErrorCode))
	if f.ErrorCode != 0 {
		return s
	}
	if f.Diverging.Epoch >= 0 {
		s += fmt.Sprintf(", DivergingEpoch (%d, %d)", f.Diverging.Epoch, f.Diverging.EndOffset)
	}
	s += fmt.Sprintf(", %d bytes of records", len(f.Records))
	if f.first != nil {
		s += fmt.Sprintf(", first batch [%d, %d] epoch %d", f.first.BaseOffset, f.first.LastOffset(), f.first.PartitionLeaderEpoch)
	}
	if f.scanErr != nil {
		s += fmt.Sprintf(", invalid batch: %v", f.scanErr)
	}
	return s + fmt.Sprintf(", high watermark %d, LSO %d, log start %d", f.HighWatermark, f.LastStableOffset, f.LogStartOffset)
}

// A probe's Fetch needs only the first batch, which a broker returns whole
// even when it is larger than the limits (KIP-74); a broker that cuts it
// instead is asked once more with room for any batch.
const (
	fetchLimit    = 64 << 10
	fetchLimitMax = 16 << 20
)

// fetch sends one sessionless consumer Fetch (wire.FetchRequest) at offset,
// fenced with current, with lastFetchedEpoch (-1: none). MaxWait 0: the
// leader answers at once. A NONE answer fenced with the current epoch adds
// a high-watermark sample; earliest is the last log start ListOffsets gave.
func (l *leaderConn) fetch(ctx context.Context, offset int64, current, lastFetchedEpoch int32, earliest int64) (fetched, string, error) {
	fs := map[wire.TopicPartition]wire.FetchPartition{l.tp: {Offset: offset, CurrentLeaderEpoch: current, LastFetchedEpoch: lastFetchedEpoch, LogStartOffset: -1}}
	ids := map[string]wire.TopicID{l.tp.Topic: l.id}
	desc := fmt.Sprintf("Fetch offset=%d lastFetchedEpoch=%d currentLeaderEpoch=%d", offset, lastFetchedEpoch, current)
	var f fetched
	for _, limit := range []int32{fetchLimit, fetchLimitMax} {
		kr, err := l.c.Request(ctx, l.pm.Leader, wire.FetchRequest(fs, ids, wire.FetchLimits{MaxWaitMillis: 0, MinBytes: 1, MaxBytes: limit, PartitionMaxBytes: limit}))
		if err != nil {
			return fetched{}, desc, fmt.Errorf("fetching %s at %d from broker %d: %w", l.tp, offset, l.pm.Leader, err)
		}
		resp := kr.(*kmsg.FetchResponse)
		as, _ := wire.FetchReplies(resp, fs, ids)
		a, ok := as[l.tp]
		if !ok {
			return fetched{}, desc, fmt.Errorf("fetching %s at %d from broker %d: the partition is missing from the answer", l.tp, offset, l.pm.Leader)
		}
		f = fetched{FetchAnswer: a, LastStableOffset: lastStable(resp, l.tp, l.id)}
		sc := batch.NewScanner(a.Records)
		for sc.Next() {
			if h := sc.Header(); h.NextOffset() > offset {
				f.first = &h
				break
			}
		}
		f.scanErr = sc.Err()
		// wire drops a partial last batch (a.Batches.Tail): when that was
		// the only batch, ask again with room for it.
		if f.first != nil || f.scanErr != nil || len(a.Records)+a.Batches.Tail == 0 {
			break
		}
	}
	if f.ErrorCode == 0 && current == l.epoch {
		l.hws = append(l.hws, hwSample{request: desc, logStart: f.LogStartOffset, lso: f.LastStableOffset, hw: f.HighWatermark, earliest: earliest})
		if h := f.first; h != nil && h.PartitionLeaderEpoch > l.maxBatchEpoch {
			l.maxBatchEpoch, l.maxBatchAt = h.PartitionLeaderEpoch, h.BaseOffset
		}
	}
	return f, desc, nil
}

// lastStable finds the partition's LastStableOffset in a Fetch answer, -1
// if absent.
func lastStable(resp *kmsg.FetchResponse, tp wire.TopicPartition, id wire.TopicID) int64 {
	for _, t := range resp.Topics {
		if t.Topic != tp.Topic && (t.Topic != "" || t.TopicID != id) {
			continue
		}
		for _, p := range t.Partitions {
			if p.Partition == tp.Partition {
				return p.LastStableOffset
			}
		}
	}
	return -1
}
