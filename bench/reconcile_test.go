package bench

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkReconcile1000 follows 1,000 partitions led by broker 1, then
// moves every leader at once with a controlled shutdown of broker 1, and
// measures how long kfollower takes from the first partition seeing a new
// leader epoch until all 1,000 are reconciled and fetching again, and how
// many OffsetsForLeaderEpoch requests that took (one per broker per round
// is the target, as Kafka's own fetcher threads batch them).
func BenchmarkReconcile1000(b *testing.B) { benchReconcile(b, 1000) }

// BenchmarkReconcile4000 is BenchmarkReconcile1000 at 4,000 partitions.
func BenchmarkReconcile4000(b *testing.B) { benchReconcile(b, 4000) }

func benchReconcile(b *testing.B, partitions int) {
	ctx := context.Background()
	c := kafka.Start(b, kafka.Options{NeedsFaults: true})
	const topic = "many"
	assign := make([][]int32, partitions)
	for p := range assign {
		assign[p] = []int32{1, 2 + int32(p%2), 3 - int32(p%2)}
	}
	c.CreateTopic(ctx, topic, assign, nil)
	cl := c.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var rs []*kgo.Record
	for p := range partitions {
		rs = append(rs, &kgo.Record{Partition: int32(p), Value: []byte("x")})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		b.Fatal(err)
	}

	dir, err := os.MkdirTemp("", "kfollower-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var epochQueries, epochPartitions atomic.Int64
	results := &resultCounts{n: map[string]int{}}
	m, err := fetcher.New(fetcher.Config{
		Client: c.Client(), DataDir: dir, MetadataInterval: time.Second,
		Follow:    func(t string) bool { return t == topic },
		Backoff:   follower.BackoffPolicy{Base: 20 * time.Millisecond, Max: time.Second},
		Observers: []fetcher.Observer{epochCounter{requests: &epochQueries, partitions: &epochPartitions, results: results}},
	})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	opened := time.Now()
	go func() { done <- m.Run(rctx) }()
	defer func() { cancel(); <-done }()
	waitAll(b, m, partitions, time.Millisecond, "fetching with their record", func(s fetcher.Status) bool { return s.State == "fetching" && s.LogEndOffset == 1 })
	b.ReportMetric(time.Since(opened).Seconds()*1000, "ms-to-follow-all") // start-up: empty data dir to all fetching
	b.Logf("following %d partitions; %d epoch queries for the first reconciliation", partitions, epochQueries.Load())

	epochQueries.Store(0)
	epochPartitions.Store(0)
	results.reset()
	stopped := time.Now()
	// Controlled shutdown: every leader moves at once. Stop returns once
	// the broker has exited, long after the leaders moved, so it runs
	// beside the measurement.
	exited := make(chan struct{})
	go func() { defer close(exited); c.Stop(1) }()
	defer func() { <-exited }()
	var first time.Time
	for first.IsZero() {
		for _, s := range m.Statuses() {
			if s.LeaderEpoch > 0 {
				first = time.Now()
				break
			}
		}
		time.Sleep(time.Millisecond)
	}
	waitAll(b, m, partitions, time.Millisecond, "fetching from their new leader", func(s fetcher.Status) bool { return s.LeaderEpoch > 0 && s.State == "fetching" })
	d := time.Since(first)
	b.ReportMetric(d.Seconds()*1000, "ms-to-reconcile")
	b.ReportMetric(time.Since(stopped).Seconds()*1000, "ms-since-shutdown-began")
	b.ReportMetric(float64(epochQueries.Load()), "epoch-requests")
	b.ReportMetric(float64(epochPartitions.Load())/float64(partitions), "epoch-queries-per-partition")
	b.Logf("epoch query answers after the move: %s; load average %s", results, loadAverage())
}

// epochCounter counts the OffsetForLeaderEpoch requests and the
// partitions they carry.
type epochCounter struct {
	fetcher.NopObserver
	requests, partitions *atomic.Int64
	results              *resultCounts
}

func (c epochCounter) RequestDone(s fetcher.RequestStats) {
	if s.Key == kmsg.OffsetForLeaderEpoch {
		c.requests.Add(1)
		c.partitions.Add(int64(s.Partitions))
		c.results.add(s)
	}
}

// resultCounts sums the answers of the epoch queries by result (ok, an
// error name, or the request's failure), to tell a needed query from a
// retried one.
type resultCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *resultCounts) add(s fetcher.RequestStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.Err != nil {
		r.n["request-failed"] += s.Partitions
	}
	for k, v := range s.Results {
		r.n[k] += v
	}
}

func (r *resultCounts) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.n)
}

func (r *resultCounts) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k, v := range r.n {
		out = append(out, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// waitAll waits until n partitions' statuses meet cond, looking every
// poll. BenchmarkScale looks every 50 ms: a status copy of thousands of
// partitions is itself work that slows what is measured (at 10 ms,
// Manager.Statuses took a fifth of the process's CPU at 4,000 partitions),
// and its figures are seconds.
func waitAll(b *testing.B, m *fetcher.Manager, n int, poll time.Duration, what string, cond func(fetcher.Status) bool) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		ok := 0
		for _, s := range m.Statuses() {
			if cond(s) {
				ok++
			}
		}
		if ok == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("after 5 minutes only %d of %d partitions are %s", ok, n, what)
		}
		time.Sleep(poll)
	}
}
