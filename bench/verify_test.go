package bench

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kfollower/kfollower/audit"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/storage"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkVerify measures audit.Verify on a ~1 GiB single partition
// beside a franz-go consumer reading the same range in the same run, three
// rounds alternating, and reports the median ratio of throughputs
// (verify/consumer; 1.0 = as fast as the consumer). The consumer runs
// twice per round: with franz-go's default fetch sizes, and with verify's
// (32 MiB a partition), the fairer reference. The local copy is the
// leader's segments byte for byte, which is what kfollower stores
// (TestFollowWhileProducing checks that), so the figure is verify's alone.
//
//	bench/run.sh Verify
func BenchmarkVerify(b *testing.B) {
	ctx := context.Background()
	c := kafka.Start(b, kafka.Options{NeedsFaults: true})
	const topic = "verify"
	const valueSize, records = 1 << 10, 1 << 20 // 1 GiB of values
	// RF 1 so filling is quick; 256 MiB segments so verify crosses segment
	// boundaries as it would on a real log.
	assign := [][]int32{{1}}
	c.CreateTopic(ctx, topic, assign, map[string]string{"segment.bytes": strconv.Itoa(256 << 20)})
	size := fill(ctx, b, c, topic, assign, valueSize, records) // fails unless all records landed
	hw := int64(records)
	b.Logf("filled %s-0: %d records, %d MiB on disk", topic, hw, size>>20)
	dataDir := b.TempDir()
	copyPartition(b, filepath.Join(c.Node(1).DataDir(), topic+"-0"), storage.PartitionDir(dataDir, topic, 0))

	cl := c.Client()
	var ratios, tunedRatios []float64
	var verifyMiBs float64
	for round := range 3 {
		consumer := consumeRange(ctx, b, c, topic, hw, nil)
		tuned := consumeRange(ctx, b, c, topic, hw, []kgo.Opt{kgo.FetchMaxPartitionBytes(32 << 20), kgo.FetchMaxBytes(64 << 20)})
		t0 := time.Now()
		rep, err := audit.Verify(ctx, audit.VerifyOptions{Client: cl, DataDir: dataDir})
		verify := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		if p := rep.Partitions; rep.ExitCode() != audit.ExitOK || len(p) != 1 || p[0].VerifiedTo != hw {
			b.Fatalf("verify did not match the whole log: %+v", p)
		}
		mib := float64(rep.Partitions[0].Bytes) / (1 << 20)
		r, rt := consumer.Seconds()/verify.Seconds(), tuned.Seconds()/verify.Seconds()
		ratios, tunedRatios = append(ratios, r), append(tunedRatios, rt)
		verifyMiBs = max(verifyMiBs, mib/verify.Seconds())
		b.Logf("round %d: verify %.0f MiB in %v (%.0f MiB/s); consumer %v (default fetch sizes), %v (32 MiB fetches); verify/consumer %.2f, %.2f",
			round, mib, verify.Round(time.Millisecond), mib/verify.Seconds(), consumer.Round(time.Millisecond), tuned.Round(time.Millisecond), r, rt)
	}
	slices.Sort(ratios)
	slices.Sort(tunedRatios)
	b.ReportMetric(ratios[1], "verify/consumer")
	b.ReportMetric(tunedRatios[1], "verify/consumer-32MiB")
	b.ReportMetric(verifyMiBs, "verify-MiB/s")
	b.Logf("median verify/consumer throughput ratio: %.2f (consumer with default fetch sizes), %.2f (consumer with 32 MiB fetches)", ratios[1], tunedRatios[1])
}

// consumeRange reads [0, hw) of partition 0 with a franz-go consumer.
func consumeRange(ctx context.Context, b *testing.B, c *kafka.Cluster, topic string, hw int64, opts []kgo.Opt) time.Duration {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Bootstrap()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}})}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	t0 := time.Now()
	for next := int64(0); next < hw; {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) { b.Fatal(err) })
		fs.EachRecord(func(r *kgo.Record) { next = r.Offset + 1 })
	}
	return time.Since(t0)
}

// copyPartition copies a broker's partition directory's segments,
// leader-epoch-checkpoint and partition.metadata.
func copyPartition(b *testing.B, from, to string) {
	if err := os.MkdirAll(to, 0o755); err != nil {
		b.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(from, "*.log"))
	names = append(names, filepath.Join(from, "leader-epoch-checkpoint"), filepath.Join(from, "partition.metadata"))
	for _, n := range names {
		in, err := os.Open(n)
		if err != nil {
			b.Fatal(err)
		}
		out, err := os.Create(filepath.Join(to, filepath.Base(n)))
		if err == nil {
			_, err = io.Copy(out, in)
			err = errors.Join(err, out.Close())
		}
		in.Close()
		if err != nil {
			b.Fatalf("copying %s: %v", n, err)
		}
	}
}
