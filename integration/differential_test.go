package integration

import (
	"context"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"testing"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The differential test: the same Metadata (the topic part), ListOffsets,
// OffsetsForLeaderEpoch and Fetch requests, sent to the real leader and to
// kfollower's --serve endpoint once it has copied everything, get
// equivalent answers: error codes, record bytes (whole batches), offsets,
// timestamps, leader epochs, high watermark, log start and last stable
// offset. The log has several leader epochs (clean leader moves), two
// codecs and committed and aborted transactions. What differs by design is
// not compared: broker ids, replicas and ISR, and a partial trailing batch
// Kafka may return (kfollower returns whole batches only).
//
// read_committed (LSO and aborted transactions under isolation level 1)
// is its own subtest: kfollower has no .txnindex yet, which another change
// adds.
func TestDifferential(t *testing.T) {
	ctx := context.Background()
	bin := buildKfollower(t)
	c := kafka.Start(t, kafka.Options{})
	const topic = "differential"
	c.CreateTopic(ctx, topic, [][]int32{{1, 2, 3}}, nil)
	produceTo(ctx, t, c, topic, 0, "e0", 300, kgo.ProducerBatchMaxBytes(1024)) // many small batches
	moveLeaders(ctx, t, c, topic, 1)
	produceTo(ctx, t, c, topic, 0, "gzip", 200, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	produceTransactions(ctx, t, c, topic, 1, 4)
	moveLeaders(ctx, t, c, topic, 1)
	produceTo(ctx, t, c, topic, 0, "zstd", 150, kgo.ProducerBatchCompression(kgo.ZstdCompression()))

	serve := freeLoopback(t)
	kf := startChainDaemon(t, bin, "kfollower", "--bootstrap-servers", strings.Join(c.Bootstrap(), ","), "--topics", topic,
		"--data-dir", t.TempDir(), "--serve", serve, "--metadata-interval", "500ms")
	ends, err := c.Admin().ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	hw, _ := ends.Lookup(topic, 0)
	kf.waitStatus(t, topic, fmt.Sprintf("log end %d", hw.Offset), func(s fetcher.Status) bool {
		return s.LogEndOffset == hw.Offset && s.State == "fetching"
	})
	st, err := c.Partition(ctx, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	leader := differ{t: t, name: "leader", cl: c.Client()}
	defer leader.cl.Close()
	leader.request(kmsg.NewPtrMetadataRequest()) // learns the brokers
	leader.broker = leader.cl.Broker(int(st.Leader))
	kcl, err := kgo.NewClient(kgo.SeedBrokers(serve))
	if err != nil {
		t.Fatal(err)
	}
	defer kcl.Close()
	copyOf := differ{t: t, name: "kfollower", cl: kcl, broker: kcl.SeedBrokers()[0]}
	// Served up to the high watermark: the copy's durable end, which
	// moves at the next flush (--flush-interval).
	want := leader.listOffset(topic, -1, 0)
	waitFor(t, "kfollower's latest offset "+want, func() bool { return copyOf.listOffset(topic, -1, 0) == want })

	// Metadata, the topic part, and an unknown topic.
	mdReq := func() *kmsg.MetadataRequest {
		req := kmsg.NewPtrMetadataRequest()
		for _, name := range []string{topic, "no-such-topic"} {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	mdL := leader.request(mdReq()).(*kmsg.MetadataResponse)
	mdK := copyOf.request(mdReq()).(*kmsg.MetadataResponse)
	topicPart := func(md *kmsg.MetadataResponse) string {
		var b strings.Builder
		for _, t := range md.Topics {
			fmt.Fprintf(&b, "%s err=%d id=%x internal=%v partitions=%d;", *t.Topic, t.ErrorCode, t.TopicID, t.IsInternal, len(t.Partitions))
			for _, p := range t.Partitions {
				fmt.Fprintf(&b, " p%d err=%d epoch=%d;", p.Partition, p.ErrorCode, p.LeaderEpoch)
			}
		}
		return b.String()
	}
	if l, k := topicPart(mdL), topicPart(mdK); l != k {
		t.Errorf("Metadata:\n  leader    %s\n  kfollower %s", l, k)
	}
	id := mdL.Topics[0].TopicID
	epoch := mdL.Topics[0].Partitions[0].LeaderEpoch

	// The leader's batches, for the offsets, timestamps and epochs asked.
	all := leader.fetch(topic, id, 0, 64<<20, 0, -1, -1)
	var bases []int64
	var stamps []int64
	epochs := map[int32]bool{}
	sc := batch.NewScanner(all.RecordBatches)
	for sc.Next() {
		h := sc.Header()
		bases = append(bases, h.BaseOffset)
		stamps = append(stamps, h.BaseTimestamp, h.MaxTimestamp, h.MaxTimestamp+1)
		epochs[h.PartitionLeaderEpoch] = true
	}
	if len(bases) < 20 || len(epochs) < 3 {
		t.Fatalf("the leader's log has %d batches in %d epochs; the test wants more", len(bases), len(epochs))
	}

	t.Run("ListOffsets", func(t *testing.T) {
		ts := []int64{-2, -1, -3, 1, 1 << 50}
		for i := 0; i < len(stamps); i += 7 {
			ts = append(ts, stamps[i])
		}
		for _, ts := range ts {
			l, k := leader.listOffset(topic, ts, 0), copyOf.listOffset(topic, ts, 0)
			if l != k {
				t.Errorf("ListOffsets timestamp %d:\n  leader    %s\n  kfollower %s", ts, l, k)
			}
		}
	})

	t.Run("OffsetsForLeaderEpoch", func(t *testing.T) {
		for e := int32(-1); e <= epoch+2; e++ {
			for _, current := range []int32{-1, epoch} {
				l, k := leader.endOffsetFor(topic, current, e), copyOf.endOffsetFor(topic, current, e)
				if l != k {
					t.Errorf("OffsetsForLeaderEpoch epoch %d (current %d):\n  leader    %s\n  kfollower %s", e, current, l, k)
				}
			}
		}
	})

	t.Run("Fetch", func(t *testing.T) {
		offsets := []int64{0, bases[1], bases[1] + 1, bases[len(bases)/2], bases[len(bases)-1], hw.Offset, hw.Offset + 1}
		for _, off := range offsets {
			for _, max := range []int32{1 << 20, 4 << 10, 1} {
				for _, last := range []int32{-1, 0} {
					l := leader.fetch(topic, id, off, max, 0, epoch, last)
					k := copyOf.fetch(topic, id, off, max, 0, epoch, last)
					if ls, ks := fetchSummary(t, l), fetchSummary(t, k); ls != ks {
						t.Errorf("Fetch offset %d, partition max bytes %d, last fetched epoch %d:\n  leader    %s\n  kfollower %s", off, max, last, ls, ks)
					}
				}
			}
		}
		// A fenced epoch, and one from the future.
		for _, current := range []int32{epoch - 1, epoch + 1} {
			l := leader.fetch(topic, id, 0, 1<<20, 0, current, -1)
			k := copyOf.fetch(topic, id, 0, 1<<20, 0, current, -1)
			if ls, ks := fetchSummary(t, l), fetchSummary(t, k); ls != ks {
				t.Errorf("Fetch at current epoch %d:\n  leader    %s\n  kfollower %s", current, ls, ks)
			}
		}
	})

	t.Run("read_committed", func(t *testing.T) {
		for _, off := range []int64{0, bases[len(bases)/2]} {
			l := leader.fetch(topic, id, off, 1<<20, 1, epoch, -1)
			k := copyOf.fetch(topic, id, off, 1<<20, 1, epoch, -1)
			if ls, ks := fetchSummary(t, l)+abortedSummary(l), fetchSummary(t, k)+abortedSummary(k); ls != ks {
				t.Errorf("Fetch read_committed offset %d:\n  leader    %s\n  kfollower %s", off, ls, ks)
			}
		}
		if l, k := leader.listOffset(topic, -1, 1), copyOf.listOffset(topic, -1, 1); l != k {
			t.Errorf("ListOffsets latest read_committed:\n  leader    %s\n  kfollower %s", l, k)
		}
	})
}

// differ sends requests to one broker.
type differ struct {
	t      *testing.T
	name   string
	cl     *kgo.Client
	broker *kgo.Broker
}

func (d differ) request(req kmsg.Request) kmsg.Response {
	d.t.Helper()
	var resp kmsg.Response
	var err error
	if d.broker == nil {
		resp, err = d.cl.Request(context.Background(), req)
	} else {
		resp, err = d.broker.Request(context.Background(), req)
	}
	if err != nil {
		d.t.Fatalf("%s: %T: %v", d.name, req, err)
	}
	return resp
}

func (d differ) listOffset(topic string, ts int64, isolation int8) string {
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := d.request(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	return fmt.Sprintf("err=%v offset=%d timestamp=%d epoch=%d", kerr.ErrorForCode(p.ErrorCode), p.Offset, p.Timestamp, p.LeaderEpoch)
}

func (d differ) endOffsetFor(topic string, current, epoch int32) string {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.CurrentLeaderEpoch, rp.LeaderEpoch = current, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := d.request(req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	return fmt.Sprintf("err=%v epoch=%d end=%d", kerr.ErrorForCode(p.ErrorCode), p.LeaderEpoch, p.EndOffset)
}

func (d differ) fetch(topic string, id [16]byte, offset int64, partMax int32, isolation int8, current, lastFetched int32) kmsg.FetchResponseTopicPartition {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.IsolationLevel = 0, 0, 64<<20, isolation
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = offset, partMax, current, lastFetched
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := d.request(req).(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		d.t.Fatalf("%s: Fetch: %v", d.name, err)
	}
	return resp.Topics[0].Partitions[0]
}

// fetchSummary is what a Fetch answer must agree on, the records as whole
// batches (Kafka may end with a partial one).
func fetchSummary(t *testing.T, p kmsg.FetchResponseTopicPartition) string {
	whole, err := batch.Whole(p.RecordBatches)
	if err != nil {
		t.Errorf("a fetched batch does not parse: %v", err)
	}
	first, last := int64(-1), int64(-1)
	sc := batch.NewScanner(whole)
	n := 0
	for sc.Next() {
		if first < 0 {
			first = sc.Header().BaseOffset
		}
		last = sc.Header().LastOffset()
		n++
	}
	return fmt.Sprintf("err=%v hw=%d lso=%d logStart=%d diverging=(%d, %d) batches=%d [%d..%d] bytes=%d crc32=%08x",
		kerr.ErrorForCode(p.ErrorCode), p.HighWatermark, p.LastStableOffset, p.LogStartOffset,
		p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset, n, first, last, len(whole), crc32.ChecksumIEEE(whole))
}

func abortedSummary(p kmsg.FetchResponseTopicPartition) string {
	var as []string
	for _, a := range p.AbortedTransactions {
		as = append(as, fmt.Sprintf("%d@%d", a.ProducerID, a.FirstOffset))
	}
	slices.Sort(as)
	return fmt.Sprintf(" aborted=%v", as)
}
