package bench

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/servecat"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/server"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkServe compares serving with the broker: a ~1 GiB, 8-partition
// topic, all led by broker 1 (so one broker against one kfollower), is
// copied by an in-process kfollower (fetcher and wire/server wired as
// `kfollower run --serve` wires them), then read to the end of every
// partition by franz-go consumers in assign mode, records dropped:
//
//	broker-1     one consumer against the broker leader
//	kfollower-1  one consumer against kfollower's endpoint
//	broker-8     8 concurrent consumers, each reading every partition
//	kfollower-8  the same against kfollower (8 GiB served in all)
//
// The four runs are interleaved for serveRounds rounds, so a change in the
// machine's load touches both sides alike. Reported: the median MB/s of
// each, the median ratio kfollower/broker for 1 and 8 consumers with its
// spread (min, max over the rounds), and the load average beside them.
func BenchmarkServe(b *testing.B) {
	ctx := context.Background()
	c := kafka.Start(b, kafka.Options{})
	const topic, partitions = "serve", 8
	const valueSize, records = 16 << 10, 64 << 10 // 1 GiB of values
	var assign [][]int32
	for range partitions {
		assign = append(assign, []int32{1})
	}
	c.CreateTopic(ctx, topic, assign, nil)
	total := fill(ctx, b, c, topic, assign, valueSize, records)
	ends := endOffsets(ctx, b, c, topic)
	b.Logf("topic %s: %d partitions on broker 1, %.0f MiB on disk; load %s", topic, partitions, float64(total)/(1<<20), loadAverage())

	addr, d := serveCopy(ctx, b, c, topic, ends)
	b.Logf("kfollower copied the topic in %v and serves it on %s; load %s", d, addr, loadAverage())

	broker := c.Node(1).Addr()
	mb := float64(total) / (1 << 20)
	runs := []struct {
		name      string
		addr      string
		consumers int
	}{
		{"broker-1", broker, 1}, {"kfollower-1", addr, 1},
		{"broker-8", broker, 8}, {"kfollower-8", addr, 8},
	}
	rates := make([][]float64, len(runs))
	const serveRounds = 3
	for round := range serveRounds {
		for i, r := range runs {
			d := consumeFrom(ctx, b, r.addr, topic, ends, r.consumers)
			rate := mb * float64(r.consumers) / d.Seconds()
			rates[i] = append(rates[i], rate)
			b.Logf("round %d, %s: %v, %.0f MB/s; load %s", round, r.name, d.Round(time.Millisecond), rate, loadAverage())
		}
	}
	for i, r := range runs {
		b.ReportMetric(median(rates[i]), r.name+"-MB/s")
	}
	for _, k := range []struct {
		name   string
		br, kf int
	}{{"1", 0, 1}, {"8", 2, 3}} {
		var ratios []float64
		for round := range serveRounds {
			ratios = append(ratios, rates[k.kf][round]/rates[k.br][round])
		}
		b.ReportMetric(median(ratios), "ratio-"+k.name)
		b.Logf("kfollower/broker, %s consumer(s): median %.2f, min %.2f, max %.2f over %d rounds",
			k.name, median(ratios), slices.Min(ratios), slices.Max(ratios), serveRounds)
	}
	b.Logf("load average at the end: %s", loadAverage())
}

// endOffsets is the end offset of every partition of topic.
func endOffsets(ctx context.Context, b *testing.B, c *kafka.Cluster, topic string) map[int32]int64 {
	listed, err := c.Admin().ListEndOffsets(ctx, topic)
	if err != nil {
		b.Fatal(err)
	}
	ends := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return ends
}

// serveCopy starts kfollower following topic into a temporary data dir and
// serving it on a loopback port, as `kfollower run --serve` does, and
// returns the address once every partition is served up to its end offset
// in ends, with the time the copy took. Both stop when the benchmark ends.
func serveCopy(ctx context.Context, b *testing.B, c *kafka.Cluster, topic string, ends map[int32]int64) (string, time.Duration) {
	dir, err := os.MkdirTemp("", "kfollower-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var srv *server.Server
	m, err := fetcher.New(fetcher.Config{
		Client: c.Client(), DataDir: dir,
		// The daemon's default flush policy: the served high watermark
		// is the durable end, moved by the flush each maintenance pass
		// makes.
		Storage:             storage.Options{Flush: storage.FlushInterval, FlushInterval: time.Second},
		MaintenanceInterval: time.Second,
		Follow:              func(t string) bool { return t == topic },
		Backoff:             follower.BackoffPolicy{Base: 20 * time.Millisecond, Max: time.Second},
		Changed:             func(tp wire.TopicPartition) { srv.Notify(tp.Topic, tp.Partition) },
	})
	if err != nil {
		b.Fatal(err)
	}
	cat := servecat.New(m)
	srv, err = server.New(server.Config{Advertise: ln.Addr().String(), ClusterID: "a2ZvbGxvd2VyLWJlbmNoLg", Catalog: cat})
	if err != nil {
		b.Fatal(err)
	}
	// The server stops before the fetcher, which closes the logs it reads
	// (cmd/kfollower's endpoint.run).
	sctx, stopServer := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	mctx, stopFetcher := context.WithCancel(ctx)
	followed := make(chan error, 1)
	start := time.Now()
	go func() { followed <- m.Run(mctx) }()
	b.Cleanup(func() {
		stopServer()
		if err := <-served; err != nil {
			b.Errorf("serving: %v", err)
		}
		stopFetcher()
		if err := <-followed; err != nil && !errors.Is(err, context.Canceled) {
			b.Errorf("following: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Minute)
	for {
		servedUp := 0
		for p, end := range ends {
			if l, _, ok := cat.Partition(topic, p); ok && l.DurableEnd() == end {
				servedUp++
			}
		}
		if servedUp == len(ends) {
			return ln.Addr().String(), time.Since(start)
		}
		if time.Now().After(deadline) {
			b.Fatalf("kfollower did not serve the topic to its end in 10 minutes: %+v", m.Statuses())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// consumeFrom runs n concurrent franz-go consumers against the broker at
// addr, each reading every partition of topic from its start to its end
// offset in ends and dropping the records, and returns the time until the
// last one is done.
func consumeFrom(ctx context.Context, b *testing.B, addr, topic string, ends map[int32]int64, n int) time.Duration {
	offs := map[int32]kgo.Offset{}
	for p := range ends {
		offs[p] = kgo.NewOffset().AtStart()
	}
	var clients []*kgo.Client
	for range n {
		// Seeded with addr alone: the cluster's metadata names the topic's
		// leader, broker 1, and kfollower names itself.
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
			kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(8<<20))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		clients = append(clients, cl)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for _, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- readToEnd(rctx, cl, ends)
		}()
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatalf("consuming from %s: %v", addr, err)
		}
	}
	return d
}

// readToEnd polls cl until every partition has given its records up to
// its end offset in ends.
func readToEnd(ctx context.Context, cl *kgo.Client, ends map[int32]int64) error {
	next := map[int32]int64{}
	done := 0
	for p, end := range ends {
		if end == 0 {
			done++
		}
		next[p] = 0
	}
	for done < len(ends) {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return err
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			was := next[p.Partition]
			next[p.Partition] = p.Records[len(p.Records)-1].Offset + 1
			if was < ends[p.Partition] && next[p.Partition] >= ends[p.Partition] {
				done++
			}
		})
	}
	return nil
}

// median is the middle of xs (the mean of the two middle ones for an even
// count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
