package bench

import (
	"context"
	"crypto/rand"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkCatchUp copies a ~1 GiB, 8-partition topic from a local 3-broker
// cluster into an empty data dir, beside a franz-go consumer reading the
// same data to nowhere in the same run: the ceiling without a disk. Each is
// run twice, alternating, and the better run of each is reported, with the
// ratio kfollower/consumer (1.0 = as fast as the consumer).
func BenchmarkCatchUp(b *testing.B) {
	ctx := context.Background()
	b.Log(holdGuestMemory(b))
	c := kafka.Start(b, kafka.Options{})
	const topic, partitions = "catchup", 8
	const valueSize, records = 16 << 10, 64 << 10 // 1 GiB of values
	var assign [][]int32
	for p := range partitions {
		assign = append(assign, []int32{int32(p%3 + 1)})
	}
	c.CreateTopic(ctx, topic, assign, nil)
	total := fill(ctx, b, c, topic, assign, valueSize, records)
	b.Logf("topic %s: %d partitions, %.0f MiB on disk", topic, partitions, float64(total)/(1<<20))

	var best [3]time.Duration
	for round := range 2 {
		for i, run := range []func() time.Duration{
			func() time.Duration { return consumeAll(ctx, b, c, topic, partitions, records) },
			func() time.Duration { return follow(ctx, b, c, topic, partitions, total, storage.FlushOS) },
			func() time.Duration { return follow(ctx, b, c, topic, partitions, total, storage.FlushEveryAppend) },
		} {
			d := run()
			b.Logf("round %d, run %d: %v", round, i, d)
			if best[i] == 0 || d < best[i] {
				best[i] = d
			}
		}
	}
	mb := float64(total) / (1 << 20)
	b.ReportMetric(mb/best[0].Seconds(), "consumer-MB/s")
	b.ReportMetric(mb/best[1].Seconds(), "kfollower-MB/s")
	b.ReportMetric(mb/best[2].Seconds(), "kfollower-fsync-MB/s")
	b.ReportMetric(best[0].Seconds()/best[1].Seconds(), "ratio-vs-consumer")
	b.ReportMetric(best[0].Seconds()/best[2].Seconds(), "fsync-ratio-vs-consumer")
}

// fill produces records of valueSize random bytes (incompressible) spread
// over the partitions and returns the bytes the leaders hold; assign is
// the topic's replica assignment, leader first.
func fill(ctx context.Context, b *testing.B, c *kafka.Cluster, topic string, assign [][]int32, valueSize, records int) int64 {
	val := make([]byte, valueSize)
	_, _ = rand.Read(val)
	return produceAll(ctx, b, c, topic, assign, records, kgo.NoCompression(), func(int) []byte { return val })
}

// produceAll produces records values (value(i) the i-th) round robin over
// the partitions, in batches compressed with codec, fails unless every one
// landed, and returns the bytes the leaders hold; assign is the topic's
// replica assignment, leader first.
func produceAll(ctx context.Context, b *testing.B, c *kafka.Cluster, topic string, assign [][]int32, records int, codec kgo.CompressionCodec, value func(i int) []byte) int64 {
	cl := c.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerBatchCompression(codec), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedBytes(64<<20))
	var failed atomic.Value
	for i := range records {
		cl.Produce(ctx, &kgo.Record{Value: value(i)}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if err, _ := failed.Load().(error); err != nil {
		b.Fatalf("producing: %v", err)
	}
	ends, err := c.Admin().ListEndOffsets(ctx, topic)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	if n != int64(records) {
		b.Fatalf("the topic holds %d records, want %d", n, records)
	}
	// The bytes to copy: what the leaders hold on disk.
	var size int64
	for p, replicas := range assign {
		n, err := c.Node(replicas[0]).LogBytes(topic, int32(p))
		if err != nil {
			b.Fatal(err)
		}
		size += n
	}
	return size
}

// consumeAll reads every record with a franz-go consumer and drops it; it
// fetches with kfollower's own limits (wire.DefaultFetchLimits).
func consumeAll(ctx context.Context, b *testing.B, c *kafka.Cluster, topic string, partitions, records int) time.Duration {
	return consumeAllLimits(ctx, b, c, topic, partitions, records, wire.DefaultFetchLimits)
}

// consumeAllLimits is consumeAll with the fetch limits lim.
func consumeAllLimits(ctx context.Context, b *testing.B, c *kafka.Cluster, topic string, partitions, records int, lim wire.FetchLimits) time.Duration {
	offs := map[int32]kgo.Offset{}
	for p := range partitions {
		offs[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchMaxBytes(lim.MaxBytes), kgo.FetchMaxPartitionBytes(lim.PartitionMaxBytes))
	defer cl.Close()
	start := time.Now()
	n := 0
	for n < records {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			b.Fatal(err)
		}
		n += fs.NumRecords()
	}
	return time.Since(start)
}

// follow copies the topic with kfollower into a new data dir until every
// partition has caught up with its leader; obs are told what it does.
func follow(ctx context.Context, b *testing.B, c *kafka.Cluster, topic string, partitions int, total int64, flush storage.FlushPolicy, obs ...fetcher.Observer) time.Duration {
	return followLimits(ctx, b, c, topic, partitions, flush, wire.FetchLimits{}, obs...)
}

// followLimits is follow with the fetch limits lim (zero: the defaults).
func followLimits(ctx context.Context, b *testing.B, c *kafka.Cluster, topic string, partitions int, flush storage.FlushPolicy, lim wire.FetchLimits, obs ...fetcher.Observer) time.Duration {
	return followVia(ctx, b, c, topic, partitions, flush, lim, benchDirectFetch, obs...)
}

// benchDirectFetch is how the in-process fetcher fetches, as the binary
// does (cmd/kfollower's directFetch, plaintext): on connections of its
// own (fetcher.Config.DirectFetch).
var benchDirectFetch = &fetcher.DirectFetch{ClientID: "kfollower-bench"}

// followVia is followLimits with the Fetch connections df (nil: the
// client's, franz-go's).
func followVia(ctx context.Context, b *testing.B, c *kafka.Cluster, topic string, partitions int, flush storage.FlushPolicy, lim wire.FetchLimits, df *fetcher.DirectFetch, obs ...fetcher.Observer) time.Duration {
	dir, err := os.MkdirTemp("", "kfollower-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cl := c.Client()
	ends, err := c.Admin().ListEndOffsets(ctx, topic)
	if err != nil {
		b.Fatal(err)
	}
	m, err := fetcher.New(fetcher.Config{
		Client: cl, DataDir: dir, Storage: storage.Options{Flush: flush},
		Follow:      func(t string) bool { return t == topic },
		Backoff:     follower.BackoffPolicy{Base: 20 * time.Millisecond, Max: time.Second},
		Observers:   obs,
		Limits:      lim,
		DirectFetch: df,
	})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- m.Run(rctx) }()
	defer func() { cancel(); <-done }()
	for {
		caughtUp := 0
		for _, st := range m.Statuses() {
			if o, ok := ends.Lookup(topic, st.Partition); ok && st.LogEndOffset == o.Offset {
				caughtUp++
			}
		}
		if caughtUp == partitions {
			return time.Since(start)
		}
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("kfollower did not catch up in 10 minutes: %+v", m.Statuses())
		}
		time.Sleep(2 * time.Millisecond)
	}
}
