package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkReplica compares kfollower, as users run it, with a real broker
// replica and with a consumer, on one cluster: three brokers lead an
// 8-partition topic of ~1 GiB of 1 KiB JSON-like records (RF 1, leaders
// spread over brokers 1-3), and a fourth broker holds nothing of it. For an
// uncompressed and an lz4 topic, 3 rounds (KFOLLOWER_REPLICA_ROUNDS), the
// contenders interleaved (each round starts one later in the list, so none
// is always first):
//
//	consumer  a franz-go consumer with kfollower's own fetch limits (8 MiB a
//	          partition, 64 MiB a response), records dropped
//	consumer-process
//	          the same consumer as a process of its own (bench/consume),
//	          timed from its start until it has read every record: it
//	          pays what the binary pays and the one inside the benchmark's
//	          warm process does not (the program's start, the first touch
//	          of the memory it reads responses into), so os/consumer-process
//	          tells the start-up's share of os/consumer
//	interval  the kfollower binary, built from this tree, as users run it:
//	os        `kfollower run --flush interval` (the default), `--flush os`,
//	always    `--flush always`, each into an empty data dir, timed from the
//	          process's start until its /status shows every partition's
//	          log end at the topic's end (written, not yet all durable:
//	          under interval a copy shorter than --flush-interval may end
//	          before its first fsync)
//	os-client `--flush os --fetch-connection client`: every Fetch through
//	          franz-go's connections, where the others fetch on
//	          kfollower's own (the default), so os/os-client is the own
//	          connections' effect within one run
//	replica   a reassignment adding broker 4 as a replica of every
//	          partition, timed from the AlterPartitionAssignments call until
//	          the controller ends it, which it does once broker 4 is in
//	          every ISR. Broker 4 runs the broker defaults
//	          (num.replica.fetchers 1, replica.fetch.max.bytes 1 MiB,
//	          replica.fetch.response.max.bytes 10 MiB) and leaves flushing
//	          to the OS, as Kafka does by default. A reassignment back and
//	          the deletion of broker 4's copy end each round, untimed.
//
// MB/s is MiB of the leaders' segments (what every contender copies; for
// lz4, compressed) per second. On the lz4 topic the consumer decompresses
// every batch (franz-go does) while kfollower and the broker copy them
// as they are, so there the consumer is no ceiling. Reported per topic: each contender's median
// MB/s, the medians of the per-round ratios interval/replica (goal ≥ 1.5),
// os/consumer (goal ≥ 0.9), os/consumer-process and os/os-client, every
// spread (min–max over the rounds) in the log, and the load average before
// and after every run.
// Every timed run starts on a disk at rest (waitDiskSettled): what the run
// before it left to write back or discard is not charged to it.
// Before the rounds, one untimed warm-up round of every contender, and the
// guest's memory held (holdGuestMemory: on a VM that hands freed memory back
// to its host, the next writer into the page cache would pay the host's
// backing of it, by chance of timing); each binary run also logs its CPU
// time per GiB, from its start to its exit, and when it had copied a
// quarter, half and three quarters of the records.
// KFOLLOWER_REPLICA_CONTENDERS=interval,os,replica runs only those named.
//
//	bench/run.sh Replica
func BenchmarkReplica(b *testing.B) {
	ctx := context.Background()
	const extra = int32(4)
	c := kafka.Start(b, kafka.Options{ExtraBrokers: 1, NeedsFaults: true,
		// A removed replica is deleted this long after it is dropped
		// (LogManager.deleteLogs), 60 s by default, and the delete task
		// first runs this long after start-up, 30 s by default; no other
		// effect here.
		Config: map[string]string{"log.segment.delete.delay.ms": "500", "log.initial.task.delay.ms": "100"}})
	b.Log(holdGuestMemory(b))
	bin, consumeBin := buildBinary(b), buildCommand(b, "bench/consume")
	const partitions, valueSize, records = 8, 1 << 10, 1 << 20 // 1 GiB of values
	var assign [][]int32
	for p := range partitions {
		assign = append(assign, []int32{int32(p%3 + 1)})
	}
	values := jsonValues(8192, valueSize)
	type topicRun struct {
		name, short string
		codec       kgo.CompressionCodec
		mib         float64 // on the leaders' disks
		ends        map[int32]int64
	}
	topics := []*topicRun{
		{name: "replica-none", short: "none", codec: kgo.NoCompression()},
		{name: "replica-lz4", short: "lz4", codec: kgo.Lz4Compression()},
	}
	for _, t := range topics {
		c.CreateTopic(ctx, t.name, assign, nil)
		size := produceAll(ctx, b, c, t.name, assign, records, t.codec, func(i int) []byte { return values[i%len(values)] })
		t.mib, t.ends = float64(size)/(1<<20), endOffsets(ctx, b, c, t.name)
		b.Logf("topic %s: %d partitions on brokers 1-3, %d records of %d B (%.0f MiB of values), %.0f MiB on disk; load %s",
			t.name, partitions, records, valueSize, float64(records*valueSize)/(1<<20), t.mib, loadAverage())
	}
	for _, t := range topics {
		for p := range partitions {
			c.WaitPartitionGone(ctx, extra, t.name, int32(p)) // broker 4 starts empty
		}
	}

	type contender struct {
		name string
		// run copies t and returns the time, and what to log beside it.
		run func(t *topicRun) (time.Duration, string)
	}
	binary := func(t *topicRun, flush string, extra ...string) (time.Duration, string) {
		r := runBinary(ctx, b, bin, c, t.name, t.ends, flush, extra...)
		return r.total, fmt.Sprintf("; first record copied after %v, a quarter, half, three quarters after %v %v %v; %.2f CPU-s per GiB, %d page faults, peak RSS %d MiB (start to exit); partitions at their end after %s",
			r.firstData.Round(time.Millisecond), r.quarters[0].Round(time.Millisecond), r.quarters[1].Round(time.Millisecond),
			r.quarters[2].Round(time.Millisecond), r.cpu.Seconds()*1024/t.mib, r.faults, r.maxRSS>>20, partitionEnds(r.partitionEnds))
	}
	contenders := []contender{
		{"consumer", func(t *topicRun) (time.Duration, string) {
			return consumeAll(ctx, b, c, t.name, partitions, records), ""
		}},
		{"consumer-process", func(t *topicRun) (time.Duration, string) {
			r := consumeProcess(ctx, b, consumeBin, c, t.name, partitions, records)
			return r.total, fmt.Sprintf("; first record read after %v, a quarter, half, three quarters after %v %v %v; %.2f CPU-s per GiB, %d page faults (start to exit)",
				r.first.Round(time.Millisecond), r.quarters[0].Round(time.Millisecond), r.quarters[1].Round(time.Millisecond),
				r.quarters[2].Round(time.Millisecond), r.cpu.Seconds()*1024/t.mib, r.faults)
		}},
		{"interval", func(t *topicRun) (time.Duration, string) { return binary(t, "interval") }},
		{"os", func(t *topicRun) (time.Duration, string) { return binary(t, "os") }},
		{"os-client", func(t *topicRun) (time.Duration, string) { return binary(t, "os", "--fetch-connection", "client") }},
		{"always", func(t *topicRun) (time.Duration, string) { return binary(t, "always") }},
		{"replica", func(t *topicRun) (time.Duration, string) { return replicaCopy(ctx, b, c, t.name, assign, extra), "" }},
	}
	if s := os.Getenv("KFOLLOWER_REPLICA_CONTENDERS"); s != "" {
		var keep []contender
		for _, name := range strings.Split(s, ",") {
			i := slices.IndexFunc(contenders, func(k contender) bool { return k.name == name })
			if i < 0 {
				b.Fatalf("KFOLLOWER_REPLICA_CONTENDERS=%q: no contender %q", s, name)
			}
			keep = append(keep, contenders[i])
		}
		contenders = keep
	}
	rounds := 3
	if s := os.Getenv("KFOLLOWER_REPLICA_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("KFOLLOWER_REPLICA_ROUNDS=%q: want a number of rounds, at least 1", s)
		}
		rounds = n
	}
	// One untimed round first: the brokers' JVMs compile the paths each
	// contender's requests take (broker 4's replica fetcher has never run
	// before), the binary's first exec reads it in, and every contender
	// then starts from the same warm state. On this project's machines the
	// first binary run of a bench copied its first record after 127–539
	// ms, the later ones after 39–98 ms, whichever contender it was.
	for _, t := range topics {
		for _, k := range contenders {
			d, note := k.run(t)
			b.Logf("warm-up, %s, %-9s %8v (not counted)%s", t.short, k.name, d.Round(time.Millisecond), note)
		}
	}
	load0 := loadAverage()
	rates := map[string][]float64{} // topic/contender → MB/s, one a round
	for round := range rounds {
		for _, t := range topics {
			for i := range contenders {
				k := contenders[(i+round)%len(contenders)]
				settled := waitDiskSettled()
				before := loadAverage()
				d, note := k.run(t)
				rate := t.mib / d.Seconds()
				rates[t.short+"/"+k.name] = append(rates[t.short+"/"+k.name], rate)
				b.Logf("round %d, %s, %-9s %8v %6.0f MB/s; %s; load before %s, after %s%s",
					round, t.short, k.name, d.Round(time.Millisecond), rate, settled, before, loadAverage(), note)
			}
		}
	}
	for _, t := range topics {
		for _, k := range contenders {
			r := rates[t.short+"/"+k.name]
			b.ReportMetric(median(r), t.short+"-"+k.name+"-MB/s")
			b.Logf("%s %-9s median %6.0f MB/s, min %6.0f, max %6.0f", t.short, k.name, median(r), slices.Min(r), slices.Max(r))
		}
		for _, q := range []struct{ num, den, goal string }{
			{"interval", "replica", "goal ≥ 1.5"}, {"os", "consumer", "goal ≥ 0.9"},
			{"os", "consumer-process", "(both fresh processes)"},
			{"os", "os-client", "(the own Fetch connections' effect)"},
			{"os", "replica", ""}, {"always", "replica", ""}, {"consumer", "replica", ""},
		} {
			num, den := rates[t.short+"/"+q.num], rates[t.short+"/"+q.den]
			if len(num) == 0 || len(den) == 0 {
				continue // one of them left out (KFOLLOWER_REPLICA_CONTENDERS)
			}
			var ratios []float64
			for round := range rounds {
				ratios = append(ratios, num[round]/den[round])
			}
			b.ReportMetric(median(ratios), t.short+"-"+q.num+"/"+q.den)
			b.Logf("%s %s/%s: median %.2f, min %.2f, max %.2f over %d rounds %s",
				t.short, q.num, q.den, median(ratios), slices.Min(ratios), slices.Max(ratios), rounds, q.goal)
		}
	}
	load1 := loadAverage()
	b.Logf("load average at the start of the rounds: %s; at the end: %s", load0, load1)
	for name, l := range map[string]string{"load1-start": load0, "load1-end": load1} {
		if v, err := strconv.ParseFloat(strings.Fields(l)[0], 64); err == nil {
			b.ReportMetric(v, name)
		}
	}
}

// jsonValues makes n distinct JSON objects of size bytes, like an
// application's events: the same field names in every one, values drawn
// from small vocabularies, numbers and a random tail. They compress as such
// data does (lz4 finds the repeats), neither not at all (random bytes) nor
// completely (one value repeated). Seeded: every run makes the same ones.
func jsonValues(n, size int) [][]byte {
	r := rand.New(rand.NewPCG(14, 1))
	words := strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa " +
		"quebec romeo sierra tango uniform victor whiskey xray yankee zulu checkout login search click view cart refund")
	pick := func() string { return words[r.IntN(len(words))] }
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	out := make([][]byte, n)
	for i := range out {
		v := fmt.Appendf(make([]byte, 0, size), `{"id":%d,"ts":%d,"user":"user-%06d","event":"%s","region":"eu-%s-%d","session":"%016x","tags":[`,
			i, 1_700_000_000_000+r.Int64N(1e9), r.IntN(1e6), pick(), pick(), r.IntN(4), r.Uint64())
		for len(v) < size*3/4 {
			v = fmt.Appendf(v, `{"k":"%s","v":"%s-%s","n":%d},`, pick(), pick(), pick(), r.IntN(10_000))
		}
		v = append(v[:len(v)-1], `],"note":"`...)
		for len(v) < size-2 {
			v = append(v, letters[r.IntN(len(letters))])
		}
		out[i] = append(v, `"}`...)
	}
	return out
}

// buildBinary builds cmd/kfollower from this tree into the benchmark's
// temporary directory: the binary users run, with whatever the tree holds.
func buildBinary(b *testing.B) string {
	return buildCommand(b, "cmd/kfollower")
}

// buildCommand builds the command in pkg, a directory of this module,
// into the benchmark's temporary directory.
func buildCommand(b *testing.B, pkg string) string {
	b.Helper()
	out := filepath.Join(b.TempDir(), filepath.Base(pkg))
	if msg, err := exec.Command("go", "build", "-o", out, "github.com/kfollower/kfollower/"+pkg).CombinedOutput(); err != nil {
		b.Fatalf("go build ./%s: %v\n%s", pkg, err, msg)
	}
	return out
}

// consumeProcess runs bench/consume (bin) over topic's partitions with
// kfollower's own fetch limits. Its times run from the process's start:
// to the line that says it has read every record, to its first record
// and to each quarter, each as its line is read; its minor page faults
// and CPU time run from start to exit.
func consumeProcess(ctx context.Context, b *testing.B, bin string, c *kafka.Cluster, topic string, partitions, records int) (r consumeRun) {
	b.Helper()
	// As long as runBinary gives the binary to catch up.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-brokers", strings.Join(c.Bootstrap(), ","), "-topic", topic,
		"-partitions", strconv.Itoa(partitions), "-records", strconv.Itoa(records),
		"-max-bytes", strconv.Itoa(int(wire.DefaultFetchLimits.MaxBytes)),
		"-partition-max-bytes", strconv.Itoa(int(wire.DefaultFetchLimits.PartitionMaxBytes)))
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting %s: %v", bin, err)
	}
	lines := bufio.NewScanner(out)
	var last string
	for last != "done" && lines.Scan() {
		at := time.Since(start)
		switch last = lines.Text(); last {
		case "first":
			r.first = at
		case "quarter 1", "quarter 2", "quarter 3":
			r.quarters[last[len(last)-1]-'1'] = at
		case "done":
			r.total = at
		}
	}
	if err := cmd.Wait(); err != nil || last != "done" {
		b.Fatalf("%s reading %s (within 10 minutes): %v, last printed %q:\n%s", bin, topic, err, last, stderr.String())
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.faults = ru.Minflt
	}
	r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return r
}

// consumeRun is what a run of bench/consume took: from the process's
// start to its last record (total), its first and each quarter; its page
// faults and CPU time, start to exit.
type consumeRun struct {
	total, first time.Duration
	quarters     [3]time.Duration
	faults       int64
	cpu          time.Duration
}

// lockedBuffer collects a process's output, written by exec's copying
// goroutine and read by the benchmark.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// binaryRun is how long a run of the binary took from the process's start.
type binaryRun struct {
	// firstData is until /status first showed a record copied: the
	// start-up's share of total (process start, the cluster probe,
	// metadata, opening the logs, the first Fetch's round trip), to
	// within the 10 ms between two looks.
	firstData time.Duration
	// total is until /status showed every partition at its end.
	total time.Duration
	// cpu is the process's user and system time, from its start until
	// it exited (stopped once caught up: its shutdown's flush included).
	cpu time.Duration
	// faults is the process's minor page faults, start to exit: memory
	// it touched for the first time (its heap, its Fetch buffers), each
	// a trap and a page zeroed by the kernel, which a warm in-process run
	// does not pay again. maxRSS is its peak resident set (VmHWM, read
	// before it is stopped: getrusage's ru_maxrss of an exec'd child
	// starts from its parent's, whose memory it shared until the exec).
	faults, maxRSS int64
	// partitionEnds is when /status first showed each partition at its
	// end: how the brokers' shares of the copy ended (the copy's tail).
	partitionEnds map[int32]time.Duration
	// quarters are when /status first showed a quarter, half and three
	// quarters of the records copied: where in the copy time went (under
	// --flush interval, whether before or after its first flush).
	quarters [3]time.Duration
}

// runBinary runs `kfollower run --flush flush` and the extra flags,
// following topic into an empty data dir, and returns the time from the
// process's start until its /status shows every partition's log end at its
// end offset in ends. The process is stopped (SIGTERM) and its data dir
// removed before it returns.
func runBinary(ctx context.Context, b *testing.B, bin string, c *kafka.Cluster, topic string, ends map[int32]int64, flush string, extra ...string) (run binaryRun) {
	b.Helper()
	dir, err := os.MkdirTemp("", "kfollower-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := append([]string{"run", "--bootstrap-servers", strings.Join(c.Bootstrap(), ","), "--topics", topic,
		"--data-dir", filepath.Join(dir, "data"), "--http-listen", addr, "--flush", flush}, extra...)
	cmd := exec.Command(bin, args...)
	// Configured by these flags alone, not by the benchmark's environment.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KFOLLOWER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	what := strings.Join(append([]string{"--flush", flush}, extra...), " ")
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		// 0 if it has already exited: it failed, and the run with it.
		run.maxRSS, _ = procStatusBytes(strconv.Itoa(cmd.Process.Pid), "VmHWM")
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		run.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			run.faults = ru.Minflt
		}
	}()

	hc := &http.Client{Timeout: 5 * time.Second}
	url := "http://" + addr + "/status"
	deadline := time.Now().Add(10 * time.Minute)
	var last string
	run.partitionEnds = map[int32]time.Duration{}
	var want int64 // records in all
	for _, end := range ends {
		want += end
	}
	for {
		atEnd, copied, err := statusPartitions(ctx, hc, url, topic, ends)
		for _, p := range atEnd {
			if _, ok := run.partitionEnds[p]; !ok {
				run.partitionEnds[p] = time.Since(start)
			}
		}
		if copied > 0 && run.firstData == 0 {
			run.firstData = time.Since(start)
		}
		for q := range run.quarters {
			if run.quarters[q] == 0 && copied*4 >= want*int64(q+1) {
				run.quarters[q] = time.Since(start)
			}
		}
		if err == nil && len(atEnd) == len(ends) {
			run.total = time.Since(start)
			return run
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%d of %d partitions at their end", len(atEnd), len(ends))
		}
		select {
		case <-exited:
			b.Fatalf("kfollower %s exited before catching up (last: %s):\n%s", what, last, out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Fatalf("kfollower %s did not catch up with %s in 10 minutes (last: %s):\n%s", what, topic, last, out.String())
		}
	}
}

// partitionEnds lists when each partition reached its end, by partition.
func partitionEnds(at map[int32]time.Duration) string {
	var out []string
	for _, p := range slices.Sorted(maps.Keys(at)) {
		out = append(out, fmt.Sprintf("%d:%v", p, at[p].Round(time.Millisecond)))
	}
	return strings.Join(out, " ")
}

// statusPartitions asks kfollower's /status which partitions of topic
// have their log end at their end offset in ends, and how many of their
// records are copied.
func statusPartitions(ctx context.Context, hc *http.Client, url, topic string, ends map[int32]int64) (atEnd []int32, copied int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	var st struct {
		Partitions []struct {
			Topic        string `json:"topic"`
			Partition    int32  `json:"partition"`
			LogEndOffset int64  `json:"log_end_offset"`
		} `json:"partitions"`
	}
	// /status answers 200 whether or not kfollower is ready (readiness is
	// /readyz); anything else is a failure to look at.
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, 0, fmt.Errorf("GET %s: %w", url, err)
	}
	for _, p := range st.Partitions {
		end, ok := ends[p.Partition]
		if !ok || p.Topic != topic {
			continue
		}
		if p.LogEndOffset == end {
			atEnd = append(atEnd, p.Partition)
		}
		copied += p.LogEndOffset
	}
	return atEnd, copied, nil
}

// replicaCopy adds broker extra as a replica of every partition of topic
// (assign holds the current replicas) and returns the time from the
// AlterPartitionAssignments call until the controller ends the
// reassignment, once extra is in every ISR. Then, untimed, it moves the
// topic back and waits until extra has deleted its copy, so that the next
// round starts from an empty broker again.
func replicaCopy(ctx context.Context, b *testing.B, c *kafka.Cluster, topic string, assign [][]int32, extra int32) time.Duration {
	to, back := map[int32][]int32{}, map[int32][]int32{}
	for p, rs := range assign {
		to[int32(p)], back[int32(p)] = append(slices.Clone(rs), extra), rs
	}
	start := time.Now()
	c.Reassign(ctx, topic, to)
	c.WaitReassigned(ctx, topic, 10*time.Millisecond)
	d := time.Since(start)
	// The time is the copy's: extra holds every byte of the leaders' now.
	for p, rs := range assign {
		want, err := c.Node(rs[0]).LogBytes(topic, int32(p))
		if err == nil {
			var got int64
			if got, err = c.Node(extra).LogBytes(topic, int32(p)); err == nil && got != want {
				err = fmt.Errorf("broker %d holds %d bytes, the leader %d", extra, got, want)
			}
		}
		if err != nil {
			b.Fatalf("%s-%d once the reassignment ended: %v", topic, p, err)
		}
	}
	for p, rs := range to {
		c.WaitPartition(ctx, topic, p, fmt.Sprintf("replicas and ISR %v", rs), func(s kafka.PartitionState) bool {
			return slices.Equal(s.Replicas, rs) && kafka.SameSet(s.ISR, rs)
		})
	}
	c.Reassign(ctx, topic, back)
	c.WaitReassigned(ctx, topic, 10*time.Millisecond)
	for p, rs := range back {
		c.WaitPartition(ctx, topic, p, fmt.Sprintf("replicas %v", rs), func(s kafka.PartitionState) bool {
			return slices.Equal(s.Replicas, rs) && s.Leader == rs[0]
		})
		c.WaitPartitionGone(ctx, extra, topic, p)
	}
	return d
}

// The bench's records are what it says: valid JSON of exactly the size
// asked, all distinct.
func TestJSONValues(t *testing.T) {
	vs := jsonValues(512, 1<<10)
	seen := map[string]bool{}
	for i, v := range vs {
		if len(v) != 1<<10 || !json.Valid(v) || seen[string(v)] {
			t.Fatalf("value %d: %d bytes, valid JSON %v, seen before %v: %s", i, len(v), json.Valid(v), seen[string(v)], v)
		}
		seen[string(v)] = true
	}
}
