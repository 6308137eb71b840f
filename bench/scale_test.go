package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkScale follows N partitions (1,000, 4,000 and 10,000; one size
// alone with KFOLLOWER_SCALE=4000, or a list "1000,4000") on the
// 3-broker cluster, every one led by broker 1, with the fetcher in this
// process and its default settings, and measures against the goals of
// issue 14 at 10,000 partitions:
//
//   - start-up: an empty data directory to every partition fetching with
//     its one record (under 10 s);
//   - RSS (VmRSS of this process, which holds little else) and idle CPU
//     (this process's user+system time over an idle window,
//     KFOLLOWER_SCALE_IDLE, 15s by default; the JVMs are other processes):
//     ≤ 100 MB + 5 KB per partition, under 10% of a core;
//   - after every leader moves at once (broker 1's controlled shutdown),
//     the time from the shutdown's start until every partition has
//     reconciled with its new leader and is fetching again (under 2 s), and
//     the OffsetsForLeaderEpoch requests that took: one per broker per
//     round is the goal, as Kafka's fetcher threads batch them, so
//     requests per broker should equal epoch queries per partition.
//
// KFOLLOWER_SCALE_IDLEPROF=file writes a CPU profile of the idle window
// (of the last size run), to see how much of it is full Fetch encoding;
// KFOLLOWER_SCALE_HEAPPROF=file a heap profile at its end.
func BenchmarkScale(b *testing.B) {
	sizes := []int{1000, 4000, 10000}
	if s := os.Getenv("KFOLLOWER_SCALE"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("KFOLLOWER_SCALE=%q: want partition counts such as 1000,4000", s)
			}
			sizes = append(sizes, n)
		}
	}
	idle := 15 * time.Second
	if s := os.Getenv("KFOLLOWER_SCALE_IDLE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("KFOLLOWER_SCALE_IDLE: %v", err)
		}
		idle = d
	}
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				benchScale(b, n, idle)
			}
		})
	}
}

func benchScale(b *testing.B, partitions int, idle time.Duration) {
	ctx := context.Background()
	// Every open log holds its files open: check the process may hold
	// them all before starting a cluster to find out.
	perLog := fdsPerLog(b)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	if need := uint64(perLog*partitions + 1024); need > lim.Cur {
		b.Fatalf("%d partitions need about %d open files (%d per log, and sockets), over this process's limit of %d (ulimit -n)",
			partitions, need, perLog, lim.Cur)
	}
	c := kafka.Start(b, kafka.Options{NeedsFaults: true})
	const topic = "many"
	assign := make([][]int32, partitions)
	for p := range assign {
		assign[p] = []int32{1, 2 + int32(p%2), 3 - int32(p%2)}
	}
	created := time.Now()
	c.CreateTopic(ctx, topic, assign, nil)
	cl := c.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var rs []*kgo.Record
	for p := range partitions {
		rs = append(rs, &kgo.Record{Partition: int32(p), Value: []byte("x")})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	cl.Close()
	b.Logf("%d partitions created and produced to in %v; load average %s", partitions, time.Since(created).Round(time.Millisecond), loadAverage())

	dir, err := os.MkdirTemp("", "kfollower-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	counts := newScaleCounts()
	fcl := c.Client()
	defer fcl.Close()
	m, err := fetcher.New(fetcher.Config{
		Client: fcl, DataDir: dir,
		Follow:    func(t string) bool { return t == topic },
		Observers: []fetcher.Observer{counts},
	})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- m.Run(rctx) }()
	defer func() { cancel(); <-done }()
	waitAll(b, m, partitions, 50*time.Millisecond, "fetching with their record", func(s fetcher.Status) bool { return s.State == "fetching" && s.LogEndOffset == 1 })
	startup := time.Since(began)
	first := counts.take()
	b.Logf("start-up: %v to %d partitions fetching (goal < 10 s); first reconciliation: %s; load average %s",
		startup.Round(time.Millisecond), partitions, first, loadAverage())

	// Idle: every partition fetched to its end, nothing produced.
	runtime.GC()
	var prof *os.File
	if path := os.Getenv("KFOLLOWER_SCALE_IDLEPROF"); path != "" {
		if prof, err = os.Create(path); err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(prof); err != nil {
			b.Fatal(err)
		}
	}
	cpu0, t0 := cpuTime(b), time.Now()
	counts.take()
	time.Sleep(idle) // the window measured, not a wait for a condition
	cpu, window := cpuTime(b)-cpu0, time.Since(t0)
	idleCounts := counts.take()
	if prof != nil {
		pprof.StopCPUProfile()
		prof.Close()
	}
	rss := vmRSS(b)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if path := os.Getenv("KFOLLOWER_SCALE_HEAPPROF"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	goalRSS := 100<<20 + 5<<10*int64(partitions)
	idleShare := cpu.Seconds() / window.Seconds()
	b.Logf("idle %v: CPU %.1f%% of a core (goal < 10%%), %s; RSS %.1f MB (goal ≤ %.1f MB; Go heap in use %.1f MB, %.1f KB per partition); %d goroutines, %d open files; load average %s",
		window.Round(time.Millisecond), 100*idleShare, idleCounts, float64(rss)/1e6, float64(goalRSS)/1e6,
		float64(ms.HeapInuse)/1e6, float64(ms.HeapInuse)/1e3/float64(partitions),
		runtime.NumGoroutine(), openFiles(b), loadAverage())

	// Every leader moves at once: broker 1's controlled shutdown.
	epochs := map[int32]int32{}
	for _, s := range m.Statuses() {
		epochs[s.Partition] = s.LeaderEpoch
	}
	counts.take()
	moved := time.Now()
	// Stop returns once the broker has exited, long after the leaders
	// moved, so it runs beside the measurement. (If it fails, its Fatal
	// ends only that goroutine, but marks the benchmark failed.)
	var exited time.Duration
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		c.Stop(1)
		exited = time.Since(moved)
	}()
	defer func() { <-stopped }()
	waitAll(b, m, partitions, 50*time.Millisecond, "reconciled with their new leader", func(s fetcher.Status) bool {
		return s.LeaderEpoch > epochs[s.Partition] && s.Leader != 1 && s.State == "fetching" && s.Reconciled
	})
	reconcile := time.Since(moved)
	move := counts.take()
	<-stopped
	perBroker := move.epochRequestsPerBroker()
	perPartition := float64(move.epochQueries) / float64(partitions)
	b.Logf("every leader moved: reconciled %v after the shutdown began (goal < 2 s; broker 1 exited after %v); "+
		"OffsetsForLeaderEpoch requests per broker %v, %.2f queries per partition (goal: requests per broker = queries per partition); %s; load average %s",
		reconcile.Round(time.Millisecond), exited.Round(time.Millisecond), perBroker, perPartition, move, loadAverage())

	for _, e := range move.timeline {
		b.Logf("  %s", e)
	}

	b.ReportMetric(startup.Seconds()*1000, "ms-startup")
	b.ReportMetric(reconcile.Seconds()*1000, "ms-reconcile")
	b.ReportMetric(float64(move.epochRequests), "epoch-requests")
	b.ReportMetric(perPartition, "epoch-queries/partition")
	b.ReportMetric(float64(rss)/1e6, "MB-rss")
	b.ReportMetric(100*idleShare, "%cpu-idle")
}

// scaleCounts is an Observer that counts requests by API and broker, and
// the epoch queries' answers, between two takes.
type scaleCounts struct {
	fetcher.NopObserver
	mu sync.Mutex
	scaleWindow
}

type scaleWindow struct {
	epochRequests, epochQueries int
	epochByBroker               map[int32]int
	results                     map[string]int
	fetches, fetchPartitions    int
	fetchLatency                time.Duration
	// since is when the window began; timeline lists its epoch requests,
	// leader changes and reconciliations in time since then.
	since                          time.Time
	timeline                       []string
	leaderChanges, reconciliations int
	firstChange, lastChange        time.Duration
	lastReconciled                 time.Duration
	// lastRetried is when the last epoch answer that was not "ok" came:
	// a broker had not yet made itself leader of some partition then, so
	// what comes after it is ours (the wait and the next round).
	lastRetried time.Duration
}

func newScaleCounts() *scaleCounts {
	c := &scaleCounts{}
	c.take()
	return c
}

func (c *scaleCounts) RequestDone(s fetcher.RequestStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch s.Key {
	case kmsg.OffsetForLeaderEpoch:
		c.epochRequests++
		c.epochQueries += s.Partitions
		c.epochByBroker[s.Broker]++
		end := time.Since(c.since)
		c.timeline = append(c.timeline, fmt.Sprintf("%v-%v broker %d: %d queries %v", (end-s.Latency).Round(time.Millisecond),
			end.Round(time.Millisecond), s.Broker, s.Partitions, s.Results))
		if s.Err != nil {
			c.results["request-failed"] += s.Partitions
		}
		for k, v := range s.Results {
			c.results[k] += v
			if k != "ok" {
				c.lastRetried = end
			}
		}
	case kmsg.Fetch:
		c.fetches++
		c.fetchPartitions += s.Partitions
		c.fetchLatency += s.Latency
		if s.Latency > time.Second {
			// Longer than the long poll (500 ms): what epoch retries due
			// meanwhile waited for, as a worker has one request in the air.
			end := time.Since(c.since)
			c.timeline = append(c.timeline, fmt.Sprintf("%v-%v broker %d: a Fetch of %d partitions", (end-s.Latency).Round(time.Millisecond),
				end.Round(time.Millisecond), s.Broker, s.Partitions))
		}
	}
}

func (c *scaleCounts) LeaderChanged(wire.TopicPartition, follower.LeaderChange, follower.LeaderChange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := time.Since(c.since)
	if c.leaderChanges == 0 {
		c.firstChange = d
	}
	c.leaderChanges++
	c.lastChange = d
}

func (c *scaleCounts) Reconciled(*follower.ReconciledEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reconciliations++
	c.lastReconciled = time.Since(c.since)
}

// take returns the counts since the last take and starts again from zero.
func (c *scaleCounts) take() scaleWindow {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.scaleWindow
	c.scaleWindow = scaleWindow{epochByBroker: map[int32]int{}, results: map[string]int{}, since: time.Now()}
	return w
}

// epochRequestsPerBroker is "broker=requests" for each broker asked.
func (w scaleWindow) epochRequestsPerBroker() string {
	var out []string
	for id, n := range w.epochByBroker {
		out = append(out, fmt.Sprintf("%d=%d", id, n))
	}
	sort.Strings(out)
	return "[" + strings.Join(out, " ") + "]"
}

func (w scaleWindow) String() string {
	var rs []string
	for k, v := range w.results {
		rs = append(rs, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(rs)
	s := fmt.Sprintf("%d epoch requests (%d queries; answers: %s)", w.epochRequests, w.epochQueries, strings.Join(rs, " "))
	if w.fetches > 0 {
		s += fmt.Sprintf(", %d fetches of %.0f partitions each, mean latency %v", w.fetches,
			float64(w.fetchPartitions)/float64(w.fetches), (w.fetchLatency / time.Duration(w.fetches)).Round(time.Millisecond))
	}
	if w.leaderChanges > 0 {
		s += fmt.Sprintf("; %d leader changes from Metadata at %v-%v", w.leaderChanges,
			w.firstChange.Round(time.Millisecond), w.lastChange.Round(time.Millisecond))
	}
	if w.reconciliations > 0 {
		s += fmt.Sprintf("; %d reconciliations, the last at %v", w.reconciliations, w.lastReconciled.Round(time.Millisecond))
	}
	if w.lastRetried > 0 {
		s += fmt.Sprintf("; the last answer not ok (a broker not yet leader) at %v", w.lastRetried.Round(time.Millisecond))
	}
	return s
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// vmRSS is this process's resident set (VmRSS in /proc/self/status).
func vmRSS(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// openFiles is the number of files this process holds open.
func openFiles(b *testing.B) int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		b.Fatal(err)
	}
	return len(es)
}

// fdsPerLog is how many files one open, empty log holds open.
func fdsPerLog(b *testing.B) int {
	dir := b.TempDir()
	before := openFiles(b)
	l, err := storage.Open(dir, "probe", 0, storage.Options{})
	if err != nil {
		b.Fatal(err)
	}
	n := openFiles(b) - before
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	return n
}
