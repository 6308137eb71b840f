package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkProfileCatchUp is where to look for the gap between kfollower
// and the consumer: over BenchmarkReplica's uncompressed data (8
// partitions, ~1 GiB of 1 KiB JSON records), the consumer and the
// in-process fetcher under --flush os each copy it twice, the second time
// with a CPU profile and an execution trace of their own
// (consumer.cpu, follow.cpu, follow.trace in $BENCH_PROFILE_DIR, or a new
// directory under the temp dir); the fetcher fetches on its own
// connections (Config.DirectFetch, as the binary does), and once more
// through franz-go's ("follow-kgo", follow-kgo.cpu), for comparison; then
// 4 unprofiled rounds of the two, interleaved, give the ratios
// direct/franz-go of CPU per GiB and of MB/s. Logged per run: the time, the CPU time
// of this process per GiB copied (on a loaded machine a steadier figure
// than the time), bytes allocated per byte copied, GC cycles and, for the
// fetcher, its Fetch responses per broker with their mean and largest
// size. Then 3 rounds of the binary under --flush os (when it copied its
// first record: the start-up's share), each followed by the consumer and
// the fetcher at 1, 2, 4 and 8 MiB a partition, interleaved.
//
//	BENCH_PROFILE_DIR=/tmp/prof bench/run.sh ProfileCatchUp
//	go tool pprof -top bench.test /tmp/prof/follow.cpu
func BenchmarkProfileCatchUp(b *testing.B) {
	ctx := context.Background()
	dir := os.Getenv("BENCH_PROFILE_DIR")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "kfollower-profile-"); err != nil {
			b.Fatal(err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	b.Log(holdGuestMemory(b))
	c := kafka.Start(b, kafka.Options{})
	const topic, partitions, valueSize, records = "profile", 8, 1 << 10, 1 << 20
	var assign [][]int32
	for p := range partitions {
		assign = append(assign, []int32{int32(p%3 + 1)})
	}
	c.CreateTopic(ctx, topic, assign, nil)
	values := jsonValues(8192, valueSize)
	size := produceAll(ctx, b, c, topic, assign, records, kgo.NoCompression(), func(i int) []byte { return values[i%len(values)] })
	mib := float64(size) / (1 << 20)
	b.Logf("topic %s: %.0f MiB on disk; load %s; profiles in %s", topic, mib, loadAverage(), dir)

	measure := func(name string, profile bool, run func() time.Duration) (took time.Duration, cpuPerGiB float64) {
		b.Helper()
		if profile {
			cpu, err := os.Create(filepath.Join(dir, name+".cpu"))
			if err != nil {
				b.Fatal(err)
			}
			defer cpu.Close()
			if err := pprof.StartCPUProfile(cpu); err != nil {
				b.Fatal(err)
			}
			defer pprof.StopCPUProfile()
			if name != "consumer" {
				tr, err := os.Create(filepath.Join(dir, name+".trace"))
				if err != nil {
					b.Fatal(err)
				}
				defer tr.Close()
				if err := trace.Start(tr); err != nil {
					b.Fatal(err)
				}
				defer trace.Stop()
			}
		}
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		before, cpu0 := loadAverage(), cpuTime(b)
		d := run()
		cpu := cpuTime(b) - cpu0
		runtime.ReadMemStats(&m1)
		b.Logf("%-8s profiled %-5v %8v %6.0f MB/s, %.2f CPU-s per GiB; allocated %.2f B per B copied, %d GC cycles, GC CPU %.1f%%; load before %s, after %s",
			name, profile, d.Round(time.Millisecond), mib/d.Seconds(), cpu.Seconds()*1024/mib, float64(m1.TotalAlloc-m0.TotalAlloc)/float64(size),
			m1.NumGC-m0.NumGC, 100*m1.GCCPUFraction, before, loadAverage())
		return d, cpu.Seconds() * 1024 / mib
	}
	for round := range 2 {
		profile := round == 1
		measure("consumer", profile, func() time.Duration { return consumeAll(ctx, b, c, topic, partitions, records) })
		fs := &fetchStats{}
		measure("follow", profile, func() time.Duration {
			return follow(ctx, b, c, topic, partitions, size, storage.FlushOS, fs)
		})
		fs.log(b)
		// The same through franz-go's connections (Config.DirectFetch
		// nil, as under SASL): what reading each response into a fresh
		// buffer costs, beside the direct connections' reused ones.
		fk := &fetchStats{}
		measure("follow-kgo", profile, func() time.Duration {
			return followVia(ctx, b, c, topic, partitions, storage.FlushOS, wire.FetchLimits{}, nil, fk)
		})
		fk.log(b)
	}

	// The direct connections against franz-go's, unprofiled, 4 rounds,
	// each starting with the other (the page cache and the brokers'
	// state favour neither): CPU per GiB and MB/s, and their per-round
	// ratios direct/franz-go.
	var cpuRatios, rateRatios, cpuD, cpuK []float64
	load0 := loadAverage()
	for round := range 4 {
		var took [2]time.Duration
		var cpu [2]float64
		for i := range 2 {
			k := (i + round) % 2
			if k == 0 {
				took[k], cpu[k] = measure("follow", false, func() time.Duration {
					return follow(ctx, b, c, topic, partitions, size, storage.FlushOS)
				})
			} else {
				took[k], cpu[k] = measure("follow-kgo", false, func() time.Duration {
					return followVia(ctx, b, c, topic, partitions, storage.FlushOS, wire.FetchLimits{}, nil)
				})
			}
		}
		cpuD, cpuK = append(cpuD, cpu[0]), append(cpuK, cpu[1])
		cpuRatios = append(cpuRatios, cpu[0]/cpu[1])
		rateRatios = append(rateRatios, took[1].Seconds()/took[0].Seconds())
	}
	b.Logf("direct vs franz-go connections, 4 rounds: CPU-s per GiB %.2f (%.2f-%.2f) vs %.2f (%.2f-%.2f); ratio direct/franz-go CPU per GiB median %.2f (%.2f-%.2f), MB/s median %.2f (%.2f-%.2f); load at the start %s, at the end %s",
		median(cpuD), slices.Min(cpuD), slices.Max(cpuD), median(cpuK), slices.Min(cpuK), slices.Max(cpuK),
		median(cpuRatios), slices.Min(cpuRatios), slices.Max(cpuRatios), median(rateRatios), slices.Min(rateRatios), slices.Max(rateRatios),
		load0, loadAverage())
	b.ReportMetric(median(cpuRatios), "direct/kgo-cpu-per-GiB")
	b.ReportMetric(median(rateRatios), "direct/kgo-MB/s")

	// The binary's start-up share, and a partition's share of a Fetch
	// response: the consumer and the in-process fetcher with each
	// PartitionMaxBytes, interleaved.
	bin, ends := buildBinary(b), endOffsets(ctx, b, c, topic)
	sizes := []int32{1 << 20, 2 << 20, 4 << 20, 8 << 20}
	rates := map[string][]float64{}
	for round := range 3 {
		r := runBinary(ctx, b, bin, c, topic, ends, "os")
		b.Logf("round %d: binary --flush os %v (%.0f MB/s), first record copied after %v; load %s",
			round, r.total.Round(time.Millisecond), mib/r.total.Seconds(), r.firstData.Round(time.Millisecond), loadAverage())
		for i := range sizes {
			lim := wire.DefaultFetchLimits
			lim.PartitionMaxBytes = sizes[(i+round)%len(sizes)]
			dc := consumeAllLimits(ctx, b, c, topic, partitions, records, lim)
			df := followLimits(ctx, b, c, topic, partitions, storage.FlushOS, lim)
			k := fmt.Sprintf("%d MiB", lim.PartitionMaxBytes>>20)
			rates[k+" consumer"] = append(rates[k+" consumer"], mib/dc.Seconds())
			rates[k+" follow"] = append(rates[k+" follow"], mib/df.Seconds())
			b.Logf("round %d, partition max %s: consumer %6.0f MB/s, follow --flush os %6.0f MB/s; load %s",
				round, k, mib/dc.Seconds(), mib/df.Seconds(), loadAverage())
		}
	}
	for _, n := range sizes {
		k := fmt.Sprintf("%d MiB", n>>20)
		c, f := rates[k+" consumer"], rates[k+" follow"]
		b.Logf("partition max %s: consumer median %6.0f (%0.f-%0.f), follow median %6.0f (%0.f-%0.f) MB/s",
			k, median(c), slices.Min(c), slices.Max(c), median(f), slices.Min(f), slices.Max(f))
	}
}

// fetchStats counts a fetcher's Fetch responses per broker.
type fetchStats struct {
	fetcher.NopObserver
	mu     sync.Mutex
	n      map[int32]int
	direct map[int32]int
	bytes  map[int32]int64
	most   map[int32]int64
	empty  map[int32]int
	staged map[int32]int64
	others int
}

func (s *fetchStats) RequestDone(r fetcher.RequestStats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n, s.direct, s.bytes, s.most, s.empty, s.staged = map[int32]int{}, map[int32]int{}, map[int32]int64{}, map[int32]int64{}, map[int32]int{}, map[int32]int64{}
	}
	if r.Key != kmsg.Fetch {
		s.others++
		return
	}
	s.n[r.Broker]++
	if r.Direct {
		s.direct[r.Broker]++
	}
	s.bytes[r.Broker] += r.FetchedBytes
	s.staged[r.Broker] += r.StagedBytes
	s.most[r.Broker] = max(s.most[r.Broker], r.FetchedBytes)
	if r.FetchedBytes == 0 {
		s.empty[r.Broker]++
	}
}

func (s *fetchStats) log(b *testing.B) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, n := range s.n {
		b.Logf("  broker %d: %d Fetch responses (%d on the direct connection, %d without records), %.1f MiB a response on average, at most %.1f MiB, %.0f%% of the bytes staged as read (limits: %d MiB a partition, %d MiB a response)",
			id, n, s.direct[id], s.empty[id], float64(s.bytes[id])/float64(n)/(1<<20), float64(s.most[id])/(1<<20), 100*float64(s.staged[id])/float64(max(s.bytes[id], 1)),
			wire.DefaultFetchLimits.PartitionMaxBytes>>20, wire.DefaultFetchLimits.MaxBytes>>20)
	}
	b.Logf("  %d other requests", s.others)
}
