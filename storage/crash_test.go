package storage

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kfollower/kfollower/wire/batch"
)

// The crash test re-executes the test binary as a child (TestMain sees
// crashChildEnv) that appends and truncates in a loop, and SIGKILLs it at
// a random moment, over and over. The child journals each operation
// before ("B ...") and after ("E") it runs; after every kill the parent
// reopens the log (running recovery) and checks that it is exactly the
// state after all finished operations, or after those plus (a prefix of)
// the one in flight: nothing torn, no gap, no truncated batch back, and an
// epoch cache equal to the one the stored batches give.
const (
	crashChildEnv = "KFOLLOWER_STORAGE_CRASH_CHILD"
	crashSeedEnv  = "KFOLLOWER_STORAGE_CRASH_SEED"
	crashTopic    = "crash"
	// replaySeedEnv replays one TestCrashLoop run: the seed it logs gives
	// the same children (their seeds, so their operations and flush
	// policies) and the same kill delays; where a kill lands still depends
	// on the machine.
	replaySeedEnv = "KFOLLOWER_CRASH_SEED"
)

func crashOptions(seed uint64) Options {
	o := Options{Logger: quiet, SegmentBytes: 4096, IndexIntervalBytes: 300}
	o.Flush = []FlushPolicy{FlushOS, FlushOS, FlushEveryAppend, FlushInterval}[seed%4]
	o.FlushInterval = 5 * time.Millisecond
	return o
}

// crashBatch is the one batch content for (base, epoch, n), so the parent
// can check bytes without the child telling them.
func crashBatch(base int64, epoch int32, n int) []byte {
	return batch.Build(batch.Spec{BaseOffset: base, Epoch: epoch, Records: n,
		Timestamp: 1_700_000_000_000 + base, Value: bytes.Repeat([]byte{byte(base)}, int(base*7%200))})
}

func crashChild() {
	dir := os.Getenv(crashChildEnv)
	seed, _ := strconv.ParseUint(os.Getenv(crashSeedEnv), 10, 64)
	die := func(code int, err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(code)
	}
	j, err := os.OpenFile(filepath.Join(dir, "journal"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		die(2, err)
	}
	l, err := Open(dir, crashTopic, 0, crashOptions(seed))
	if err != nil {
		die(3, err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	for {
		leo, start := l.LogEndOffset(), l.LogStartOffset()
		ep, _ := l.LatestEpoch()
		r := rng.IntN(100)
		var op string
		var run func() error
		switch {
		case r < 80 || leo == start:
			count, n := 1+rng.IntN(4), 1+rng.IntN(5)
			if rng.IntN(8) == 0 {
				ep++
			}
			var raw []byte
			for i := range count {
				raw = append(raw, crashBatch(leo+int64(i*n), ep, n)...)
			}
			op = fmt.Sprintf("A %d %d %d %d", leo, ep, n, count)
			run = func() error { return l.Append(raw) }
		case r < 99:
			to := max(start, leo-int64(rng.IntN(15)))
			op = fmt.Sprintf("T %d", to)
			run = func() error { return l.TruncateTo(to) }
		default:
			to := leo + int64(rng.IntN(5))
			op = fmt.Sprintf("F %d", to)
			run = func() error { return l.TruncateFullyAndStartAt(to) }
		}
		fmt.Fprintf(j, "B %s\n", op)
		if err := run(); err != nil {
			die(4, fmt.Errorf("%s: %w", op, err))
		}
		fmt.Fprintf(j, "E\n")
	}
}

// crashModel is the expected log: its start and its batches.
type crashModel struct {
	start   int64
	batches [][3]int64 // base, epoch, records
}

func (m crashModel) clone() crashModel {
	return crashModel{m.start, append([][3]int64(nil), m.batches...)}
}

func (m crashModel) String() string { return fmt.Sprintf("start %d %v", m.start, m.batches) }

func (m *crashModel) apply(op []string, prefix int) {
	arg := func(i int) int64 { n, _ := strconv.ParseInt(op[i], 10, 64); return n }
	switch op[0] {
	case "A":
		base, ep, n, count := arg(1), arg(2), arg(3), int(arg(4))
		for i := range min(count, prefix) {
			m.batches = append(m.batches, [3]int64{base + int64(i)*n, ep, n})
		}
	case "T":
		to := arg(1)
		if to < m.start {
			m.start, m.batches = to, nil
			return
		}
		for len(m.batches) > 0 {
			b := m.batches[len(m.batches)-1]
			if b[0]+b[2]-1 < to {
				break
			}
			m.batches = m.batches[:len(m.batches)-1]
		}
	case "F":
		m.start, m.batches = arg(1), nil
	}
}

func (m crashModel) equal(o crashModel) bool { return m.String() == o.String() }

// crashState reads the log into a model, checking every batch's bytes and
// contiguity on the way, and the epoch cache against the batches.
func crashState(t *testing.T, l *Log) crashModel {
	t.Helper()
	st := crashModel{start: l.LogStartOffset()}
	all := readAll(t, l)
	s := batch.NewScanner(all)
	next := st.start
	var cache Epochs
	for s.Next() {
		h := s.Header()
		if h.BaseOffset != next {
			t.Fatalf("gap or overlap: batch at %d, expected %d", h.BaseOffset, next)
		}
		n := int(h.LastOffsetDelta) + 1
		if !bytes.Equal(s.Batch(), crashBatch(h.BaseOffset, h.PartitionLeaderEpoch, n)) {
			t.Fatalf("batch at %d has unexpected bytes", h.BaseOffset)
		}
		st.batches = append(st.batches, [3]int64{h.BaseOffset, int64(h.PartitionLeaderEpoch), int64(n)})
		cache, _, _ = cache.Assign(h.PartitionLeaderEpoch, h.BaseOffset)
		next = h.NextOffset()
	}
	if s.Err() != nil || s.Tail() != 0 {
		t.Fatalf("scan: %v tail %d", s.Err(), s.Tail())
	}
	if l.LogEndOffset() != next {
		t.Fatalf("LEO %d, batches end at %d", l.LogEndOffset(), next)
	}
	if !cache.Equal(l.Epochs()) {
		t.Fatalf("epoch cache %v, batches give %v", l.Epochs(), cache)
	}
	return st
}

func readJournal(t *testing.T, path string) (done [][]string, inflight []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	// The last element follows the last newline: a line the kill cut, or
	// "". A cut "B" line was written before its operation began.
	for _, line := range lines[:len(lines)-1] {
		switch {
		case strings.HasPrefix(line, "B ") && inflight == nil:
			inflight = strings.Fields(line)[1:]
		case line == "E" && inflight != nil:
			done, inflight = append(done, inflight), nil
		default:
			t.Fatalf("journal out of order at %q", line)
		}
	}
	return done, inflight
}

func TestCrashLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop skipped in -short")
	}
	dir := t.TempDir()
	kills := 0
	model := crashModel{}
	runSeed := uint64(time.Now().UnixNano())
	if s := os.Getenv(replaySeedEnv); s != "" {
		var err error
		if runSeed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", replaySeedEnv, s, err)
		}
	}
	t.Logf("run seed %d (replay with %s=%d)", runSeed, replaySeedEnv, runSeed)
	rng := rand.New(rand.NewPCG(runSeed, 1))
	ops := 0
	during := map[string]int{}
	for iter := 0; kills < 60; iter++ {
		if iter > 200 {
			t.Fatalf("only %d kills in %d runs", kills, iter)
		}
		seed := rng.Uint64()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, crashSeedEnv+"="+strconv.FormatUint(seed, 10))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait until the child runs (it creates the journal just before
		// Open), then kill it at a random moment: early ones land in
		// Open's recovery, later ones in the loop.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if _, err := os.Stat(filepath.Join(dir, "journal")); err == nil {
				break
			}
		}
		time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err == nil {
			kills++
		}
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("child exited on its own: %v\n%s", err, stderr.String())
		}

		done, inflight := readJournal(t, filepath.Join(dir, "journal"))
		// A child killed before it opened the journal must not replay the
		// previous one.
		if err := os.Remove(filepath.Join(dir, "journal")); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		ops += len(done)
		for _, op := range done {
			model.apply(op, 1<<30)
		}
		l, err := Open(dir, crashTopic, 0, crashOptions(seed))
		if err != nil {
			t.Fatalf("child %d (seed %d): open after kill: %v", iter, seed, err)
		}
		got := crashState(t, l)
		l.Close()
		candidates := []crashModel{model}
		if inflight != nil {
			during[inflight[0]]++
			n := 1
			if inflight[0] == "A" {
				n, _ = strconv.Atoi(inflight[4])
			}
			for p := 1; p <= n; p++ {
				c := model.clone()
				c.apply(inflight, p)
				candidates = append(candidates, c)
			}
		}
		ok := false
		for _, c := range candidates {
			if c.equal(got) {
				ok = true
			}
		}
		if !ok {
			t.Fatalf("child %d (seed %d): after kill during %v the log is\n%v\nwant one of\n%v", iter, seed, inflight, got, candidates)
		}
		model = got
	}
	t.Logf("%d kills (during append/truncate/full: %d/%d/%d), %d finished operations, final %d batches",
		kills, during["A"], during["T"], during["F"], ops, len(model.batches))
	if ops < 100 {
		t.Errorf("only %d operations finished: the kills come too early to test much", ops)
	}
}
